"""False recall and abstention (bench.evaluation.measures.false_recall): the calibrated and abstention rules,
scale invariance, not measurable, the worst case of failed queries, the dev thresholds reused."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from bench.evaluation.cells import aggregate
from bench.evaluation.measures.false_recall import calibrate, false_recall_rules
from bench.evaluation.per_query import per_query
from tests.evaluation.frames import T0
from tests.evaluation.frames import assert_cell as _assert_cell
from tests.evaluation.frames import entries_of as _entries
from tests.evaluation.frames import gold_of as _gold
from tests.evaluation.frames import row_of as _row
from tests.evaluation.frames import run_of as _run

LATER = pd.Timestamp("2025-01-01", tz="UTC")
K = 3
STRONG = 0.8
LOG3 = math.log2(3)


# --------------------------------------------------------------------------- false recall rules, abstention, AUROC


def _calib_case(scale: float = 1.0, shift: float = 0.0, abstain: dict | None = None, confidence: dict | None = None):
    """Ten answerable entries with top-1 scores 1..10, three unanswerable with 1.5, 2, 3, one empty."""
    rows = [(f"a{i:02d}", "conversation", False, "h", 1) for i in range(1, 11)]
    rows += [(f"u{i}", "conversation", True, "h", 0) for i in range(1, 5)]
    entries = _entries(rows)
    top = {f"a{i:02d}": float(i) for i in range(1, 11)} | {"u1": 1.5, "u2": 2.0, "u3": 3.0}
    atoms = pd.DataFrame({"atom_id": ["x", "y"], "holder": "h", "observed_at": T0})
    run = _run([(q, "x", 1, s * scale + shift) for q, s in top.items()] + [(q, "y", 2, 0.5 * scale + shift) for q in top])
    responses = pd.DataFrame({"query_id": [r[0] for r in rows]})
    responses["abstain"] = [bool((abstain or {}).get(q, False)) for q in responses["query_id"]]
    responses["confidence"] = [(confidence or {}).get(q, np.nan) for q in responses["query_id"]]
    return entries, run, _gold([(f"a{i:02d}", 0, "x") for i in range(1, 11)]), atoms, responses


def test_calibrated_threshold_is_the_share_of_answerable_top1_hits() -> None:
    entries, run, gold, atoms, responses = _calib_case()
    df = per_query(entries, run, gold, atoms, responses=responses, calibration_recall=0.9)
    # 9 of 10 answerable top-1 scores reach 2.0; u2 (2.0) and u3 (3.0) reach it, u1 (1.5) and empty u4 do not
    assert set(df["false_recall_rule"]) == {"calibrated"} and set(df["false_recall_threshold"]) == {2.0}
    assert _row(df, "u2")["false_recall"] == 1.0 and _row(df, "u1")["false_recall"] == 0.0 and _row(df, "u4")["false_recall"] == 0.0
    rep = aggregate(df, None)["by_modality"]["conversation"]
    _assert_cell(rep["false_recall"], 0.5, 4, 4)
    _assert_cell(rep["abstention_rate"], 0.0, 10, 10)
    # AUROC of the top-1 score: pairs (answerable > unanswerable) + ties / 2 over 10 x 4 pairs
    wins = sum((a > u) + 0.5 * (a == u) for a in range(1, 11) for u in (1.5, 2.0, 3.0, -math.inf))
    _assert_cell(rep["auroc_unanswerable"], wins / 40, 14, 14)
    rules = false_recall_rules(df)
    assert rules["conversation"] == {"rule": "calibrated", "unanswerable": 4, "threshold_score": 2.0, "kept": 9, "answerable": 10}
    assert rules["overall"] == {"rule": "calibrated"}


def test_every_metric_is_unchanged_by_scaling_or_shifting_scores() -> None:
    base = aggregate(per_query(*_calib_case()[:4], responses=_calib_case()[4]), None)
    for scale, shift in ((1e-3, 0.0), (1e3, 0.0), (1.0, 1.0), (7.0, -3.0)):
        entries, run, gold, atoms, responses = _calib_case(scale, shift)
        df = per_query(entries, run, gold, atoms, responses=responses)
        assert aggregate(df, None) == base, (scale, shift)
        assert set(df["false_recall_threshold"]) == {2.0 * scale + shift}


def test_scores_that_do_not_separate_are_not_measurable_never_zero() -> None:
    entries, run, gold, atoms, responses = _calib_case()
    flat = run.assign(score=1.0)
    df = per_query(entries, flat, gold, atoms, responses=responses)
    cell = aggregate(df, None)["by_modality"]["conversation"]["false_recall"]
    assert cell["value"] is None and (cell["n"], cell["denominator"]) == (4, 4)
    assert "do not separate" in cell["reason"] and df["false_recall"].isna().all()
    assert false_recall_rules(df)["conversation"]["rule"] == "not measurable"
    assert aggregate(df, None)["by_modality"]["conversation"]["auroc_unanswerable"]["value"] == pytest.approx(
        (10 * 3 * 0.5 + 10 * 1) / 40)  # ties count one half, the empty u4 ranks lowest


def test_abstention_rule_when_any_response_abstains() -> None:
    entries, run, gold, atoms, responses = _calib_case(abstain={"u1": True, "u3": True, "a01": True})
    df = per_query(entries, run, gold, atoms, responses=responses)
    assert set(df["false_recall_rule"]) == {"abstention"} and df["false_recall_threshold"].isna().all()
    # u2 answered with a hit: false recall; u1, u3 abstained; u4 returned nothing
    assert df.set_index("query_id").loc[["u1", "u2", "u3", "u4"], "false_recall"].tolist() == [0.0, 1.0, 0.0, 0.0]
    rep = aggregate(df, None)["by_modality"]["conversation"]
    _assert_cell(rep["false_recall"], 0.25, 4, 4)
    _assert_cell(rep["abstention_rate"], 0.1, 10, 10)


def test_declared_abstention_and_a_system_that_always_abstains() -> None:
    entries, run, gold, atoms, responses = _calib_case()
    df = per_query(entries, run, gold, atoms, responses=responses, abstains=True)
    assert set(df["false_recall_rule"]) == {"abstention"}
    _assert_cell(aggregate(df, None)["overall"]["false_recall"], 0.75, 4, 4)  # never abstained, 3 of 4 returned hits
    entries, run, gold, atoms, responses = _calib_case(abstain={q: True for q in entries["query_id"]})
    rep = aggregate(per_query(entries, run, gold, atoms, responses=responses), None)["overall"]
    _assert_cell(rep["false_recall"], 0.0, 4, 4)
    _assert_cell(rep["abstention_rate"], 1.0, 10, 10)


def test_failed_queries_count_as_the_worst_case() -> None:
    entries, run, gold, atoms, responses = _calib_case()
    df = per_query(entries, run, gold, atoms, responses=responses, failed={"u1", "a10", "a09"})
    rep = aggregate(df, None)["by_modality"]["conversation"]
    # calibration: failed a09, a10 have no hit -> 9 of 10 is impossible, threshold = lowest answerable hit (1.0)
    assert set(df["false_recall_threshold"]) == {1.0}
    _assert_cell(rep["false_recall"], 3 / 4, 3, 4)  # failed u1 counts 1, u2 and u3 reach 1.0, empty u4 does not
    _assert_cell(rep["abstention_rate"], 2 / 10, 8, 10)
    # AUROC: failed answerable rank below everything, the failed unanswerable above everything
    ans = [float(i) for i in range(1, 9)] + [-10.0, -10.0]
    un = [10.0 ** 3, 2.0, 3.0, -5.0]
    wins = sum((a > u) + 0.5 * (a == u) for a in ans for u in un)
    _assert_cell(rep["auroc_unanswerable"], wins / 40, 11, 14)



def test_calibrate_edges() -> None:
    assert calibrate(np.array([]), 0.9).rule == "not measurable"
    assert calibrate(np.array([np.nan, np.nan]), 0.9).rule == "not measurable"
    assert calibrate(np.array([3.0, 1.0]), 0.5).threshold == 3.0
    assert calibrate(np.array([3.0, 1.0]), 0.51).threshold == 1.0
    assert calibrate(np.array([3.0, 2.0, np.nan]), 0.9).threshold == 2.0  # fewer hits than the share: lowest hit
    assert calibrate(np.array([3.0, np.nan, np.nan]), 0.9).rule == "not measurable"  # one score value: no separation
    with pytest.raises(ValueError, match="calibration_recall"):
        calibrate(np.array([1.0]), 0.0)



def test_acceptance_reuses_the_dev_thresholds_and_never_recalibrates() -> None:
    from bench.acceptance.report import dev_thresholds

    entries, run, gold, atoms, responses = _calib_case()
    dev = per_query(entries, run, gold, atoms, responses=responses)
    doc = {"run": {"false_recall_rule": false_recall_rules(dev)}}
    abstains, thresholds = dev_thresholds(json.loads(json.dumps(doc, allow_nan=False)))  # through strict JSON
    assert not abstains and thresholds == {"conversation": 2.0}
    # "test" entries whose own calibration would give another threshold (all scores lower by 1.5)
    test = per_query(entries, run.assign(score=run["score"] - 1.5), gold, atoms, responses=responses,
                     abstains=abstains, thresholds=thresholds)
    assert set(test["false_recall_threshold"]) == {2.0}
    assert test.set_index("query_id").loc[["u1", "u2", "u3"], "false_recall"].tolist() == [0.0, 0.0, 0.0]  # 0, 0.5, 1.5 < 2
    # a dev run read by abstention makes the acceptance read by abstention
    assert dev_thresholds({"run": {"false_recall_rule": {"pdf": {"rule": "abstention"}, "overall": {"rule": "abstention"}}}})[0]
