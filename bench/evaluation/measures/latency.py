"""Latency measures: p50 and p95 of the per-query latency (``latency_ms``).

A percentile (numpy "linear") over the group's timed, non-failed queries: n is the
number of those, the denominator every entry of the group; no value when n == 0.
The interval resamples the timed queries' latencies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.evaluation.encoding import require_columns
from bench.evaluation.measures.base import Family, Measure, MetricCell, RunRecord, cell, flags, in_denominator

__all__ = ["FAMILY", "MEASURES", "Percentile", "latency_column"]


@dataclass(frozen=True)
class Percentile:
    """The ``q``-th percentile of the entries with a value (failed ones carry none), all of
    the scope's entries as denominator; also the extent percentiles (bench.evaluation.measures.extent)."""

    q: int

    @property
    def statistic(self) -> str:
        return f"p{self.q}"

    @property
    def worst_case(self) -> str:
        return "a failed query has no value: n counts the others, the denominator every entry of the scope"

    def cell(self, measure: Measure, group: pd.DataFrame) -> MetricCell:
        unans, _ = flags(group)
        denominator = int(in_denominator(measure.scope, unans).sum())
        values = group[measure.column].to_numpy(dtype=float)
        timed = values[~np.isnan(values)]
        reason = measure.unmeasurable(group) if measure.unmeasurable is not None else None
        if reason is not None:
            return cell(None, len(timed), denominator, reason)
        value = float(np.percentile(timed, float(self.q))) if len(timed) and denominator else None
        return cell(value, len(timed), denominator)

    def values(self, measure: Measure, group: pd.DataFrame) -> np.ndarray:
        return group[measure.column].to_numpy(dtype=float)[self.rows(measure, group)]

    def rows(self, measure: Measure, group: pd.DataFrame) -> np.ndarray:
        _, failed = flags(group)
        return ~failed & ~np.isnan(group[measure.column].to_numpy(dtype=float))


def latency_column(record: RunRecord) -> dict[str, np.ndarray]:
    """``latency_ms`` per entry of ``record.table`` (in its order) from the responses (query_id,
    latency_ms); NaN for a failed query and for one the responses do not time."""
    table, responses = record.table, record.responses
    ids = table["query_id"].astype(str)
    if responses is None:
        lat = np.full(len(table), np.nan)
    else:
        require_columns(responses, ("query_id", "latency_ms"), "latency")
        by_query = pd.Series(responses["latency_ms"].astype(float).to_numpy(), index=responses["query_id"].astype(str).to_numpy())
        if by_query.index.duplicated().any():
            raise ValueError("latency has duplicate query_id")
        lat = by_query.reindex(ids.to_numpy()).to_numpy(dtype=float)
    return {"latency_ms": np.where(table["failed"].to_numpy(dtype=bool), np.nan, lat)}


FAMILY = Family(
    name="latency", phase="run", compute=latency_column, columns=lambda k: ("latency_ms",),
    measures=(
        Measure(name="latency_p50_ms", column="latency_ms", scope="all", reducer=Percentile(50), higher_is_better=False,
                heading="latency p50 (ms)", unit="milliseconds",
                description="Median latency of the timed, answered queries, as the run measured it."),
        Measure(name="latency_p95_ms", column="latency_ms", scope="all", reducer=Percentile(95), higher_is_better=False,
                heading="latency p95 (ms)", unit="milliseconds",
                description="95th percentile of the latency of the timed, answered queries."),
    ),
)
MEASURES: tuple[Measure, ...] = FAMILY.measures
