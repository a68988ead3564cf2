"""The evaluation step, wired once: the evaluate stage, the acceptance stage and the test
fixtures hand a run to :func:`bench.evaluation.evaluate.evaluate_run` through
:func:`run_blocks`.

* :func:`run_blocks` -- the run and its resolved gold (atoms as codes, query ids as the
  stages write them) as the evaluation reads them: in core (one block) when the run has
  at most ``in_core_rows`` rows, else block by block (DuckDB for files on disk, cut from
  the frames for a run in memory). Nothing is decoded here: atom ids are named only by
  the writers (bench.reporting.outputs, the TREC files).

A run held in memory is resolved and evaluated in one call by
bench.evaluation.in_memory.evaluate_entries (the acceptance, the fixtures); this module
does not import the resolution, so the evaluate stage does not depend on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.evaluation.blocks import BlockSource, DuckDBBlocks, FrameBlocks, parquet_rows, queries_per_block

__all__ = ["DUCKDB_MEMORY", "RunBlocks", "run_blocks"]

#: DuckDB's memory bound when the run is read out of core (it spills to a temporary folder beyond it)
DUCKDB_MEMORY = "2GB"


@dataclass(frozen=True)
class RunBlocks:
    """Where the evaluation reads the run from, and how it was cut."""

    source: BlockSource
    run_rows: int
    per_block: int | None  # queries per block; None: in core, one block

    def describe(self, in_core_rows: int) -> str | None:
        """The line the stage prints for an out-of-core evaluation (None in core)."""
        if self.per_block is None:
            return None
        return (f"out of core: {self.run_rows} run rows > executor.in_core_rows {in_core_rows}: "
                f"{self.source.block_count} query blocks of <= {self.per_block} queries")


@contextlib.contextmanager
def run_blocks(run: Path | pd.DataFrame, gold: Path | pd.DataFrame, n_queries: int, in_core_rows: int,
               memory_limit: str = DUCKDB_MEMORY) -> Iterator[RunBlocks]:
    """The run and gold (Parquet files as retrieve and resolve write them, or frames of the
    same columns) as a block source for the evaluation; a context manager (DuckDB's copy
    is removed on exit)."""
    rows = parquet_rows(run) if isinstance(run, Path) else len(run)
    per_block = queries_per_block(rows, n_queries, in_core_rows)
    if isinstance(run, Path) and isinstance(gold, Path):
        if per_block is None:
            yield RunBlocks(FrameBlocks(pd.read_parquet(run), pd.read_parquet(gold)), rows, None)
            return
        with DuckDBBlocks(run, gold, per_block, memory_limit=memory_limit) as source:
            yield RunBlocks(source, rows, per_block)
        return
    if isinstance(run, Path) or isinstance(gold, Path):
        raise ValueError("run and gold are both files or both frames")
    yield RunBlocks(FrameBlocks(run, gold, per_block), rows, per_block)
