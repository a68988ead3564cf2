"""AUROC (``auroc_unanswerable``, threshold-free): how well the system's signal
separates answerable (positive) from unanswerable entries.

The Mann-Whitney probability that an answerable entry's signal exceeds an unanswerable
one's (ties, bench.evaluation.measures.scores.tie_groups, count one half). The signal
(per-query column ``auroc_signal``) is the declared ``confidence`` when the system sent
one with every answered query, else the top-1 score (an empty answer ranks lowest);
``auroc_signal_source`` says which. Only ranks are used. A failed answerable entry
ranks below every other entry and a failed unanswerable one above every other entry;
the cell needs both kinds of entries.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.evaluation.measures.base import AllQueries, Family, Measure, MetricCell, cell, flags, in_denominator
from bench.evaluation.measures.scores import tie_groups

__all__ = ["FAMILY", "MEASURES", "Auroc", "auroc_codes", "auroc_from_codes", "auroc_signal"]


@dataclass(frozen=True)
class Auroc:
    """The AUROC of answerable against unanswerable entries; the bootstrap resamples entries with their kind."""

    def cell(self, measure: Measure, group: pd.DataFrame) -> MetricCell:
        unans, failed = flags(group)
        n, denominator = int((~failed).sum()), int(in_denominator(measure.scope, unans).sum())
        if unans.all() or not unans.any():
            return cell(None, n, denominator, "needs both answerable and unanswerable entries")
        return cell(float(auroc_from_codes(self.values(measure, group))), n, denominator)

    def values(self, measure: Measure, group: pd.DataFrame) -> np.ndarray:
        unans, failed = flags(group)
        return auroc_codes(group[measure.column].to_numpy(dtype=float), ~unans, failed)

    def rows(self, measure: Measure, group: pd.DataFrame) -> np.ndarray:
        return in_denominator(measure.scope, flags(group)[0])

    @property
    def statistic(self) -> Callable[[np.ndarray], np.ndarray]:
        return auroc_from_codes

    @property
    def worst_case(self) -> str:
        return "a failed answerable entry ranks below every other entry, a failed unanswerable one above every other"


def auroc_signal(top1: np.ndarray, confidence: np.ndarray, failed: np.ndarray) -> tuple[np.ndarray, str]:
    """The AUROC signal per entry: declared confidence when every answered query has one,
    else the top-1 score (-inf for an empty answer); NaN for failed queries."""
    answered = ~failed
    use_conf = bool(answered.any()) and not np.isnan(confidence[answered]).any()
    signal = confidence if use_conf else np.where(np.isnan(top1), -np.inf, top1)
    return np.where(failed, np.nan, signal), "confidence" if use_conf else "top1_score"


def auroc_codes(signal: np.ndarray, positive: np.ndarray, failed: np.ndarray) -> np.ndarray:
    """Integer codes 2 * key + positive whose keys order the entries by signal, with the
    worst case for failed queries (answerable: below all; unanswerable: above all)."""
    sep = np.asarray(signal, dtype=float)
    pos = np.asarray(positive, dtype=bool)
    bad = np.asarray(failed, dtype=bool)
    key = np.zeros(len(sep), dtype=np.int64)
    ok = ~bad
    if ok.any():
        key[ok] = tie_groups(sep[ok]) + 1
    top = int(key.max(initial=0)) + 1
    key[bad & ~pos] = top
    key[bad & pos] = 0
    return 2 * key + pos.astype(np.int64)


def auroc_from_codes(codes: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """AUROC along the last axis of :func:`auroc_codes` codes (NaN where a class is absent).
    ``weights`` (the shape of `codes`, or rows of weights over one row of codes): how many times
    each entry counts (a cluster bootstrap's draw, bench.evaluation.stats.uncertainty). Integer
    weights over one row of codes take :func:`_auroc_counted`, equal bit for bit and faster."""
    w = None if weights is None else np.asarray(weights)
    if w is not None and w.dtype.kind in "iu" and np.ndim(codes) == 1 and np.size(codes):
        out = _auroc_counted(np.asarray(codes, dtype=np.int64), np.atleast_2d(w).astype(np.int64, copy=False))
        return out if w.ndim > 1 and len(w) > 1 else out.reshape(())
    c = np.atleast_2d(np.asarray(codes, dtype=np.int64))
    w = None if w is None else np.atleast_2d(np.asarray(w, dtype=float))
    if w is not None and c.shape[0] == 1 and w.shape[0] > 1:
        c = np.broadcast_to(c, w.shape)
    b, _ = c.shape
    key, pos = c // 2, c % 2
    width = int(key.max(initial=0)) + 1
    flat = (np.arange(b)[:, None] * width + key).ravel()
    ones = np.ones(c.size) if w is None else w.ravel()
    p = np.bincount(flat, weights=pos.ravel() * ones, minlength=b * width).reshape(b, width)
    allc = np.bincount(flat, weights=ones, minlength=b * width).reshape(b, width)
    neg = allc - p
    below = np.cumsum(neg, axis=1) - neg
    return _ratio((p * (below + 0.5 * neg)).sum(axis=1), p.sum(axis=1), neg.sum(axis=1),
                  np.asarray(codes).ndim > 1 or (w is not None and w.shape[0] > 1))


def _auroc_counted(codes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The AUROC of each row of integer `weights` over one row of codes, in integers: every count,
    and twice the Mann-Whitney U (a sum of half counts), is an integer, so the float path's sums
    (exact while below 2**53) give the same numbers in any order. With the entries in code order
    (the cluster bootstrap passes them so), a positive entry's negatives below are the negative
    entries before it: one running sum over the negatives (the fewer), a product of rows, less
    half of each tie between the classes; in blocks of rows that stay in the core's cache."""
    plan = _plan(codes.tobytes())
    if plan.order is not None:
        weights = weights[:, plan.order]
    out = np.empty((len(weights), 3))  # twice U, positives, negatives (integers below 2**53)
    rows = max(1, CACHE_VALUES // len(codes))
    for r in range(0, len(weights), rows):
        w = weights[r:r + rows] if plan.merge is None else np.add.reduceat(weights[r:r + rows], plan.merge, axis=1)
        p = np.take(w, plan.pos, axis=1)
        negatives = np.zeros((len(p), len(plan.neg) + 1), dtype=np.int64)  # column m: the first m negatives' weight
        np.cumsum(np.take(w, plan.neg, axis=1), axis=1, out=negatives[:, 1:])
        twice_u = 2 * np.einsum("ij,ij->i", p, np.take(negatives, plan.below, axis=1))  # each positive above its key's negatives ...
        if len(plan.tied):  # ... less half of them: a tied key's negatives times its positives
            tied = np.add.reduceat(np.take(w, plan.tied, axis=1), plan.tied_runs, axis=1)
            twice_u -= np.einsum("ij,ij->i", tied[:, 0::2], tied[:, 1::2])
        out[r:r + len(p), 0], out[r:r + len(p), 1], out[r:r + len(p), 2] = twice_u, p.sum(axis=1), negatives[:, -1]
    return _ratio(out[:, 0] * 0.5, out[:, 1], out[:, 2], True)


#: entries per block of rows in _auroc_counted (1 MB of counts)
CACHE_VALUES = 1 << 17


@dataclass(frozen=True)
class _Plan:
    """Where _auroc_counted reads in a row of weights (over code-ordered columns)."""

    order: np.ndarray | None  # the entries in code order (None: they are)
    merge: np.ndarray | None  # each code's first entry when its entries are summed first (many ties)
    pos: np.ndarray  # the positive columns
    neg: np.ndarray  # the negative columns
    below: np.ndarray  # per positive column: the negative columns before it (its key's and lower)
    tied: np.ndarray  # the columns of keys held by both classes, key by key (its negatives, then its positives)
    tied_runs: np.ndarray  # where each key's negatives and positives start among them


@functools.lru_cache(maxsize=4)
def _plan(raw: bytes) -> _Plan:
    """The plan of a row of int64 codes, kept for the last few: the cluster bootstrap asks for the
    same codes' AUROC a block of resamples at a time, and the plan costs more than a block."""
    codes = np.frombuffer(raw, dtype=np.int64)
    order = np.argsort(codes, kind="stable") if np.any(codes[1:] < codes[:-1]) else None
    codes = codes if order is None else codes[order]
    starts = np.flatnonzero(np.append(True, codes[1:] != codes[:-1]))  # each code's first entry
    merge = starts if len(starts) * 2 <= len(codes) else None
    if merge is not None:
        codes, starts = codes[starts], np.arange(len(starts))
    neg = codes & 1 == 0
    pos = np.flatnonzero(~neg)
    sizes = np.diff(np.append(starts, len(codes)))
    run = np.repeat(np.arange(len(starts)), sizes)  # each column's code, counted from 0
    edge = run[np.flatnonzero(neg[:-1] & (codes[1:] == codes[:-1] + 1))]  # the negatives of a key held by both (next: its positives)
    held = np.zeros(len(starts), dtype=bool)
    held[edge] = held[edge + 1] = True
    return _Plan(order, merge, pos, np.flatnonzero(neg), np.cumsum(neg)[pos], np.flatnonzero(held[run]),
                 np.cumsum(sizes[held]) - sizes[held])


def _ratio(u: np.ndarray, n_pos: np.ndarray, n_neg: np.ndarray, rows: bool) -> np.ndarray:
    """U / (positives x negatives), NaN where a class is absent; a 0-d array unless `rows`."""
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where((n_pos > 0) & (n_neg > 0), u / (n_pos * n_neg), np.nan)
    return out if rows else out.reshape(())


def _compute(every: AllQueries) -> dict[str, np.ndarray | str]:
    """The declared confidence beside the signal read from it (or from the top-1 score), and its source."""
    blocks = every.blocks
    confidence = blocks["confidence"].to_numpy(dtype=float)
    signal, source = auroc_signal(blocks["top1_score"].to_numpy(dtype=float), confidence, blocks["failed"].to_numpy(dtype=bool))
    return {"confidence": confidence, "auroc_signal": signal, "auroc_signal_source": source}


FAMILY = Family(
    name="auroc", phase="cross_query", compute=_compute, columns=lambda k: ("confidence", "auroc_signal", "auroc_signal_source"),
    measures=(
        Measure(name="auroc_unanswerable", column="auroc_signal", scope="all", reducer=Auroc(), higher_is_better=True, heading="AUROC",
                unit="probability (0-1; 0.5 is chance)",
                description="Per group, not per query: how well the system's signal separates answerable from unanswerable "
                            "entries (the Mann-Whitney probability, ties count one half; ranks only). The signal is the declared "
                            "confidence when the system sent one with every answer, else the top-1 score."),
    ),
)
MEASURES: tuple[Measure, ...] = FAMILY.measures
