"""bench.reporting.report.entries_table: human-labelled and derived unanswerables apart, against 15 %."""

from __future__ import annotations

import json
from pathlib import Path

from bench.reporting.report import entries_table

SETS = Path(__file__).resolve().parents[2] / "bench" / "sets"


def dev_entries(*keys: str) -> list[dict]:
    out = []
    for key in keys:
        with open(SETS / f"{key}.jsonl", encoding="utf-8") as fh:
            out += [e for e in map(json.loads, fh) if e["split"] == "dev"]
    return out


def row_of(lines: list[str], modality: str) -> list[str]:
    row = next(line for line in lines if line.startswith(f"| {modality} |"))
    return [c.strip() for c in row.strip("|").split("|")]


def test_committed_sets_counted_by_origin_marker():
    entries = dev_entries("locomo", "coco", "screenagent", "medvidqa", "tutorialvqa")
    lines = entries_table(entries)
    conv = [e for e in entries if e["modality"] == "conversation"]
    n_conv_derived = sum("|derived:" in e["origin"]["item"] for e in conv)
    n_conv_human = sum(e["unanswerable"] for e in conv) - n_conv_derived
    # LoCoMo's adversarial questions are human-labelled; its mid moment's temporally unanswerable ones are derived
    assert n_conv_human > 0 and n_conv_derived > 0
    assert row_of(lines, "conversation")[:4] == ["conversation", str(len(conv)), str(n_conv_human), str(n_conv_derived)]
    image = [e for e in entries if e["modality"] == "image"]
    derived = [e for e in image if "|derived:gold-later" in e["origin"]["item"]]
    assert derived and all(e["unanswerable"] for e in derived)
    cells = row_of(lines, "image")
    assert cells[:4] == ["image", str(len(image)), "0", str(len(derived))]
    assert cells[4].endswith(f"({len(derived)}/{len(image)})") and cells[5] == "met"
    for modality in ("video", "ui_screenshot"):
        assert row_of(lines, modality)[2] == "0" and int(row_of(lines, modality)[3]) > 0
        assert row_of(lines, modality)[5] == "met"


def test_a_modality_below_target_says_so():
    entries = dev_entries("coco")
    answerable = [e for e in entries if not e["unanswerable"]]
    cells = row_of(entries_table(answerable), "image")
    assert cells[2:] == ["0", "0", f"0.0% (0/{len(answerable)})", "NOT met"]
