"""Ranking measures: recall@k, atom_recall@k, MRR, nDCG@k (answerable entries).

Per query (``k`` = cut-off; "gold atom set" = distinct atom codes in the query's gold
rows; "top-k" = run rows with ``rank <= k``):

``recall@k``       share of the entry's ``n_regions`` gold regions overlapped by some
                   top-k atom (region coverage: an atom overlapping two regions
                   covers both). 0 when n_regions == 0.
``atom_recall@k``  |top-k ∩ gold atom set| / |gold atom set|; 0 when the gold atom
                   set is empty.
``mrr``            1 / rank of the first returned atom (any depth) in the gold atom
                   set, else 0.
``ndcg@k``         binary relevance (rel = 1 iff atom in gold atom set);
                   DCG = sum_{r<=k} rel_r / log2(r + 1), IDCG = DCG of
                   min(|gold atom set|, k) hits at ranks 1..; 0 when the gold atom
                   set is empty. Equals trec_eval / ranx / ir_measures nDCG@k on
                   queries with non-empty qrels.
Beside them: ``n_gold_atoms``, ``first_hit_rank`` (NaN if no gold atom was returned),
``n_returned`` (whole list) and ``top1_score`` (score of the rank-1 atom, NaN when
nothing was returned).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.evaluation.encoding import Entries, GoldRows, RunRows, count_per_query, distinct_rows
from bench.evaluation.measures.base import Bar, Mean, Measure

__all__ = ["MEASURES", "ranking_columns", "returned_columns"]

MEASURES = (
    Measure("recall", "recall", "answerable", "ranking", Mean(worst=0.0), True, cutoff=True, bar=Bar(">=", 0.90),
            heading="recall", compared=True),
    Measure("atom_recall", "atom_recall", "answerable", "ranking", Mean(worst=0.0), True, cutoff=True),
    Measure("mrr", "mrr", "answerable", "ranking", Mean(worst=0.0), True, heading="MRR", compared=True),
    Measure("ndcg", "ndcg", "answerable", "ranking", Mean(worst=0.0), True, cutoff=True, heading="nDCG", compared=True),
)


def _idcg_table(k: int) -> np.ndarray:
    """idcg[g] = ideal DCG with g relevant atoms at ranks 1..g (g <= k)."""
    discounts = 1.0 / np.log2(np.arange(2, k + 2, dtype=float))
    return np.concatenate(([0.0], np.cumsum(discounts)))


def _safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros_like(num, dtype=float)
    np.divide(num, den, out=out, where=den > 0)
    return out


def ranking_columns(run: RunRows, gold: GoldRows, entries: Entries, k: int) -> dict[str, np.ndarray]:
    """recall@k, atom_recall@k, mrr, ndcg@k, n_gold_atoms, first_hit_rank."""
    n = len(entries.ids)
    n_codes = int(max(run.a.max(initial=0), gold.a.max(initial=0))) + 1
    gold_keys = gold.q * n_codes + gold.a
    gold_atoms = distinct_rows(gold.q, gold.a)
    n_gold = count_per_query(gold.q[gold_atoms], n)

    is_gold_atom = np.zeros(n_codes, dtype=bool)
    is_gold_atom[gold.a] = True
    maybe = np.flatnonzero(is_gold_atom[run.a])  # cheap filter before the pair lookup
    rel = np.zeros(len(run.q), dtype=bool)
    maybe_keys = run.q[maybe] * n_codes + run.a[maybe]
    rel[maybe] = pd.Series(maybe_keys, copy=False).isin(gold_keys[gold_atoms]).to_numpy()
    topk = run.rank <= k
    hit_q, hit_rank = run.q[rel], run.rank[rel]
    first = np.ones(len(hit_q), dtype=bool)
    first[1:] = hit_q[1:] != hit_q[:-1]  # rows come sorted by (query, rank)
    first_hit = np.full(n, np.nan)
    first_hit[hit_q[first]] = hit_rank[first]

    top_hit = rel & topk
    top_q = run.q[top_hit]
    dcg = np.bincount(top_q, weights=1.0 / np.log2(run.rank[top_hit] + 1.0), minlength=n)
    n_top_hits = count_per_query(top_q, n).astype(float)
    idcg = _idcg_table(k)[np.minimum(n_gold, k)]

    # a gold row is covered when its (query, atom) is a top-k hit: top-k gold hits only
    top_keys = top_q * n_codes + run.a[top_hit]
    covered = pd.Series(gold_keys, copy=False).isin(top_keys).to_numpy()
    cq, cg = gold.q[covered], gold.g[covered]
    n_covered = count_per_query(cq[distinct_rows(cq, cg)], n).astype(float)

    recall, atom_recall, mrr, ndcg = (m.at(k).column for m in MEASURES)
    return {
        "n_gold_atoms": n_gold,
        "first_hit_rank": first_hit,
        recall: _safe_ratio(n_covered, entries.frame["n_regions"].to_numpy(dtype=float)),
        atom_recall: _safe_ratio(n_top_hits, n_gold.astype(float)),
        mrr: np.where(np.isnan(first_hit), 0.0, 1.0 / first_hit),
        ndcg: _safe_ratio(dcg, idcg),
    }


def returned_columns(run: RunRows, entries: Entries) -> dict[str, np.ndarray]:
    """n_returned and the rank-1 score (NaN when nothing was returned)."""
    n = len(entries.ids)
    first = np.ones(len(run.q), dtype=bool)
    first[1:] = run.q[1:] != run.q[:-1]  # rows come sorted by (query, rank)
    top1 = np.full(n, np.nan)
    top1[run.q[first]] = run.score[first]
    return {"n_returned": count_per_query(run.q, n), "top1_score": top1}

