"""The minimum detectable effect tables (dev.md, dev.html, the leaderboard) read smallest first
and have no open end: on the committed run's dev.json (ui_screenshot's two-run estimate falls
below its floor, image's values do not vary) and on made cells."""

from __future__ import annotations

import json
import re

import pytest

from bench.evaluation.stats.power import ALPHA, POWER, fewest, mde
from bench.reporting.html_report import mde_html
from bench.reporting.report import MDE_BOUND, MDE_FEW, MDE_FLOOR, mde_markdown, mde_range
from tests.conftest import ROOT

#: a range, then what it rests on: " (n in C)", n entries in C clusters
RANGE = re.compile(r"^(\d\.\d{3})(?:–(\d\.\d{3}))?([†‡§]?)(?: \(\d+ in \d+\))?$")


@pytest.fixture(scope="module")
def block() -> dict:
    return json.loads((ROOT / "reports" / "metrics" / "dev.json").read_text())["mde"]


def test_every_range_reads_smallest_first_and_is_closed(block):
    lines = mde_markdown(block)
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| modality")]
    assert len(rows) == len(block["by_modality"]) + 1
    for row in rows:
        for cell in row.strip("| ").split(" | ")[2:]:
            m = RANGE.match(cell)
            assert m, (row, cell)  # no "—" end, no reversed range
            lo, hi = float(m.group(1)), float(m.group(2) or m.group(1))
            assert lo <= hi, cell
    for group, cells in block["by_modality"].items():
        for cell in cells.values():
            got = mde_range(cell, block["alpha"], block["power"])
            if cell["independent"] is None:  # the values do not vary: the bound of a [0, 1] measure
                assert got == f"{cell['fewest']:.3f}–{mde(0.5, cell['n']):.3f}{MDE_BOUND}", group
            elif cell["independent"] < cell["fewest"]:  # nothing below fewest can be seen
                assert got == f"{cell['fewest']:.3f}{MDE_FLOOR}", group
            else:
                assert got == f"{cell['fewest']:.3f}–{cell['independent']:.3f}", group
    notes = [line for line in lines if line.startswith((MDE_FLOOR, MDE_BOUND, MDE_FEW))]
    used = [mark for mark in (MDE_FLOOR, MDE_BOUND, MDE_FEW) if mark in "".join(rows)]
    assert len(notes) == 1 and [m for m in (MDE_FLOOR, MDE_BOUND, MDE_FEW) if f"{m} " in notes[0]] == used  # each mark explained
    html = mde_html(block)
    assert "–—" not in html and "–</td>" not in html


def test_made_cells():
    n = 77
    low = {"n": n, "fewest": fewest(n), "independent": 0.05}
    assert mde_range(low, ALPHA, POWER) == f"{fewest(n):.3f}{MDE_FLOOR}"
    assert mde_range({"n": 4, "fewest": None, "independent": 0.3}, ALPHA, POWER) == f"—{MDE_FEW}"
    assert mde_range({"n": 190, "fewest": fewest(190), "independent": None}, ALPHA, POWER) == (
        f"{fewest(190):.3f}–{mde(0.5, 190, ALPHA, POWER):.3f}{MDE_BOUND}")
    assert mde_range(None, ALPHA, POWER) == "—"
