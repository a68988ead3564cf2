"""What a measure declares, and the denominator rule every cell follows.

A :class:`Measure` declares, once: its dev.json name and per-query column, whether it
takes the cut-off ``k`` (``cutoff``: then :meth:`Measure.at` makes ``name@k`` of both),
its scope (which entries are its denominator, and so which entries its per-query
column is defined on), its family (the module of bench.evaluation.measures that
computes the per-query column), its reducer (how a cell turns per-query values into
one number, and what the bootstrap resamples), its direction, the spec's bar, the
verdict column it fills and whether ``bench compare`` tests it.

The denominator rule (docs/measuring.md): a metric's denominator is every annotated
entry of its scope (answerable, unanswerable or all), never the number of hits; a
failed query (timeout, crash) stays in it and counts as the worst case (:class:`Mean`'s
``worst``: 0 where higher is better, 1 for false recall and abstention rate); a
per-query value that is not defined (NaN) counts 0. :func:`counted` is the one place
it is written; cells, intervals and ``bench compare`` all call it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import numpy as np
import pandas as pd

__all__ = ["Bar", "Mean", "Measure", "MetricCell", "Reducer", "Scope", "cell", "counted", "in_denominator"]

Scope = Literal["answerable", "unanswerable", "all"]
#: the module of bench.evaluation.measures that computes a measure's per-query column
Family = Literal["ranking", "budget", "false_recall", "auroc", "leaks", "latency", "extent"]
MetricCell = dict[str, Any]


@dataclass(frozen=True)
class Bar:
    """The spec's bar (schema b-2, section 4): the value must be ``>=`` or ``<=`` it."""

    direction: Literal[">=", "<="]
    value: float

    def met(self, value: float) -> bool:
        return value >= self.value if self.direction == ">=" else value <= self.value


class Reducer(Protocol):
    """How a cell reduces the per-query values of a group of entries."""

    @property
    def statistic(self) -> str | Callable[[np.ndarray], np.ndarray]:
        """What bench.evaluation.stats.uncertainty.bootstrap_ci computes on each resample."""
        ...

    def cell(self, measure: Measure, group: pd.DataFrame) -> MetricCell:
        """value, n, denominator (and a reason when there is no value)."""
        ...

    def values(self, measure: Measure, group: pd.DataFrame) -> np.ndarray:
        """The values a cell's interval resamples, in entry order."""
        ...


@dataclass(frozen=True)
class Measure:
    """One metric of dev.json (see the module docstring)."""

    name: str  # dev.json key (with ``@k`` once :meth:`at` filled the cut-off in)
    column: str  # per-query column (likewise)
    scope: Scope  # the denominator's entries; the per-query column is NaN outside them
    family: Family
    reducer: Reducer
    higher_is_better: bool
    cutoff: bool = False  # the measure takes the cut-off k
    bar: Bar | None = None  # the spec's bar; None: the metric is reported, not judged
    heading: str | None = None  # its column in the verdict matrix (``@k`` added with the cut-off); None: not there
    compared: bool = False  # `bench compare` tests it
    #: why a group's cell cannot be measured (None: it can); given for false recall
    unmeasurable: Callable[[pd.DataFrame], str | None] | None = None
    k: int | None = None  # the cut-off, once :meth:`at` filled it in

    def __post_init__(self) -> None:
        if self.compared and not isinstance(self.reducer, Mean):
            raise ValueError(f"{self.name}: `bench compare` pairs per-query values of mean measures only")

    @property
    def worst(self) -> float | None:
        """What a failed query counts as (mean measures only)."""
        return self.reducer.worst if isinstance(self.reducer, Mean) else None

    def at(self, k: int) -> Measure:
        """This measure with the cut-off ``k`` filled into name, column and heading."""
        if not self.cutoff:
            return replace(self, k=int(k))
        return replace(self, name=f"{self.name}@{k}", column=f"{self.column}@{k}", k=int(k),
                       heading=None if self.heading is None else f"{self.heading}@{k}")


def in_denominator(scope: Scope, unanswerable: np.ndarray) -> np.ndarray:
    """Which entries a metric of ``scope`` is defined over (boolean per entry)."""
    unans = np.asarray(unanswerable, dtype=bool)
    if scope == "answerable":
        return ~unans
    if scope == "unanswerable":
        return unans
    return np.ones(len(unans), dtype=bool)


def counted(measure: Measure, values: np.ndarray, unanswerable: np.ndarray, failed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The denominator rule of a mean measure, the one place it is written.

    Returns (the value each entry of the denominator counts with, in entry order; which
    of them have a system result): a failed query counts ``measure.worst``, an
    undefined (NaN) value 0. ``n`` is the second array's sum, the denominator its length.
    """
    if measure.worst is None:
        raise ValueError(f"{measure.name}: its {measure.reducer.statistic} cell has no per-query contribution")
    bad = np.asarray(failed, dtype=bool)
    contrib = np.where(bad, measure.worst, np.nan_to_num(np.asarray(values, dtype=float), nan=0.0))
    keep = in_denominator(measure.scope, unanswerable)
    return contrib[keep], ~bad[keep]


def cell(value: float | None, n: int, denominator: int, reason: str | None = None) -> MetricCell:
    """A dev.json cell: value (None when there is none), n, denominator, and why there is no value."""
    out: MetricCell = {"value": None if value is None else float(value), "n": int(n), "denominator": int(denominator)}
    if reason is not None and value is None:
        out["reason"] = reason
    return out


def flags(group: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(unanswerable, failed) per entry of `group`."""
    return group["unanswerable"].to_numpy(dtype=bool), group["failed"].to_numpy(dtype=bool)


@dataclass(frozen=True)
class Mean:
    """The mean over the denominator, a failed query counting ``worst`` (:func:`counted`)."""

    worst: float

    @property
    def statistic(self) -> str:
        return "mean"

    def cell(self, measure: Measure, group: pd.DataFrame) -> MetricCell:
        contrib, ok = counted(measure, group[measure.column].to_numpy(dtype=float), *flags(group))
        n, denominator = int(ok.sum()), len(contrib)
        if denominator == 0:
            return cell(None, n, denominator)
        reason = measure.unmeasurable(group) if measure.unmeasurable is not None else None
        if reason is not None:
            return cell(None, n, denominator, reason)
        return cell(float(contrib.sum()) / denominator, n, denominator)

    def values(self, measure: Measure, group: pd.DataFrame) -> np.ndarray:
        return counted(measure, group[measure.column].to_numpy(dtype=float), *flags(group))[0]
