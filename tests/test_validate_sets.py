"""`bench/validate_sets.py FILE...`, the validator the spec names (../shared/spec/schema-b2.en.md),
run as the spec says (a file, from the project folder), rejects every bad-set probe exactly as
`bench validate` does: the same table of failures, the same exit code; a good set passes both.

The probes are real dev entries of LoCoMo and MMLongBench-Doc, each broken in one way, in the
session's reproduced project (its manifest and segments); nothing there is written."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.cli import cli
from tests.conftest import ROOT, write_set

pytestmark = pytest.mark.e2e


def dev(key: str) -> list[dict]:
    rows = [json.loads(line) for line in (ROOT / "bench" / "sets" / f"{key}.jsonl").read_text(encoding="utf-8").splitlines()]
    return [e for e in rows if e["split"] == "dev"]


def probes() -> dict[str, list]:
    """name -> the entries (or raw lines) of one bad set file."""
    conv = next(e for e in dev("locomo") if not e["unanswerable"])
    page = next(e for e in dev("mmlongbench") if not e["unanswerable"] and len(e["gold"]) == 1)
    none = next(e for e in dev("locomo") if e["unanswerable"])

    def edit(entry: dict, change) -> dict:
        out = copy.deepcopy(entry)
        change(out)
        return out

    return {
        "page-beyond-document": [edit(page, lambda e: e["gold"][0]["region"].update(page=9999))],
        "turn-not-in-conversation": [edit(conv, lambda e: e["gold"][0]["region"].update(turn=10_000))],
        "gold-on-unanswerable": [edit(none, lambda e: e.update(gold=copy.deepcopy(conv["gold"])))],
        "answer-on-unanswerable": [edit(none, lambda e: e.update(answer="yes"))],
        "no-gold-on-answerable": [edit(conv, lambda e: e.update(gold=[]))],
        "as-of-without-timezone": [edit(conv, lambda e: e.update(as_of="2023-05-08T14:56:00"))],
        "unknown-modality": [edit(conv, lambda e: e.update(modality="smell"))],
        "missing-question": [edit(conv, lambda e: e.pop("question"))],
        "unknown-split": [edit(conv, lambda e: e.update(split="train"))],
        "region-of-another-shape": [edit(page, lambda e: e["gold"][0].update(region={"pages": [1, 2]}))],
        "duplicate-query-id": [conv, conv],
        "not-json": ['{"query_id": "locomo:broken", "question": '],
    }


def test_the_specs_validator_is_bench_validate(reproduced: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = [str(write_set(tmp_path / f"{name}.jsonl", entries)) for name, entries in probes().items()]
    spec = subprocess.run([sys.executable, "bench/validate_sets.py", *files], cwd=reproduced, capture_output=True, text=True)
    monkeypatch.chdir(reproduced)
    ours = CliRunner().invoke(cli, ["validate", *files])
    assert spec.returncode == ours.exit_code == 1, spec.stderr + ours.output
    assert spec.stdout == ours.stdout and spec.stdout.strip()  # the same table, row for row
    assert spec.stderr.strip().splitlines()[-1] == ours.stderr.strip().splitlines()[-1]  # "N problems in M file(s)"
    assert spec.stderr.strip().endswith(f" problems in {len(files)} file(s)")  # every probe file is rejected

    good = str(write_set(tmp_path / "good.jsonl", [dev("locomo")[0]]))
    spec_ok = subprocess.run([sys.executable, "bench/validate_sets.py", good], cwd=reproduced, capture_output=True, text=True)
    ours_ok = CliRunner().invoke(cli, ["validate", good])
    assert spec_ok.returncode == ours_ok.exit_code == 0 and spec_ok.stdout == ours_ok.stdout and spec_ok.stdout.startswith("ok: 1 entries")
    assert subprocess.run([sys.executable, "-m", "bench.validate_sets", good], cwd=reproduced, capture_output=True, text=True).stdout == spec_ok.stdout
