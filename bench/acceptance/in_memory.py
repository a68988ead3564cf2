"""A run held in memory, resolved and evaluated as the dev stages do it: the acceptance
stage's test run and the test fixtures' real run.

:func:`evaluate_entries` calls the resolve step (bench.gold.resolve.resolve_frames),
encodes the system's atom ids as codes as the retrieve step does
(bench.ingest.atom_codes.to_codes; a run's memories after the served atoms,
bench.systems.credit.provenance.coded_run), resolves its memory hits by provenance as the
resolve step does (bench.gold.memories) and hands all of it to the evaluation
step (bench.evaluation.blocks.run_blocks, bench.evaluation.evaluate.evaluate_run). It
lives apart from bench.evaluation.blocks so that the evaluate stage, which reads the
resolve step's files, does not import the resolution.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from bench.bundle.evidence import Evidence
from bench.evaluation.blocks import run_blocks
from bench.evaluation.evaluate import EvalInputs, EvalOptions, EvalResult, RunDescription, evaluate_run
from bench.evaluation.measures.extent import BOX
from bench.evaluation.memory_report import MemoryInputs
from bench.gold.resolve import resolve_frames
from bench.gold.table import MEMORY_ROW_COLUMNS, Resolved
from bench.ingest.atom_codes import ATOM_CODE, HIT_COLUMNS, served_ids, to_codes

if TYPE_CHECKING:
    from bench.params import MetricsParams, SystemParams
    from bench.systems.run import RunResult
    from bench.systems.step import SystemRun

__all__ = ["evaluate_entries", "evaluated", "memory_inputs", "test_run_options"]


def evaluate_entries(entries: list[dict], invalid: list[dict], run: pd.DataFrame | RunResult, responses: pd.DataFrame,
                     failures: pd.DataFrame, served: dict[str, pd.DataFrame], segments: pd.DataFrame, options: EvalOptions,
                     description: RunDescription, *, in_core_rows: int, sha256: dict[str, Any]) -> EvalResult:
    """Resolve `entries`' gold over `served` and `segments` and evaluate `run` against it, as
    the resolve and evaluate stages do. `run` is the system's rows (query_id, atom_id, rank,
    score), or a bench.systems.run.RunResult, whose memory hits then resolve by
    provenance; an atom id that is not served raises bench.ingest.atom_codes.AtomCodeError."""
    return evaluated(entries, invalid, run, responses, failures, served, segments, options, description, in_core_rows=in_core_rows,
                     sha256=sha256)[0]


def evaluated(entries: list[dict], invalid: list[dict], run: pd.DataFrame | RunResult, responses: pd.DataFrame,
              failures: pd.DataFrame, served: dict[str, pd.DataFrame], segments: pd.DataFrame, options: EvalOptions,
              description: RunDescription, *, in_core_rows: int, sha256: dict[str, Any],
              split: str = "test") -> tuple[EvalResult, Evidence]:
    """:func:`evaluate_entries`, and the evidence it rests on (bench.bundle.evidence: what the acceptance bundles)."""
    found = resolve_frames(entries, served, segments)
    hits = getattr(run, "memories", None)
    memories = MemoryInputs(*(pd.DataFrame(columns=c) for c in (MEMORY_ROW_COLUMNS, [ATOM_CODE, "source_id", "part", *BOX], HIT_COLUMNS)))
    if hits is not None and len(hits):
        coded, gold, memories = memory_inputs(run, entries, found, served, segments)
    else:
        coded, gold = to_codes(getattr(run, "run", run), served_ids(served), "run"), found.gold
    with run_blocks(coded, gold, len(entries), in_core_rows) as blocks:
        inputs = EvalInputs(entries=entries, regions=found.regions, responses=responses, failures=failures,
                            served=served, gold_segments=found.segments_by_source(), invalid=invalid, sha256=sha256,
                            source=blocks.source, memories=memories if memories else None)
        result = evaluate_run(inputs, options, description)
    return result, Evidence(split=split, entries=entries, invalid=invalid, run=coded, gold=gold, regions=found.regions, responses=responses,
                            failures=failures, served=served, memories=memories, sha256=sha256, options=options, description=description)


def memory_inputs(ran: RunResult, entries: list[dict], found: Resolved, served: dict[str, pd.DataFrame],
                  segments: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, MemoryInputs]:
    """A RunResult with memory hits as the stages see it: (the run with codes, the gold with
    the memories' rows, MemoryInputs), as the retrieve stage writes them."""
    from bench.gold.memories import with_memories
    from bench.systems.credit.provenance import CitationCheck, coded_run

    table = served_ids(served)
    coded, tables = coded_run(ran.run, ran.memories, table, CitationCheck(lambda: segments))
    hits = coded.loc[coded[ATOM_CODE].to_numpy() >= len(table), HIT_COLUMNS].astype({"query_id": str})
    res = with_memories(entries, found.gold, found.segments, tables.memories, tables.units, hits,
                        given_atoms=not ran.info.get("replay", False))
    rows = res.memories.sort_values(ATOM_CODE, kind="stable").reset_index(drop=True)
    return coded, res.gold, MemoryInputs(rows, res.boxes, hits)


def test_run_options(metrics: MetricsParams, chunking: dict[str, Any], system: SystemParams, ran: SystemRun,
                     dev_doc: dict[str, Any]) -> tuple[EvalOptions, RunDescription]:
    """How the acceptance evaluates its test run: params `metrics` with the dev run's false-recall rule (never
    recalibrated on test: bench.acceptance.report.dev_thresholds), and the run's description."""
    from bench.acceptance.report import dev_thresholds
    from bench.systems.run import latency_percentiles

    abstains, thresholds = dev_thresholds(dev_doc)
    info = ran.result.info
    return (EvalOptions.from_params(metrics, abstains=abstains, thresholds=thresholds),
            RunDescription(system=system.name, depth=system.depth, chunking=chunking, concurrency=system.concurrency, warm=info["warm"],
                           adapter=system.adapter, warmup_queries=info["warmup_queries"], timeout_s=system.timeout_s,
                           latency=latency_percentiles(ran.result.latency["latency_ms"]), split="test", isolation=ran.info["isolation"],
                           description=ran.info.get("description")))
