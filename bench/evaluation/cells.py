"""dev.json's cells: every measure's value, n and denominator per modality and overall.

Each cell is its measure's declared reducer over the group's per-query column
(bench.evaluation.measures): the mean over the denominator with a failed query at its
worst case, the AUROC, or a latency percentile. ``overall`` pools all entries (a micro
average); modalities are sorted by name. A cell's value is ``None`` when its
denominator is 0, and ``None`` with a ``reason`` where the measure cannot be measured.
All numbers are plain Python ``float`` / ``int``; nothing is rounded.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.evaluation.encoding import Failed, failed_ids, require_columns
from bench.evaluation.measures import families, measures
from bench.evaluation.measures.base import MetricCell, RunRecord, run_family
from bench.evaluation.per_query import query_measures

__all__ = ["aggregate", "group_cells", "metric_cells"]


def group_cells(group: pd.DataFrame, k: int, families: tuple[str, ...] | None = None) -> dict[str, MetricCell]:
    """Cells of the measures (of `families`; None: all) over the entries of `group`, in report
    order. ``group``: modality, unanswerable, failed and the measures' per-query columns."""
    return {m.name: m.reducer.cell(m, group) for m in measures(k) if families is None or m.family in families}


def metric_cells(table: pd.DataFrame, k: int, families: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``{"by_modality": {modality: cells}, "overall": cells}`` over the rows of `table` (one per entry)."""
    by_modality = {str(m): group_cells(g, k, families) for m, g in table.groupby("modality", sort=True)}
    return {"by_modality": by_modality, "overall": group_cells(table, k, families)}


def aggregate(per_query_df: pd.DataFrame, latency: pd.DataFrame | None, failed: Failed = None, *, k: int = 10) -> dict[str, Any]:
    """The cells of the per-query table's measures and the latency percentiles.

    ``per_query_df``: bench.evaluation.per_query.per_query's table; ``latency``:
    query_id, latency_ms of the timed queries; ``failed`` is unioned with the table's
    ``failed`` column. The chunk-fair (extent) measures are not in it."""
    require_columns(per_query_df, ("query_id", "modality", "unanswerable", *(m.column for m in query_measures(k)),
                                   "false_recall_rule", "false_recall_reason", "auroc_signal"), "per_query_df")
    df = per_query_df.assign(query_id=per_query_df["query_id"].astype(str))
    if df["query_id"].duplicated().any():
        raise ValueError("per_query_df.query_id must be unique")
    df = df.sort_values("query_id", kind="stable").reset_index(drop=True)
    prior = df["failed"].astype(bool) if "failed" in df.columns else False
    df["failed"] = prior | df["query_id"].isin(failed_ids(failed))
    for family in families("run"):  # the latency
        df = df.assign(**run_family(family, RunRecord(table=df, responses=latency, k=k)))
    return metric_cells(df, k, tuple(f.name for f in families("query", "cross_query", "run")))
