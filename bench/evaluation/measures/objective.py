"""The objective: answering and abstaining judged together, over all entries.

A run can raise its recall by abstaining less and pay for it in false recalls; recall@budget
sees only the gain, false recall only the price. The objective prices both on one scale, as
SQuAD 2.0 scores answerable and unanswerable questions together: per entry,

=================  ==========================================================================
answerable         its held credit at equal cost: the per-query value of the part declared
                   ``in_objective`` on answerable entries (recall@budget)
unanswerable       1 when nothing strong was handed over, else 0: one minus the per-query
                   value of the part declared ``in_objective`` on unanswerable entries
                   (false recall, under the modality's rule)
=================  ==========================================================================

and the cell is the mean over **all** entries (n and denominator: every entry of the group;
a failed query counts 0, the worst case). So a run rises by abstaining less only when what
it gains on answerable entries outweighs the false recalls it adds: abstaining on one more
answerable entry it would have found costs 1 / denominator, answering one more unanswerable
entry strongly costs the same. The parts are found by their declarations (``in_objective``;
a part where lower is better counts one minus its value), never by name; each entry is
scored by exactly one part. No value (with the part's reason) where a part cannot be
measured: a modality without a budget, a false recall that is not measurable.

``bench leaderboard`` ranks runs by it and draws its frontier on it, and ``bench gate``
gates it (the declaration's ``ranks`` and ``primary``); both parts are shown beside it
(docs/measuring.md, *The objective*).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np
import pandas as pd

from bench.evaluation.measures.base import Columns, Family, Mean, Measure, in_denominator

__all__ = ["NAME", "family", "objective_column", "parts"]

NAME = "objective"


def parts(catalogue: Sequence[Measure]) -> tuple[Measure, ...]:
    """The measures declared ``in_objective``, checked: mean measures whose scopes (answerable,
    unanswerable) score every entry exactly once."""
    found = tuple(m for m in catalogue if m.in_objective)
    scopes = sorted(m.scope for m in found)
    if scopes != ["answerable", "unanswerable"] or not all(isinstance(m.reducer, Mean) for m in found):
        raise ValueError(f"the objective needs one mean measure declared in_objective per scope (answerable, unanswerable); "
                         f"found {[(m.name, m.scope) for m in found]}")
    return found


def objective_column(table: pd.DataFrame, k: int, catalogue: Sequence[Measure]) -> np.ndarray | None:
    """The objective per entry of `table` (its unanswerable flags and the parts' per-query
    columns at cut-off k); NaN where the part has no value (a failed query, an unmeasurable
    part); None when `table` lacks a part's column."""
    found = [m.at(k) for m in parts(catalogue)]
    if any(m.column not in table.columns for m in found):
        return None
    unans = table["unanswerable"].to_numpy(dtype=bool)
    out = np.full(len(table), np.nan)
    for m in found:
        rows = in_denominator(m.scope, unans)
        value = table[m.column].to_numpy(dtype=float)[rows]
        out[rows] = value if m.higher_is_better else 1.0 - value
    return out


def _unmeasurable(catalogue: Sequence[Measure], group: pd.DataFrame) -> str | None:
    """The first reason a part of the objective has no value over `group` (None: both have one)."""
    for m in parts(catalogue):
        if m.unmeasurable is None:
            continue
        try:
            why = m.unmeasurable(group)
        except KeyError:  # a compact per-query table without the columns the part's rule reads
            why = None
        if why:
            return f"{m.name}: {why}"
    return None


def family(catalogue: Sequence[Measure]) -> Family:
    """The objective's family over the measures of the other families (`catalogue`, cut-off not filled in)."""
    found = parts(catalogue)
    answerable = next(m for m in found if m.scope == "answerable")
    unanswerable = next(m for m in found if m.scope == "unanswerable")

    def compute(ctx: Columns) -> dict[str, np.ndarray]:
        column = objective_column(ctx.table, ctx.k, catalogue)
        return {NAME: np.full(len(ctx.table), np.nan) if column is None else column}

    return Family(
        name="objective", phase="combined", compute=compute, columns=lambda k: (NAME,), after="handed_nothing",
        measures=(
            Measure(name=NAME, scope="all", reducer=Mean(worst=0.0), higher_is_better=True, heading="objective", compared=True,
                    primary=True, ranks=True, unmeasurable=partial(_unmeasurable, catalogue), unit="share of entries (0-1)",
                    description=f"Answering and abstaining judged together, over all entries (SQuAD 2.0's way): an answerable "
                                f"entry scores its {answerable.name} (held credit at equal cost), an unanswerable one 1 when "
                                f"nothing strong was handed over (1 - {unanswerable.name}). A run rises by abstaining less only "
                                f"when what it gains on answerable entries outweighs the false recalls it adds."),
        ),
    )
