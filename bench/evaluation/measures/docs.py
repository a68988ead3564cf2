"""docs/metrics.md, written from the declarations (bench.evaluation.measures): one entry per
measure of dev.json with its definition, unit, denominator, worst case, direction, bar and
roles. Pure: the caller gathers the roles from the modules that read the measures (the
verdict, ``bench gate``, the leaderboard, ``bench compare``, the MDE) and writes the file
(``bench docs metrics``, bench.project.docs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bench.evaluation.measures import CATALOGUE, FAMILIES
from bench.evaluation.measures.base import Measure, Scope

__all__ = ["catalogue_markdown", "generic_name"]

#: the denominator of each scope, in words
DENOMINATOR: dict[Scope, str] = {
    "answerable": "the group's answerable entries",
    "unanswerable": "the group's unanswerable entries",
    "all": "all of the group's entries",
}

HEAD = """# Metrics

<!-- Generated from the declarations in bench/evaluation/measures/ by `bench docs metrics`;
do not edit by hand (tests/evaluation/measures/test_docs.py fails when this page is stale). -->

Every metric of `reports/metrics/dev.json` (and of the acceptance's `test.json`) is a cell
`{"value", "n", "denominator", "ci95"}` per modality and `overall` (all entries pooled). `k` is
the cut-off `metrics.k` of params.yaml (dev.json `run.k`): a name with `@k` carries it, e.g.
`recall@10`.

* **denominator**: the annotated valid entries of the metric's scope (answerable, unanswerable
  or all), never a count of hits. Invalid entries are in no denominator.
* **n**: the entries of the denominator that got a system result. A failed query (timeout,
  crash) stays in the denominator and counts as the metric's worst case; a per-query value that
  is not defined counts 0.
* **value**: the metric's reducer over the group's per-query values (a mean over the
  denominator, a percentile, the AUROC); `null` when the denominator is 0, `null` with a
  `reason` when the metric cannot be measured. `ci95` is a seeded percentile bootstrap over
  clusters of entries asking the same question (`metrics.bootstrap_resamples`,
  `metrics.bootstrap_seed`; bench/evaluation/stats/clusters.py), and `clusters` how many
  clusters it rests on.

Roles: **verdict**, a column of the verdict matrix of reports/dev.md and dev.html, marked
against its bar when it has one; **gate**, gated by `bench gate` (primary: declared `primary`)
or reported by it;
**leaderboard**, a column of `bench leaderboard`; **compare**, tested by `bench compare`;
**MDE**, its minimum detectable effect is in dev.json `mde`. A metric with none of these is a
**diagnostic**: reported, never judged. docs/measuring.md explains how the metrics are read.
"""

TAIL = """## Adding a measure

Declare it (keyword arguments only) in its family's `FAMILY` in bench/evaluation/measures/:
name, column (when it differs from the name), scope, reducer, direction, `description`,
`unit`, and where they apply `cutoff`, `bar`, `heading`, `compared`, `unmeasurable`,
`abstained_nothing` (scored on what an answer handed over), `primary` (gated by `bench gate`),
`ranks` (the one objective `bench leaderboard` ranks by) and `in_objective` (a part of it).
Fill its column in the family's computation (a new family: a module with
its `FAMILY`, listed in `FAMILIES` of bench/evaluation/measures/__init__.py), test it in
tests/evaluation/measures/, then run `bench docs metrics` to rewrite this page.
"""


def generic_name(m: Measure) -> str:
    """The measure's dev.json name with the cut-off written ``@k``."""
    return f"{m.name}@k" if m.cutoff else m.name


def _bar(m: Measure, notes: Mapping[str, str]) -> str:
    if m.bar is None:
        return "none: reported, not judged" + (f"; {notes[m.name]}" if m.name in notes else "")
    text = f"{m.bar.direction.replace('>=', '≥').replace('<=', '≤')} {m.bar.value:.2f} (the spec's)"
    return f"{text}; {notes[m.name]}" if m.name in notes else text


def _role(m: Measure, roles: Mapping[str, Sequence[str]]) -> str:
    return ", ".join(roles.get(m.name, ())) or "diagnostic"


def _row(m: Measure, roles: Mapping[str, Sequence[str]]) -> str:
    direction = "higher" if m.higher_is_better else "lower"
    bar = "—" if m.bar is None else f"{m.bar.direction.replace('>=', '≥').replace('<=', '≤')} {m.bar.value:.2f}"
    return (f"| [`{generic_name(m)}`](#{_anchor(m)}) | {m.family} | {m.unit} | {m.scope} | {direction} | {bar} | "
            f"{_role(m, roles)} |")


def _anchor(m: Measure) -> str:
    """GitHub's anchor of the measure's heading."""
    return "".join(c for c in generic_name(m).lower() if c.isalnum() or c in "-_")


def _entry(m: Measure, roles: Mapping[str, Sequence[str]], notes: Mapping[str, str]) -> list[str]:
    phase = next(f.phase for f in FAMILIES if f.name == m.family)
    column = m.column + ("@k" if m.cutoff else "")
    heading = "" if m.heading is None else f"verdict (column “{m.heading}{'@k' if m.cutoff else ''}”)"
    role = ", ".join(heading if r == "verdict" and heading else r for r in roles.get(m.name, ())) or "diagnostic"
    rows = [
        ("unit", m.unit),
        ("denominator", DENOMINATOR[m.scope]),
        ("worst case", m.reducer.worst_case),
        ("direction", "higher is better" if m.higher_is_better else "lower is better"),
        ("bar", _bar(m, notes)),
        ("role", role),
        ("per-query column", f"`{column}` (family `{m.family}`, phase `{phase}`)"),
    ]
    if m.abstained_nothing:
        rows.append(("abstention", "scored on what was handed over: an answer that abstained scores what the empty answer scores"))
    if m.ranks:
        rows.append(("objective", "the one declared objective: `bench leaderboard` ranks runs by it and draws its frontier on it"))
    if m.in_objective:
        rows.append(("objective", f"a part of the objective: it scores the objective's {m.scope} entries"))
    return [f"## {generic_name(m)}", "", m.description, "", "| | |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows), ""]


def catalogue_markdown(roles: Mapping[str, Sequence[str]], notes: Mapping[str, str]) -> str:
    """docs/metrics.md: the summary table and one entry per measure, in report order.

    ``roles``: measure (catalogue name, cut-off not filled in) -> its roles (verdict, gate,
    ...); ``notes``: measure -> what its bar's verdict cell may read instead of "met" (a measure
    without a bar: what the reports' tables may say beside its value)."""
    lines = [HEAD, "| metric | family | unit | denominator | better | bar | role |", "|---|---|---|---|---|---|---|"]
    lines += [_row(m, roles) for m in CATALOGUE]
    lines.append("")
    for m in CATALOGUE:
        lines += _entry(m, roles, notes)
    return "\n".join(lines) + "\n" + TAIL
