"""The dev run's pictures and HTML report, built in memory from one evaluation
(bench.evaluation.evaluate); the evaluate stage writes them (reports/plots/*.csv,
reports/dev.html) with bench.io's atomic helpers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bench.evaluation.evaluate import EvalInputs, EvalResult
from bench.gold.table import GOLD_COLUMNS
from bench.ingest.atom_codes import ATOM_CODE, served_ids, with_atom_ids
from bench.memo import Memo
from bench.modalities import modalities
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

__all__ = ["DevReport", "dev_report"]


@dataclass(frozen=True)
class DevReport:
    plots: dict[str, str]  # file name under reports/plots/ -> CSV text
    html: str  # reports/dev.html


def dev_report(result: EvalResult, inputs: EvalInputs, *, k: int, max_k: int, calibration_recall: float,
               corpus: CorpusFiles, memo: Memo | None = None, content: str | None = None) -> DevReport:
    """The plot tables (`dvc plots`) and the HTML report with its figures, drill-down and pictures.

    ``max_k``: the recall curve's last cut-off (params system.depth); ``calibration_recall``:
    params metrics.calibration_recall (marked on the threshold figure); ``corpus``: where
    the pictures of gold sources are read from; ``memo`` and ``content``: pictures reused
    by content (bench.reporting.thumbnails.pictures), and figures by the values they draw."""
    doc, full = result.document, result.query_table
    # the curves read only the run rows that hit a gold atom (collected block by block by the evaluation)
    hit_run = result.hits[["query_id", ATOM_CODE, "rank", "score"]].drop_duplicates(["query_id", ATOM_CODE])
    hit_gold = result.hits[GOLD_COLUMNS]
    curve = recall_curve(full, hit_run, hit_gold, max_k=max_k)
    thresholds = threshold_curve(full, hit_run, hit_gold, k)
    lat = latency_quantiles(full)
    points = fair_points(doc, k)
    plots = {
        "recall_at_k.csv": _csv(_wide(curve, "k", "recall")),
        "latency.csv": _csv(_wide(lat, "percentile", "latency_ms")),
        "threshold.csv": _csv(thresholds.loc[thresholds["modality"] == "overall"].drop(columns="modality")),
        "precision_coverage.csv": _csv(points),
    }
    store = memo or Memo(None)

    def drawn(draw: Callable[..., str], frame: pd.DataFrame, *args: Any) -> str:
        """`draw(frame, *args)`, reused when the frame's values and the arguments are a stored figure's."""
        key = store.key("svg", draw.__name__, frame.to_csv(index=False, lineterminator="\n"), list(frame.columns), *args)
        return store.text("svg", key, lambda: draw(frame, *args))

    figures = {
        "recall@k for k = 1…100 per modality (dashed: all modalities pooled)": drawn(recall_curve_svg, curve),
        f"precision@{k} against coverage@{k} (this run: one point per modality)": drawn(precision_coverage_svg, points, k),
        "compile-latency distribution (cumulative)": drawn(latency_svg, lat),
        f"false recall and recall@{k} against the calibration share of a top-1 score threshold (grey: metrics.calibration_recall)":
            drawn(threshold_svg, thresholds.loc[thresholds["modality"] != "overall"], k, calibration_recall),
    }
    # row i of the served atoms in modality-name order is atom code i, as of the atom extents; a run's memories after them
    memories = inputs.memories if inputs.memories else None
    atoms_info = pd.concat([*(inputs.served[m][["atom_id", "source_id", "text", "extent"]] for m in sorted(inputs.served)),
                            *([memories.info()] if memories is not None else [])], ignore_index=True)
    atoms_info["amount"] = result.atom_extents["extent"].to_numpy(float)
    # the drill-down's queries are chosen from the per-query table alone; then only their run and gold rows are
    # read, and their atom codes named (the one place the report decodes them)
    source = inputs.source
    shown = drilldown(inputs.entries, full, _no_rows(RUN_COLS), _no_rows(GOLD_COLS), inputs.regions, atoms_info.iloc[:0], k=k)
    wanted = [q["query_id"] for m in shown["modalities"].values() for q in m["queries"]]
    table = served_ids(inputs.served, memories.ids if memories is not None else ())
    run, gold = (with_atom_ids(rows, table) for rows in source.rows_of(wanted))
    drill = drilldown(inputs.entries, full, run, gold, inputs.regions, atoms_info, k=k)
    pics = pictures(drill, corpus, inputs.gold_segments, memo=memo, content=content)
    return DevReport(plots, render(doc, figures, drill, pictures=pics))


RUN_COLS = ("query_id", "atom_id", "rank", "score")
GOLD_COLS = ("query_id", "gold_idx", "atom_id")


def _no_rows(columns: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=float if c == "score" else int if c in ("rank", "gold_idx") else str) for c in columns})


def _wide(frame: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """One column per modality known to the harness (empty when absent) plus overall,
    so the dvc.yaml plot definitions can name fixed columns."""
    wide = frame.pivot(index=x, columns="modality", values=y)
    return wide.reindex(columns=[*sorted(modalities()), "overall"]).reset_index()


def _csv(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, float_format="%.6g", lineterminator="\n")
