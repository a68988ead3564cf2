"""When two scores are equal, the one rule: the false-recall threshold
(:func:`reaches`), the AUROC's ranks (:func:`tie_groups`) and the tied positions of
the top k (:func:`tied_positions`) all use :func:`within_tie`.

Scores within a relative ``REL_TIE`` (1e-9) of each other count as equal: the same
terms summed in another order differ in the last bit, and such a difference must not
turn into a tie (or out of one) when the scores are rescaled. Only comparisons are
used, so any positive scaling or shift of a system's scores changes nothing.

:data:`FAMILY` declares no measure: it is the registry's entry for the per-query ``tied@k``
column behind dev.json's ``ties``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.evaluation.measures.base import BlockRows, Family

__all__ = ["FAMILY", "REL_TIE", "reaches", "tie_groups", "tied_column", "tied_positions", "within_tie"]

#: scores closer than this, relative to their magnitude, are equal (floating-point rounding)
REL_TIE = 1e-9


def within_tie(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """|a - b| <= REL_TIE * max(|a|, |b|), elementwise (NaN: False)."""
    with np.errstate(invalid="ignore"):
        return np.asarray(np.abs(np.subtract(a, b)) <= REL_TIE * np.maximum(np.abs(a), np.abs(b)))


def reaches(values: np.ndarray, threshold: float) -> np.ndarray:
    """values >= threshold, where values within REL_TIE of the threshold count as equal (NaN: False)."""
    v = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        return (v >= threshold) | (np.isfinite(v) & within_tie(v, threshold))


def tie_groups(values: np.ndarray) -> np.ndarray:
    """Dense rank (0, 1, ...) of finite or infinite values, neighbours within REL_TIE merged."""
    v = np.asarray(values, dtype=float)
    uniq, inverse = np.unique(v, return_inverse=True)
    if len(uniq) > 1:
        gap = ~within_tie(uniq[1:], uniq[:-1])
        gap |= ~np.isfinite(uniq[1:]) | ~np.isfinite(uniq[:-1])
        group = np.concatenate(([0], np.cumsum(gap)))
    else:
        group = np.zeros(len(uniq), dtype=np.int64)
    return group[inverse.reshape(-1)]


def tied_column(k: int) -> str:
    """The per-query column of :func:`tied_positions` at cut-off `k`."""
    return f"tied@{k}"


def tied_positions(run: pd.DataFrame, k: int) -> pd.DataFrame:
    """Per query: top-k positions whose score equals a neighbour's (rank r-1 or r+1), equal
    meaning :func:`within_tie`, so the count does not depend on the system's score scale.

    Those are the positions whose order (or whether they made the cut at k) was set
    by the tie rule -- score descending, then atom_id ascending -- not by the score.
    Columns query_id, ``tied@k``.
    """
    r = run[["query_id", "rank", "score"]].assign(query_id=run["query_id"].astype(str))
    r = r.loc[r["rank"].astype(int) <= k + 1].sort_values(["query_id", "rank"], kind="stable")
    same_query_before = r["query_id"].eq(r["query_id"].shift(1))
    same_query_after = r["query_id"].eq(r["query_id"].shift(-1))
    score = r["score"].astype(float).to_numpy()
    before, after = r["score"].astype(float).shift(1).to_numpy(), r["score"].astype(float).shift(-1).to_numpy()
    tie_before = same_query_before & pd.Series(within_tie(score, before), index=r.index)
    tie_after = same_query_after & pd.Series(within_tie(score, after), index=r.index)
    tied = (tie_before | tie_after) & (r["rank"].astype(int) <= k)
    counts = tied.groupby(r["query_id"]).sum().astype(int)
    return counts.rename(tied_column(k)).rename_axis("query_id").reset_index()


def _tied(block: BlockRows) -> pd.DataFrame:
    """``tied@k`` of every entry of a query block : 0
    for a query without a tie or without a run row."""
    ids = block.entries["query_id"].astype(str).to_numpy()
    column = tied_column(block.k)
    tied = tied_positions(block.run, block.k).set_index("query_id")[column]
    return pd.DataFrame({"query_id": ids, column: tied.reindex(ids).fillna(0).astype(int).to_numpy()})


FAMILY = Family(name="scores", phase="block", measures=(), compute=_tied, columns=lambda k: (tied_column(k),))
