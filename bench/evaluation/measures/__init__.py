"""The measures of dev.json: a registry of families, one module per family, each declaring
its measures once beside the per-query computation that fills their columns.

=================  =============  ========================================================
module             phase          measures (docs/metrics.md, generated from the declarations)
=================  =============  ========================================================
``ranking``        query          recall@k (gold regions relevant); mrr, ndcg@k (regions at atom ranks), ranked_recall@k,
                                  atom_recall@k, atom_ndcg@k
``false_recall``   cross_query    false_recall (under the calibrated or abstention rule), abstention_rate, handed_nothing
``auroc``          cross_query    auroc_unanswerable
``leaks``          query          temporal_correctness, holder_correctness
``latency``        run            latency_p50_ms, latency_p95_ms
``extent``         block          coverage@k, precision@k, iou@k, oracle_coverage@k, oracle_iou@k, cartridge_p50@k, cartridge_p95@k
``scores``         block          none: the per-query ``tied@k`` behind dev.json's ``ties``
``budget``         block          recall@budget (held credit), coverage@budget (what the cartridge a reader can afford
                                  holds); half_recall@budget, touch_recall@budget
``reading``        block          content_mrr, content_ndcg@k: positions in content read, not atom ranks
``objective``      combined       objective (answering and abstaining judged together: its parts are declared ``in_objective``)
=================  =============  ========================================================

Each module exports ``FAMILY`` (bench.evaluation.measures.base.Family): its keyword-only
declarations, its computation, the phase that runs it (base.PHASES) and the per-query
columns it writes. :data:`FAMILIES` lists them in the order of their columns in the
per-query tables; the evaluation (bench.evaluation.per_query, bench.evaluation.evaluate)
runs each phase's families from it through base.run_family, which also applies the one
rule of abstention. The objective's family is built from the other families' declarations
(``objective.family``: its parts are the measures declared ``in_objective``). The report order (:data:`CATALOGUE`, every cell block) follows the
registry, a family that declares ``after`` placed right after that measure (recall@budget
right after recall@k: the verdict judges the two side by side; the content MRR and nDCG after
the budget measures). ``base`` holds what a
declaration is and the denominator rule; ``scores`` the one rule for equal scores;
``docs`` writes docs/metrics.md from the declarations. The cells, intervals, ``bench
compare``, the gate, the leaderboard and the verdict read only these declarations, through
:func:`measures` (built once per cut-off: an immutable tuple). Adding a measure: its
declaration in its family's ``FAMILY`` and its column in that family's computation, then
``bench docs metrics`` (docs/metrics.md, *Adding a measure*).
"""

from __future__ import annotations

from functools import lru_cache
from types import MappingProxyType, ModuleType

from bench.evaluation.measures import auroc, budget, extent, false_recall, latency, leaks, objective, ranking, reading, scores
from bench.evaluation.measures.base import Family, Measure, Phase

__all__ = ["CATALOGUE", "FAMILIES", "by_name", "families", "measures", "ranking_measure"]


def _registry(*modules: ModuleType) -> tuple[Family, ...]:
    """Each module's ``FAMILY``, checked to be named after its module."""
    out = []
    for module in modules:
        family: Family = module.FAMILY
        if family.name != module.__name__.rpartition(".")[2]:
            raise ValueError(f"{module.__name__}: its FAMILY is named {family.name!r}")
        out.append(family)
    return tuple(out)


_MEASURED = _registry(ranking, false_recall, auroc, leaks, latency, extent, scores, budget, reading)
#: the families in the order of their per-query columns (each phase's in this order); the objective's last, from the others'
FAMILIES: tuple[Family, ...] = (*_MEASURED, objective.family([m for f in _MEASURED for m in f.measures]))


def _report_order(registry: tuple[Family, ...]) -> tuple[Measure, ...]:
    """Every family's measures in registry order, a family with ``after`` right after that measure."""
    order: list[Measure] = []
    for family in registry:
        if family.after is None:
            order.extend(family.measures)
            continue
        at = [i for i, m in enumerate(order) if m.name == family.after]
        if not at:
            raise ValueError(f"family {family.name}: after {family.after!r}, which no earlier family declares")
        order[at[0] + 1:at[0] + 1] = family.measures
    names = [m.name for m in order]
    if len(set(names)) != len(names):
        raise ValueError(f"a measure is declared twice: {sorted({n for n in names if names.count(n) > 1})}")
    if sum(m.ranks for m in order) != 1:
        raise ValueError(f"exactly one measure ranks runs (declared ranks=True); found {[m.name for m in order if m.ranks]}")
    return tuple(order)


#: dev.json's measures in report order (the order of every cell block), cut-off not filled in
CATALOGUE: tuple[Measure, ...] = _report_order(FAMILIES)


def families(*phases: Phase) -> tuple[Family, ...]:
    """The families that run in `phases`, in registry order."""
    return tuple(f for f in FAMILIES if f.phase in phases)


@lru_cache(maxsize=8)
def measures(k: int) -> tuple[Measure, ...]:
    """Every measure with the cut-off ``k`` filled in, in report order (built once per k)."""
    return tuple(m.at(int(k)) for m in CATALOGUE)


@lru_cache(maxsize=8)
def by_name(k: int) -> MappingProxyType[str, Measure]:
    """dev.json key -> measure (read-only)."""
    return MappingProxyType({m.name: m for m in measures(k)})


def ranking_measure(k: int) -> Measure:
    """The one declared objective (``ranks``): what ``bench leaderboard`` ranks by and draws its frontier on."""
    return next(m for m in measures(k) if m.ranks)
