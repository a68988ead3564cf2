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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from bench.evaluation.atom_codes import ATOM_CODE, served_ids, with_atom_ids
from bench.evaluation.blocks import BlockSource, DuckDBBlocks, FrameBlocks, parquet_rows, queries_per_block
from bench.evaluation.evaluate import EvalInputs, EvalOptions, EvalResult, RunDescription, evaluate_run, select_gold_segments
from bench.evaluation.memory_report import MemoryInputs
from bench.evaluation.resolve import ResolvedGold, resolve_frames

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
               in_core_rows: int, memory_limit: str = DUCKDB_MEMORY, memory_ids: Sequence[str] = ()) -> Iterator[RunBlocks]:
    """The run and gold (Parquet files as retrieve and resolve write them, or frames) as
    a block source for the evaluation; a context manager (DuckDB's copy is removed on exit).
    `memory_ids`: the run's memories' ids in code order, after the served atoms' (bench.evaluation.provenance)."""
    table = served_ids(served)
    if len(memory_ids):
        table = pa.concat_arrays([table, pa.array(list(memory_ids), type=pa.large_string())])

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


def evaluate_entries(entries: list[dict], invalid: list[dict], run: Any, responses: pd.DataFrame, failures: pd.DataFrame,
                     served: dict[str, pd.DataFrame], segments: pd.DataFrame, options: EvalOptions, description: RunDescription,
                     *, in_core_rows: int, sha256: dict[str, Any]) -> EvalResult:
    """A run held in memory (the acceptance's test run, the fixtures' real run), resolved
    and evaluated as the resolve and evaluate stages do: :func:`resolve_frames`,
    :func:`run_blocks`, bench.evaluation.evaluate.evaluate_run. `run` is the run frame, or a
    bench.evaluation.retrieve.RunResult whose memory hits then resolve by provenance
    (bench.evaluation.memory_gold), as the resolve stage resolves them."""
    found = resolve_frames(entries, served, segments)
    gold, memories, ids = found.gold, None, []
    hits = getattr(run, "memories", None)
    if hits is not None and len(hits):
        run, gold, memories = memory_inputs(run, entries, found, served, segments)
        ids = memories.ids
    frame = getattr(run, "run", run)
    with run_blocks(frame, gold, served, len(entries), in_core_rows, memory_ids=ids) as blocks:
        inputs = EvalInputs(entries=entries, run=None, gold=None, regions=found.regions, responses=responses, failures=failures,
                            served=served, gold_segments=select_gold_segments(found.regions, [found.gold_segments]), invalid=invalid,
                            sha256=sha256, source=blocks.source, memories=memories)
        return evaluate_run(inputs, options, description)


def memory_inputs(ran: Any, entries: list[dict], found: ResolvedGold, served: dict[str, pd.DataFrame],
                  segments: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, MemoryInputs]:
    """A RunResult with memory hits as the stages see it: (run with codes, gold with the memories', MemoryInputs)."""
    from bench.evaluation.memory_gold import with_memories
    from bench.evaluation.provenance import CitationCheck, coded_run

    table = served_ids(served)
    coded, tables = coded_run(ran.run, ran.memories, table, CitationCheck(lambda: segments))
    hits = coded.loc[coded[ATOM_CODE].to_numpy() >= len(table), ["query_id", "rank", ATOM_CODE]].astype({"query_id": str})
    res = with_memories(entries, found.gold, found.gold_atom_ids, found.gold_segments, tables.memories, tables.units, hits,
                        given_atoms=not ran.info.get("replay", False))
    rows = res.memories.sort_values(ATOM_CODE, kind="stable").reset_index(drop=True)
    return coded, res.gold, MemoryInputs(rows, res.boxes, hits)
