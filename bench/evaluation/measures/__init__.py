"""The measures of dev.json, one module per family, each declaring its measures once.

=================  ===========================================================
module             measures (the per-query computation beside the declaration)
=================  ===========================================================
``ranking``        recall@k, mrr, ndcg@k (gold regions relevant); ranked_recall@k, atom_recall@k, atom_ndcg@k
``budget``         recall@budget, coverage@budget (what the cartridge a reader can afford holds); touch_recall@budget
``false_recall``   false_recall (under the calibrated or abstention rule), abstention_rate
``auroc``          auroc_unanswerable
``leaks``          temporal_correctness, holder_correctness
``latency``        latency_p50_ms, latency_p95_ms
``extent``         coverage@k, precision@k, iou@k, oracle_coverage@k, oracle_iou@k
=================  ===========================================================

``base`` holds what a declaration is (:class:`~bench.evaluation.measures.base.Measure`)
and the denominator rule; ``scores`` the one rule for equal scores. The cells
(bench.evaluation.cells), the intervals (bench.evaluation.stats.uncertainty), ``bench
compare``, the verdict (bench.reporting.report) and the per-query table
(bench.evaluation.per_query) read only these declarations. Adding a measure: its
declaration in its family's ``MEASURES`` and its per-query column where that family
computes them (CONTRIBUTING.md, *Add a metric*).
"""

from __future__ import annotations

from functools import lru_cache

from bench.evaluation.measures import auroc, budget, extent, false_recall, latency, leaks, ranking
from bench.evaluation.measures.base import Measure

__all__ = ["CATALOGUE", "by_name", "measures"]

#: dev.json's measures in report order (the order of every cell block), cut-off not filled in
#: (recall@budget right after recall@k: the verdict judges the two side by side)
CATALOGUE: tuple[Measure, ...] = (ranking.MEASURES[0], *budget.MEASURES, *ranking.MEASURES[1:], *false_recall.MEASURES, *auroc.MEASURES,
                                  *leaks.MEASURES, *latency.MEASURES, *extent.MEASURES)


@lru_cache(maxsize=8)
def measures(k: int) -> tuple[Measure, ...]:
    """Every measure with the cut-off ``k`` filled in, in report order."""
    return tuple(m.at(int(k)) for m in CATALOGUE)


def by_name(k: int) -> dict[str, Measure]:
    """dev.json key -> measure."""
    return {m.name: m for m in measures(k)}
