"""Case 8: bootstrap intervals and the paired randomization test at the evaluate stage's size.

Data: the metrics case's synthetic run (`case_metrics.make_run`, 100k queries x depth
100 at size full) evaluated by the metrics engine; its per-query values are what
`add_intervals` and `bench compare` resample. Figures:

* bootstrap 95 % interval of a mean, 1,000 resamples, over the answerable queries'
  nDCG@10 (few distinct values: drawn from multinomial value counts) and over the
  top-1 score (continuous: drawn as resampled indices), each against
  scipy.stats.bootstrap(method="percentile", 1,000 resamples) on the same values;
* paired randomization test (sign flips) of the difference of two runs' per-query
  nDCG@10 (the same queries, a second run with another seed): at 1,000 flips against
  scipy.stats.permutation_test(permutation_type="samples", 1,000 resamples) on the same
  differences (scipy at 10,000 flips over 100k queries takes minutes), and at the
  10,000 flips `bench compare` uses against the metrics engine's time on the same
  100k queries (goal: the test costs no more than computing the metrics);
* each interval's bounds next to scipy's (equal up to Monte-Carlo noise).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from bench.evaluation.stats.uncertainty import bootstrap_ci, paired_randomization_test, rng_for
from benchmarks.common import best_of, figure

RESAMPLES = 1000
FLIPS = 10_000
SCIPY_FLIPS = 1000


def _ours_ci(values: np.ndarray) -> tuple[float, float] | None:
    return bootstrap_ci(values, resamples=RESAMPLES, rng=rng_for(0, "bench"))


def _scipy_ci(values: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    res = stats.bootstrap((values,), np.mean, n_resamples=RESAMPLES, method="percentile", confidence_level=0.95,
                          rng=np.random.default_rng(0))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _scipy_p(diff: np.ndarray, resamples: int) -> float:
    from scipy import stats

    res = stats.permutation_test((diff,), lambda d, axis: np.mean(d, axis=axis), permutation_type="samples",
                                 n_resamples=resamples, alternative="two-sided", rng=np.random.default_rng(0))
    return float(res.pvalue)


def run_case(n_queries: int, repeats: int) -> list[dict]:
    from benchmarks.case_metrics import make_run, ours

    data = make_run(n_queries)
    t_metrics, all_metrics, (pq, _) = best_of(lambda: ours(data), 1)
    pq2, _ = ours(make_run(n_queries, seed=1))
    answerable = ~pq["unanswerable"].to_numpy(bool)
    warm = np.random.default_rng(0).random(200)
    _scipy_ci(warm)  # imports and first-call set-up outside the timing, both sides
    _scipy_p(warm - 0.5, 100)
    _ours_ci(warm)
    figures = []
    for column, kind in (("ndcg@10", "few distinct values: value counts"), ("top1_score", "continuous: indices")):
        values = pq.loc[answerable, column].to_numpy(float)
        values = values[~np.isnan(values)]
        distinct = int(len(np.unique(values)))
        t_ours, all_ours, ci = best_of(partial(_ours_ci, values), repeats)
        t_ref, all_ref, ref_ci = best_of(partial(_scipy_ci, values), 1)
        width = ref_ci[1] - ref_ci[0]
        figures.append(figure(f"bootstrap CI of a mean, {RESAMPLES} resamples, {len(values)} values ({column}, {kind})",
                              t_ours, t_ref, f"scipy.stats.bootstrap(method='percentile', n_resamples={RESAMPLES}), "
                              "same values", "ratio <= 1.0", goal_ratio=1.0, values=len(values), distinct=distinct,
                              ci=list(ci) if ci else None, scipy_ci=list(ref_ci),
                              max_bound_gap_share_of_width=(max(abs(ci[0] - ref_ci[0]), abs(ci[1] - ref_ci[1])) / width
                                                            if ci and width > 0 else None),
                              all_ours_s=all_ours, all_reference_s=all_ref, repeats=repeats,
                              statistic="best of repeats (reference: one run)"))
    diff = pq2["ndcg@10"].to_numpy(float) - pq["ndcg@10"].to_numpy(float)
    diff = np.nan_to_num(diff, nan=0.0)
    t_small, all_small, p_small = best_of(
        lambda: paired_randomization_test(diff, resamples=SCIPY_FLIPS, rng=rng_for(0, "bench")), repeats)
    t_ref, _, p_ref = best_of(lambda: _scipy_p(diff, SCIPY_FLIPS), 1)
    figures.append(figure(f"randomization test, {SCIPY_FLIPS} sign flips, {len(diff)} paired queries", t_small, t_ref,
                          f"scipy.stats.permutation_test(permutation_type='samples', n_resamples={SCIPY_FLIPS}), "
                          "same differences", "ratio <= 1.0", goal_ratio=1.0, queries=len(diff),
                          nonzero_differences=int(np.count_nonzero(diff)), p=p_small, scipy_p=p_ref,
                          all_ours_s=all_small, repeats=repeats, statistic="best of repeats (reference: one run)"))
    t_full, all_full, p_full = best_of(
        lambda: paired_randomization_test(diff, resamples=FLIPS, rng=rng_for(0, "bench")), repeats)
    figures.append(figure(f"randomization test, {FLIPS} sign flips, {len(diff)} paired queries", t_full, t_metrics,
                          f"the metrics engine (per_query + aggregate) on the same {n_queries} queries",
                          "ratio <= 1.0 (costs no more than the metrics)", goal_ratio=1.0, queries=len(diff), p=p_full,
                          all_ours_s=all_full, all_reference_s=all_metrics, repeats=repeats,
                          statistic="best of repeats (reference: one run)"))
    return figures
