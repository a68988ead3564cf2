"""Can the set see a change? The minimum detectable effect (MDE) of a paired comparison.

For a paired test of the mean per-query difference d = B - A over n queries (two-sided
level ``alpha``, power ``power``; normal approximation, which the paired randomization
test of bench.evaluation.stats.uncertainty follows for the sample sizes here):

    MDE = (z[1 - alpha/2] + z[power]) * sd(d) / sqrt(n)

(z: standard normal quantiles; 2.80 for alpha 0.05 and 80% power). What sd(d) is depends
on the pair, so the MDE is given for three pairs, all read from the baseline's per-query
values (the measure's contributions by the denominator rule: a failed query counts its
worst case):

``fewest``       the smallest effect any change can be seen at: a change that moves
                 entries one way only, each from 0 to 1 with probability delta. The
                 sign-flip test then gives p = 2 / 2^X for X moved entries, so it
                 rejects when X >= x = ceil(log2(2 / alpha)) (6 for alpha 0.05), and
                 delta is the smallest with P(Binomial(n, delta) >= x) >= power: exact
                 for the test bench compare runs, no normal approximation.
``independent``  two runs whose per-query values are unrelated (another system): the
                 variance of d is twice the baseline's variance, sd(d) = sqrt(2 var).
                 Real pairs agree on more entries, so this is an upper bound. None when
                 the baseline's values do not vary (two such runs tell nothing apart).
``typical``      the discordance of a typical pair of the runs at hand: the median, over
                 the runs compared with the baseline (``bench leaderboard``) that differ
                 from it on some entry, of the standard deviation of their per-query
                 differences from it; never below ``fewest`` (the normal approximation
                 undershoots when few entries differ, and no change smaller than
                 ``fewest`` is seen).

A one-point change (0.01) is invisible on a set whose ``fewest`` MDE is above 0.01.

Clusters (bench.evaluation.stats.clusters): entries asking the same question move together,
so the unit of every MDE is the cluster, as for the intervals and the sign-flip test:
``fewest`` counts moved clusters (X ~ Binomial(C, delta) over the C clusters: a change that
moves a question moves its askings), and sd(d) / sqrt(n) becomes the cluster-robust standard
error of the mean, sqrt(C / (C - 1) * sum_c (S_c - mean * N_c)^2) / n (S_c the cluster's sum,
N_c its entries; the plain formula when every cluster is one entry). Each MDE says the
clusters and entries it rests on, and beside it (``entries``) what it would be if the
entries were independent -- the figure before clusters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.measures import measures
from bench.evaluation.measures.base import Measure, counted
from bench.evaluation.stats.clusters import Clustering, cluster_codes

__all__ = ["ALPHA", "POWER", "fewest", "mde", "mde_block", "mde_measures", "mde_of", "standard_error", "z_total"]

ALPHA = 0.05
POWER = 0.80


def z_total(alpha: float = ALPHA, power: float = POWER) -> float:
    """z[1 - alpha/2] + z[power]."""
    return NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)


def mde(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The effect a paired test over `n` queries with difference sd `sd` detects with `power`."""
    if n <= 1 or not np.isfinite(sd):
        return None
    return float(z_total(alpha, power) * sd / math.sqrt(n))


def _tail(n: int, p: float, x: int) -> float:
    """P(Binomial(n, p) >= x)."""
    below = sum(math.exp(math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * math.log(p)
                         + (n - j) * math.log1p(-p)) for j in range(x))
    return 1.0 - below


def fewest(n: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The one-way MDE (module docstring): the smallest delta whose X ~ Binomial(n, delta)
    moved entries reach the sign-flip test's rejection count with probability `power`."""
    x = math.ceil(math.log2(2 / alpha) - 1e-12)
    if n < x:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(60):  # bisection: the tail grows with delta
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _tail(n, mid, x) >= power else (mid, hi)
    return hi


def standard_error(values: np.ndarray, clusters: np.ndarray | None = None) -> float | None:
    """The standard error of the mean of `values` with entries of one cluster moving together
    (module docstring); the plain sd / sqrt(n) when every cluster is one entry. None below two clusters."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    codes = np.arange(n) if clusters is None else np.unique(np.asarray(clusters), return_inverse=True)[1]
    c = int(codes.max(initial=-1)) + 1
    if c < 2:
        return None
    if c == n:
        return float(np.sqrt(x.var(ddof=1) / n))
    resid = np.bincount(codes, weights=x - x.mean(), minlength=c)
    return float(np.sqrt(c / (c - 1) * float((resid ** 2).sum())) / n)


def mde_of(values: np.ndarray, alpha: float = ALPHA, power: float = POWER, typical_se: float | None = None,
           clusters: np.ndarray | None = None) -> dict[str, Any]:
    """n, clusters and the ``fewest`` / ``independent`` (and, given ``typical_se`` -- the standard
    error of a typical pair's mean difference --, ``typical``) MDE of one group's per-query
    contributions over their clusters, and beside them (``entries``) the same as if every entry
    were its own cluster (module docstring)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    codes = np.arange(n) if clusters is None else np.asarray(clusters)
    c = len(np.unique(codes)) if n else 0
    z = z_total(alpha, power)

    def independent(by: np.ndarray | None) -> float | None:
        se = standard_error(x, by) if n > 1 and x.var() > 0 else None
        return None if se is None or se == 0 else float(z * np.sqrt(2.0) * se)

    out: dict[str, Any] = {"n": n, "clusters": c, "fewest": fewest(c, alpha, power), "independent": independent(codes)}
    if typical_se is not None:
        out["typical"] = max(z * typical_se, out["fewest"] or 0.0)
    out["entries"] = {"fewest": fewest(n, alpha, power), "independent": independent(None)}
    return out


def mde_measures(k: int) -> list[Measure]:
    """The measures whose MDE is reported: the objective (``ranks``) and the recall measures the verdict judges (recall@k, recall@budget)."""
    return [m for m in measures(k) if m.ranks or (m.family in ("ranking", "budget") and m.bar is not None)]


def mde_block(table: pd.DataFrame, k: int, alpha: float = ALPHA, power: float = POWER,
              typical_se: dict[tuple[str, str], float] | None = None, clustering: Clustering = "question") -> dict[str, Any]:
    """dev.json's ``mde``: per modality and overall, each MDE measure's n, clusters, ``fewest``
    and ``independent`` MDE (and ``typical`` where `typical_se` has the (group, measure)), and
    the entry-level figures beside them, over the rows of `table` (modality, unanswerable,
    failed, the cluster labels and the measures' columns)."""
    groups: Sequence[tuple[str, pd.DataFrame]] = [*((str(m), g) for m, g in table.groupby("modality", sort=True)), ("overall", table)]
    cells: dict[str, dict[str, Any]] = {}
    for group, g in groups:
        row = {}
        codes = cluster_codes(g, clustering)
        for m in mde_measures(k):
            if m.column not in g.columns:
                continue
            unans = g["unanswerable"].to_numpy(bool)
            contrib, _ = counted(m, g[m.column].to_numpy(dtype=float), unans, g["failed"].to_numpy(bool))
            row[m.name] = mde_of(contrib, alpha, power, None if typical_se is None else typical_se.get((group, m.name)),
                                 clusters=codes[m.reducer.rows(m, g)])
        cells[group] = row
    overall = cells.pop("overall")
    return {"alpha": alpha, "power": power, "clustering": clustering, "by_modality": cells, "overall": overall}
