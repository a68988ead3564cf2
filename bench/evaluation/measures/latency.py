"""Latency measures: p50 and p95 of the per-query latency (``latency_ms``).

A percentile (numpy "linear") over the group's timed, non-failed queries: n is the
number of those, the denominator every entry of the group; no value when n == 0.
The interval resamples the timed queries' latencies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.evaluation.measures.base import Measure, MetricCell, cell, flags, in_denominator

__all__ = ["MEASURES", "Percentile"]


@dataclass(frozen=True)
class Percentile:
    """The ``q``-th percentile of the entries with a value (failed ones carry none), all of
    the scope's entries as denominator; also the extent percentiles (bench.evaluation.measures.extent)."""

    q: int

    @property
    def statistic(self) -> str:
        return f"p{self.q}"

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
        _, failed = flags(group)
        latency = group[measure.column].to_numpy(dtype=float)
        return latency[~failed & ~np.isnan(latency)]


MEASURES = (
    Measure("latency_p50_ms", "latency_ms", "all", "latency", Percentile(50), False, heading="latency p50 (ms)"),
    Measure("latency_p95_ms", "latency_ms", "all", "latency", Percentile(95), False, heading="latency p95 (ms)"),
)
