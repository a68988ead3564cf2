"""The metric catalogue: every metric of dev.json declared once.

Each :class:`Measure` names its dev.json key, the per-query column it is computed
from, its denominator (``scope``), how its cell reduces the per-query values
(``statistic``), its direction, what a failed query counts as (``worst``), the spec's
bar if it has one, the verdict column it fills and whether ``bench compare`` tests it.
bench.evaluation.metrics (the cells), bench.evaluation.fair (the chunk-fair cells),
bench.evaluation.uncertainty (the intervals), bench.evaluation.compare (paired tests)
and bench.reporting.report (the verdict) all read it, and all four count a query into
a cell by one rule, :func:`counted`. Adding a metric means one :class:`Measure` here and
its per-query computation (bench.evaluation.metrics.per_query or
bench.evaluation.fair.per_query_fair).

The denominator rule (README, *Metrics*): a metric's denominator is every annotated
entry of its scope (answerable, unanswerable or all), never the number of hits; a
failed query (timeout, crash) stays in it and counts as the worst case (``worst``:
0 where higher is better, 1 for false recall and abstention rate); a per-query value
that is not defined (NaN) counts 0. The AUROC ranks a failed answerable entry below
and a failed unanswerable one above every other entry
(bench.evaluation.metrics.auroc_codes); latency percentiles are over the timed,
non-failed queries, with all entries as denominator.

Metrics whose name ends in ``@k`` carry the cut-off (params ``metrics.k``); the
templates below hold ``{k}`` and :func:`measures` fills it in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

import numpy as np

__all__ = ["Bar", "Measure", "by_name", "counted", "in_denominator", "measures"]

Scope = Literal["answerable", "unanswerable", "all"]
#: how a cell reduces its per-query values: the mean over the denominator, the AUROC
#: of answerable against unanswerable entries, or a latency percentile
Statistic = Literal["mean", "auroc", "p50", "p95"]
#: what computes the per-query column: bench.evaluation.metrics.per_query ("core"),
#: its latency table ("latency"), or bench.evaluation.fair.per_query_fair ("fair")
Family = Literal["core", "latency", "fair"]


@dataclass(frozen=True)
class Bar:
    """The spec's bar (schema b-2, section 4): the value must be ``>=`` or ``<=`` it."""

    direction: Literal[">=", "<="]
    value: float

    def met(self, value: float) -> bool:
        return value >= self.value if self.direction == ">=" else value <= self.value


@dataclass(frozen=True)
class Measure:
    """One metric of dev.json (see the module docstring)."""

    name: str  # dev.json key
    column: str  # per-query column
    scope: Scope  # the denominator's entries
    statistic: Statistic
    higher_is_better: bool
    worst: float | None  # what a failed query counts as ("mean" statistics only)
    family: Family
    bar: Bar | None = None  # the spec's bar; None: the metric is reported, not judged
    heading: str | None = None  # its column in the verdict matrix; None: not there
    compared: bool = False  # `bench compare` tests it

    def __post_init__(self) -> None:
        if (self.statistic == "mean") != (self.worst is not None):
            raise ValueError(f"{self.name}: a worst case is declared for mean statistics, and only for them")
        if self.compared and self.statistic != "mean":
            raise ValueError(f"{self.name}: `bench compare` pairs per-query values of mean statistics only")

    def at(self, k: int) -> Measure:
        """This measure with the cut-off ``k`` filled into name, column and heading."""
        return replace(self, name=self.name.format(k=k), column=self.column.format(k=k),
                       heading=None if self.heading is None else self.heading.format(k=k))


#: dev.json's metrics in report order (the order of every cell block)
CATALOGUE: tuple[Measure, ...] = (
    Measure("recall@{k}", "recall@{k}", "answerable", "mean", True, 0.0, "core", Bar(">=", 0.90), "recall@{k}", compared=True),
    Measure("atom_recall@{k}", "atom_recall@{k}", "answerable", "mean", True, 0.0, "core"),
    Measure("mrr", "mrr", "answerable", "mean", True, 0.0, "core", heading="MRR", compared=True),
    Measure("ndcg@{k}", "ndcg@{k}", "answerable", "mean", True, 0.0, "core", heading="nDCG@{k}", compared=True),
    Measure("false_recall", "false_recall", "unanswerable", "mean", False, 1.0, "core", Bar("<=", 0.10), "false recall", compared=True),
    Measure("abstention_rate", "abstained", "answerable", "mean", False, 1.0, "core", heading="abstention rate", compared=True),
    Measure("auroc_unanswerable", "separation", "all", "auroc", True, None, "core", heading="AUROC"),
    Measure("temporal_correctness", "temporal_ok", "all", "mean", True, 0.0, "core", Bar(">=", 0.95), "temporal correctness"),
    Measure("holder_correctness", "holder_ok", "all", "mean", True, 0.0, "core", Bar(">=", 0.95), "holder correctness"),
    Measure("latency_p50_ms", "latency_ms", "all", "p50", False, None, "latency", heading="latency p50 (ms)"),
    Measure("latency_p95_ms", "latency_ms", "all", "p95", False, None, "latency", heading="latency p95 (ms)"),
    Measure("coverage@{k}", "coverage@{k}", "answerable", "mean", True, 0.0, "fair", compared=True),
    Measure("precision@{k}", "precision@{k}", "answerable", "mean", True, 0.0, "fair", compared=True),
    Measure("iou@{k}", "iou@{k}", "answerable", "mean", True, 0.0, "fair", compared=True),
    Measure("oracle_coverage@{k}", "oracle_coverage@{k}", "answerable", "mean", True, 0.0, "fair"),
    Measure("oracle_iou@{k}", "oracle_iou@{k}", "answerable", "mean", True, 0.0, "fair"),
)


@lru_cache(maxsize=8)
def measures(k: int = 10) -> tuple[Measure, ...]:
    """Every measure with the cut-off ``k`` filled in, in report order."""
    return tuple(m.at(int(k)) for m in CATALOGUE)


def by_name(k: int = 10) -> dict[str, Measure]:
    """dev.json key -> measure."""
    return {m.name: m for m in measures(k)}


def in_denominator(scope: Scope, unanswerable: np.ndarray) -> np.ndarray:
    """Which entries a metric of ``scope`` is defined over (boolean per entry)."""
    unans = np.asarray(unanswerable, dtype=bool)
    if scope == "answerable":
        return ~unans
    if scope == "unanswerable":
        return unans
    return np.ones(len(unans), dtype=bool)


def counted(measure: Measure, values: np.ndarray, unanswerable: np.ndarray, failed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The denominator rule of a "mean" measure, the one place it is written.

    Returns (the value each entry of the denominator counts with, in entry order; which
    of them have a system result): a failed query counts ``measure.worst``, an
    undefined (NaN) value 0. ``n`` is the second array's sum, the denominator its length.
    """
    if measure.worst is None:
        raise ValueError(f"{measure.name}: its {measure.statistic} cell has no per-query contribution")
    bad = np.asarray(failed, dtype=bool)
    contrib = np.where(bad, measure.worst, np.nan_to_num(np.asarray(values, dtype=float), nan=0.0))
    keep = in_denominator(measure.scope, unanswerable)
    return contrib[keep], ~bad[keep]
