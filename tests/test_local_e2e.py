"""End to end: six local data sets (one per modality, real mirrored files and real human
gold) run through `dvc repro` in a fresh project copy with no registered data set."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from tests.modalities.test_local import build_local_sets
from tests.project_copy import copy_project, keep_ocr_cache, project_env, run

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, ocr_cache: Path) -> tuple[Path, dict, dict[str, Path]]:
    base = tmp_path_factory.mktemp("local-e2e")
    folders = build_local_sets(base / "my-eval")
    # the session's OCR cache (keyed by content, engine and settings): an image OCR'd earlier in the run is a hit
    work = copy_project(base / "project", datasets=[], ocr_cache=ocr_cache)
    params = yaml.safe_load((work / "params.yaml").read_text())
    # relative to the project root, as a team would write them (one absolute, too)
    params["local_datasets"] = [f"../my-eval/{m}" for m in sorted(folders) if m != "code"] + [str(folders["code"])]
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = project_env(base / "site-cache")
    run(["git", "init", "-q"], work, env)
    run(["git", "add", "-A"], work, env)
    run(["git", "commit", "-q", "-m", "copy"], work, env)
    # each local set keeps one test entry: it enters the split lock only by a recorded freeze
    refused = run(["dvc", "repro"], work, env, ok=False)
    assert refused.returncode != 0 and "test entry not in bench/sets/splits.lock" in refused.stdout + refused.stderr
    out = run(["python", "-m", "bench.cli", "splits", "freeze", "--reason", "local data sets"], work, env).stdout
    assert '"added_to_test": 6' in out
    run(["dvc", "repro"], work, env)
    keep_ocr_cache(work, ocr_cache)
    return work, env, folders


def test_local_sets_in_the_reports(project):
    work, _, folders = project
    doc = json.loads((work / "reports/metrics/dev.json").read_text())
    assert set(doc["by_modality"]) == set(folders)
    dev = [json.loads(line) for line in (work / "data/sets/dev.jsonl").read_text().splitlines()]
    for modality, folder in folders.items():
        entries = [json.loads(line) for line in (folder / "set.jsonl").read_text().splitlines()]
        mine = [e for e in dev if e["modality"] == modality]
        assert len(mine) == sum(e["split"] == "dev" for e in entries) > 0
        cell = doc["by_modality"][modality]
        assert cell["recall@10"]["denominator"] == sum(not e["unanswerable"] for e in mine)
        assert cell["temporal_correctness"]["denominator"] == len(mine)
    # the conversation's gold turns are found by BM25 for some queries: the metric is not vacuous
    assert doc["by_modality"]["conversation"]["recall@10"]["value"] > 0
    # provenance: every local set.jsonl is cited with its sha256
    sets = doc["sha256"]["sets"]
    assert len(sets) == 6
    for path, sha in sets.items():
        assert sha == hashlib.sha256((work / path).resolve().read_bytes()).hexdigest()
    report = (work / "reports/dev.md").read_text()
    assert "my-eval/video/set.jsonl" in report


def test_manifest_holds_the_folders_files(project):
    work, _, folders = project
    rows = [json.loads(line) for line in (work / "bench/corpus/manifest.jsonl").read_text().splitlines()]
    assert {r["key"] for r in rows} == {"hb", "ui", "photos", "chat", "calls", "code"}
    assert all(r["status"] == "present" and r["revision"] == "2024.1" for r in rows)
    video = {r["path"]: r["sha256"] for r in rows if r["key"] == "calls"}
    for p, sha in video.items():
        assert sha == hashlib.sha256((folders["video"] / p).read_bytes()).hexdigest()
    assert not any(str(work.parent) in json.dumps(r) for r in rows)  # no machine paths


def test_a_changed_folder_reruns_fetch(project):
    work, env, folders = project
    assert "up to date" in run(["dvc", "status", "dvc.yaml"], work, env).stdout
    set_file = folders["video"] / "set.jsonl"
    entries = set_file.read_text().splitlines()
    set_file.write_text("\n".join(entries[:-2] + entries[-1:]) + "\n")  # a dev entry removed
    status = run(["dvc", "status", "dvc.yaml"], work, env).stdout
    assert "local@../my-eval/video" in status
    # the folder's stage, then up to the split (what the folder feeds): the stages after it read only
    # dev.jsonl, and the first `dvc repro` of the module ran them on these folders. (The local stages
    # declare no outs, so they are no ancestors of validate: they are named.)
    out = run(["dvc", "repro", "local@../my-eval/video", "validate"], work, env)
    text = out.stdout + out.stderr
    assert "Running stage 'local@../my-eval/video'" in text
    assert "Running stage 'fetch'" in text and "Running stage 'validate'" in text
    dev = [json.loads(line) for line in (work / "data/sets/dev.jsonl").read_text().splitlines()]
    assert sum(e["modality"] == "video" for e in dev) == sum(json.loads(e)["split"] == "dev" for e in entries) - 1
    # the folder's change is taken in: what is still to run is only what reads the new dev split
    stale = set(json.loads(run(["dvc", "status", "dvc.yaml", "--json"], work, env).stdout))
    assert stale and not {s for s in stale if s.startswith(("local@", "fetch", "extract@", "chunk", "validate"))}, stale
    assert {"retrieve", "evaluate"} <= stale, stale


def test_bad_local_folder_one_line(project, tmp_path):
    work, env, folders = project
    cfg = folders["image"] / "dataset.yaml"
    before = cfg.read_text()
    cfg.write_text(before.replace("gold_made_by: human", "gold_made_by: model"))
    try:
        out = run(["dvc", "repro"], work, env, ok=False)
    finally:
        cfg.write_text(before)
    assert out.returncode != 0
    line = next(x for x in (out.stdout + out.stderr).splitlines() if x.startswith("error: "))
    assert "my-eval/image/dataset.yaml: field gold_made_by is 'model'" in line
