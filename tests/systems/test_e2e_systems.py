"""End to end: one `dvc repro` evaluates a built-in system, the example command system,
an HTTP system started here, and a system that serves its own atoms; a built-in
system's metrics do not depend on the adapter that runs it.

The module's project is the session's reproduced one (MMLongBench and LoCoMo, whole corpus: every
atom is served) with its dev questions cut to one LoCoMo conversation and six MMLongBench documents
(tests/systems/small_sets.py; about 180 queries instead of 2,463) and 20 bootstrap resamples (no test
here reads an interval): every repro pays for these queries, not for the whole dev split."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bench.ingest.atom_codes import served_ids, with_atom_ids
from bench.ingest.partitions import read_modalities
from tests.conftest import MIRROR
from tests.project_copy import clone_project, project_env, run
from tests.systems.small_sets import cut_dev, dev_groups

pytestmark = pytest.mark.e2e

def sh(args: list[str], cwd: Path, env: dict) -> str:
    proc = run(args, cwd, env)
    return proc.stdout + proc.stderr


def set_system(work: Path, **system) -> None:
    """params.yaml's system block: the committed defaults of every key a test of this module sets, then
    `system` (so a test never inherits another's concurrency or sandbox, whatever order they run in)."""
    params = yaml.safe_load((work / "params.yaml").read_text())
    defaults = {"adapter": "builtin", "entry": None, "atoms": None, "name": "bm25", "concurrency": 1, "sandbox": "auto"}
    params["system"] = {**params["system"], **defaults, **system}
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


CONTRACT = ("recall@10", "atom_recall@10", "mrr", "ndcg@10", "false_recall", "temporal_correctness", "holder_correctness")


def metrics(work: Path) -> dict:
    """The contract's metric cells (value, n, denominator) per modality; latency differs by nature."""
    doc = json.loads((work / "reports/metrics/dev.json").read_text())
    return {
        m: {k: {f: block[k][f] for f in ("value", "n", "denominator")} for k in CONTRACT}
        for m, block in doc["by_modality"].items()
    }


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, reproduced: Path) -> tuple[Path, dict, dict]:
    """A clone of the session's reproduced project with this module's system, its dev questions cut to
    one LoCoMo conversation and six MMLongBench documents (the first by name) and 20 bootstrap
    resamples: validate and the stages from retrieve on re-run."""
    work = clone_project(reproduced, tmp_path_factory.mktemp("e2e-systems") / "project")
    conversation = dev_groups(work, "locomo")[0]
    documents = set(dev_groups(work, "mmlongbench")[:6])
    assert cut_dev(work, "locomo", lambda g: g == conversation) > 0 and cut_dev(work, "mmlongbench", documents.__contains__) > 0
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["metrics"]["bootstrap_resamples"] = 20  # the tests compare values, n and denominators, never interval widths
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    set_system(work)
    env = project_env(work.parent / "site-cache")
    sh(["dvc", "repro"], work, env)
    return work, env, metrics(work)


def test_builtin_run_reports_adapter_and_failures(project):
    work, _, base = project
    doc = json.loads((work / "reports/metrics/dev.json").read_text())
    assert doc["run"]["adapter"] == "builtin" and doc["run"]["warm"] and doc["run"]["concurrency"] == 1
    assert doc["run"]["failures_by_modality"]["pdf"]["failed"] == 0
    report = (work / "reports/dev.md").read_text()
    assert "## System under test" in report and "| modality | queries | failed | timeout | crash |" in report
    assert base["conversation"]["recall@10"]["n"] > 0 and base["pdf"]["recall@10"]["n"] > 0  # both modalities kept questions
    info = json.loads((work / "data/runs/system.json").read_text())
    assert info["isolation"] == "none"  # in-process: not sandboxed, and says so
    assert info["abstains"] is True  # bm25 declares its abstention policy (bench/systems/builtin/bm25.py)


def test_same_metrics_whichever_adapter_runs_bm25(project):
    """bm25 in process, as a sandboxed command (two queries in flight) and over HTTP: the contract's cells
    equal the built-in run's, on the module's cut dev questions (each over the whole served corpus)."""
    work, env, base = project
    set_system(work, adapter="python", entry="bench.systems.builtin.bm25:bm25")
    sh(["dvc", "repro"], work, env)
    assert metrics(work) == base
    set_system(work, adapter="command", entry="{python} -m bench.systems.serve bm25 --atoms {atoms}", concurrency=2)
    sh(["dvc", "repro"], work, env)
    assert metrics(work) == base  # sandboxed (the bench package visible, its sets hidden): same numbers
    info = json.loads((work / "data/runs/system.json").read_text())
    assert info["adapter"] == "command" and info["isolation"] in ("bwrap", "landlock")  # auto never runs a command system unisolated
    assert info["abstains"] is True  # declared in serve's ready line
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.systems.serve", "bm25", "--atoms", "data/served", "--http", "127.0.0.1:0"],
        cwd=work, env=env, stdout=subprocess.PIPE, text=True,
    )
    try:
        url = json.loads(server.stdout.readline())["url"]
        set_system(work, adapter="http", entry=url)
        sh(["dvc", "repro"], work, env)
        assert metrics(work) == base
        assert json.loads((work / "reports/metrics/dev.json").read_text())["run"]["adapter"] == "http"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_example_command_system(project):
    work, env, _ = project
    set_system(work, name="keyword-example", adapter="command", entry="{python} examples/keyword_system.py {atoms} --scoped")
    out = sh(["dvc", "repro"], work, env)
    assert "keyword-example (command)" in out
    doc = json.loads((work / "reports/metrics/dev.json").read_text())
    for block in doc["by_modality"].values():
        assert block["recall@10"]["n"] == block["recall@10"]["denominator"] > 0
        assert block["holder_correctness"]["value"] == 1.0 and block["temporal_correctness"]["value"] == 1.0  # it scopes
    assert doc["run"]["system"] == "keyword-example"


def test_system_serving_its_own_atoms(project):
    """Atoms handed over by the system (ids of its own) are what gold resolves against."""
    work, env, base = project
    from bench.systems.atoms import contract_rows

    served = read_modalities(work / "data/atoms")
    rows = [{**r, "atom_id": "mine:" + r["atom_id"]} for r in contract_rows(served)]
    (work / "my_atoms.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    set_system(work, atoms="my_atoms.jsonl")
    sh(["dvc", "repro"], work, env)
    assert metrics(work) == base  # same extents, other ids: same metrics
    served_now = read_modalities(work / "data/served")
    gold = with_atom_ids(pd.read_parquet(work / "data/resolved/gold.parquet"), served_ids(served_now))
    assert len(gold) and gold["atom_id"].str.startswith("mine:").all()
    assert json.loads((work / "data/served/served.json").read_text())["source"] == "system"
    (work / "my_atoms.jsonl").write_text(json.dumps({**rows[0], "observed_at": "2023-01-01"}) + "\n")
    proc = subprocess.run(["dvc", "repro", "-f", "retrieve", "--single-item"], cwd=work, env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and "my_atoms.jsonl:1: observed_at: must be ISO 8601 time with a timezone" in proc.stderr + proc.stdout
    # issue probe: atoms that claim to be observed in 1970 (so never "future") are refused, naming the row
    (work / "my_atoms.jsonl").write_text("".join(json.dumps({**r, "observed_at": "1970-01-01T00:00:00+00:00"}) + "\n" for r in rows))
    proc = subprocess.run([sys.executable, "-m", "stages.retrieve"], cwd=work, env=env, capture_output=True, text=True)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 1 and len(errors) == 1
    assert "my_atoms.jsonl:1: observed_at: 1970-01-01T00:00:00+00:00 is before its source" in errors[0] and "more row(s)" in errors[0]


def test_off_is_reported_as_not_isolated_and_a_refused_retrieve_keeps_the_run(project):
    """`sandbox: off` (bare YAML off) runs and the report's heading says not isolated; then an entry that
    names the mirror is refused with one line, and DVC keeps the previous run (persist outputs)."""
    work, env, _ = project
    entry = "{python} examples/keyword_system.py {atoms} --scoped"
    set_system(work, name="keyword-example", adapter="command", entry=entry)
    text = (work / "params.yaml").read_text()
    (work / "params.yaml").write_text(text.replace("sandbox: auto", "sandbox: off"))
    assert yaml.safe_load((work / "params.yaml").read_text())["system"]["sandbox"] is False
    sh(["dvc", "repro"], work, env)
    report = (work / "reports/dev.md").read_text()
    assert "**Isolation: process** — NOT ISOLATED (system.sandbox: off)" in report
    assert json.loads((work / "reports/metrics/dev.json").read_text())["run"]["isolation"] == "process"
    kept = {p: (work / p).read_bytes() for p in ("data/runs/dev.parquet", "data/runs/system.json", "reports/runs/dev.run")}
    set_system(work, name="keyword-example", adapter="command", entry=f"{entry} {MIRROR / 'locomo'}", sandbox="auto")
    proc = subprocess.run(["dvc", "repro"], cwd=work, env=env, capture_output=True, text=True)
    errors = [line for line in (proc.stderr + proc.stdout).splitlines() if line.startswith("error: system.entry")]
    assert proc.returncode != 0 and errors == [
        f"error: system.entry: '{MIRROR / 'locomo'}' is inside (or holds) the mirror root {MIRROR.resolve()}, "
        "which holds gold a system under test may not see"]
    assert {p: (work / p).read_bytes() for p in kept} == kept


def test_a_replayed_memory_system_through_the_stages(project):
    """A sandboxed command system asking for replay (no {atoms}) and answering with memory hits: the stages
    record the stream and ingest time, resolve the memories by provenance, report them, and name them in the TREC files."""
    work, env, _ = project
    set_system(work, name="replay-recorder", adapter="command", entry="{python} tests/systems/replay_fake.py")
    sh(["dvc", "repro"], work, env)
    info = json.loads((work / "data/runs/system.json").read_text())
    assert info["replay"] and not info["given_atoms"] and info["events"] > 0 and info["isolation"] in ("bwrap", "landlock")
    doc = json.loads((work / "reports/metrics/dev.json").read_text())
    assert set(doc["run"]["replay"]["ingest_ms"]) >= {"overall", "conversation", "pdf"} and doc["run"]["warmup_queries"] == 0
    assert doc["memories"]["overall"]["memory_hits"] == info["memory_hits"] > 0
    for block in doc["by_modality"].values():
        assert block["temporal_correctness"]["value"] == block["holder_correctness"]["value"] == 1.0  # it cites only what it was sent
    report = (work / "reports/dev.md").read_text()
    assert "## Replay" in report and "temporal correctness is 1.0 by construction" in report and "## Memory hits" in report
    run_ids = {line.split()[2] for line in (work / "reports/runs/dev.run").read_text().splitlines()}
    qrels_ids = {line.split()[2] for line in (work / "reports/runs/dev.qrels").read_text().splitlines()}
    assert run_ids and all(x.startswith("m-e") for x in run_ids | qrels_ids)  # a replayed run's gold is its memories
    assert (work / "data/memories/replay.json").is_file() and len(pd.read_parquet(work / "data/resolved/memories.parquet")) > 0
