"""Ranking measures at atom ranks: recall@k, MRR, nDCG@k (answerable entries), and their diagnostics.

Gold *regions* are the relevant items of recall@k, mrr and ndcg@k, so how the gold is cut
into atoms changes none of them (a gold page cut into ten windows is still one page). Their
positions are atom ranks, though, so bigger atoms move a region up: mrr and ndcg@k are
diagnostics, and the verdict, ``bench compare``, the leaderboard and the gate read
content_mrr and content_ndcg@k, whose positions are the content read before a region
(bench.evaluation.measures.reading; issue 46). Per query (``k`` = cut-off; "gold atom set" = distinct atom codes in the query's
gold rows; "top-k" = run rows with ``rank <= k``; a region's *first rank* = the best rank
of an atom in its resolved gold atom set, i.e. the first returned atom overlapping it):

``recall@k``         share of the entry's ``n_regions`` gold regions overlapped by some
                     top-k atom (an atom overlapping two regions covers both). 0 when
                     n_regions == 0.
``mrr``              1 / rank of the first returned atom (any depth) overlapping a gold
                     region (the smallest first rank), else 0.
``ndcg@k``           regions as the relevant items, binary gain: the regions found in the
                     top k sorted by first rank r_1 <= r_2 <= ...; DCG = sum_i
                     1 / log2(max(r_i, i) + 1) (the i-th region found cannot beat the
                     i-th ideal slot, so one atom overlapping two regions gives them ranks
                     1 and 2, never two gains at rank 1; a slot past k gains nothing);
                     IDCG = DCG of min(n_regions, k)
                     regions at ranks 1..; 0 when n_regions is 0.
``ranked_recall@k``  recall@k of the ranking whatever the answer said: recall@k counts
                     nothing for an answer that abstained (bench.evaluation.measures.
                     false_recall, *Abstention*), this diagnostic counts its ranking.
``atom_recall@k``    |top-k ∩ gold atom set| / |gold atom set|; 0 when the gold atom set
                     is empty (a diagnostic: it moves with how the gold is cut).
``atom_ndcg@k``      nDCG@k with atoms as the relevant items (rel = 1 iff the atom is in
                     the gold atom set; IDCG of min(|gold atom set|, k) hits): trec_eval's,
                     ranx's and ir_measures' nDCG@k on the TREC run and qrels (atom
                     qrels) -- a diagnostic: cutting a gold page into more atoms lowers it
                     with the same pages found.
Beside them: ``n_gold_atoms``, ``first_hit_rank`` (NaN if no gold atom was returned),
``n_returned`` (whole list) and ``top1_score`` (score of the rank-1 atom, NaN when
nothing was returned).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.evaluation.encoding import Entries, GoldRows, RunRows, count_per_query, distinct_rows
from bench.evaluation.measures.base import Bar, Family, Mean, Measure, QueryRows

__all__ = ["FAMILY", "MEASURES", "RECALL_BAR", "ranking_columns", "returned_columns"]

#: the spec's recall bar (schema b-2, section 4); recall@budget is judged against the same bar (bench.evaluation.measures.budget)
RECALL_BAR = Bar(">=", 0.90)
_REGIONS = "share of the entry's gold regions (0-1)"


def _columns(k: int) -> tuple[str, ...]:
    """The ranking columns of the per-query table at cut-off k."""
    return ("n_gold_atoms", "first_hit_rank", *(m.at(k).column for m in MEASURES), "n_returned", "top1_score")


def _compute(rows: QueryRows) -> dict[str, np.ndarray]:
    coded = rows.coded
    return {**ranking_columns(coded.run, coded.gold, coded.entries, rows.k), **returned_columns(coded.run, coded.entries)}


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
    n_regions = entries.frame["n_regions"].to_numpy(dtype=float)

    recall, atom_recall, mrr, ndcg, ranked_recall, atom_ndcg = (m.at(k).column for m in MEASURES)
    region_recall = _safe_ratio(n_covered, n_regions)
    return {
        "n_gold_atoms": n_gold,
        "first_hit_rank": first_hit,
        recall: region_recall,
        atom_recall: _safe_ratio(n_top_hits, n_gold.astype(float)),
        mrr: np.where(np.isnan(first_hit), 0.0, 1.0 / first_hit),
        ndcg: _region_ndcg(run, gold, rel, n_codes, n_regions, k),
        ranked_recall: region_recall.copy(),
        atom_ndcg: _safe_ratio(dcg, idcg),
    }


def _region_ndcg(run: RunRows, gold: GoldRows, rel: np.ndarray, n_codes: int, n_regions: np.ndarray, k: int) -> np.ndarray:
    """nDCG@k with gold regions as the relevant items (module docstring)."""
    n = len(n_regions)
    hit = rel & (run.rank <= k)
    best = pd.Series(run.rank[hit], index=run.q[hit] * n_codes + run.a[hit]).groupby(level=0).min()
    ranks = pd.Series(gold.q * n_codes + gold.a).map(best).to_numpy(dtype=float)
    found = ~np.isnan(ranks)
    first = pd.DataFrame({"q": gold.q[found], "g": gold.g[found], "r": ranks[found]}).groupby(["q", "g"], as_index=False)["r"].min()
    first = first.sort_values(["q", "r"], kind="stable")
    slot = np.maximum(first["r"].to_numpy(dtype=float), first.groupby("q").cumcount().to_numpy() + 1)
    gains = np.where(slot <= k, 1.0 / np.log2(slot + 1.0), 0.0)  # the ideal has k slots
    dcg = np.bincount(first["q"].to_numpy(dtype=np.int64), weights=gains, minlength=n)
    idcg = _idcg_table(k)[np.minimum(n_regions, k).astype(np.int64)]
    return _safe_ratio(dcg, idcg)


def returned_columns(run: RunRows, entries: Entries) -> dict[str, np.ndarray]:
    """n_returned and the rank-1 score (NaN when nothing was returned)."""
    n = len(entries.ids)
    first = np.ones(len(run.q), dtype=bool)
    first[1:] = run.q[1:] != run.q[:-1]  # rows come sorted by (query, rank)
    top1 = np.full(n, np.nan)
    top1[run.q[first]] = run.score[first]
    return {"n_returned": count_per_query(run.q, n), "top1_score": top1}



FAMILY = Family(
    name="ranking", phase="query", compute=_compute, columns=_columns,
    measures=(
        Measure(name="recall", scope="answerable", reducer=Mean(worst=0.0), higher_is_better=True, cutoff=True, bar=RECALL_BAR,
                heading="recall", compared=True, abstained_nothing=True, unit=_REGIONS,
                description="Share of the entry's gold regions that some top-k atom overlaps (an atom overlapping two regions "
                            "covers both); 0 when the entry has no region."),
        Measure(name="atom_recall", scope="answerable", reducer=Mean(worst=0.0), higher_is_better=True, cutoff=True,
                unit="share of the gold atom set (0-1)",
                description="Share of the entry's resolved gold atom set inside the top k. Moves with how the gold is cut into atoms."),
        Measure(name="mrr", scope="answerable", reducer=Mean(worst=0.0), higher_is_better=True, abstained_nothing=True,
                unit="1 / rank (0-1)",
                description="A diagnostic: 1 / rank of the first returned atom (any depth) overlapping a gold region, else 0. "
                            "Ranks are atoms, so bigger atoms move it up (the verdict's MRR is content_mrr)."),
        Measure(name="ndcg", scope="answerable", reducer=Mean(worst=0.0), higher_is_better=True, cutoff=True,
                abstained_nothing=True, unit="normalised DCG (0-1)",
                description="A diagnostic: nDCG@k with gold regions as the relevant items (binary gain) at atom ranks: a region "
                            "gains at the first rank that overlaps it, the i-th region found no better than slot i, the ideal "
                            "from the entry's regions; cutting a gold page into more atoms changes nothing, but bigger atoms "
                            "move regions up (the verdict's nDCG is content_ndcg@k)."),
        Measure(name="ranked_recall", scope="answerable", reducer=Mean(worst=0.0), higher_is_better=True, cutoff=True, unit=_REGIONS,
                description="recall@k of the ranking whatever the answer said: recall@k counts nothing for an answer that "
                            "abstained, this diagnostic counts its ranking."),
        Measure(name="atom_ndcg", scope="answerable", reducer=Mean(worst=0.0), higher_is_better=True, cutoff=True,
                unit="normalised DCG (0-1)",
                description="nDCG@k with atoms as the relevant items: trec_eval's, ranx's and ir_measures' nDCG@k on the TREC "
                            "run and atom qrels. Cutting a gold page into more atoms lowers it with the same pages found."),
    ),
)
MEASURES: tuple[Measure, ...] = FAMILY.measures
