"""The leaderboard's resampling over clusters of entries (bench.evaluation.stats.clusters): each
run's rank with its 95% interval, and which pairs of runs tie within noise on the frontier's
quality. Every resample draws the clusters with replacement, the same draw for every run;
when every cluster is one entry, the entry bootstrap runs unchanged."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["BATCH", "drawn_means", "paired_ties", "rank_interval"]

BATCH = 200  # bootstrap resamples per batch of the rank intervals


def drawn_means(matrix: np.ndarray, codes: np.ndarray, b: int, rng: np.random.Generator) -> np.ndarray:
    """`b` bootstrap means of each column of `matrix` (entries x runs), the clusters of `codes` (one
    per entry) drawn with replacement, the same draw for every column."""
    n = len(matrix)
    c = int(codes.max(initial=-1)) + 1
    if c == n:  # every entry its own cluster: the entry bootstrap
        return rng.multinomial(n, np.full(n, 1.0 / n), size=b) @ matrix / n
    weights = rng.multinomial(c, np.full(c, 1.0 / c), size=b)[:, codes].astype(float)
    return (weights @ matrix) / weights.sum(axis=1)[:, None]


def rank_interval(matrix: np.ndarray, higher: bool, resamples: int, rng: np.random.Generator,
                   codes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rank on the data, 95% rank interval [2, runs]) of each column of `matrix` (queries x runs),
    the clusters of `codes` resampled (None: every entry its own)."""
    n, runs = matrix.shape
    sign = 1.0 if higher else -1.0
    codes = np.arange(n) if codes is None else np.unique(codes, return_inverse=True)[1]

    def ranks(means: np.ndarray) -> np.ndarray:  # rows of means -> competition ranks (1 = best, ties share the better)
        s = sign * means
        return 1 + (s[:, None, :] > s[:, :, None]).sum(axis=2)

    point = ranks(matrix.mean(axis=0)[None, :])[0]
    drawn = np.empty((resamples, runs), dtype=int)
    for start in range(0, resamples, BATCH):
        b = min(BATCH, resamples - start)
        drawn[start:start + b] = ranks(drawn_means(matrix, codes, b, rng))
    lo = np.percentile(drawn, 2.5, axis=0, method="lower")
    hi = np.percentile(drawn, 97.5, axis=0, method="higher")
    return point, np.stack([lo, hi], axis=1)


def paired_ties(matrix: np.ndarray, resamples: int, rng: np.random.Generator, alpha: float = 0.05,
                 codes: np.ndarray | None = None) -> np.ndarray:
    """``out[i, j]``: runs i and j (columns of `matrix`, queries x runs) are tied within noise:
    the 1 - alpha paired bootstrap interval of mean(column j) - mean(column i) holds 0, or
    fewer clusters differ than the paired sign-flip test needs to reject at `alpha` at all
    (x with 2 / 2^x <= alpha: 6 at 0.05; bench.evaluation.stats.power, *fewest*), where a
    percentile interval would exclude 0 on a handful of one-way changes. The clusters of
    `codes` are resampled (None: every entry its own), the same draw for every pair (a
    resample's difference of means is the mean of its paired differences)."""
    n, runs = matrix.shape
    codes = np.arange(n) if codes is None else np.unique(codes, return_inverse=True)[1]
    fewest = math.ceil(math.log2(2 / alpha) - 1e-12)
    differ = matrix[:, :, None] != matrix[:, None, :]
    moved = np.stack([np.bincount(codes, weights=differ[:, i, j], minlength=int(codes.max(initial=-1)) + 1) > 0
                      for i in range(runs) for j in range(runs)], axis=1).sum(axis=0).reshape(runs, runs)
    drawn = np.empty((resamples, runs))
    for start in range(0, resamples, BATCH):
        b = min(BATCH, resamples - start)
        drawn[start:start + b] = drawn_means(matrix, codes, b, rng)
    diffs = drawn[:, None, :] - drawn[:, :, None]  # [r, i, j]: mean j - mean i
    lo, hi = np.percentile(diffs, 50 * alpha, axis=0), np.percentile(diffs, 100 - 50 * alpha, axis=0)
    return ((lo <= 0) & (hi >= 0)) | (moved < fewest)
