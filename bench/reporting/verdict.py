"""The verdict's rules for a bar that can be bought, declared once.

Some of the spec's bars can be met without the system being better:

``met only by atom size``   recall@k meets its bar while recall@budget (the same bar,
                            at equal cost: bench.evaluation.measures.budget) does not:
                            the top k met it because its atoms are big, and a reader
                            handed the modality's budget would not find the gold.
``met only by abstaining``  false recall meets its bar while the system abstained on
                            most of the modality's answerable entries (abstention rate
                            above :data:`MOST`, more than half): it says nothing strong
                            on unanswerable questions because it says nothing strong at
                            all (NoMIRACL reports the hallucination rate only beside the
                            error rate for this reason). An answer that returned nothing
                            counts as an abstention (bench.evaluation.measures.base,
                            *Abstention*), so a run returning ``[]`` reads the same.
``met only by handing       temporal or holder correctness meets its bar while the system
nothing``                   handed nothing over (abstained or returned no hit) on most of
                            the group's entries (``handed_nothing`` above :data:`MOST`):
                            nothing handed over leaks nothing, so the bar says nothing.

Such a cell reads, for example, ``met only by atom size: recall@budget 0.4100`` or
``met only by abstaining: abstention 0.9673 (266/275)`` or ``met only by handing nothing:
handed nothing 1.0000 (2071/2071)`` instead of ``met``, in
reports/dev.md, reports/dev.html and the acceptance's reports/test.md
(bench.reporting.report.verdict reads :func:`bought`). A cell of the other measure that
has no value leaves the cell ``met``.

Two diagnostics without a bar are guarded the same way (issue 46), in the full tables of
reports/dev.md and dev.html (:func:`raised`):

``only by atom size``       ``ndcg@k`` or ``mrr`` -- positions counted in atom ranks, so a
                            bigger atom moves a region up and the first atom touching a
                            region counts it whole, however little of it the atom holds (a
                            4 s video cue of a 40 s answer) -- lies above the 95% interval of
                            its content version (``content_ndcg@k``, ``content_mrr``: positions
                            in content read, bench.evaluation.measures.reading), which the
                            verdict, ``bench compare``, the leaderboard and the gate read:
                            the atoms, not the ranking, raised it (session chunks on LoCoMo:
                            ndcg@10 0.78 beside content_ndcg@10 0.22).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.evaluation.measures import CATALOGUE, measures
from bench.numbers import number

__all__ = ["MOST", "RULES", "Bought", "bought", "raised", "rules_text"]

#: "most" of the answerable entries: more than this share of them
MOST = 0.5


@dataclass(frozen=True)
class Bought:
    """A bar met only because of something the bar does not look at."""

    measure: str  # the measure whose bar can be bought (its catalogue name, cut-off not filled in)
    by: str  # the measure that tells (likewise)
    label: str  # how the other measure is named in the cell
    words: str  # what the cell says instead of "met"
    #: whether the other measure's cell (and its bar status) shows the bar was bought
    holds: Callable[[dict[str, Any], str | None], bool]
    why: str  # the rule in one sentence (the reports' legend)
    counted: bool = False  # the cell names the entries behind the other measure (value x denominator / denominator)
    #: a rule for a measure without a bar (a diagnostic, in the full tables: :func:`raised`): whether its own cell and the
    #: other measure's show the value was raised by what it does not look at; None: a rule for a bar (``holds``)
    over: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None

    def names(self, k: int) -> tuple[str, str]:
        """(measure, by) as dev.json names them at cut-off k."""
        at = {m.name: filled.name for m, filled in zip(CATALOGUE, measures(k), strict=True)}  # measures(k): built once per k
        return at[self.measure], at[self.by]


def _count(cell: dict[str, Any]) -> str:
    """The entries behind a mean cell: value x denominator of denominator."""
    return f"{round(cell['value'] * cell['denominator'])}/{cell['denominator']}"


def _above(own: dict[str, Any], other: dict[str, Any]) -> bool:
    """The own value lies above the other cell's 95% interval (its value, when it has none)."""
    ci = other.get("ci95") or [None, None]
    top = ci[1] if ci[1] is not None else other["value"]
    return own.get("value") is not None and own["value"] > top


def _never(cell: dict[str, Any], status: str | None) -> bool:
    return False


_AT_RANKS = ("an nDCG@k or MRR at atom ranks (a region counted whole at the first atom touching it, whatever the atom's size) "
             "above the 95% interval of its content version (content_ndcg@k, content_mrr: positions in content read, what the "
             "verdict shows) reads *only by atom size* in the full tables")

RULES = (
    Bought("recall", "recall@budget", "recall@budget", "met only by atom size",
           lambda cell, status: status == "not met",
           "a recall@k that meets the bar while recall@budget (the same bar, at the modality's budget) does not reads "
           "*met only by atom size*"),
    Bought("false_recall", "abstention_rate", "abstention", "met only by abstaining",
           lambda cell, status: cell.get("value") is not None and cell["value"] > MOST,
           f"a false recall that meets its bar while the system abstained on most (more than {MOST:.0%}) of the modality's "
           "answerable entries reads *met only by abstaining*", counted=True),
    *(Bought(leak, "handed_nothing", "handed nothing", "met only by handing nothing",
             lambda cell, status: cell.get("value") is not None and cell["value"] > MOST,
             f"a {leak.replace('_', ' ')} that meets its bar while the system handed nothing over (abstained or returned no "
             f"hit) on most (more than {MOST:.0%}) of the entries reads *met only by handing nothing*", counted=True)
      for leak in ("temporal_correctness", "holder_correctness")),
    Bought("ndcg", "content_ndcg", "content nDCG", "only by atom size", _never, _AT_RANKS, over=_above),
    Bought("mrr", "content_mrr", "content MRR", "only by atom size", _never, _AT_RANKS, over=_above),
)


def bought(block: dict[str, Any], name: str, k: int, status_of: Callable[[str, dict[str, Any] | None], str | None]) -> str | None:
    """What a met cell of measure `name` says instead of "met" in the cells `block` of one
    row (None: it is met). `status_of(metric, cell)` is the bar status of another cell."""
    for rule in RULES:
        measure, by = rule.names(k)
        if measure != name or rule.over is not None:
            continue
        other = block.get(by)
        if other is None or other.get("value") is None:
            return None
        if rule.holds(other, status_of(by, other)):
            return f"{rule.words}: {rule.label} {number(other['value'])}" + (f" ({_count(other)})" if rule.counted else "")
    return None


def raised(block: dict[str, Any], name: str) -> str | None:
    """What the full tables say beside the value of diagnostic `name` (a dev.json key) in the
    cells `block` of one row (None: nothing): a rule with ``over`` whose other cell has a value."""
    k = int(name.rpartition("@")[2]) if name.rpartition("@")[2].isdigit() else 10
    for rule in RULES:
        measure, by = rule.names(k)
        if measure != name or rule.over is None:
            continue
        own, other = block.get(name), block.get(by)
        if own is not None and other is not None and other.get("value") is not None and rule.over(own, other):
            return f"{rule.words}: {by} {number(other['value'])}"
    return None


def rules_text() -> str:
    """The rules in one paragraph, for every report that shows the verdict."""
    bars = [r.why for r in RULES if r.over is None]
    diagnostics = list(dict.fromkeys(r.why for r in RULES if r.over is not None))
    return "A bar can be bought: " + "; ".join(bars) + "; and " + "; ".join(diagnostics) + " (docs/measuring.md)."
