"""Case 1: the metrics engine against pytrec_eval and ranx on the same run and qrels."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.cells import aggregate
from bench.evaluation.per_query import per_query
from benchmarks.common import best_of, figure


def make_codes(n_queries: int, depth: int = 100, seed: int = 0) -> dict[str, pd.DataFrame]:
    """A run of `depth` atoms per query over a pool of atoms, with realistic gold density,
    in the form the pipeline stores: atoms as integer codes (rows of ``atoms``), query
    ids categorical (bench/ingest/atom_codes.py). No id strings but the query ids.

    10 % of queries are unanswerable (no gold); answerable ones have 1-3 gold regions
    resolving to 1-4 atoms; about 60 % of them have a gold atom somewhere in the list.
    Scores are distinct and fall with the rank (ranks follow scores, as upstream).
    """
    rng = np.random.default_rng(seed)
    n_pool = max(10_000, n_queries * 10)
    qids = pd.Index([f"q{i:07d}" for i in range(n_queries)], dtype="str")
    picks = np.stack([rng.choice(n_pool, size=depth, replace=False) for _ in range(min(n_queries, 64))])
    # rows of distinct atoms per query: a shifted copy of a few random permutations
    shift = rng.integers(0, n_pool, size=n_queries)
    pos = ((picks[np.arange(n_queries) % len(picks)] + shift[:, None]) % n_pool).astype(np.int32)
    q_codes = np.repeat(np.arange(n_queries, dtype=np.int32), depth)
    run = pd.DataFrame({
        "query_id": pd.Categorical.from_codes(q_codes, categories=qids),
        "rank": np.tile(np.arange(1, depth + 1, dtype=np.int32), n_queries),
        "atom": pos.ravel(),
        "score": (30.0 - np.tile(np.arange(depth), n_queries) * 0.1 + rng.random(n_queries * depth) * 0.01).round(6),
    })
    del q_codes
    unans = rng.random(n_queries) < 0.1
    n_regions = np.where(unans, 0, rng.integers(1, 4, size=n_queries))
    answerable = np.flatnonzero(~unans)
    n_gold = rng.integers(1, 5, size=len(answerable))
    hit = rng.random(len(answerable)) < 0.6
    gq = np.repeat(answerable, n_gold)
    g = np.concatenate([np.arange(k) for k in n_gold]) if len(n_gold) else np.zeros(0, np.int64)
    first_hit = np.repeat(hit, n_gold) & (g == 0)
    atom = rng.integers(0, n_pool, size=len(gq))
    atom[first_hit] = pos[gq[first_hit], rng.integers(0, depth, size=int(first_hit.sum()))]
    gold = pd.DataFrame({"q": gq, "gold_idx": g % n_regions[gq], "atom": atom.astype(np.int32)})
    gold = gold.drop_duplicates(["q", "atom"])
    gold = pd.DataFrame({"query_id": pd.Categorical.from_codes(gold["q"].to_numpy(), categories=qids),
                         "gold_idx": gold["gold_idx"].to_numpy(), "atom": gold["atom"].to_numpy()})
    as_of = pd.Timestamp("2024-01-01", tz="UTC")
    entries = pd.DataFrame({
        "query_id": qids, "modality": np.where(np.arange(n_queries) % 2 == 0, "pdf", "conversation"),
        "unanswerable": unans, "as_of": as_of, "holder": "owner", "n_regions": n_regions,
    })
    atoms = pd.DataFrame({"holder": np.where(rng.random(n_pool) < 0.02, "other", "owner"),
                          "observed_at": pd.Timestamp("2023-06-01", tz="UTC")})
    latency = pd.DataFrame({"query_id": qids, "latency_ms": rng.gamma(2.0, 1.0, size=n_queries)})
    return {"entries": entries, "run": run, "gold": gold, "atoms": atoms, "latency": latency, "n_pool": n_pool}


def with_ids(data: dict) -> dict[str, pd.DataFrame]:
    """The same data with atom-id strings (what the references are given, as dicts or frames)."""
    atom_ids = np.asarray([f"a{i:08d}" for i in range(data["n_pool"])], dtype=object)
    run = data["run"].assign(query_id=data["run"]["query_id"].astype(str), atom_id=atom_ids[data["run"]["atom"].to_numpy()])
    gold = data["gold"].assign(query_id=data["gold"]["query_id"].astype(str), atom_id=atom_ids[data["gold"]["atom"].to_numpy()])
    return {**data, "run": run.drop(columns="atom"), "gold": gold.drop(columns="atom"), "atoms": data["atoms"].assign(atom_id=atom_ids)}


def make_run(n_queries: int, depth: int = 100, seed: int = 0) -> dict[str, pd.DataFrame]:
    """`make_codes` with atom-id strings (the form the references read)."""
    return with_ids(make_codes(n_queries, depth, seed))


def ours(data: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, dict]:
    """Every metric of dev.json's ranking block (per_query + aggregate) from the frames as
    the stages store them: run and gold with atom codes, query ids categorical."""
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
    for ours_col, trec_key in (("atom_ndcg@10", "ndcg_cut_10"), ("mrr", "recip_rank"), ("atom_recall@10", "recall_10")):
        theirs = np.asarray([trec[q][trec_key] for q in qs])
        out[f"{ours_col}~{trec_key}"] = float(np.max(np.abs(ours_m[ours_col].to_numpy(float) - theirs))) if qs else 0.0
    out["queries_compared"] = len(qs)
    out["equal"] = all(v <= 1e-9 for k, v in out.items() if "~" in k)
    return out


def run_case(sizes: list[int], repeats: int, huge: int | None = None) -> list[dict]:
    """10k and 100k against pytrec_eval and ranx; then `huge` queries (default 10 x the
    largest size: 1M x 100 = 100M run rows at full size) alone, in a fresh process, for
    its time and peak memory."""
    figures = []
    warm = make_codes(200, seed=1)
    ranx_eval(with_ids(warm))  # JIT warm-up (numba compiles on first use)
    ours(warm)
    for n in sizes:
        data = make_codes(n)
        t_ours, all_ours, (pq, _) = best_of(functools.partial(ours, data), repeats)
        named = with_ids(data)
        t_conv, _, (qrels, run_d) = best_of(functools.partial(trec_dicts, named), 1)
        t_trec, all_trec, trec = best_of(functools.partial(pytrec, qrels, run_d), repeats)
        del qrels, run_d
        t_ranx, all_ranx, _ = best_of(functools.partial(ranx_eval, named), repeats)
        strings_pq, _ = ours(named)  # the atom-id path of the same engine gives the same table
        agree = agreement(pq, trec)
        agree["codes_equal_ids"] = bool(strings_pq.equals(pq))
        details: dict[str, Any] = {"queries": n, "depth": 100, "run_rows": len(data["run"]), "gold_rows": len(data["gold"]),
                   "repeats": repeats, "statistic": "best of repeats", "all_ours_s": all_ours,
                   "input": "run and gold as integer atom codes, query ids categorical (as data/runs, data/resolved hold them)",
                   "agreement_with_pytrec_eval": agree}
        figures.append(figure(f"metrics {n // 1000}k x 100 vs pytrec_eval", t_ours, t_trec,
                              "pytrec_eval RelevanceEvaluator.evaluate (ndcg_cut_10, recip_rank, recall_10; dicts prebuilt)",
                              "ratio <= 0.5 and equal results", goal_ratio=0.5,
                              pytrec_dict_build_s=t_conv, all_reference_s=all_trec, **details))
        figures[-1]["met"] = bool(figures[-1]["met"]) and agree["equal"] and agree["codes_equal_ids"]
        figures.append(figure(f"metrics {n // 1000}k x 100 vs ranx", t_ours, t_ranx,
                              "ranx Qrels/Run.from_df + evaluate(ndcg@10, mrr, recall@10), JIT warmed",
                              "ratio <= 0.5", goal_ratio=0.5, all_reference_s=all_ranx, **details))
        del data, named
    figures.append(huge_figure(huge or 10 * max(sizes)))
    return figures


#: what `huge_figure` may use: the machine's memory bound of the goal
MEMORY_GOAL_GIB = 24.0


def huge_figure(n: int) -> dict:
    """per_query + aggregate over `n` queries x 100 in a fresh Python process: wall time of
    the evaluation and the process's peak RSS (VmHWM, which covers building the data too)."""
    import json
    import subprocess
    import sys

    from benchmarks.common import ROOT

    code = (
        "import gc, json, sys, time\n"
        "from benchmarks.case_metrics import make_codes, ours\nfrom benchmarks.common import peak_rss_kib\n"
        f"data = make_codes({n})\n"
        "built = peak_rss_kib()\n"
        "gc.collect(); t = time.perf_counter(); pq, agg = ours(data); t = time.perf_counter() - t\n"
        "peak = peak_rss_kib()\n"
        "print(json.dumps({'seconds': t, 'peak_kib': peak, 'after_build_kib': built, 'run_rows': len(data['run']),"
        " 'gold_rows': len(data['gold']), 'queries': len(pq), 'recall': agg['overall']['recall@10']}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    name = f"metrics {n // 1000}k x 100 ({n * 100 // 1_000_000}M run rows), fresh process" if n >= 1000 else f"metrics {n} x 100"
    if proc.returncode != 0:
        return figure(name, None, None, "none (time and peak memory)", f"peak RSS <= {MEMORY_GOAL_GIB:g} GiB",
                      error=proc.stderr.strip().splitlines()[-1:] or ["failed"], statistic="one run")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    peak_gib = out["peak_kib"] / 1024**2
    fig = figure(name, out["seconds"], None, "none (time and peak memory of the whole process)",
                 f"peak RSS <= {MEMORY_GOAL_GIB:g} GiB", queries=n, depth=100, run_rows=out["run_rows"],
                 gold_rows=out["gold_rows"], peak_rss_gib=round(peak_gib, 2),
                 rss_after_building_data_gib=round(out["after_build_kib"] / 1024**2, 2),
                 overall_recall_at_10=out["recall"], statistic="one run")
    fig["met"] = peak_gib <= MEMORY_GOAL_GIB
    return fig
