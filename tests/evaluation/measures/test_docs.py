"""docs/metrics.md is generated from the measures' declarations (`bench docs metrics`) and is
current; every metric of the committed reports/metrics/dev.json has its entry."""

from __future__ import annotations

import json

from click.testing import CliRunner

from bench.cli import cli
from bench.evaluation.measures import CATALOGUE
from bench.evaluation.measures.docs import generic_name
from bench.project.docs import METRICS_PAGE, metrics_page
from tests.conftest import ROOT


def test_docs_metrics_md_is_current() -> None:
    page = (ROOT / METRICS_PAGE).read_text(encoding="utf-8")
    assert page == metrics_page(), f"{METRICS_PAGE} is stale: run `bench docs metrics` and commit it"


def test_every_metric_of_the_committed_dev_json_has_an_entry() -> None:
    doc = json.loads((ROOT / "reports" / "metrics" / "dev.json").read_text(encoding="utf-8"))
    k = int(doc["run"]["k"])
    page = (ROOT / METRICS_PAGE).read_text(encoding="utf-8")
    keys = set(doc["overall"]).union(*(set(block) for block in doc["by_modality"].values()))
    declared = {m.at(k).name: m for m in CATALOGUE}
    assert keys == set(declared), keys ^ set(declared)
    for key in sorted(keys):
        m = declared[key]
        entry = page.split(f"\n## {generic_name(m)}\n", 1)
        assert len(entry) == 2, f"{key}: no entry in {METRICS_PAGE}"
        body = entry[1].split("\n## ", 1)[0]
        assert m.description in body and "| denominator |" in body and "| worst case |" in body and "| direction |" in body, key
        assert "| bar |" in body and "| role |" in body, key


def test_the_command_writes_and_checks_the_page(tmp_path, monkeypatch) -> None:
    (tmp_path / "params.yaml").write_text("{}\n", encoding="utf-8")
    (tmp_path / "bench").mkdir()
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    stale = runner.invoke(cli, ["docs", "metrics", "--check"])
    assert stale.exit_code == 1 and "run `bench docs metrics`" in stale.output
    wrote = runner.invoke(cli, ["docs", "metrics"])
    assert wrote.exit_code == 0 and (tmp_path / METRICS_PAGE).read_text(encoding="utf-8") == metrics_page()
    assert runner.invoke(cli, ["docs", "metrics", "--check"]).exit_code == 0
