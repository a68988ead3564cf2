"""Uncertainty over queries: seeded bootstrap intervals, a paired randomization test
and Holm's correction. Pure numpy; nothing read from disk or the environment.

Clusters (bench.evaluation.stats.clusters)
    Entries that ask the same question are not independent, so both the bootstrap and the
    sign flips take ``clusters`` (an integer code per value): a bootstrap resample draws
    the C clusters with replacement and takes the statistic over the drawn clusters'
    entries (for the mean: the drawn clusters' sum over their size, the ratio estimator);
    the sign-flip test flips each cluster's summed difference as one, so three questions
    improved at both askings give the p-value of three questions. When every cluster is
    one entry the entry-level paths below run unchanged, bit for bit; fewer than two
    clusters give no interval.

Bootstrap (``bootstrap_ci``)
    Percentile interval: draw ``resamples`` samples of the n per-query values with
    replacement, compute the statistic of each, take the 2.5th and 97.5th
    percentiles (numpy "linear"). Vectorised in batches of at most ~2 million drawn
    values. This is scipy.stats.bootstrap(method="percentile") up to Monte-Carlo
    noise. Resamples whose statistic is undefined (NaN: an AUROC resample that
    drew only one kind of entry) are left out of the percentiles.
    The mean of values that take few distinct values (at most n/32: hit rates,
    reciprocal ranks, nDCG at a small depth) is resampled through its sufficient
    statistic: how often a resample draws each distinct value is multinomial(n,
    share of that value), so one multinomial draw per resample replaces n index
    draws (the same distribution; 1,000 resamples of 100k binary values take
    milliseconds instead of about a second). A percentile ("p50", "p95") keeps the
    index draws and its values bit for bit, but selects each resample's two order
    statistics among integer ranks (values ranked once) instead of partitioning
    the resampled values (about 1.3x faster: the index draws are most of what is left).
Randomization test (``paired_randomization_test``)
    Two-sided test of "mean paired difference = 0" by flipping the sign of each
    query's difference (the null: the two runs are exchangeable per query). Exact
    enumeration of all 2^m sign vectors when 2^m <= resamples (m = queries with a
    non-zero difference: zero differences do not change the null distribution),
    Monte Carlo otherwise with the +1 correction. p = min(1, 2 min(P(null <= obs),
    P(null >= obs))), the same rule and tolerance as
    scipy.stats.permutation_test(permutation_type="samples").
    Monte Carlo draws the signs 4 queries at a time: each group of 4 differences
    has its 16 signed sums tabled once, a random 4-bit code per group and resample
    picks one, and a resample's statistic is the sum of its picks / n, so a resample
    costs one table look-up per 4 queries instead of a ±1 per query and a matrix
    product (10,000 sign vectors over 100k queries: about 2 s).
Holm (``holm``)
    Step-down adjusted p-values; NaN p-values are left out of the family.
Seeds
    ``rng_for(seed, *labels)`` derives an independent generator per (modality,
    metric), so a number does not change when another metric is added.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.measures import by_name
from bench.evaluation.stats.clusters import Clustering, cluster_codes
from bench.memo import Memo

__all__ = ["rng_for", "bootstrap_ci", "paired_randomization_test", "holm", "add_intervals", "cluster_sums", "weighted_percentile"]

BATCH_VALUES = 2_000_000
#: values per block of resamples in the weighted paths (1 MB of counts: they stay in the core's cache)
CACHE_VALUES = 1 << 17
#: entries per block in weighted_percentile's search
BLOCK = 64
CONFIDENCE = 0.95


def rng_for(seed: int, *labels: str) -> np.random.Generator:
    """A generator seeded by `seed` and the labels (stable across runs and machines)."""
    words = [int(seed)] + [int.from_bytes(hashlib.sha256(str(lab).encode()).digest()[:8], "big") for lab in labels]
    return np.random.default_rng(words)


def _stat(name: str | Callable) -> Callable[[np.ndarray], np.ndarray]:
    if callable(name):
        return name
    if name == "mean":
        return lambda x: x.mean(axis=-1)
    if name.startswith("p"):
        q = float(name[1:])
        return lambda x: np.percentile(x, q, axis=-1)
    raise ValueError(f"unknown statistic {name!r}")


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    resamples: int = 1000,
    rng: np.random.Generator,
    statistic: str | Callable = "mean",
    confidence: float = CONFIDENCE,
    clusters: np.ndarray | None = None,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of `statistic` ("mean", "p50", "p95", or a function
    reducing the last axis that also takes ``weights``); None when there are no values.
    ``clusters``: an integer code per value; the clusters are resampled (module docstring),
    None when there are fewer than two."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return None
    if resamples < 1:
        raise ValueError("resamples must be >= 1")
    codes = _codes(clusters, n)
    out = None
    if codes is not None:
        if codes.max() < 1:
            return None
        out = _bootstrap_clusters(x, codes, statistic, resamples, rng)
    elif statistic == "mean":
        out = _bootstrap_means(x, resamples, rng)
    elif isinstance(statistic, str) and statistic.startswith("p"):
        out = _bootstrap_percentiles(x, float(statistic[1:]), resamples, rng)
    if out is None:
        stat = _stat(statistic)
        out = np.empty(resamples)
        batch = max(1, BATCH_VALUES // n)
        for start in range(0, resamples, batch):
            b = min(batch, resamples - start)
            out[start:start + b] = stat(x[rng.integers(0, n, size=(b, n))])
    out = out[~np.isnan(out)]
    if len(out) == 0:
        return None
    alpha = (1 - confidence) / 2
    lo, hi = np.percentile(out, [100 * alpha, 100 * (1 - alpha)])
    return float(lo), float(hi)


#: the mean goes through value counts when distinct values <= n / this (see the module docstring)
FEW_VALUES = 32


#: the clustered mean goes through counts of the kinds of cluster (distinct (sum, size) pairs) when kinds <= clusters / this
#: (one multinomial draw over the kinds replaces drawing every cluster: measured faster from a fifth of the clusters down)
FEW_KINDS = 4


def _codes(clusters: np.ndarray | None, n: int) -> np.ndarray | None:
    """Dense cluster codes 0..C-1 of `n` values; None when every value is its own cluster (or none given)."""
    if clusters is None:
        return None
    c = np.asarray(clusters)
    if len(c) != n:
        raise ValueError(f"clusters: {len(c)} codes for {n} values")
    codes = np.unique(c, return_inverse=True)[1].astype(np.intp)
    return None if int(codes.max(initial=-1)) + 1 == n else codes


def cluster_sums(values: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sum of the values, number of entries) of each cluster 0..C-1."""
    c = int(codes.max(initial=-1)) + 1
    return np.bincount(codes, weights=values, minlength=c), np.bincount(codes, minlength=c).astype(float)


def _bootstrap_clusters(x: np.ndarray, codes: np.ndarray, statistic: str | Callable, resamples: int,
                        rng: np.random.Generator) -> np.ndarray:
    """`resamples` values of the statistic over the entries of C clusters drawn with replacement."""
    c = int(codes.max()) + 1
    if statistic == "mean" and np.isfinite(x).all():
        sums, sizes = cluster_sums(x, codes)
        pairs, counts = np.unique(np.stack([sums, sizes], axis=1), axis=0, return_counts=True)
        out = np.empty(resamples)
        if c >= 2 * FEW_VALUES and len(pairs) * FEW_KINDS <= c:  # a multinomial over the kinds of cluster
            batch = max(1, BATCH_VALUES // len(pairs))
            for start in range(0, resamples, batch):
                b = min(batch, resamples - start)
                drawn = rng.multinomial(c, counts / c, size=b)
                out[start:start + b] = (drawn @ pairs[:, 0]) / (drawn @ pairs[:, 1])
            return out
        batch = max(1, BATCH_VALUES // c)
        for start in range(0, resamples, batch):
            b = min(batch, resamples - start)
            idx = rng.integers(0, c, size=(b, c))
            out[start:start + b] = sums[idx].sum(axis=1) / sizes[idx].sum(axis=1)
        return out
    # a percentile or a function of weighted entries (the AUROC): each entry weighs how often its cluster was drawn
    order = np.arange(len(x)) if statistic == "mean" else np.argsort(x, kind="stable")  # others: in value order (the AUROC: by code)
    ordered, at = x[order], codes[order]
    first = np.unique(at, return_index=True)[1]  # each cluster's first entry (in `ordered`)
    rest = np.flatnonzero(first[at] != np.arange(len(x)))  # a cluster's other entries, which copy its first's count
    out = np.empty(resamples)
    batch = max(1, BATCH_VALUES // max(len(x), c))
    rows = batch if statistic == "mean" else max(1, CACHE_VALUES // len(x))
    for start in range(0, resamples, batch):
        drawn = rng.integers(0, c, size=(min(batch, resamples - start), c))
        for s in range(start, start + len(drawn), rows):  # counted at each cluster's first entry, copied to its others
            picks = first.take(drawn[s - start:s - start + rows])
            picks += np.arange(len(picks))[:, None] * len(x)
            weights = np.bincount(picks.ravel(), minlength=len(picks) * len(x)).reshape(len(picks), len(x))
            weights[:, rest] = weights[:, first[at[rest]]]
            if callable(statistic):
                out[s:s + len(weights)] = statistic(ordered, weights=weights)
            elif statistic == "mean":  # in floats: the matrix product as ever
                out[s:s + len(weights)] = (weights.astype(float) @ ordered) / weights.sum(axis=1)
            else:
                out[s:s + len(weights)] = weighted_percentile(ordered, weights, float(str(statistic)[1:]))
    return out


def weighted_percentile(ordered: np.ndarray, weights: np.ndarray, q: float) -> np.ndarray:
    """numpy's "linear" q-th percentile of each row's sample -- value i repeated ``weights[r, i]``
    times (integers >= 0; `ordered` sorted ascending) -- without repeating anything: a rank's entry,
    (running count <= rank).sum(), is found among running counts of blocks of entries, then in one
    block (a running count of every entry would take longer than the draws)."""
    w = np.atleast_2d(weights)
    (b, n), blocks, row = w.shape, -(-w.shape[1] // BLOCK), np.arange(2 * len(w)) % len(w)
    running = np.append(0, np.cumsum(np.add.reduceat(w, np.arange(0, n, BLOCK), axis=1)))  # row after row (exact, nondecreasing)
    total = (running[blocks::blocks] - running[:-1:blocks]).astype(float)
    below = np.floor(virtual := (total - 1) * np.true_divide(q, 100))
    at = running[row * blocks] + np.append(below, np.minimum(below + 1, total - 1)).astype(running.dtype)  # lo's rank, hi's
    block = np.clip(np.searchsorted(running, at, side="right") - 1 - row * blocks, 0, blocks - 1)
    cols = np.minimum(block[:, None] * BLOCK + np.arange(BLOCK), n - 1)  # past the end: the last entry again, after it
    inside = np.cumsum(w[row[:, None], cols], axis=1) <= (at - running[row * blocks + block])[:, None]
    lo, hi = ordered[np.minimum(block * BLOCK + inside.sum(axis=1), n - 1)].reshape(2, b)
    gamma = virtual - below
    return np.where(gamma >= 0.5, hi - (hi - lo) * (1 - gamma), lo + (hi - lo) * gamma)  # numpy's _lerp, as _bootstrap_percentiles


def _bootstrap_means(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray | None:
    """Bootstrap means from multinomial counts of the distinct values; None when the
    values are too many distinct ones (or not all finite) for that to pay."""
    n = len(x)
    if n < 2 * FEW_VALUES or not np.isfinite(x).all():
        return None
    uniq, counts = np.unique(x, return_counts=True)
    if len(uniq) * FEW_VALUES > n:
        return None
    share = counts / n
    out = np.empty(resamples)
    batch = max(1, BATCH_VALUES // len(uniq))
    for start in range(0, resamples, batch):
        b = min(batch, resamples - start)
        out[start:start + b] = rng.multinomial(n, share, size=b) @ uniq / n
    return out


def _bootstrap_percentiles(x: np.ndarray, q: float, resamples: int, rng: np.random.Generator) -> np.ndarray | None:
    """The q-th percentile (numpy "linear") of each resample, from the same index
    draws as the plain path and equal to it bit for bit, without gathering and
    partitioning the values of every resample: the values are ranked once, each
    resample's two order statistics are selected among its integer ranks, and
    numpy's interpolation rule is applied to the two values. None when the values
    are not all finite or q is at an end (the plain path handles those)."""
    n = len(x)
    virtual = (n - 1) * np.true_divide(q, 100)  # numpy's "linear" virtual index
    if n < 2 or not 0 < virtual < n - 1 or not np.isfinite(x).all():
        return None
    order = np.argsort(x, kind="stable")
    rank = np.empty(n, dtype=np.intp)
    rank[order] = np.arange(n)
    ranked = x[order]
    below = int(np.floor(virtual))
    gamma = virtual - np.floor(virtual)
    out = np.empty(resamples)
    batch = max(1, BATCH_VALUES // n)
    for start in range(0, resamples, batch):
        b = min(batch, resamples - start)
        picked = np.partition(rank[rng.integers(0, n, size=(b, n))], (below, below + 1), axis=1)
        lo, hi = ranked[picked[:, below]], ranked[picked[:, below + 1]]
        diff = hi - lo  # numpy's _lerp: a + (b - a) t, or b - (b - a)(1 - t) from t = 0.5 on
        out[start:start + b] = hi - diff * (1 - gamma) if gamma >= 0.5 else lo + diff * gamma
    return out


#: queries per group in the Monte Carlo sign flips (a table of 2**4 signed sums per group)
SIGN_GROUP = 4


def _sign_flip_null(d: np.ndarray, n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """`resamples` values of sum(s_i d_i) / n with independent fair signs s_i = ±1."""
    groups = -(-len(d) // SIGN_GROUP)
    padded = np.zeros(groups * SIGN_GROUP)
    padded[: len(d)] = d  # padding differences are 0: their sign changes nothing
    codes_per_group = 1 << SIGN_GROUP
    bits = (np.arange(codes_per_group)[:, None] >> np.arange(SIGN_GROUP)) & 1
    table = (padded.reshape(groups, SIGN_GROUP) @ (1.0 - 2.0 * bits).T).ravel()  # group g, code c at g*16 + c
    offsets = np.arange(groups, dtype=np.intp) * codes_per_group
    null = np.empty(resamples)
    batch = max(1, BATCH_VALUES // groups)
    for start in range(0, resamples, batch):
        b = min(batch, resamples - start)
        codes = rng.integers(0, codes_per_group, size=(b, groups), dtype=np.uint8)
        null[start:start + b] = table[codes + offsets].sum(axis=1) / n
    return null


def paired_randomization_test(
    diff: Sequence[float] | np.ndarray,
    *,
    resamples: int = 10000,
    rng: np.random.Generator,
    clusters: np.ndarray | None = None,
) -> float:
    """Two-sided p-value of mean(diff) = 0 by sign flips (see the module docstring); ``clusters``:
    an integer code per difference, each cluster's differences flipped together."""
    d_all = np.asarray(diff, dtype=float)
    if len(d_all) == 0:
        return float("nan")
    n = len(d_all)
    observed = d_all.mean()
    codes = _codes(clusters, n)
    if codes is not None:  # each cluster's summed difference is one sign flip; the statistic is still over entries
        d_all = cluster_sums(d_all, codes)[0]
        d_all = np.where(np.abs(d_all) < 1e-12, 0.0, d_all)  # +1 and -1 of one cluster's askings cancel exactly
        observed = d_all.sum() / n
    d = d_all[d_all != 0]
    m = len(d)
    if m == 0:
        return 1.0
    if 2**m <= resamples:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=m)))
        null = signs @ d / n
        total, adjust = len(null), 0
    else:
        null = _sign_flip_null(d, n, resamples, rng)
        total, adjust = resamples, 1
    gamma = abs(observed) * np.finfo(float).eps * 100
    p_less = (np.count_nonzero(null <= observed + gamma) + adjust) / (total + adjust)
    p_greater = (np.count_nonzero(null >= observed - gamma) + adjust) / (total + adjust)
    return float(np.clip(2 * min(p_less, p_greater), 0.0, 1.0))


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (same order as given; NaN stays NaN)."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out


# --------------------------------------------------------------------------- dev.json cells


def add_intervals(
    report: dict[str, Any],
    per_query_df: pd.DataFrame,
    *,
    k: int = 10,
    resamples: int = 1000,
    seed: int = 0,
    memo: Memo | None = None,
    clustering: Clustering = "question",
) -> dict[str, Any]:
    """Copy of ``report`` ({"by_modality": {m: {name: cell}}, "overall": {...}}) with
    ``ci95: [lo, hi]`` and ``clusters`` (how many clusters the interval resampled; the
    entries are the cell's n and denominator) added to every cell (``[null, null]`` when the
    cell has no data, its metric is unknown here, or it rests on fewer than two clusters).

    ``per_query_df``: query_id, modality, unanswerable, failed, latency_ms, the cluster
    labels (bench.evaluation.stats.clusters; without them every entry is its own) and every
    per-query column of the measures (bench.evaluation.measures); each cell resamples the
    clusters of the entries its reducer declares (``rows``). A failed query contributes its
    worst case (as in the value); latency intervals resample the timed queries' percentiles;
    the AUROC interval resamples entries with their kind.
    ``memo`` (bench.memo): an interval is reused when the values it resamples, their
    clusters, the statistic, resamples, seed and labels are those of a stored one (the same
    numbers the bootstrap would draw again).
    """
    known = by_name(k)
    store = memo or Memo(None)
    tasks: list[_Cell] = []
    for name, cells, df in [*((m, cells, per_query_df.loc[per_query_df["modality"] == m]) for m, cells in report["by_modality"].items()),
                            ("overall", report["overall"], per_query_df)]:
        codes = cluster_codes(df, clustering)
        tasks.extend(_cell(known, store, name, metric, cell, df, codes, resamples, seed) for metric, cell in cells.items())
    found = _intervals(tasks, store, resamples, seed)
    out: dict[str, dict[str, Any]] = {}
    for task, ci in zip(tasks, found, strict=True):
        cell = {**task.cell, "ci95": list(ci) if ci else [None, None]}
        if task.clusters is not None:
            cell["clusters"] = int(len(np.unique(task.clusters)))
        out.setdefault(task.name, {})[task.metric] = cell
    return {**report, "by_modality": {m: out.get(m, {}) for m in report["by_modality"]}, "overall": out.get("overall", {})}


def _cell(known: Mapping[str, Any], store: Memo, name: str, metric: str, cell: dict[str, Any], df: pd.DataFrame, codes: np.ndarray,
          resamples: int, seed: int) -> _Cell:
    """The cell's values and clusters to resample, and their memo key (none when it has no data or its metric is unknown)."""
    measure = known.get(metric)
    if measure is None or measure.column not in df.columns or cell.get("value") is None:
        return _Cell(name, metric, cell)
    values = np.ascontiguousarray(measure.reducer.values(measure, df))
    clusters = np.ascontiguousarray(codes[measure.reducer.rows(measure, df)])
    stat = measure.reducer.statistic
    key = store.key("ci", values, clusters, resamples, seed, name, metric, stat if isinstance(stat, str) else measure.name, CONFIDENCE)
    return _Cell(name, metric, cell, values, clusters, stat, key)


def _intervals(tasks: list[_Cell], store: Memo, resamples: int, seed: int) -> list[list[float] | None]:
    """Each cell's interval: stored ones read, the others drawn on up to two threads (numpy's draws, gathers
    and sums release the GIL; each cell has its own generator, so the order they run in changes no number)."""
    found: list[list[float] | None] = [None] * len(tasks)
    todo = []
    for i, task in enumerate(tasks):
        stored = None if task.key is None else store.get("ci", task.key)
        try:
            found[i] = None if stored is None else json.loads(stored)
        except ValueError:
            stored = None
        if stored is None and task.key is not None:
            todo.append(i)

    def compute(i: int) -> list[float] | None:
        task = tasks[i]
        assert task.values is not None  # a cell with a key has values
        drawn = bootstrap_ci(task.values, resamples=resamples, rng=rng_for(seed, task.name, task.metric), statistic=task.stat,
                             clusters=task.clusters)
        return None if drawn is None else list(drawn)

    if len(todo) > 1:
        with ThreadPoolExecutor(max_workers=INTERVAL_THREADS) as pool:
            computed = list(pool.map(compute, todo))
    else:
        computed = [compute(i) for i in todo]
    for i, value in zip(todo, computed, strict=True):
        found[i] = value
        store.put("ci", str(tasks[i].key), json.dumps(value, allow_nan=True).encode())
    return found


#: threads drawing the intervals not stored (the machine's two cores)
INTERVAL_THREADS = 2


@dataclass(frozen=True)
class _Cell:
    """One dev.json cell to give an interval: without a key when it has none (no data, an unknown metric)."""

    name: str  # the modality, or "overall"
    metric: str
    cell: dict[str, Any]
    values: np.ndarray | None = None
    clusters: np.ndarray | None = None
    stat: Any = None
    key: str | None = None
