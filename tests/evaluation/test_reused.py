"""bench/evaluation/reused.py: each modality's per-query columns reused by content.

On the real LoCoMo and MMLongBench-Doc entries (bm25-scoped over the page/turn atoms, some queries
failed, gold resolved by the stages' step): an evaluation with reuse equals one without,
computed or reused; when the conversation atoms change so that every PDF atom's code moves,
the PDF queries' columns are reused (same atoms, other codes) and the conversation queries'
computed, and the result equals a fresh evaluation of the changed inputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from bench.evaluation.blocks import run_blocks
from bench.evaluation.evaluate import EvalInputs, EvalOptions, EvalResult, RunDescription, evaluate_run
from bench.gold.resolve import resolve_frames
from bench.ingest.atom_codes import served_ids, to_codes
from bench.memo import Memo
from bench.params import MetricsParams

K = 10


def _ran(real_run: dict, name: str) -> Any:
    from bench.systems.config import check_system, make_adapter
    from bench.systems.run import SYSTEM_COLUMNS, run_queries

    atoms = pd.concat([f[SYSTEM_COLUMNS] for f in real_run["served"].values()], ignore_index=True)
    cfg = check_system({"name": name})
    return run_queries(make_adapter(cfg, atoms), real_run["entries"], cfg.depth, warmup=0, known_atoms=set(atoms["atom_id"].astype(str)))


@pytest.fixture(scope="module")
def scoped(real_run: dict) -> Any:
    """bm25-scoped's run of the real entries: a pdf query's answer names pdf atoms only."""
    return _ran(real_run, "bm25-scoped")


@pytest.fixture(scope="module")
def unscoped(real_run: dict) -> Any:
    """bm25's run of the real entries (the fixture's): it ranks every modality's atoms for every query."""
    assert real_run["cfg"].name == "bm25"
    return real_run["ran"]


def _evaluate(real_run: dict, ran: Any, served: dict[str, pd.DataFrame], memo: Memo | None) -> EvalResult:
    entries = real_run["entries"]
    failed = sorted(e["query_id"] for e in entries)[::97]  # a few real queries marked failed, both modalities
    run = ran.run.loc[~ran.run["query_id"].astype(str).isin(failed)].reset_index(drop=True)
    found = resolve_frames(entries, served, real_run["segments"])
    with run_blocks(to_codes(run, served_ids(served), "run"), found.gold, len(entries), 10**9) as blocks:
        inputs = EvalInputs(entries=entries, source=blocks.source, regions=found.regions,
                            responses=ran.latency.loc[~ran.latency["query_id"].astype(str).isin(failed)].reset_index(drop=True),
                            failures=pd.DataFrame({"query_id": failed, "kind": "timeout"}), served=served,
                            gold_segments=found.segments_by_source(), invalid=[], sha256={})
        cfg = real_run["cfg"]
        description = RunDescription(system=cfg.name, depth=cfg.depth, chunking=real_run["params"]["chunking"], concurrency=1,
                                     warm=False, adapter=cfg.adapter, warmup_queries=0, timeout_s=cfg.timeout_s, latency=None)
        return evaluate_run(inputs, EvalOptions.from_params(MetricsParams(k=K, bootstrap_resamples=50)), description, memo)


def _same(a: EvalResult, b: EvalResult) -> None:
    assert json.dumps(a.document, allow_nan=False) == json.dumps(b.document, allow_nan=False)
    pd.testing.assert_frame_equal(a.query_table, b.query_table)
    pd.testing.assert_frame_equal(a.per_query, b.per_query)
    pd.testing.assert_frame_equal(a.hits, b.hits)


@pytest.mark.filterwarnings("ignore::pandas.errors.PerformanceWarning")
def test_reused_columns_equal_computed_ones_and_follow_atoms_whose_codes_moved(real_run: dict, scoped: Any, unscoped: Any,
                                                                             tmp_path: Path) -> None:
    served = real_run["served"]
    assert sorted(served) == ["conversation", "pdf"]  # codes: the conversation atoms first, then the pdf atoms
    n = len(real_run["entries"])
    n_pdf = sum(e["modality"] == "pdf" for e in real_run["entries"])
    memo = Memo(tmp_path / "memo")
    plain = _evaluate(real_run, scoped, served, None)
    computed = _evaluate(real_run, scoped, served, memo)
    reused = _evaluate(real_run, scoped, served, memo)
    assert (computed.reused_queries, reused.reused_queries) == (0, n)
    _same(plain, computed)
    _same(plain, reused)

    # one more conversation atom (nobody's answer, nobody's gold): the conversation atoms differ,
    # every pdf atom's code moves by one, the pdf atoms themselves do not
    conv = served["conversation"]
    extra = conv.iloc[[-1]].assign(atom_id=conv["atom_id"].iloc[-1] + "-extra")
    changed = {**served, "conversation": pd.concat([conv, extra], ignore_index=True)}
    again = _evaluate(real_run, scoped, changed, memo)
    assert again.reused_queries == n_pdf
    _same(_evaluate(real_run, scoped, changed, None), again)
    # the unscoped run names conversation atoms in pdf answers too: nothing of it is reused after the change
    memo_all = Memo(tmp_path / "memo-all")
    _evaluate(real_run, unscoped, served, memo_all)
    assert _evaluate(real_run, unscoped, changed, memo_all).reused_queries == 0
