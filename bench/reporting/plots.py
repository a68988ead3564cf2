"""Plot data (pure pandas) and static pictures (matplotlib SVG, inlined in reports/dev.html).

`dvc plots show` fetches its chart library from a CDN and renders blank offline, so
the report draws its own figures. The same data frames are written as CSV for the
`plots:` definitions in dvc.yaml (for `dvc plots diff` across experiments).

Data
  recall_curve      recall@k for k = 1..max_k per modality (and overall): a region is
                    found at k when some atom of its resolved gold set has rank <= k;
                    per query found regions / n_regions, mean over the answerable
                    entries with failed queries counted 0 (so k = 10 equals dev.json).
  threshold_curve   against the calibration share s (``metrics.calibration_recall``:
                    the share of answerable entries whose top-1 hit reaches the
                    threshold, bench.evaluation.measures.false_recall.calibrate, per modality): false recall
                    (unanswerable entries whose top-1 score reaches it; failed ones
                    count 1) next to recall@k counting only top-k atoms scoring at or
                    above it -- what a strong-evidence cut-off would cost. The x axis
                    is a share, not a score, so the curve does not depend on the
                    system's score scale.
  latency_quantiles compile latency at percentiles 0..100 per modality.
Figures are deterministic SVG text (no dates, fixed ids).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.measures.extent import RATIOS
from bench.gold.table import GOLD_COLUMNS
from bench.ingest.atom_codes import ATOM_CODE

PERCENTILES = np.arange(0, 101, 1)


def _base(per_query: pd.DataFrame) -> pd.DataFrame:
    df = per_query[["query_id", "modality", "unanswerable", "failed", "n_regions"]].copy()
    df["query_id"] = df["query_id"].astype(str)
    return df


def _region_first_rank(run: pd.DataFrame, gold: pd.DataFrame, failed: set[str]) -> pd.DataFrame:
    """Gold rows joined to the run rows of the same query and atom (column ``atom``: its
    code, bench.ingest.atom_codes), failed queries left out."""
    r = run[["query_id", ATOM_CODE, "rank", "score"]].astype({"query_id": str})
    r = r.loc[~r["query_id"].isin(failed)]
    g = gold[GOLD_COLUMNS].astype({"query_id": str})
    return g.merge(r, on=["query_id", ATOM_CODE])


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


SHARES = np.round(np.arange(0.5, 1.0001, 0.01), 2)


def threshold_curve(per_query: pd.DataFrame, run: pd.DataFrame, gold: pd.DataFrame, k: int = 10,
                    shares: np.ndarray | None = None) -> pd.DataFrame:
    """Long frame: modality (incl. "overall"), calibration_recall, false_recall, recall@k.

    ``per_query`` needs query_id, modality, unanswerable, failed, n_regions, top1_score.
    A share at which no threshold can be calibrated (scores do not separate) gives NaN.
    """
    from bench.evaluation.measures.false_recall import calibrate
    from bench.evaluation.measures.scores import reaches

    shares = SHARES if shares is None else np.asarray(shares, dtype=float)
    base = _base(per_query)
    base["top1"] = np.where(per_query["failed"].astype(bool), np.nan, per_query["top1_score"].to_numpy(float))
    failed = set(base.loc[base["failed"].astype(bool), "query_id"])
    hits = _region_first_rank(run, gold, failed)
    hits = hits.loc[hits["rank"] <= k]
    best = hits.groupby(["query_id", "gold_idx"])["score"].max().reset_index()
    parts = []
    for name, grp in base.groupby("modality", sort=True):
        un = grp.loc[grp["unanswerable"].astype(bool)]
        an = grp.loc[~grp["unanswerable"].astype(bool)]
        b = best.loc[best["query_id"].isin(an["query_id"])]
        w = 1.0 / an.set_index("query_id")["n_regions"].astype(float).reindex(b["query_id"]).to_numpy()
        sc = b["score"].to_numpy(float)
        un_top = un["top1"].to_numpy(float)
        un_failed = un["failed"].astype(bool).to_numpy()
        fr_num, rc_num = [], []
        for share in shares:
            t = calibrate(an["top1"].to_numpy(float), float(share)).threshold
            fr_num.append(np.nan if t is None else float(reaches(un_top, t).sum() + un_failed.sum()))
            rc_num.append(np.nan if t is None else float(w[reaches(sc, t)].sum()))
        parts.append((str(name), np.array(fr_num), len(un), np.array(rc_num), len(an)))
    rows = []
    for name, fr, n_un, rc, n_an in parts:
        rows.append(pd.DataFrame({"modality": name, "calibration_recall": shares,
                                  "false_recall": fr / n_un if n_un else np.nan, f"recall@{k}": rc / n_an if n_an else np.nan}))
    if parts:
        n_un, n_an = sum(p[2] for p in parts), sum(p[4] for p in parts)
        nan = np.full(len(shares), np.nan)
        fr = np.sum([p[1] for p in parts if p[2]], axis=0) if n_un else nan
        rc = np.sum([p[3] for p in parts if p[4]], axis=0) if n_an else nan
        rows.append(pd.DataFrame({"modality": "overall", "calibration_recall": shares,
                                  "false_recall": fr / max(n_un, 1) if n_un else fr, f"recall@{k}": rc / max(n_an, 1) if n_an else rc}))
    cols = ["modality", "calibration_recall", "false_recall", f"recall@{k}"]
    return pd.concat(rows, ignore_index=True)[cols] if rows else pd.DataFrame(columns=cols)


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
    """One point per modality: the run's chunk-fair cells (bench.evaluation.measures.extent:
    coverage, precision, IoU) and the oracle ceiling."""
    chunking = doc.get("run", {}).get("chunking", {})
    names = [m.at(k).name for m in RATIOS]
    rows = []
    for m, block in doc["by_modality"].items():
        if names[0] not in block:
            continue
        rows.append({
            "modality": m,
            "strategy": chunking.get(m, {}).get("strategy", "?"),
            **{name: block[name]["value"] for name in names},
        })
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- figures


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def figure(width: float = 6.4, height: float = 3.6) -> Any:
    plt = _pyplot()

    plt.rcParams["svg.hashsalt"] = "bench"
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(width, height), dpi=100)
    ax.grid(True, alpha=0.3)
    return fig, ax


#: the axes' margins in inches (left, right, bottom, top): room for the tick labels, axis labels and title of
#: every figure here; fixed, because `tight_layout` measured them by drawing each figure once more (about 0.07 s a figure)
MARGINS = (0.9, 0.3, 0.62, 0.4)


def svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    width, height = fig.get_size_inches()
    left, right, bottom, top = MARGINS
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height)
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def recall_curve_svg(curve: pd.DataFrame) -> str:
    fig, ax = figure()
    for name, grp in curve.groupby("modality", sort=True):
        ax.plot(grp["k"], grp["recall"], label=str(name), linestyle="--" if name == "overall" else "-")
    ax.set_xlabel("k (atoms read)")
    ax.set_ylabel("recall@k (gold regions found)")
    ax.set_ylim(0, 1.02)
    ax.set_xscale("log")
    ax.set_title("recall@k, k = 1…100")
    ax.legend(loc="lower right", fontsize=8)
    return svg(fig)


def precision_coverage_svg(points: pd.DataFrame, k: int = 10) -> str:
    fig, ax = figure(5.2, 4.0)
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
    return svg(fig)


def latency_svg(quantiles: pd.DataFrame) -> str:
    fig, ax = figure()
    for name, grp in quantiles.groupby("modality", sort=True):
        ax.plot(grp["latency_ms"], grp["percentile"] / 100.0, label=str(name), linestyle="--" if name == "overall" else "-")
    ax.set_xlabel("compile latency (ms)")
    ax.set_ylabel("share of queries at or below")
    ax.set_title("compile-latency distribution")
    if len(quantiles) and float(quantiles["latency_ms"].min()) > 0:
        ax.set_xscale("log")
    ax.legend(loc="lower right", fontsize=8)
    return svg(fig)


def threshold_svg(curve: pd.DataFrame, k: int = 10, current: float | None = None) -> str:
    fig, ax = figure()
    for i, (name, grp) in enumerate(curve.groupby("modality", sort=True)):
        ax.plot(grp["calibration_recall"], grp["false_recall"], color=f"C{i}", linestyle=":", label=f"{name} false recall")
        ax.plot(grp["calibration_recall"], grp[f"recall@{k}"], color=f"C{i}", linestyle="-", label=f"{name} recall@{k}")
    if current is not None:
        ax.axvline(current, color="grey", linewidth=1)
        ax.annotate("calibration_recall", (current, 1.0), fontsize=8, color="grey", ha="right")
    ax.set_xlabel("calibration share (answerable entries whose top-1 hit reaches the threshold)")
    ax.set_ylabel("rate")
    ax.set_ylim(0, 1.02)
    ax.set_title("false recall (dotted) next to recall (solid)")
    ax.legend(fontsize=7, ncol=2)
    return svg(fig)
