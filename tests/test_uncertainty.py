"""Bootstrap intervals, the paired randomization test and Holm against scipy / a textbook."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.uncertainty import add_intervals, bootstrap_ci, holm, paired_randomization_test, rng_for

scipy_stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("statistic", ["mean", "p50"])
def test_bootstrap_agrees_with_scipy(statistic):
    data = np.random.default_rng(7).gamma(2.0, 1.5, size=400)
    ours = bootstrap_ci(data, resamples=20000, rng=rng_for(1, "t"), statistic=statistic)
    func = np.mean if statistic == "mean" else np.median
    theirs = scipy_stats.bootstrap((data,), lambda x, axis: func(x, axis=axis), n_resamples=20000,
                                   method="percentile", confidence_level=0.95, rng=np.random.default_rng(2)).confidence_interval
    width = theirs.high - theirs.low
    assert ours[0] == pytest.approx(theirs.low, abs=0.03 * width)
    assert ours[1] == pytest.approx(theirs.high, abs=0.03 * width)


def test_bootstrap_binary_metric_agrees_with_scipy():
    data = (np.random.default_rng(3).random(300) < 0.4).astype(float)
    ours = bootstrap_ci(data, resamples=20000, rng=rng_for(0, "b"))
    theirs = scipy_stats.bootstrap((data,), np.mean, n_resamples=20000, method="percentile", rng=np.random.default_rng(4)).confidence_interval
    assert ours == pytest.approx((theirs.low, theirs.high), abs=0.006)


def test_bootstrap_is_seeded_and_handles_edges():
    data = np.arange(50, dtype=float)
    assert bootstrap_ci(data, rng=rng_for(5, "a")) == bootstrap_ci(data, rng=rng_for(5, "a"))
    assert bootstrap_ci(data, rng=rng_for(5, "a")) != bootstrap_ci(data, rng=rng_for(6, "a"))
    assert bootstrap_ci([], rng=rng_for(0)) is None
    assert bootstrap_ci([0.5] * 10, rng=rng_for(0)) == (0.5, 0.5)


def _scipy_paired_p(a, b, n_resamples):
    res = scipy_stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
                                       n_resamples=n_resamples, alternative="two-sided", rng=np.random.default_rng(0))
    return res.pvalue


def test_randomization_exact_equals_scipy():
    rng = np.random.default_rng(11)
    for n in (5, 8, 11):
        a = rng.random(n)
        b = a + rng.normal(0.1, 0.2, n)
        ours = paired_randomization_test(b - a, resamples=10000, rng=rng_for(0))
        assert ours == pytest.approx(_scipy_paired_p(b, a, 10000), rel=1e-12, abs=1e-12)


def test_randomization_monte_carlo_agrees_with_scipy():
    rng = np.random.default_rng(12)
    a = (rng.random(200) < 0.5).astype(float)
    b = np.where(rng.random(200) < 0.15, 1.0 - a, a)  # some flips, no real direction
    ours = paired_randomization_test(b - a, resamples=20000, rng=rng_for(1))
    theirs = _scipy_paired_p(b, a, 20000)
    assert ours == pytest.approx(theirs, abs=0.02)
    strong = np.where(rng.random(200) < 0.3, 1.0, a)  # b only ever gains
    assert paired_randomization_test(strong - a, resamples=20000, rng=rng_for(1)) < 0.001


def test_randomization_no_difference():
    assert paired_randomization_test(np.zeros(30), rng=rng_for(0)) == 1.0
    assert np.isnan(paired_randomization_test([], rng=rng_for(0)))


def test_holm_textbook_example():
    # Wikipedia "Holm-Bonferroni method", example: four hypotheses at alpha 0.05
    p = [0.01, 0.04, 0.03, 0.005]
    adj = holm(p)
    assert adj == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert list(adj < 0.05) == [True, False, False, True]


def test_holm_is_monotone_and_skips_nan():
    adj = holm([0.2, np.nan, 0.01, 0.5, 0.04])
    assert np.isnan(adj[1])
    assert adj[[2, 4, 0, 3]] == pytest.approx([0.04, 0.12, 0.4, 0.5])


def test_add_intervals_bracket_value():
    rng = np.random.default_rng(0)
    n = 500
    df = pd.DataFrame({
        "query_id": [f"q{i}" for i in range(n)], "modality": ["pdf"] * n,
        "unanswerable": rng.random(n) < 0.2, "failed": rng.random(n) < 0.02,
        "recall@10": rng.random(n), "latency_ms": rng.gamma(2, 1, n),
    })
    df.loc[df["unanswerable"], "recall@10"] = np.nan
    ans = ~df["unanswerable"]
    value = float(np.where(df["failed"], 0, df["recall@10"].fillna(0))[ans].mean())
    cell = {"value": value, "n": int((ans & ~df["failed"]).sum()), "denominator": int(ans.sum())}
    p50 = float(np.percentile(df.loc[~df["failed"], "latency_ms"], 50))
    report = {"by_modality": {"pdf": {"recall@10": cell, "latency_p50_ms": {"value": p50, "n": 1, "denominator": n}, "other": {"value": 1.0, "n": 1, "denominator": 1}}},
              "overall": {"recall@10": cell}}
    out = add_intervals(report, df, k=10, resamples=500, seed=3)
    lo, hi = out["by_modality"]["pdf"]["recall@10"]["ci95"]
    assert lo < value < hi and hi - lo < 0.1
    lo, hi = out["by_modality"]["pdf"]["latency_p50_ms"]["ci95"]
    assert lo < p50 < hi
    assert out["by_modality"]["pdf"]["other"]["ci95"] == [None, None]
    assert set(out["overall"]["recall@10"]) == {"value", "n", "denominator", "ci95"}
