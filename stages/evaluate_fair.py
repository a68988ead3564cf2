"""Part of the evaluate stage: chunk-fair metrics, intervals, per-query table, plots, HTML.

Called from stages/evaluate.py; reads data/atoms and the gold sources' segments,
adds to dev.json (new cells, ``ci95`` on every cell, ``atom_stats``, ``ties``) and
writes reports/per_query/dev.parquet, reports/plots/ and reports/dev.html.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from bench.evaluation.fair import atom_extents, atom_statistics, fair_cells, per_query_fair, region_extents, tied_positions
from bench.evaluation.uncertainty import add_intervals
from bench.ingest.corpus import Manifest
from bench.ingest.store import segment_files
from bench.io import write_parquet, write_text
from bench.modalities import modalities
from bench.project.layout import MANIFEST, REPORTS, SEGMENTS, SERVED, STORE
from bench.reporting.html_report import drilldown, render
from bench.reporting.plots import (
    fair_points,
    latency_quantiles,
    latency_svg,
    precision_coverage_svg,
    recall_curve,
    recall_curve_svg,
    threshold_curve,
    threshold_svg,
)
from bench.reporting.thumbnails import CorpusFiles, pictures

PER_QUERY_TABLE = REPORTS / "per_query" / "dev.parquet"
PLOTS = REPORTS / "plots"
HTML = REPORTS / "dev.html"
#: per-query columns kept in the committed table (small: a few bytes per query and column)
TABLE_COLUMNS = ["query_id", "modality", "unanswerable", "failed", "n_regions", "n_returned", "first_hit_rank"]


def load_atoms() -> dict[str, pd.DataFrame]:
    return {p.stem: pd.read_parquet(p) for p in sorted(SERVED.glob("*.parquet"))}


def gold_segments(regions: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Segments of the gold sources only."""
    wanted = set(regions["source_id"].astype(str))
    frames = []
    for p in segment_files(SEGMENTS):  # <modality>/<key>.parquet
        # a pyarrow filter fails on a data set with no segments (an all-null column), so filter here
        seg = pd.read_parquet(p)
        seg = seg[seg["source_id"].astype(str).isin(wanted)]
        if len(seg):
            frames.append(seg)
    seg = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["source_id"])
    return {str(s): g for s, g in seg.groupby("source_id", sort=False)}


def extend(
    doc: dict[str, Any],
    pq: pd.DataFrame,
    ent: pd.DataFrame,
    run: pd.DataFrame,
    gold: pd.DataFrame,
    regions: pd.DataFrame,
    latency: pd.DataFrame,
    failed: list[str],
    cfg: dict[str, Any],
) -> tuple[dict[str, Any], pd.DataFrame, dict[str, Any]]:
    """(dev.json document with the new cells and intervals, full per-query frame, context for outputs)."""
    k = int(cfg["metrics"]["k"])
    resamples = int(cfg["metrics"].get("bootstrap_resamples", 1000))
    seed = int(cfg["metrics"].get("bootstrap_seed", 0))
    atoms = load_atoms()
    segs = gold_segments(regions)
    empty = pd.DataFrame()
    aext = atom_extents(atoms)
    rext = region_extents(regions, lambda sid: segs.get(sid, empty))
    fair = per_query_fair(ent, run, gold, rext, aext, k=k, failed=failed)
    ties = tied_positions(run, k)
    full = pq.merge(fair, on="query_id", how="left").merge(ties, on="query_id", how="left")
    full[f"tied@{k}"] = full[f"tied@{k}"].fillna(0).astype(int)
    lat = latency.assign(query_id=latency["query_id"].astype(str)).set_index("query_id")["latency_ms"]
    full["latency_ms"] = full["query_id"].astype(str).map(lat).astype(float)
    full.loc[full["failed"].astype(bool), "latency_ms"] = float("nan")

    cells = fair_cells(full, k)
    report = {"by_modality": {m: {**block, **cells["by_modality"].get(m, {})} for m, block in doc["by_modality"].items()},
              "overall": {**doc["overall"], **cells["overall"]}}
    report = add_intervals(report, full, k=k, resamples=resamples, seed=seed)
    tie_summary = {}
    for m, g in [*full.groupby("modality", sort=True), ("overall", full)]:
        t = g[f"tied@{k}"]
        tie_summary[str(m)] = {"tied_positions": int(t.sum()), "queries_with_ties": int((t > 0).sum()), "queries": int(len(t))}
    out = {**doc, "by_modality": report["by_modality"], "overall": report["overall"],
           "atom_stats": atom_statistics(aext, regions), "ties": tie_summary}
    out["run"] = {**doc.get("run", {}), "bootstrap": {"resamples": resamples, "seed": seed, "method": "percentile", "confidence": 0.95, "over": "queries"}}
    ctx = {"k": k, "atoms": atoms, "aext": aext, "rext": rext, "segs": segs}
    return out, full, ctx


def write_outputs(doc: dict[str, Any], full: pd.DataFrame, ctx: dict[str, Any], entries: list[dict], run: pd.DataFrame,
                  gold: pd.DataFrame, regions: pd.DataFrame, cfg: dict[str, Any]) -> None:
    k = ctx["k"]
    cols = [c for c in [*TABLE_COLUMNS, *(c for c in full.columns if "@" in c or c in (
        "mrr", "false_recall", "abstained", "temporal_ok", "holder_ok", "latency_ms", "gold_extent"))] if c in full.columns]
    table = full[list(dict.fromkeys(cols))].sort_values("query_id", kind="stable").reset_index(drop=True)
    write_parquet(PER_QUERY_TABLE, table)

    curve = recall_curve(full, run, gold, max_k=int(cfg["system"].get("depth", 100)))
    thresholds = threshold_curve(full, run, gold, k)
    lat = latency_quantiles(full)
    points = fair_points(doc, k)
    _csv(PLOTS / "recall_at_k.csv", _wide(curve, "k", "recall"))
    _csv(PLOTS / "latency.csv", _wide(lat, "percentile", "latency_ms"))
    _csv(PLOTS / "threshold.csv", thresholds.loc[thresholds["modality"] == "overall"].drop(columns="modality"))
    _csv(PLOTS / "precision_coverage.csv", points)

    figures = {
        "recall@k for k = 1…100 per modality (dashed: all modalities pooled)": recall_curve_svg(curve),
        f"precision@{k} against coverage@{k} (this run: one point per modality)": precision_coverage_svg(points, k),
        "compile-latency distribution (cumulative)": latency_svg(lat),
        f"false recall and recall@{k} against the calibration share of a top-1 score threshold (grey: metrics.calibration_recall)":
            threshold_svg(thresholds.loc[thresholds["modality"] != "overall"], k, float(cfg["metrics"]["calibration_recall"])),
    }
    atoms_info = pd.concat([a[["atom_id", "source_id", "text", "extent"]] for a in ctx["atoms"].values()], ignore_index=True)
    atoms_info = atoms_info.merge(ctx["aext"][["atom_id", "extent"]].rename(columns={"extent": "amount"}), on="atom_id", how="left")
    drill = drilldown(entries, full, run, gold, ctx["rext"], regions, atoms_info, k=k)
    pics = pictures(drill, CorpusFiles.from_manifest(Manifest.load(MANIFEST), STORE), ctx["segs"])
    write_text(HTML, render(doc, figures, drill, pictures=pics))


def _wide(frame: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """One column per modality known to the harness (empty when absent) plus overall,
    so the dvc.yaml plot definitions can name fixed columns."""
    wide = frame.pivot(index=x, columns="modality", values=y)
    return wide.reindex(columns=[*sorted(modalities()), "overall"]).reset_index()


def _csv(path: Path, frame: pd.DataFrame) -> None:
    write_text(path, frame.to_csv(index=False, float_format="%.6g", lineterminator="\n"))
