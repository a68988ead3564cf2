"""Plot data (pure pandas) and static pictures (matplotlib SVG, inlined in reports/dev.html).

`dvc plots show` fetches its chart library from a CDN and renders blank offline, so
the report draws its own figures. The same data frames are written as CSV for the
`plots:` definitions in dvc.yaml (for `dvc plots diff` across experiments).

Data
  recall_curve      recall@k for k = 1..max_k per modality (and overall): a region is
                    found at k when some atom of its resolved gold set has rank <= k;
                    per query found regions / n_regions, mean over the answerable
                    entries with failed queries counted 0 (so k = 10 equals dev.json).
  threshold_curve   for thresholds t: false recall (unanswerable entries with some
                    returned atom scoring >= t) next to recall@k counting only top-k
                    atoms scoring >= t -- what a strong-evidence cut-off would cost.
  latency_quantiles compile latency at percentiles 0..100 per modality.
Figures are deterministic SVG text (no dates, fixed ids).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pandas as pd

PERCENTILES = np.arange(0, 101, 1)


def _base(per_query: pd.DataFrame) -> pd.DataFrame:
    df = per_query[["query_id", "modality", "unanswerable", "failed", "n_regions"]].copy()
    df["query_id"] = df["query_id"].astype(str)
    return df


def _region_first_rank(run: pd.DataFrame, gold: pd.DataFrame, failed: set[str]) -> pd.DataFrame:
    r = run[["query_id", "atom_id", "rank", "score"]].astype({"query_id": str, "atom_id": str})
    r = r.loc[~r["query_id"].isin(failed)]
    g = gold[["query_id", "gold_idx", "atom_id"]].astype({"query_id": str, "atom_id": str})
    return g.merge(r, on=["query_id", "atom_id"])


def recall_curve(per_query: pd.DataFrame, run: pd.DataFrame, gold: pd.DataFrame, max_k: int = 100) -> pd.DataFrame:
    """Long frame: modality (incl. "overall"), k, recall."""
    base = _base(per_query)
    failed = set(base.loc[base["failed"].astype(bool), "query_id"])
    hits = _region_first_rank(run, gold, failed)
    first = hits.groupby(["query_id", "gold_idx"])["rank"].min().reset_index()
    ks = np.arange(1, max_k + 1)
    rows = []
    ans = base.loc[~base["unanswerable"].astype(bool)]
    for name, grp in [*((str(m), g) for m, g in ans.groupby("modality", sort=True)), ("overall", ans)]:
        if not len(grp):
            continue
        f = first.loc[first["query_id"].isin(grp["query_id"])]
        nreg = grp.set_index("query_id")["n_regions"].astype(float)
        weight = (1.0 / nreg.reindex(f["query_id"]).to_numpy())
        counts = np.bincount(np.minimum(f["rank"].to_numpy(int), max_k + 1), weights=weight, minlength=max_k + 2)
        found = np.cumsum(counts)[1:max_k + 1]
        rows.append(pd.DataFrame({"modality": name, "k": ks, "recall": found / len(grp)}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["modality", "k", "recall"])


def threshold_curve(per_query: pd.DataFrame, run: pd.DataFrame, gold: pd.DataFrame, k: int = 10,
                    thresholds: np.ndarray | None = None) -> pd.DataFrame:
    """Long frame: modality (incl. "overall"), threshold, false_recall, recall@k."""
    base = _base(per_query)
    failed = set(base.loc[base["failed"].astype(bool), "query_id"])
    r = run.loc[~run["query_id"].astype(str).isin(failed)]
    if thresholds is None:
        top = float(np.nanpercentile(r["score"], 99.5)) if len(r) else 1.0
        thresholds = np.round(np.linspace(0.0, max(top, 1e-9), 81), 4)
    maxscore = r.groupby(r["query_id"].astype(str))["score"].max()
    hits = _region_first_rank(run, gold, failed)
    hits = hits.loc[hits["rank"] <= k]
    best = hits.groupby(["query_id", "gold_idx"])["score"].max().reset_index()
    rows = []
    groups = [*((str(m), g) for m, g in base.groupby("modality", sort=True)), ("overall", base)]
    for name, grp in groups:
        un = grp.loc[grp["unanswerable"].astype(bool), "query_id"]
        an = grp.loc[~grp["unanswerable"].astype(bool)]
        ms = maxscore.reindex(un).to_numpy(float)
        fr = [(np.nan_to_num(ms, nan=-np.inf) >= t).sum() / len(un) if len(un) else np.nan for t in thresholds]
        b = best.loc[best["query_id"].isin(an["query_id"])]
        w = 1.0 / an.set_index("query_id")["n_regions"].astype(float).reindex(b["query_id"]).to_numpy()
        sc = b["score"].to_numpy(float)
        rc = [float(w[sc >= t].sum()) / len(an) if len(an) else np.nan for t in thresholds]
        rows.append(pd.DataFrame({"modality": name, "threshold": thresholds, "false_recall": fr, f"recall@{k}": rc}))
    return pd.concat(rows, ignore_index=True)


def latency_quantiles(per_query: pd.DataFrame) -> pd.DataFrame:
    """Long frame: modality (incl. "overall"), percentile, latency_ms (timed, non-failed queries)."""
    df = per_query.loc[~per_query["failed"].astype(bool) & per_query["latency_ms"].notna()]
    rows = []
    for name, grp in [*((str(m), g) for m, g in df.groupby("modality", sort=True)), ("overall", df)]:
        if len(grp):
            rows.append(pd.DataFrame({"modality": name, "percentile": PERCENTILES,
                                      "latency_ms": np.percentile(grp["latency_ms"].to_numpy(float), PERCENTILES)}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["modality", "percentile", "latency_ms"])


def fair_points(doc: dict[str, Any], k: int = 10) -> pd.DataFrame:
    """One point per modality: the run's coverage/precision/IoU and the oracle ceiling."""
    chunking = doc.get("run", {}).get("chunking", {})
    rows = []
    for m, block in doc["by_modality"].items():
        if f"coverage@{k}" not in block:
            continue
        rows.append({
            "modality": m,
            "strategy": chunking.get(m, {}).get("strategy", "?"),
            f"coverage@{k}": block[f"coverage@{k}"]["value"],
            f"precision@{k}": block[f"precision@{k}"]["value"],
            f"iou@{k}": block[f"iou@{k}"]["value"],
            f"oracle_coverage@{k}": block[f"oracle_coverage@{k}"]["value"],
            f"oracle_iou@{k}": block[f"oracle_iou@{k}"]["value"],
        })
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- figures


def _figure(width: float = 6.4, height: float = 3.6) -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "bench"
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(width, height), dpi=100)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.tight_layout()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def recall_curve_svg(curve: pd.DataFrame) -> str:
    fig, ax = _figure()
    for name, grp in curve.groupby("modality", sort=True):
        ax.plot(grp["k"], grp["recall"], label=str(name), linestyle="--" if name == "overall" else "-")
    ax.set_xlabel("k (atoms read)")
    ax.set_ylabel("recall@k (gold regions found)")
    ax.set_ylim(0, 1.02)
    ax.set_xscale("log")
    ax.set_title("recall@k, k = 1…100")
    ax.legend(loc="lower right", fontsize=8)
    return _svg(fig)


def precision_coverage_svg(points: pd.DataFrame, k: int = 10) -> str:
    fig, ax = _figure(5.2, 4.0)
    for i, r in enumerate(points.to_dict("records")):
        ax.scatter([r[f"coverage@{k}"]], [r[f"precision@{k}"]], color=f"C{i}", s=50,
                   label=f"{r['modality']} ({r['strategy']})")
    ax.set_xlabel(f"coverage@{k} (share of gold extent covered)")
    ax.set_ylabel(f"precision@{k} (gold covered / extent read)")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, max(0.05, float(points[f"precision@{k}"].max() if len(points) else 0) * 1.25))
    ax.set_title("precision against coverage (one point per modality)")
    if len(points):
        ax.legend(fontsize=8)
    return _svg(fig)


def latency_svg(quantiles: pd.DataFrame) -> str:
    fig, ax = _figure()
    for name, grp in quantiles.groupby("modality", sort=True):
        ax.plot(grp["latency_ms"], grp["percentile"] / 100.0, label=str(name), linestyle="--" if name == "overall" else "-")
    ax.set_xlabel("compile latency (ms)")
    ax.set_ylabel("share of queries at or below")
    ax.set_title("compile-latency distribution")
    if len(quantiles) and float(quantiles["latency_ms"].min()) > 0:
        ax.set_xscale("log")
    ax.legend(loc="lower right", fontsize=8)
    return _svg(fig)


def threshold_svg(curve: pd.DataFrame, k: int = 10, current: float | None = None) -> str:
    fig, ax = _figure()
    for i, (name, grp) in enumerate(curve.groupby("modality", sort=True)):
        ax.plot(grp["threshold"], grp["false_recall"], color=f"C{i}", linestyle=":", label=f"{name} false recall")
        ax.plot(grp["threshold"], grp[f"recall@{k}"], color=f"C{i}", linestyle="-", label=f"{name} recall@{k}")
    if current is not None:
        ax.axvline(current, color="grey", linewidth=1)
        ax.annotate("strong_score", (current, 1.0), fontsize=8, color="grey")
    ax.set_xlabel("strong-evidence threshold (score)")
    ax.set_ylabel("rate")
    ax.set_ylim(0, 1.02)
    ax.set_title("false recall (dotted) next to recall (solid)")
    ax.legend(fontsize=7, ncol=2)
    return _svg(fig)
