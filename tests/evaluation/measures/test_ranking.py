"""Ranking measures (bench.evaluation.measures.ranking) against independent oracles: pytrec_eval, ir_measures, ranx."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bench.evaluation.per_query import per_query
from tests.evaluation.frames import T0
from tests.evaluation.frames import entries_of as _entries
from tests.evaluation.frames import gold_of as _gold
from tests.evaluation.frames import run_of as _run

LATER = pd.Timestamp("2025-01-01", tz="UTC")
K = 3
STRONG = 0.8
LOG3 = math.log2(3)


# --------------------------------------------------------------------------- independent oracles


def _oracle_data(n_queries: int = 300, depth: int = 100, pool: int = 150, seed: int = 7):
    rng = np.random.default_rng(seed)
    run_rows, gold_rows, entry_rows = [], [], []
    for i in range(n_queries):
        qid = f"q{i:03d}"
        cand = [f"{qid}_d{j}" for j in rng.permutation(pool)]
        kind = rng.random()
        if kind < 0.1:  # unanswerable
            entry_rows.append((qid, "pdf", True, "h", 0))
        elif kind < 0.15:  # answerable but no region resolves to an atom
            entry_rows.append((qid, "pdf", False, "h", 1))
        else:
            rel = rng.choice(pool, size=int(rng.integers(1, 6)), replace=False)  # some beyond depth
            entry_rows.append((qid, "pdf", False, "h", len(rel)))
            gold_rows += [(qid, g, cand[j]) for g, j in enumerate(rel)]
        scores = np.sort(rng.uniform(0, 1, depth))[::-1] + np.arange(depth, 0, -1)  # strictly decreasing
        run_rows += [(qid, cand[r], r + 1, float(scores[r])) for r in range(depth)]
    run, gold = _run(run_rows), _gold(gold_rows)
    atoms = pd.DataFrame({"atom_id": run["atom_id"], "holder": "h", "observed_at": T0})
    return _entries(entry_rows), run, gold, atoms


@pytest.fixture(scope="module")
def oracle_case():
    entries, run, gold, atoms = _oracle_data()
    ours = per_query(entries, run, gold, atoms, k=10).set_index("query_id")
    qrels = {q: {a: 1 for a in g["atom_id"]} for q, g in gold.groupby("query_id")}
    run_d = {q: dict(zip(g["atom_id"], g["score"])) for q, g in run.groupby("query_id") if q in qrels}
    assert len(qrels) > 200 and sum(len(v) for v in qrels.values()) > 500
    return ours, qrels, run_d


def test_oracle_pytrec_eval(oracle_case) -> None:
    import pytrec_eval

    ours, qrels, run_d = oracle_case
    res = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "ndcg_cut.10", "recall.10"}).evaluate(run_d)
    assert set(res) == set(qrels)
    for q, m in res.items():
        assert ours.loc[q, "mrr"] == pytest.approx(m["recip_rank"], abs=1e-9)
        assert ours.loc[q, "atom_ndcg@10"] == pytest.approx(m["ndcg_cut_10"], abs=1e-9)  # atom qrels: the atom-level nDCG
        assert ours.loc[q, "atom_recall@10"] == pytest.approx(m["recall_10"], abs=1e-9)
        assert ours.loc[q, "recall@10"] == pytest.approx(m["recall_10"], abs=1e-9)  # 1 region per atom here


def test_oracle_ir_measures(oracle_case) -> None:
    import ir_measures
    from ir_measures import RR, nDCG

    ours, qrels, run_d = oracle_case
    seen = 0
    for m in ir_measures.iter_calc([RR, nDCG @ 10], qrels, run_d):
        col = "mrr" if m.measure == RR else "atom_ndcg@10"
        assert ours.loc[m.query_id, col] == pytest.approx(m.value, abs=1e-9)
        seen += 1
    assert seen == 2 * len(qrels)


def test_oracle_ranx(oracle_case) -> None:
    import warnings

    ours, qrels, run_d = oracle_case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ranx import Qrels, Run, evaluate

        run = Run(run_d)
        evaluate(Qrels(qrels), run, ["mrr", "ndcg@10"])
    for metric, col in (("mrr", "mrr"), ("ndcg@10", "atom_ndcg@10")):
        theirs = run.scores[metric]
        assert set(theirs) == set(qrels)
        for q, v in theirs.items():
            assert ours.loc[q, col] == pytest.approx(float(v), abs=1e-9)


def test_oracle_gold_region_order_irrelevant_for_ranking_metrics(oracle_case) -> None:
    ours, qrels, _ = oracle_case
    answerable = ours.loc[~ours["unanswerable"]]
    empty = answerable.loc[answerable["n_gold_atoms"] == 0]
    assert len(empty) > 0 and (empty[["mrr", "ndcg@10", "atom_recall@10", "recall@10"]] == 0).all().all()
