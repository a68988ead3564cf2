"""Case 1: the metrics engine against pytrec_eval and ranx on the same run and qrels."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.evaluation.metrics import aggregate, per_query
from benchmarks.common import best_of, figure


def make_run(n_queries: int, depth: int = 100, seed: int = 0) -> dict[str, pd.DataFrame]:
    """A run of `depth` atoms per query over a pool of atoms, with realistic gold density.

    10 % of queries are unanswerable (no gold); answerable ones have 1-3 gold regions
    resolving to 1-4 atoms; about 60 % of them have a gold atom somewhere in the list.
    Scores are distinct and fall with the rank (ranks follow scores, as upstream).
    """
    rng = np.random.default_rng(seed)
    n_pool = max(10_000, n_queries * 10)
    qids = np.asarray([f"q{i:07d}" for i in range(n_queries)], dtype=object)
    atom_ids = np.asarray([f"a{i:08d}" for i in range(n_pool)], dtype=object)
    picks = np.stack([rng.choice(n_pool, size=depth, replace=False) for _ in range(min(n_queries, 64))])
    # rows of distinct atoms per query: a shifted copy of a few random permutations
    shift = rng.integers(0, n_pool, size=n_queries)
    pos = (picks[np.arange(n_queries) % len(picks)] + shift[:, None]) % n_pool
    run = pd.DataFrame({
        "query_id": np.repeat(qids, depth),
        "atom_id": atom_ids[pos.ravel()],
        "rank": np.tile(np.arange(1, depth + 1), n_queries),
        "score": (30.0 - np.tile(np.arange(depth), n_queries) * 0.1 + rng.random(n_queries * depth) * 0.01).round(6),
    })
    unans = rng.random(n_queries) < 0.1
    n_regions = np.where(unans, 0, rng.integers(1, 4, size=n_queries))
    gold_rows = []
    for q in np.flatnonzero(~unans):
        n_gold = int(rng.integers(1, 5))
        hit = rng.random() < 0.6
        for g in range(n_gold):
            if hit and g == 0:
                atom = atom_ids[pos[q, int(rng.integers(0, depth))]]
            else:
                atom = atom_ids[int(rng.integers(0, n_pool))]
            gold_rows.append((qids[q], int(g % n_regions[q]), atom))
    gold = pd.DataFrame(gold_rows, columns=["query_id", "gold_idx", "atom_id"]).drop_duplicates(["query_id", "atom_id"])
    as_of = pd.Timestamp("2024-01-01", tz="UTC")
    entries = pd.DataFrame({
        "query_id": qids, "modality": np.where(np.arange(n_queries) % 2 == 0, "pdf", "conversation"),
        "unanswerable": unans, "as_of": as_of, "holder": "owner", "n_regions": n_regions,
    })
    atoms = pd.DataFrame({"atom_id": atom_ids, "holder": np.where(rng.random(n_pool) < 0.02, "other", "owner"),
                          "observed_at": pd.Timestamp("2023-06-01", tz="UTC")})
    latency = pd.DataFrame({"query_id": qids, "latency_ms": rng.gamma(2.0, 1.0, size=n_queries)})
    return {"entries": entries, "run": run, "gold": gold, "atoms": atoms, "latency": latency}


def ours(data: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, dict]:
    pq = per_query(data["entries"], data["run"], data["gold"], data["atoms"], k=10)
    return pq, aggregate(pq, data["latency"], k=10)


def trec_dicts(data: dict[str, pd.DataFrame]) -> tuple[dict, dict]:
    run, gold = data["run"], data["gold"]
    run_d: dict[str, dict[str, float]] = {}
    for q, a, s in zip(run["query_id"].tolist(), run["atom_id"].tolist(), run["score"].tolist(), strict=True):
        run_d.setdefault(q, {})[a] = s
    qrels: dict[str, dict[str, int]] = {}
    for q, a in zip(gold["query_id"].tolist(), gold["atom_id"].tolist(), strict=True):
        qrels.setdefault(q, {})[a] = 1
    return qrels, run_d


def pytrec(qrels: dict, run_d: dict) -> dict:
    import pytrec_eval

    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recip_rank", "recall_10"})
    return ev.evaluate(run_d)


def ranx_eval(data: dict[str, pd.DataFrame]) -> dict:
    from ranx import Qrels, Run, evaluate

    # ranx wants object (not pandas' str) id columns: converting is part of its cost
    gold = data["gold"].assign(score=1)[["query_id", "atom_id", "score"]].astype({"query_id": object, "atom_id": object})
    qrels = Qrels.from_df(gold, q_id_col="query_id", doc_id_col="atom_id", score_col="score")
    frame = data["run"][["query_id", "atom_id", "score"]].astype({"query_id": object, "atom_id": object})
    run = Run.from_df(frame, q_id_col="query_id", doc_id_col="atom_id", score_col="score")
    return evaluate(qrels, run, ["ndcg@10", "mrr", "recall@10"], return_mean=False, make_comparable=True)


def agreement(pq: pd.DataFrame, trec: dict) -> dict:
    """Max |ours - pytrec_eval| over queries where both are defined (answerable, with qrels)."""
    df = pq.set_index("query_id")
    qs = [q for q in trec if not df.at[q, "unanswerable"]]
    ours_m = df.loc[qs]
    out = {}
    for ours_col, trec_key in (("ndcg@10", "ndcg_cut_10"), ("mrr", "recip_rank"), ("atom_recall@10", "recall_10")):
        theirs = np.asarray([trec[q][trec_key] for q in qs])
        out[f"{ours_col}~{trec_key}"] = float(np.max(np.abs(ours_m[ours_col].to_numpy(float) - theirs))) if qs else 0.0
    out["queries_compared"] = len(qs)
    out["equal"] = all(v <= 1e-9 for k, v in out.items() if "~" in k)
    return out


def run_case(sizes: list[int], repeats: int) -> list[dict]:
    figures = []
    warm = make_run(200, seed=1)
    ranx_eval(warm)  # JIT warm-up (numba compiles on first use)
    ours(warm)
    for n in sizes:
        data = make_run(n)
        t_ours, all_ours, (pq, _) = best_of(lambda d=data: ours(d), repeats)
        t_conv, _, (qrels, run_d) = best_of(lambda d=data: trec_dicts(d), 1)
        t_trec, all_trec, trec = best_of(lambda q=qrels, r=run_d: pytrec(q, r), repeats)
        t_ranx, all_ranx, _ = best_of(lambda d=data: ranx_eval(d), repeats)
        agree = agreement(pq, trec)
        details = {"queries": n, "depth": 100, "run_rows": len(data["run"]), "gold_rows": len(data["gold"]),
                   "repeats": repeats, "statistic": "best of repeats", "all_ours_s": all_ours,
                   "agreement_with_pytrec_eval": agree}
        figures.append(figure(f"metrics {n // 1000}k x 100 vs pytrec_eval", t_ours, t_trec,
                              "pytrec_eval RelevanceEvaluator.evaluate (ndcg_cut_10, recip_rank, recall_10; dicts prebuilt)",
                              "ratio <= 1.0 and equal results", goal_ratio=1.0,
                              pytrec_dict_build_s=t_conv, all_reference_s=all_trec, **details))
        figures[-1]["met"] = bool(figures[-1]["met"]) and agree["equal"]
        figures.append(figure(f"metrics {n // 1000}k x 100 vs ranx", t_ours, t_ranx,
                              "ranx Qrels/Run.from_df + evaluate(ndcg@10, mrr, recall@10), JIT warmed",
                              "ratio <= 1.0", goal_ratio=1.0, all_reference_s=all_ranx, **details))
    return figures
