"""The evaluation's steps, wired once: the evaluate stage, the acceptance stage and the
test fixtures call these to hand a run to :func:`bench.evaluation.evaluate.evaluate_run`
(the resolve step is bench.evaluation.resolve's :func:`~bench.evaluation.resolve.resolve_partitions`
and :func:`~bench.evaluation.resolve.resolve_frames`).

* :func:`run_blocks` -- the run and its gold as the evaluation reads them: in core (one
  block) when the run has at most ``in_core_rows`` rows, else block by block (DuckDB
  for files on disk, cut from the frames for a run in memory). Atom codes stay; the
  atom ids are added here, once, for the report's writers (curves, drill-down).
* :func:`evaluate_entries` -- a run held in memory resolved and evaluated as the dev
  stages do (the acceptance stage, the test fixtures).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bench.evaluation.atom_codes import ATOM_CODE, served_ids, with_atom_ids
from bench.evaluation.blocks import BlockSource, DuckDBBlocks, FrameBlocks, parquet_rows, queries_per_block
from bench.evaluation.evaluate import EvalInputs, EvalOptions, EvalResult, RunDescription, evaluate_run, select_gold_segments
from bench.evaluation.resolve import resolve_frames

__all__ = ["DUCKDB_MEMORY", "RunBlocks", "evaluate_entries", "run_blocks"]

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
def run_blocks(run: Path | pd.DataFrame, gold: Path | pd.DataFrame, served: dict[str, pd.DataFrame], n_queries: int,
               in_core_rows: int, memory_limit: str = DUCKDB_MEMORY) -> Iterator[RunBlocks]:
    """The run and gold (Parquet files as retrieve and resolve write them, or frames) as
    a block source for the evaluation; a context manager (DuckDB's copy is removed on exit)."""
    table = served_ids(served)

    def named(frame: pd.DataFrame) -> pd.DataFrame:
        return with_atom_ids(frame, table) if ATOM_CODE in frame.columns and "atom_id" not in frame.columns else frame

    rows = parquet_rows(run) if isinstance(run, Path) else len(run)
    per_block = queries_per_block(rows, n_queries, in_core_rows)
    if isinstance(run, Path) and isinstance(gold, Path):
        if per_block is None:
            yield RunBlocks(FrameBlocks(named(pd.read_parquet(run)), named(pd.read_parquet(gold))), rows, None)
            return
        with DuckDBBlocks(run, gold, per_block, memory_limit=memory_limit, prepare=named) as source:
            yield RunBlocks(source, rows, per_block)
        return
    if isinstance(run, Path) or isinstance(gold, Path):
        raise ValueError("run and gold are both files or both frames")
    yield RunBlocks(FrameBlocks(named(run), named(gold), per_block), rows, per_block)


def evaluate_entries(entries: list[dict], invalid: list[dict], run: pd.DataFrame, responses: pd.DataFrame, failures: pd.DataFrame,
                     served: dict[str, pd.DataFrame], segments: pd.DataFrame, options: EvalOptions, description: RunDescription,
                     *, in_core_rows: int, sha256: dict[str, Any]) -> EvalResult:
    """A run held in memory (the acceptance's test run, the fixtures' real run), resolved
    and evaluated as the resolve and evaluate stages do: :func:`resolve_frames`,
    :func:`run_blocks`, bench.evaluation.evaluate.evaluate_run."""
    found = resolve_frames(entries, served, segments)
    with run_blocks(run, found.gold, served, len(entries), in_core_rows) as blocks:
        inputs = EvalInputs(entries=entries, run=None, gold=None, regions=found.regions, responses=responses, failures=failures,
                            served=served, gold_segments=select_gold_segments(found.regions, [found.gold_segments]), invalid=invalid,
                            sha256=sha256, source=blocks.source)
        return evaluate_run(inputs, options, description)
