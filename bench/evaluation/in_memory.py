"""A run held in memory, resolved and evaluated as the dev stages do it: the acceptance
stage's test run and the test fixtures' real run.

:func:`evaluate_entries` calls the resolve step (bench.evaluation.resolve.resolve_frames),
encodes the system's atom ids as codes as the retrieve step does
(bench.evaluation.atom_codes.to_codes), and hands both to the evaluation step
(bench.evaluation.steps.run_blocks, bench.evaluation.evaluate.evaluate_run). It lives
apart from bench.evaluation.steps so that the evaluate stage, which reads the resolve
stage's files, does not import the resolution.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.evaluation.atom_codes import served_ids, to_codes
from bench.evaluation.evaluate import EvalInputs, EvalOptions, EvalResult, RunDescription, evaluate_run
from bench.evaluation.resolve import resolve_frames
from bench.evaluation.steps import run_blocks

__all__ = ["evaluate_entries"]


def evaluate_entries(entries: list[dict], invalid: list[dict], run: pd.DataFrame, responses: pd.DataFrame, failures: pd.DataFrame,
                     served: dict[str, pd.DataFrame], segments: pd.DataFrame, options: EvalOptions, description: RunDescription,
                     *, in_core_rows: int, sha256: dict[str, Any]) -> EvalResult:
    """Resolve `entries`' gold over `served` and `segments` and evaluate `run` (the system's
    rows: query_id, atom_id, rank, score) against it, as the resolve and evaluate stages do;
    an atom id that is not served raises bench.evaluation.atom_codes.AtomCodeError."""
    found = resolve_frames(entries, served, segments)
    coded = to_codes(run, served_ids(served), "run")
    with run_blocks(coded, found.gold, len(entries), in_core_rows) as blocks:
        inputs = EvalInputs(entries=entries, run=None, gold=None, regions=found.regions, responses=responses, failures=failures,
                            served=served, gold_segments=found.segments_by_source(), invalid=invalid, sha256=sha256,
                            source=blocks.source)
        return evaluate_run(inputs, options, description)
