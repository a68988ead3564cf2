"""AUROC (bench.evaluation.measures.auroc): value and interval against scipy, undefined resamples,
and which signal it reads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.evaluation.cells import aggregate
from bench.evaluation.measures.auroc import auroc_codes, auroc_from_codes
from bench.evaluation.per_query import per_query
from bench.evaluation.stats.uncertainty import bootstrap_ci, rng_for
from tests.evaluation.measures.test_false_recall import _calib_case

scipy_stats = pytest.importorskip("scipy.stats")


def _auroc_frame(n: int = 400, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    unans = rng.random(n) < 0.3
    # answerable entries score higher on average; rounded so that ties occur
    sep = np.round(rng.normal(np.where(unans, 0.0, 1.0), 1.0), 1)
    sep[rng.random(n) < 0.05] = -np.inf  # empty answers rank lowest
    return pd.DataFrame({"modality": "conversation", "unanswerable": unans, "failed": False, "auroc_signal": sep})


def test_auroc_value_and_interval_agree_with_scipy():
    df = _auroc_frame()
    pos, neg = df.loc[~df["unanswerable"], "auroc_signal"], df.loc[df["unanswerable"], "auroc_signal"]
    codes = auroc_codes(df["auroc_signal"].to_numpy(), ~df["unanswerable"].to_numpy(), df["failed"].to_numpy())
    u = scipy_stats.mannwhitneyu(pos.replace(-np.inf, -1e9), neg.replace(-np.inf, -1e9)).statistic
    assert float(auroc_from_codes(codes)) == pytest.approx(u / (len(pos) * len(neg)), abs=1e-12)

    def auc(sep, lab, axis=-1):
        return np.array([scipy_stats.mannwhitneyu(s[lb], s[~lb]).statistic / (lb.sum() * (~lb).sum())
                         for s, lb in zip(np.atleast_2d(sep), np.atleast_2d(lab).astype(bool), strict=True)]).reshape(np.shape(sep)[:-1])

    sep = df["auroc_signal"].replace(-np.inf, -1e9).to_numpy()
    theirs = scipy_stats.bootstrap((sep, (~df["unanswerable"]).to_numpy()), auc, paired=True, vectorized=True, n_resamples=2000,
                                   method="percentile", rng=np.random.default_rng(1)).confidence_interval
    ours = bootstrap_ci(codes, resamples=2000, rng=rng_for(0, "auroc"), statistic=auroc_from_codes)
    width = theirs.high - theirs.low
    assert ours[0] == pytest.approx(theirs.low, abs=0.08 * width) and ours[1] == pytest.approx(theirs.high, abs=0.08 * width)


def test_auroc_undefined_resamples_are_left_out():
    codes = np.array([2 * 1 + 1, 2 * 0 + 0])  # one answerable above one unanswerable
    ci = bootstrap_ci(codes, resamples=200, rng=rng_for(0, "x"), statistic=auroc_from_codes)
    assert ci == (1.0, 1.0)  # single-class resamples (NaN) do not count
    assert bootstrap_ci(np.array([3, 5]), resamples=50, rng=rng_for(0, "y"), statistic=auroc_from_codes) is None


# -- the fast paths: value counts for a mean, tabled sign flips -------------------------------------


def test_confidence_is_the_auroc_signal_when_always_sent() -> None:
    entries, run, gold, atoms, _ = _calib_case()
    # confidence ranks every unanswerable entry above every answerable one: AUROC 0 whatever the scores
    conf = {q: (0.9 if q.startswith("u") else 0.1) for q in entries["query_id"]}
    _, _, _, _, responses = _calib_case(confidence=conf)
    df = per_query(entries, run, gold, atoms, responses=responses)
    assert set(df["auroc_signal_source"]) == {"confidence"}
    assert aggregate(df, None)["overall"]["auroc_unanswerable"]["value"] == 0.0
    conf.pop("a01")  # not sent with every answer: the top-1 score is used
    _, _, _, _, responses = _calib_case(confidence=conf)
    assert set(per_query(entries, run, gold, atoms, responses=responses)["auroc_signal_source"]) == {"top1_score"}
