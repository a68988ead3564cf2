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
    each entry counts (a cluster bootstrap's draw, bench.evaluation.stats.uncertainty)."""
    c = np.atleast_2d(np.asarray(codes, dtype=np.int64))
    w = None if weights is None else np.atleast_2d(np.asarray(weights, dtype=float))
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
    u = (p * (below + 0.5 * neg)).sum(axis=1)
    n_pos, n_neg = p.sum(axis=1), neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where((n_pos > 0) & (n_neg > 0), u / (n_pos * n_neg), np.nan)
    return out if np.asarray(codes).ndim > 1 or (w is not None and w.shape[0] > 1) else out.reshape(())


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
