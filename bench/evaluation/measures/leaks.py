"""Leak measures (spec section 4): temporal and holder correctness, over all entries.

``temporal_ok``  1 if no top-k atom has ``observed_at > as_of`` (memory from after
                 the question), else 0.
``holder_ok``    1 if no top-k atom has ``holder != entry holder`` (someone else's
                 memory), else 0.
Both count only what was handed over: an answer that abstained hands over nothing and so
scores as the empty answer, 1 (bench.evaluation.measures.base, *Abstention*); the verdict
reads a cell met while most entries were handed nothing as *met only by handing nothing*.
A failed query counts 0.
"""

from __future__ import annotations

import numpy as np

from bench.evaluation.encoding import Atoms, Entries, RunRows, count_per_query
from bench.evaluation.measures.base import Bar, Family, Mean, Measure, QueryRows

__all__ = ["FAMILY", "MEASURES", "leak_columns"]


def leak_columns(run: RunRows, entries: Entries, atoms: Atoms, k: int) -> dict[str, np.ndarray]:
    """temporal_ok / holder_ok over the top-k atoms."""
    n = len(entries.ids)
    top = run.rank <= k
    q, a = run.q[top], run.a[top]
    future = atoms.observed_at[a] > entries.as_of[q]
    foreign = atoms.holder[a] != entries.holder[q]
    temporal, holder = (m.column for m in MEASURES)
    return {
        temporal: (count_per_query(q[future], n) == 0).astype(float),
        holder: (count_per_query(q[foreign], n) == 0).astype(float),
    }


def _compute(rows: QueryRows) -> dict[str, np.ndarray]:
    return leak_columns(rows.coded.run, rows.coded.entries, rows.coded.atoms, rows.k)


FAMILY = Family(
    name="leaks", phase="query", compute=_compute, columns=lambda k: tuple(m.column for m in MEASURES),
    measures=(
        Measure(name="temporal_correctness", column="temporal_ok", scope="all", reducer=Mean(worst=0.0), higher_is_better=True,
                bar=Bar(">=", 0.95), heading="temporal correctness", abstained_nothing=True, primary=True, unit="share of entries (0-1)",
                description="1 if no top-k atom handed over was observed after the entry's as_of (no memory from after the "
                            "question), else 0; an answer that abstained hands over nothing."),
        Measure(name="holder_correctness", column="holder_ok", scope="all", reducer=Mean(worst=0.0), higher_is_better=True,
                bar=Bar(">=", 0.95), heading="holder correctness", abstained_nothing=True, primary=True, unit="share of entries (0-1)",
                description="1 if no top-k atom handed over belongs to another holder than the entry's (someone else's memory), "
                            "else 0; an answer that abstained hands over nothing."),
    ),
)
MEASURES: tuple[Measure, ...] = FAMILY.measures
