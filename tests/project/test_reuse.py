"""bench/project/reuse.py: the evaluate stage's outputs reused by content.

The key holds every input file, every param the stage reads and of params ``chunking``
only the strategies; the end-to-end case changes a chunking option that leaves LoCoMo's
atoms as they are (`window_turns` under the `turn` strategy) and compares the reused
outputs byte for byte with an evaluation computed afresh, reuse off."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from bench.memo import Memo
from bench.project.layout import DEV_METRICS, HERE, MEMO_DIR, Layout
from bench.project.reuse import evaluate_inputs, evaluate_key, with_chunking
from bench.project.selection import config
from tests.project_copy import clone_project, project_env, run


def _layout(tmp_path: Path) -> Layout:
    layout = Layout(tmp_path)
    layout.runs.mkdir(parents=True)
    (layout.runs / "part.txt").write_text(layout.runs.name)
    (layout.runs / "system.json").write_text(json.dumps({"name": "bm25", "latency": {"p50_ms": 0.3}, "run_id": "a", "run_s": 1.0}))
    for path in evaluate_inputs(layout):
        if path.parent == layout.runs:
            continue
        if path.suffix:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}\n")
        else:
            path.mkdir(parents=True, exist_ok=True)
            (path / "part.txt").write_text(path.name)
    return layout


def test_the_key_holds_inputs_params_and_strategies_but_not_chunking_options(tmp_path: Path) -> None:
    layout, memo, cfg = _layout(tmp_path), Memo(None), config(HERE)
    script = tmp_path / "stage.py"
    script.write_text("# the stage\n")
    key = evaluate_key(memo, cfg, layout, script)
    conv = cfg.chunking_written["conversation"]
    options = dataclasses.replace(cfg, chunking_written={**cfg.chunking_written, "conversation": {**conv, "window_turns": 9}})
    assert evaluate_key(memo, options, layout, script) == key  # recorded only: dev.json's run.chunking (with_chunking)
    strategy = dataclasses.replace(cfg, chunking_written={**cfg.chunking_written, "conversation": {**conv, "strategy": "session"}})
    metrics = dataclasses.replace(cfg, metrics=dataclasses.replace(cfg.metrics, k=cfg.metrics.k - 1))
    depth = dataclasses.replace(cfg, system=dataclasses.replace(cfg.system, depth=cfg.system.depth + 1))
    assert len({key} | {evaluate_key(memo, c, layout, script) for c in (strategy, metrics, depth)}) == 4
    (layout.runs / "part.txt").write_text("another run")  # any input file: a new key
    assert evaluate_key(memo, cfg, layout, script) != key
    (layout.runs / "part.txt").write_text(layout.runs.name)
    assert evaluate_key(memo, cfg, layout, script) == key
    # the run's record: how this retrieve went (its id, its time) is no input; what dev.json shows is
    (layout.runs / "system.json").write_text(json.dumps({"name": "bm25", "latency": {"p50_ms": 0.3}, "run_id": "b", "run_s": 2.5}))
    assert evaluate_key(memo, cfg, layout, script) == key
    (layout.runs / "system.json").write_text(json.dumps({"name": "bm25", "latency": {"p50_ms": 0.4}, "run_id": "a", "run_s": 1.0}))
    assert evaluate_key(memo, cfg, layout, script) != key
    (layout.runs / "system.json").write_text(json.dumps({"name": "bm25", "latency": {"p50_ms": 0.3}, "run_id": "a", "run_s": 1.0}))
    script.write_text("# the stage, edited\n")
    assert evaluate_key(memo, cfg, layout, script) != key


def test_with_chunking_sets_only_the_recorded_chunking() -> None:
    doc = {"run": {"system": "bm25", "chunking": {"conversation": {"strategy": "turn", "window_turns": 5}}, "k": 10}, "overall": {}}
    stored = {DEV_METRICS: json.dumps(doc).encode(), "reports/dev.md": b"# report\n"}
    out = with_chunking(stored, {"conversation": {"strategy": "turn", "window_turns": 6}})
    assert out["reports/dev.md"] == b"# report\n"
    assert out[DEV_METRICS] == {"run": {"system": "bm25", "chunking": {"conversation": {"strategy": "turn", "window_turns": 6}}, "k": 10},
                                "overall": {}}
    assert list(out[DEV_METRICS]["run"]) == ["system", "chunking", "k"]  # the key keeps its place in dev.json


OUTPUTS = ["reports/metrics/dev.json", "reports/dev.md", "reports/dev.html", "reports/per_query/dev.parquet", "data/eval/per_query.parquet",
           "reports/plots/recall_at_k.csv", "reports/plots/latency.csv", "reports/plots/threshold.csv", "reports/plots/precision_coverage.csv"]


def _set_window_turns(work: Path, value: int) -> None:
    params = yaml.safe_load((work / "params.yaml").read_text())
    assert params["chunking"]["conversation"]["strategy"] == "turn"  # window_turns then changes no atom
    params["chunking"]["conversation"]["window_turns"] = value
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.mark.e2e
def test_a_chunking_option_that_changes_no_atom_reuses_the_evaluation_byte_for_byte(locomo_reproduced: Path, tmp_path: Path) -> None:
    work = clone_project(locomo_reproduced, tmp_path / "project")  # .dvc/tmp is not cloned: its memo starts empty
    env = project_env(tmp_path / "site-cache")
    _set_window_turns(work, 6)
    first = run(["dvc", "repro"], work, env)
    assert "Running stage 'evaluate'" in first.stdout and "outputs reused" not in first.stderr  # computed, then stored
    assert "Running stage 'retrieve'" not in first.stdout  # the same atoms: the run stays as it was
    _set_window_turns(work, 7)
    second = run(["dvc", "repro"], work, env)
    assert "Running stage 'evaluate'" in second.stdout and "its outputs reused" in second.stderr
    assert run(["dvc", "status"], work, env).stdout.strip() == "Data and pipelines are up to date."
    reused = {name: (work / name).read_bytes() for name in OUTPUTS}
    assert json.loads(reused[DEV_METRICS])["run"]["chunking"]["conversation"]["window_turns"] == 7
    fresh = run(["python", "-m", "stages.evaluate"], work, {**env, "BENCH_MEMO_DIR": "off", "PYTHONPATH": str(work)})
    assert "outputs reused" not in fresh.stderr
    assert [name for name in OUTPUTS if (work / name).read_bytes() != reused[name]] == []


def _params(work: Path, **changes: dict) -> None:
    params = yaml.safe_load((work / "params.yaml").read_text())
    for block, values in changes.items():
        params[block] = {**params[block], **values} if block != "chunking" else {
            **params[block], **{m: {**params[block][m], **v} for m, v in values.items()}}
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.mark.e2e
def test_a_conversation_change_reuses_the_pdf_answers_and_columns_and_equals_a_cold_run(reproduced: Path, tmp_path: Path) -> None:
    """Issue 50 through the stages, MMLongBench-Doc and LoCoMo, bm25-scoped: after the conversation
    atoms are rewritten, retrieve sends only the conversation queries (the pdf answers and their
    latency are the first run's) and evaluate computes only their per-query columns; dev.json
    (latency apart), the per-query table (latency_ms apart), dev.run and dev.qrels equal those of
    the same stages forced with reuse off.

    The first run is the session's reproduced one: its memo (every answer and column its cold
    `dvc repro` computed and stored) is copied into the clone, whose own .dvc/tmp is not cloned,
    instead of computing them again with retrieve and evaluate forced."""
    import shutil

    from benchmarks.case_loop import differences, keep

    work = clone_project(reproduced, tmp_path / "project")
    shutil.copytree(reproduced / MEMO_DIR, work / MEMO_DIR)  # copied, not linked: the clone's runs add to it
    env = project_env(tmp_path / "site-cache")
    _params(work, system={"name": "bm25-scoped"})  # the default as committed; said, so the test holds if it changes
    run(["dvc", "repro"], work, env)  # nothing to run while it is the default (a changed default: its run is computed and stored)
    first = json.loads((work / "data" / "runs" / "system.json").read_text())
    _params(work, chunking={"conversation": {"strategy": "window"}})
    out = run(["dvc", "repro"], work, env)
    record = json.loads((work / "data" / "runs" / "system.json").read_text())
    entries = [json.loads(line) for line in (work / "data" / "sets" / "dev.jsonl").read_text().splitlines() if line.strip()]
    n_pdf = sum(e["modality"] == "pdf" for e in entries)
    assert record["reused_queries"] == n_pdf > 0 and record["parts_built"] == ["conversation"]
    assert record["latency_measured_in"] == {first["run_id"]: n_pdf, record["run_id"]: len(entries) - n_pdf}
    assert f"per-query columns of {n_pdf} of {len(entries)} queries reused" in out.stderr
    warm = keep(work, tmp_path / "warm")
    run(["dvc", "repro", "--force", "--single-item", "chunk", "retrieve", "evaluate"], work, {**env, "BENCH_MEMO_DIR": "off"})
    assert differences(warm, work) == []
