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


# -- integer weights (the cluster bootstrap's counts): the same numbers as the repeated entries, bit for bit ----------


def _reference_auroc(codes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The AUROC of each row of integer weights by counting every (positive, negative) pair: twice U,
    the positives and the negatives are exact integers, so the ratio is the one correctly rounded value."""
    key, pos = codes // 2, codes % 2 == 1
    above = np.sign(key[:, None] - key[None, :]) + 1  # twice the pair's score: 2 above, 1 tied, 0 below
    out = []
    for w in np.atleast_2d(weights).astype(np.int64):
        wp, wn = w * pos, w * ~pos
        twice_u, n_pos, n_neg = int(wp @ above @ wn), int(wp.sum()), int(wn.sum())
        out.append(twice_u * 0.5 / (float(n_pos) * float(n_neg)) if n_pos and n_neg else np.nan)
    return np.array(out)


def _signals(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Signals without ties, with a few (some across the classes), or with many (fewer codes than half the entries)."""
    sep = rng.normal(size=n)
    if kind == "few ties":
        sep[: n // 4] = np.round(sep[: n // 4])
    elif kind == "many ties":
        sep = np.round(sep, 0)
    return sep


@pytest.mark.parametrize("kind", ["distinct", "few ties", "many ties"])
def test_auroc_of_integer_weights_equals_the_pair_count_bit_for_bit(kind, monkeypatch):
    import bench.evaluation.measures.auroc as auroc

    monkeypatch.setattr(auroc, "CACHE_VALUES", 3 * 160)  # blocks of 3 rows, the last of 2
    rng = np.random.default_rng({"distinct": 1, "few ties": 2, "many ties": 3}[kind])
    for share in (0.2, 0.5):
        n = 160
        codes = auroc_codes(_signals(kind, n, rng), rng.random(n) >= share, rng.random(n) < 0.05)  # failed entries at both ends
        weights = rng.poisson(1.0, size=(11, n))
        weights[0] = 0  # no entry
        weights[1] = np.where(codes % 2 == 1, weights[1], 0)  # positives only
        for order in (np.argsort(codes, kind="stable"), np.arange(n)):  # in code order (as the bootstrap passes them), and not
            got = auroc_from_codes(codes[order], weights=weights[:, order])
            assert np.array_equal(got, _reference_auroc(codes[order], weights[:, order]), equal_nan=True)
            assert np.array_equal(got, auroc_from_codes(codes[order], weights=weights[:, order].astype(float)), equal_nan=True)
        assert auroc_from_codes(codes, weights=weights[2]).shape == () and auroc_from_codes(codes, weights=weights[2:3]).shape == ()
        assert float(auroc_from_codes(codes, weights=weights[2])) == _reference_auroc(codes, weights[2])[0]
