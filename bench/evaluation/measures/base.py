"""What a measure declares, and the denominator rule every cell follows.

A :class:`Measure` declares, once and by keyword only: its dev.json name and per-query
column, whether it takes the cut-off ``k`` (``cutoff``: then :meth:`Measure.at` makes
``name@k`` of both), its scope (which entries are its denominator, and so which entries
its per-query column is defined on), its reducer (how a cell turns per-query values into
one number, and what the bootstrap resamples), its direction, what it is and its unit
(``description``, ``unit``: docs/metrics.md is written from them), the spec's bar, the
verdict column it fills, whether ``bench compare`` tests it, whether it is scored on what
an answer handed over (``abstained_nothing``), and its roles in the decisions: ``primary``
(``bench gate`` gates it), ``ranks`` (the one objective ``bench leaderboard`` ranks runs by
and draws its frontier on) and ``in_objective`` (a part of that objective). Its family (the
module of bench.evaluation.measures that computes the per-query column) is filled in by that
module's :class:`Family`, which also declares the computation and the phase (:data:`PHASES`)
it runs in; :func:`run_family` runs one.

Abstention (the one rule, applied in :func:`run_family` and nowhere else): an answer that
abstained hands the reader nothing, exactly as an empty answer does. A measure declared
``abstained_nothing`` (and a family's ``handed`` columns) is computed, for an answer that
abstained, by the same computation on that answer with its ranked rows removed: recall,
MRR, nDCG and the budget measures score what an empty answer scores (0), temporal and
holder correctness what it scores (1: nothing from the future or of another holder was
handed over). :func:`hands_nothing` is the one test of "nothing handed over" (abstained, or
no hit returned) that the abstention rate, false recall's abstention rule and the verdict read.

The denominator rule (docs/metrics.md): a metric's denominator is every annotated
entry of its scope (answerable, unanswerable or all), never the number of hits; a
failed query (timeout, crash) stays in it and counts as the worst case (:class:`Mean`'s
``worst``: 0 where higher is better, 1 for false recall and abstention rate); a
per-query value that is not defined (NaN) counts 0. :func:`counted` is the one place
it is written; cells, intervals and ``bench compare`` all call it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from bench.evaluation.encoding import Encoded

__all__ = ["PHASES", "AllQueries", "Bar", "BlockRows", "Columns", "Family", "Mean", "Measure", "MetricCell", "Phase", "QueryRows", "Reducer",
           "RunRecord", "Scope", "cell", "counted", "hands_nothing", "in_denominator", "run_family"]

Scope = Literal["answerable", "unanswerable", "all"]
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

    def rows(self, measure: Measure, group: pd.DataFrame) -> np.ndarray:
        """Which entries of `group` :meth:`values` holds a value of (boolean per entry, in its order):
        the interval resamples them by their clusters (bench.evaluation.stats.clusters)."""
        ...

    @property
    def worst_case(self) -> str:
        """What a failed query counts as, in words (docs/metrics.md)."""
        ...


@dataclass(frozen=True, kw_only=True)
class Measure:
    """One metric of dev.json (see the module docstring), declared by keyword only."""

    name: str  # dev.json key (with ``@k`` once :meth:`at` filled the cut-off in)
    column: str = ""  # per-query column (likewise); "": the name
    scope: Scope  # the denominator's entries; the per-query column is NaN outside them
    reducer: Reducer
    higher_is_better: bool
    description: str  # what the per-query value (or the cell) is, one or two sentences (docs/metrics.md)
    unit: str  # the value's unit (docs/metrics.md)
    cutoff: bool = False  # the measure takes the cut-off k
    bar: Bar | None = None  # the spec's bar; None: the metric is reported, not judged
    heading: str | None = None  # its column in the verdict matrix (``@k`` added with the cut-off); None: not there
    compared: bool = False  # `bench compare` tests it
    #: why a group's cell cannot be measured (None: it can); given for false recall
    unmeasurable: Callable[[pd.DataFrame], str | None] | None = None
    #: scored on what an answer handed over: for an answer that abstained, what the empty answer scores (:func:`run_family`)
    abstained_nothing: bool = False
    primary: bool = False  # `bench gate` gates it (per modality and overall); the verdict's other mean measures are reported
    ranks: bool = False  # the one declared objective: `bench leaderboard` ranks runs by it and draws its frontier on it
    in_objective: bool = False  # a part of the objective: it scores the entries of this measure's scope (bench.evaluation.measures.objective)
    family: str = ""  # the module that computes its per-query column: filled in by its :class:`Family`
    k: int | None = None  # the cut-off, once :meth:`at` filled it in

    def __post_init__(self) -> None:
        if not self.column:
            object.__setattr__(self, "column", self.name)
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

    @property
    def worst_case(self) -> str:
        return f"a failed query counts {self.worst:g}"

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

    def rows(self, measure: Measure, group: pd.DataFrame) -> np.ndarray:
        return in_denominator(measure.scope, flags(group)[0])


def hands_nothing(abstained: np.ndarray, n_returned: np.ndarray) -> np.ndarray:
    """Per entry: the answer handed the reader nothing -- it abstained, or returned no hit. One
    thing for every rule (the module docstring, *Abstention*)."""
    return np.asarray(abstained, dtype=bool) | (np.asarray(n_returned, dtype=float) == 0)


# --------------------------------------------------------------------------- families

#: when a family computes its per-query columns (:class:`Family`), each phase with the one context it reads:
#: ``query``        per query from its own ranked rows as codes, query block by query block
#:                  (bench.evaluation.per_query.query_block; :class:`QueryRows`)
#: ``block``        per query from a query block's rows and the extents of atoms and gold regions
#:                  (bench.evaluation.evaluate.evaluate_block; :class:`BlockRows`)
#: ``cross_query``  per query, from every query of the run: a rule calibrated over a modality, one
#:                  signal for the run (bench.evaluation.per_query.finish_per_query; :class:`AllQueries`)
#: ``run``          per query from the run's own record of it, its latency (:class:`RunRecord`)
#: ``combined``     per query from the other families' per-query columns, last: the objective (:class:`Columns`)
Phase = Literal["query", "block", "cross_query", "run", "combined"]
PHASES: tuple[Phase, ...] = ("query", "block", "cross_query", "run", "combined")
#: the phases whose context can hand a family an answer's ranked rows removed (``handed``): the abstention rule's
HANDING: tuple[Phase, ...] = ("query", "block")


@dataclass(frozen=True, kw_only=True)
class QueryRows:
    """Phase ``query``: one query block's inputs as codes, entries sorted by query_id."""

    coded: Encoded
    k: int
    abstained: np.ndarray  # bool per entry: its answer abstained

    def handed(self) -> QueryRows | None:
        """The same entries, the ranked rows of every answer that abstained removed (None: none abstained)."""
        gone = np.asarray(self.abstained, dtype=bool)
        if not gone.any():
            return None
        run = self.coded.run
        keep = ~gone[run.q]
        rows = type(run)(q=run.q[keep], a=run.a[keep], rank=run.rank[keep], score=run.score[keep])
        return replace(self, coded=replace(self.coded, run=rows), abstained=np.zeros_like(gone))


@dataclass(frozen=True, kw_only=True)
class BlockRows:
    """Phase ``block``: one query block's frames, atoms as codes (bench.evaluation.evaluate.evaluate_block)."""

    entries: pd.DataFrame  # query_id, modality, unanswerable, n_regions
    run: pd.DataFrame  # query_id, atom (code), rank, score (rows of other queries are ignored)
    gold: pd.DataFrame  # query_id, gold_idx, atom (code; resolved)
    regions: pd.DataFrame  # the placed gold regions (bench.gold.table)
    atom_ext: pd.DataFrame  # bench.evaluation.measures.extent.atom_extents, row i the atom of code i
    k: int
    failed: list[str]
    budget: Mapping[str, float | None]  # modality -> amount in its unit (None: no budget)
    #: the run's memories, their codes after the served atoms' (bench.evaluation.measures.extent.MemoryExtents; None: none)
    memories: Any = None
    abstained: frozenset[str] = field(default_factory=frozenset)  # queries whose answer abstained
    #: frames more than one family reads, built once per block (:meth:`shared`); not copied by ``replace``
    _shared: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def shared(self, name: str, build: Callable[[], Any]) -> Any:
        """`build()`, built once for this block: a frame more than one family reads (the budget and
        reading families' reading order, bench.evaluation.measures.budget.block_reading_order)."""
        if name not in self._shared:
            self._shared[name] = build()
        return self._shared[name]

    def handed(self) -> BlockRows | None:
        """The entries whose answer abstained, with their ranked rows removed (None: none abstained)."""
        ids = self.entries["query_id"].astype(str)
        gone = ids.isin(self.abstained).to_numpy()
        if not gone.any():
            return None
        kept = set(ids[gone])
        return replace(self, entries=self.entries.loc[gone], run=self.run.iloc[:0], abstained=frozenset(),
                       gold=self.gold.loc[self.gold["query_id"].astype(str).isin(kept).to_numpy()])


@dataclass(frozen=True, kw_only=True)
class AllQueries:
    """Phase ``cross_query``: the ``query`` phase's rows of every entry (sorted by query_id) and how
    false recall is read (bench.evaluation.evaluate.EvalOptions)."""

    blocks: pd.DataFrame
    k: int
    abstains: bool = False  # the system declared abstention
    calibration_recall: float = 0.9
    thresholds: dict[str, float | None] | None = None  # the dev run's calibrated thresholds (None: calibrate)


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """Phase ``run``: the entries' table (query_id, failed) and the run's responses (query_id, latency_ms, ...)."""

    table: pd.DataFrame
    responses: pd.DataFrame | None
    k: int


@dataclass(frozen=True, kw_only=True)
class Columns:
    """Phase ``combined``: every other family's per-query columns (query_id, modality, unanswerable,
    failed and the measures' columns), one row per entry, and the catalogue at cut-off k."""

    table: pd.DataFrame
    k: int


@dataclass(frozen=True, kw_only=True)
class Family:
    """A module of bench.evaluation.measures: its declarations and the per-query computation
    that fills their columns, with the phase it runs in. It fills in each measure's ``family``."""

    name: str  # the module's name (the registry checks it)
    phase: Phase
    measures: tuple[Measure, ...]
    #: the context of the phase (:class:`QueryRows`, ...) -> its per-query columns: a mapping of
    #: arrays in entry order (phases query, cross_query, run), a frame with query_id (phase block)
    compute: Callable[[Any], Any]
    #: the per-query columns it writes at cut-off k, in table order (its measures' and the amounts beside them)
    columns: Callable[[int], tuple[str, ...]]
    #: report order: its measures follow this measure of an earlier family (None: after the earlier families')
    after: str | None = None
    #: columns besides its measures' that are scored on what an answer handed over (as ``abstained_nothing``)
    handed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"family {self.name}: phase {self.phase!r} is not one of {', '.join(PHASES)}")
        if (self.handed or any(m.abstained_nothing for m in self.measures)) and self.phase not in HANDING:
            raise ValueError(f"family {self.name}: phase {self.phase} cannot score what an answer handed over "
                             f"(only {', '.join(HANDING)} can)")
        for m in self.measures:
            if m.family not in ("", self.name):
                raise ValueError(f"{m.name}: declared in family {self.name}, says {m.family}")
        object.__setattr__(self, "measures", tuple(replace(m, family=self.name) for m in self.measures))


def run_family(family: Family, context: Any) -> Any:
    """`family`'s per-query columns for `context` (its phase's), checked against what it
    declares, with the one rule of abstention applied (module docstring, *Abstention*): its
    measures declared ``abstained_nothing`` and its ``handed`` columns take, for an answer
    that abstained, the value the same computation gives that answer with its ranked rows
    removed -- what the empty answer scores."""
    out = family.compute(context)
    wrote = tuple(c for c in out if c != "query_id")
    if wrote != family.columns(context.k):
        raise ValueError(f"family {family.name} wrote columns {wrote}, declares {family.columns(context.k)}")
    handed = [*(m.at(context.k).column for m in family.measures if m.abstained_nothing), *family.handed]
    emptied = context.handed() if handed else None
    if emptied is None:
        return out
    alt = family.compute(emptied)
    if isinstance(out, pd.DataFrame):  # phase block: the abstained entries' rows, by query_id
        at = pd.Index(out["query_id"].astype(str)).get_indexer(alt["query_id"].astype(str))
        if (at < 0).any():
            raise ValueError(f"family {family.name}: its handed rows name queries it did not score")
        out = out.copy()
        for c in handed:
            values = out[c].to_numpy(dtype=float).copy()
            values[at] = np.asarray(alt[c], dtype=float)
            out[c] = values
        return out
    out = dict(out)  # phase query: every entry, in the same order
    mask = np.asarray(context.abstained, dtype=bool)
    for c in handed:
        out[c] = np.where(mask, np.asarray(alt[c], dtype=float), np.asarray(out[c], dtype=float))
    return out
