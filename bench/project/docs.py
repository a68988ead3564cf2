"""`bench docs metrics [--check]`: docs/metrics.md from the measures' declarations
(bench.evaluation.measures.docs), each measure's roles read from the modules that use it: the
verdict's columns, `bench gate`'s primary and reported measures, the leaderboard's, `bench
compare`'s, the MDE's; the verdict's rules for a bar that can be bought."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bench.project.layout import find_root

__all__ = ["METRICS_PAGE", "docs_command", "metrics_page"]

#: the generated page, relative to the project root
METRICS_PAGE = "docs/metrics.md"
_K = 10  # any cut-off: which measures a module reads does not depend on it


def metrics_page() -> str:
    """The text of docs/metrics.md (the measures imported here: `bench --help` imports no pandas)."""
    from bench.comparison.compare import compared
    from bench.comparison.gate import LATENCY, primary, reported
    from bench.comparison.leaderboard import board_measures
    from bench.evaluation.measures import CATALOGUE
    from bench.evaluation.measures.base import Measure
    from bench.evaluation.measures.docs import catalogue_markdown
    from bench.evaluation.stats.power import mde_measures
    from bench.reporting.compare_page import verdict_measures
    from bench.reporting.verdict import RULES

    base = {m.at(_K).name: m.name for m in CATALOGUE}
    roles: dict[str, list[str]] = {}
    readers: list[tuple[str, list[Measure]]] = [
        ("verdict", verdict_measures(_K)), ("gate (primary)", primary(_K)), ("gate (reported)", reported(_K)),
        ("gate (latency check)", [m for m in CATALOGUE if m.column == "latency_ms" and m.reducer.statistic in {p for p, _ in LATENCY}]),
        ("leaderboard", board_measures(_K)), ("compare", compared(_K)), ("MDE", mde_measures(_K))]
    for role, read in readers:
        for m in read:
            roles.setdefault(base[m.name], []).append(role)
    notes = {rule.measure: f"the {'verdict' if rule.over is None else 'report'} applies its rule: {rule.why}" for rule in RULES}
    return catalogue_markdown(roles, notes)


@click.group("docs")
def docs_command() -> None:
    """Pages generated from the code."""


@docs_command.command("metrics")
@click.option("--check", is_flag=True, help="only check that docs/metrics.md is current (exit 1 when it is not)")
def metrics(check: bool) -> None:
    """Write docs/metrics.md from the measures' declarations (bench/evaluation/measures/)."""
    from bench.evaluation.measures import CATALOGUE
    from bench.io import write_text

    path = Path(find_root()) / METRICS_PAGE
    text = metrics_page()
    if check:
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            click.echo(f"{METRICS_PAGE} is stale: run `bench docs metrics` and commit it", err=True)
            sys.exit(1)
        click.echo(f"{METRICS_PAGE} is current")
        return
    write_text(path, text)
    click.echo(f"wrote {METRICS_PAGE} ({len(CATALOGUE)} measures)")
