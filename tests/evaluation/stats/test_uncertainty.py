"""Bootstrap intervals, the paired randomization test and Holm against scipy / a textbook."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.evaluation.stats.uncertainty import add_intervals, bootstrap_ci, holm, paired_randomization_test, rng_for
from tests.evaluation.measures.test_auroc import _auroc_frame

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
    assert set(out["overall"]["recall@10"]) == {"value", "n", "denominator", "ci95", "clusters"}
    assert out["overall"]["recall@10"]["clusters"] == out["overall"]["recall@10"]["denominator"]  # no labels: every entry its own


def test_failed_queries_are_the_worst_case_in_intervals():
    from bench.evaluation.measures.auroc import auroc_codes, auroc_from_codes

    df = _auroc_frame(200, 9)
    base = float(auroc_from_codes(auroc_codes(df["auroc_signal"].to_numpy(), ~df["unanswerable"].to_numpy(), df["failed"].to_numpy())))
    worse = df.assign(failed=np.arange(len(df)) < 20)
    codes = auroc_codes(worse["auroc_signal"].to_numpy(), ~worse["unanswerable"].to_numpy(), worse["failed"].to_numpy())
    assert float(auroc_from_codes(codes)) < base
    # every answerable entry failed: all rank below every unanswerable one
    allbad = auroc_codes(df["auroc_signal"].to_numpy(), ~df["unanswerable"].to_numpy(), ~df["unanswerable"].to_numpy())
    assert float(auroc_from_codes(allbad)) == 0.0
    # a failed unanswerable entry counts as a false recall in the interval too
    fr = pd.DataFrame({"modality": "pdf", "unanswerable": True, "failed": [True] * 5 + [False] * 5, "false_recall": [np.nan] * 5 + [0.0] * 5})
    cell = {"value": 0.5, "n": 5, "denominator": 10}
    out = add_intervals({"by_modality": {"pdf": {"false_recall": cell}}, "overall": {}}, fr, resamples=300, seed=0)
    lo, hi = out["by_modality"]["pdf"]["false_recall"]["ci95"]
    assert lo < 0.5 < hi


def test_bootstrap_mean_by_value_counts_matches_index_resampling(monkeypatch):
    """A few-valued metric (reciprocal ranks) goes through multinomial value counts; its
    interval equals the one of plain index resampling up to Monte-Carlo noise."""
    import bench.evaluation.stats.uncertainty as unc

    ranks = np.random.default_rng(21).geometric(0.3, size=5000)
    rr = np.where(ranks <= 10, 1.0 / ranks, 0.0)  # 11 distinct values
    assert unc._bootstrap_means(rr, 10, rng_for(0)) is not None
    assert unc._bootstrap_means(np.random.default_rng(1).random(5000), 10, rng_for(0)) is None  # continuous
    assert unc._bootstrap_means(np.array([1.0, np.nan] * 100), 10, rng_for(0)) is None
    by_counts = bootstrap_ci(rr, resamples=20000, rng=rng_for(3, "rr"))
    assert by_counts == bootstrap_ci(rr, resamples=20000, rng=rng_for(3, "rr"))  # seeded
    monkeypatch.setattr(unc, "FEW_VALUES", 10**9)  # forces index resampling
    by_index = bootstrap_ci(rr, resamples=20000, rng=rng_for(3, "rr"))
    width = by_index[1] - by_index[0]
    assert by_counts == pytest.approx(by_index, abs=0.03 * width)
    theirs = scipy_stats.bootstrap((rr,), np.mean, n_resamples=20000, method="percentile",
                                   rng=np.random.default_rng(5)).confidence_interval
    assert by_counts == pytest.approx((theirs.low, theirs.high), abs=0.03 * width)


def test_tabled_sign_flips_draw_every_sign_vector_uniformly():
    """5 differences (2 groups of 4, 3 padding zeros): each of the 32 sign vectors has a
    distinct sum, and every one is drawn with probability 1/32."""
    from bench.evaluation.stats.uncertainty import _sign_flip_null

    d = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    n_draws = 64_000
    null = _sign_flip_null(d, 5, n_draws, rng_for(0, "flips"))
    signs = 1 - 2 * ((np.arange(32)[:, None] >> np.arange(5)) & 1)
    possible = np.sort(signs @ d / 5)
    assert len(np.unique(possible)) == 32
    hit = np.searchsorted(possible, null)
    assert np.allclose(possible[hit], null)
    freq = np.bincount(hit, minlength=32) / n_draws
    assert np.abs(freq - 1 / 32).max() < 0.006  # about 4 standard errors
    again = _sign_flip_null(d, 5, n_draws, rng_for(0, "flips"))
    assert np.array_equal(null, again)


def test_randomization_monte_carlo_on_many_queries_agrees_with_the_normal_limit():
    """5,000 queries: the sign-flip p-value is close to the normal approximation's."""
    from scipy.stats import norm

    d = np.random.default_rng(8).normal(0.004, 0.2, size=5000)
    z = d.mean() / (np.sqrt((d**2).sum()) / len(d))
    expected = 2 * norm.sf(abs(z))
    assert paired_randomization_test(d, resamples=20000, rng=rng_for(2)) == pytest.approx(expected, abs=0.015)


@pytest.mark.parametrize("q", [50, 95, 2.5, 99.9])
@pytest.mark.parametrize("n", [2, 7, 50, 1001])
def test_bootstrap_percentile_by_ranks_equals_numpy_bit_for_bit(monkeypatch, q, n):
    """The rank path gives exactly np.percentile of the same resamples (same draws)."""
    import bench.evaluation.stats.uncertainty as unc

    gen = np.random.default_rng(n)
    for values in (gen.gamma(2.0, 1.0, size=n), gen.integers(0, 4, size=n).astype(float)):  # distinct, and ties
        fast = unc._bootstrap_percentiles(values, q, 300, rng_for(1, "p"))
        if fast is None:  # an end of the sample (q = 2.5 or 99.9 of 2 values): the plain path
            assert (n - 1) * q / 100 <= 0 or (n - 1) * q / 100 >= n - 1 or n < 2
            continue
        draws = rng_for(1, "p")
        plain = np.concatenate([np.percentile(values[draws.integers(0, n, size=(b, n))], q, axis=-1)
                                for b in [min(max(1, unc.BATCH_VALUES // n), 300 - s)
                                          for s in range(0, 300, max(1, unc.BATCH_VALUES // n))]])
        assert np.array_equal(fast, plain)
    assert unc._bootstrap_percentiles(np.array([1.0, np.nan, 2.0]), 50, 10, rng_for(0)) is None


def test_add_intervals_reuse_is_by_content(tmp_path):
    """A stored interval is reused only for the same values, seed and labels (bench/memo.py),
    and equals the one computed again."""
    from bench.memo import Memo

    rng = np.random.default_rng(5)
    n = 300
    df = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "modality": ["pdf"] * n, "unanswerable": False,
                       "failed": False, "recall@10": rng.random(n).round(1), "latency_ms": rng.gamma(2, 1, n)})
    report = {"by_modality": {"pdf": {"recall@10": {"value": 0.5, "n": n, "denominator": n}}},
              "overall": {"recall@10": {"value": 0.5, "n": n, "denominator": n}}}
    fresh = add_intervals(report, df, resamples=200, seed=1)
    memo = Memo(tmp_path)
    assert add_intervals(report, df, resamples=200, seed=1, memo=memo) == fresh and (memo.hits, memo.misses) == (0, 2)
    assert add_intervals(report, df, resamples=200, seed=1, memo=memo) == fresh and (memo.hits, memo.misses) == (2, 2)
    changed = df.assign(**{"recall@10": df["recall@10"].where(df.index > 0, 0.0 if df.loc[0, "recall@10"] else 1.0)})
    got = add_intervals(report, changed, resamples=200, seed=1, memo=memo)
    assert (memo.hits, memo.misses) == (2, 4) and got == add_intervals(report, changed, resamples=200, seed=1)
    assert add_intervals(report, df, resamples=200, seed=2, memo=memo) == add_intervals(report, df, resamples=200, seed=2)
    assert memo.misses == 6  # another seed: another key


# -- clustered percentiles and AUROC: the numbers of the repeated entries, from the same draws, bit for bit ----------


def _reference_clusters(x, codes, statistic, resamples, rng):
    """The cluster bootstrap written out: the same draws (a batch of BATCH_VALUES // max(n, C) resamples at a
    time), each resample's sample the entries repeated as often as their cluster was drawn."""
    import bench.evaluation.stats.uncertainty as unc
    from tests.evaluation.measures.test_auroc import _reference_auroc

    c = int(codes.max()) + 1
    batch, out = max(1, unc.BATCH_VALUES // max(len(x), c)), []
    for start in range(0, resamples, batch):
        for drawn in rng.integers(0, c, size=(min(batch, resamples - start), c)):
            times = np.bincount(drawn, minlength=c)[codes]
            out.append(_reference_auroc(x.astype(np.int64), times)[0] if callable(statistic)
                       else np.percentile(np.repeat(x, times), float(statistic[1:])))
    return np.array(out)


def _clustered_cases():
    """(values, clusters, statistic): latencies with and without ties, AUROC codes with failed entries and ties,
    over clusters of one to four entries (fewer clusters than values), two clusters, one entry per cluster but one."""
    from bench.evaluation.measures.auroc import auroc_codes, auroc_from_codes

    rng = np.random.default_rng(17)
    n = 240
    sizes = rng.choice([1, 1, 1, 2, 3, 4], size=n)
    clusters = rng.permutation(np.repeat(np.arange(n), sizes)[:n]) * 7 + 3  # labels, not codes
    latency = rng.gamma(2.0, 300.0, n)
    codes = auroc_codes(np.round(rng.normal(size=n), 1), rng.random(n) >= 0.2, rng.random(n) < 0.05)
    for values in (latency, np.round(latency, -2)):
        for stat in ("p50", "p95", "p2.5", "p100"):
            yield values, clusters, stat
    yield codes, clusters, auroc_from_codes
    yield auroc_codes(rng.normal(size=n), rng.random(n) >= 0.5, rng.random(n) < 0.05), clusters, auroc_from_codes
    yield latency[:9], np.array([0, 0, 0, 0, 1, 1, 1, 1, 1]), "p50"  # two clusters
    yield np.array([2, 5, 7, 0, 3, 4, 9, 6, 1]), np.array([0, 0, 0, 0, 1, 1, 1, 1, 1]), auroc_from_codes  # both kinds in each
    yield latency[:30], np.append(np.arange(29), 0), "p95"  # one cluster of two entries, the others alone


@pytest.mark.parametrize("blocks", ["as run", "small"])
def test_clustered_bootstrap_equals_the_repeated_entries_bit_for_bit(monkeypatch, blocks):
    """Each resample's percentile or AUROC is the one of its repeated entries, from the same draws in the same
    order (the generator ends where the written-out bootstrap leaves it), whatever the batch and block sizes."""
    import bench.evaluation.stats.uncertainty as unc

    for values, clusters, stat in _clustered_cases():
        if blocks == "small":  # 7 resamples per batch (97 = 13 x 7 + 6), 3 per block (7 = 3 + 3 + 1)
            monkeypatch.setattr(unc, "BATCH_VALUES", 7 * len(values))
            monkeypatch.setattr(unc, "CACHE_VALUES", 3 * len(values))
        codes = unc._codes(clusters, len(values))
        ours, theirs = rng_for(4, "cells"), rng_for(4, "cells")
        got = unc._bootstrap_clusters(values.astype(float), codes, stat, 97, ours)
        assert np.array_equal(got, _reference_clusters(values.astype(float), codes, stat, 97, theirs), equal_nan=True)
        assert ours.bit_generator.state == theirs.bit_generator.state
        defined = got[~np.isnan(got)]
        want = tuple(np.percentile(defined, [2.5, 97.5])) if len(defined) else None
        assert bootstrap_ci(values, resamples=97, rng=rng_for(4, "cells"), statistic=stat, clusters=clusters) == want
    assert bootstrap_ci(np.arange(5.0), rng=rng_for(0), statistic="p50", clusters=np.zeros(5)) is None  # one cluster


@pytest.mark.parametrize("q", [0.0, 2.5, 50.0, 95.0, 99.9, 100.0])
def test_weighted_percentile_equals_numpy_on_the_repeated_values(q):
    """Integer or integral float weights, rows without any weight at the end or the start, a last block of
    entries shorter than the others: numpy's percentile of the repeated values, bit for bit."""
    from bench.evaluation.stats.uncertainty import BLOCK, weighted_percentile

    rng = np.random.default_rng(int(q * 10))
    for n in (1, BLOCK - 1, BLOCK, 3 * BLOCK + 5):
        for x in (np.sort(rng.gamma(2.0, 1.0, n)), np.sort(rng.integers(0, 4, n).astype(float))):
            w = rng.poisson(0.7, size=(25, n))
            w[:, 0] += 1
            w[1, : n // 2] = 0  # the low values not drawn
            w[2, n // 2 + 1:] = 0  # the high values not drawn
            want = [np.percentile(np.repeat(x, row), q) for row in w]
            assert np.array_equal(weighted_percentile(x, w, q), want)
            assert np.array_equal(weighted_percentile(x, w.astype(float), q), want)
