"""A run held in memory, resolved and evaluated as the dev stages do it: the acceptance
stage's test run and the test fixtures' real run.

:func:`evaluate_entries` calls the resolve step (bench.gold.resolve.resolve_frames),
encodes the system's atom ids as codes as the retrieve step does
(bench.ingest.atom_codes.to_codes; a run's memories after the served atoms,
bench.systems.provenance.coded_run), resolves its memory hits by provenance as the
resolve stage does (bench.gold.memories) and hands all of it to the evaluation
step (bench.evaluation.blocks.run_blocks, bench.evaluation.evaluate.evaluate_run). It
lives apart from bench.evaluation.blocks so that the evaluate stage, which reads the
resolve stage's files, does not import the resolution.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from bench.evaluation.blocks import run_blocks
from bench.evaluation.evaluate import EvalInputs, EvalOptions, EvalResult, RunDescription, evaluate_run
from bench.evaluation.memory_report import MemoryInputs
from bench.gold.resolve import resolve_frames
from bench.gold.table import Resolved
from bench.ingest.atom_codes import ATOM_CODE, HIT_COLUMNS, served_ids, to_codes

if TYPE_CHECKING:
    from bench.systems.run import RunResult

__all__ = ["evaluate_entries", "memory_inputs"]


def evaluate_entries(entries: list[dict], invalid: list[dict], run: pd.DataFrame | RunResult, responses: pd.DataFrame,
                     failures: pd.DataFrame, served: dict[str, pd.DataFrame], segments: pd.DataFrame, options: EvalOptions,
                     description: RunDescription, *, in_core_rows: int, sha256: dict[str, Any]) -> EvalResult:
    """Resolve `entries`' gold over `served` and `segments` and evaluate `run` against it, as
    the resolve and evaluate stages do. `run` is the system's rows (query_id, atom_id, rank,
    score), or a bench.systems.run.RunResult, whose memory hits then resolve by
    provenance; an atom id that is not served raises bench.ingest.atom_codes.AtomCodeError."""
    found = resolve_frames(entries, served, segments)
    hits = getattr(run, "memories", None)
    memories = None
    if hits is not None and len(hits):
        coded, gold, memories = memory_inputs(run, entries, found, served, segments)
    else:
        coded, gold = to_codes(getattr(run, "run", run), served_ids(served), "run"), found.gold
    with run_blocks(coded, gold, len(entries), in_core_rows) as blocks:
        inputs = EvalInputs(entries=entries, regions=found.regions, responses=responses, failures=failures,
                            served=served, gold_segments=found.segments_by_source(), invalid=invalid, sha256=sha256,
                            source=blocks.source, memories=memories)
        return evaluate_run(inputs, options, description)


def memory_inputs(ran: RunResult, entries: list[dict], found: Resolved, served: dict[str, pd.DataFrame],
                  segments: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, MemoryInputs]:
    """A RunResult with memory hits as the stages see it: (the run with codes, the gold with
    the memories' rows, MemoryInputs), as the retrieve and resolve stages write them."""
    from bench.gold.memories import with_memories
    from bench.systems.provenance import CitationCheck, coded_run

    table = served_ids(served)
    coded, tables = coded_run(ran.run, ran.memories, table, CitationCheck(lambda: segments))
    hits = coded.loc[coded[ATOM_CODE].to_numpy() >= len(table), HIT_COLUMNS].astype({"query_id": str})
    res = with_memories(entries, found.gold, found.segments, tables.memories, tables.units, hits,
                        given_atoms=not ran.info.get("replay", False))
    rows = res.memories.sort_values(ATOM_CODE, kind="stable").reset_index(drop=True)
    return coded, res.gold, MemoryInputs(rows, res.boxes, hits)
