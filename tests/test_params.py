"""params.yaml is checked against one schema before any stage touches an output."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import yaml

from bench.corpus_sources import datasets
from bench.io import NonFiniteError, write_json
from bench.modalities import modalities
from bench.params import ParamsError, check_params
from tests.conftest import ROOT
from tests.project_copy import copy_project, project_env

STRATEGIES = {m: mod.strategies for m, mod in modalities().items()}


def real() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))


def check(doc: dict) -> dict:
    return check_params(doc, STRATEGIES, set(datasets()))


def with_(path: str, value, doc: dict | None = None) -> dict:
    doc = copy.deepcopy(doc or real())
    *parents, leaf = path.split(".")
    node = doc
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value
    return doc


def refused(doc: dict) -> str:
    with pytest.raises(ParamsError) as err:
        check(doc)
    return str(err.value)


def test_the_committed_params_pass():
    assert check(real()) == real()


def test_nan_and_inf_refused():
    # YAML `.nan` / `.inf` parse to float nan / inf
    for text in (".nan", ".inf", "-.inf"):
        value = yaml.safe_load(text)
        assert refused(with_("metrics.calibration_recall", value)).startswith("params.yaml: metrics.calibration_recall: must be a finite number")


def test_misspelled_key_refused_with_the_close_one():
    doc = real()
    doc["chunking"]["pdf"]["stratgy"] = "window"
    msg = refused(doc)
    assert msg.startswith("params.yaml: chunking.pdf.stratgy: unknown key (did you mean 'strategy'?)")
    assert "\n" not in msg
    assert refused(with_("metrics.kk", 10)).startswith("params.yaml: metrics.kk: unknown key (did you mean 'k'?)")
    assert refused(with_("chunkin", {})).startswith("params.yaml: chunkin: unknown key (did you mean 'chunking'?)")


def test_k_beyond_depth_and_non_integer_k_refused():
    assert refused(with_("metrics.k", 500)) == (
        "params.yaml: metrics.k: 500 is more than system.depth (100): recall@k would count atoms never retrieved")
    assert refused(with_("metrics.k", 10.7)) == "params.yaml: metrics.k: must be a whole number, got 10.7"
    assert refused(with_("metrics.k", 0)) == "params.yaml: metrics.k: must be >= 1, got 0"
    assert refused(with_("metrics.k", True)).startswith("params.yaml: metrics.k: must be a whole number")
    assert check(with_("metrics.k", 100))["metrics"]["k"] == 100


def test_other_values_refused():
    cases = {
        "chunking.pdf.strategy": ("windw", "chunking.pdf.strategy: must be one of ['page', 'window', 'whole']"),
        "chunking.pdf.window_tokens": (150.5, "chunking.pdf.window_tokens: must be a whole number"),
        "chunking.conversation.overlap_turns": (5, "chunking.conversation.overlap_turns: must be smaller than window_turns (5)"),
        "chunking.video.window_seconds": (float("nan"), "chunking.video.window_seconds: must be a finite number"),
        "system.depth": (0, "system.depth: must be >= 1"),
        "system.sandbox": ("maybe", "system.sandbox: must be one of ['auto', 'required', 'off']"),
        "metrics.bootstrap_resamples": (-1, "metrics.bootstrap_resamples: must be >= 1"),
        "metrics.calibration_recall": (0.0, "metrics.calibration_recall: must be > 0"),
        "fetch.download": ("sometimes", "fetch.download: must be one of"),
        "executor.kind": ("ray", "executor.kind: must be one of ['local', 'dask']"),
        "executor.in_core_rows": (0, "executor.in_core_rows: must be >= 1"),
        "datasets": (["mmlongbench", "locomoo"], "datasets: unknown data set 'locomoo' (did you mean 'locomo'?)"),
    }
    for key, (value, message) in cases.items():
        assert refused(with_(key, value)).startswith(f"params.yaml: {message}"), key


def test_keys_other_engineers_add_are_known():
    doc = with_("metrics.calibration_recall", 0.9)
    doc = with_("system.sandbox", "auto", doc)
    doc = with_("executor", {"kind": "dask", "address": "tcp://127.0.0.1:8786", "workers": 2}, doc)
    doc = with_("local_datasets", [], doc)
    assert check(doc) is doc


def test_check_executor_fills_in_core_rows():
    """executor.in_core_rows: checked alone (not a DVC param), defaulted when absent."""
    from bench.params import IN_CORE_ROWS, check_executor

    assert check_executor(None) == {"kind": "local", "address": None, "workers": None, "in_core_rows": IN_CORE_ROWS}
    assert check_executor({"in_core_rows": 1000})["in_core_rows"] == 1000
    assert check_executor(real()["executor"])["in_core_rows"] == real()["executor"]["in_core_rows"]
    for bad, message in ((2.5, "must be a whole number"), (True, "must be a whole number"), (0, "must be >= 1")):
        with pytest.raises(ParamsError, match=rf"params.yaml: executor.in_core_rows: {message}"):
            check_executor({"in_core_rows": bad})


def test_strong_score_is_gone():
    assert "strong_score" in refused(with_("metrics.strong_score", 12.0))


def test_write_json_refuses_nan(tmp_path):
    target = tmp_path / "dev.json"
    target.write_text('{"old": 1}\n')
    with pytest.raises(NonFiniteError, match=r"dev.json: run.strong_score: not a finite number"):
        write_json(target, {"run": {"strong_score": float("nan")}})
    assert json.loads(target.read_text()) == {"old": 1}
    write_json(target, {"x": 1.5})
    assert json.loads(target.read_text()) == {"x": 1.5}


@pytest.mark.e2e
def test_stage_refuses_bad_params_before_touching_outputs(tmp_path):
    """A stage run by hand with a misspelled key: one line, exit 1, its outputs as they were."""
    work = copy_project(tmp_path / "p", datasets=["locomo"])
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["chunking"]["pdf"]["stratgy"] = "window"
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    dev_json = (work / "reports" / "metrics" / "dev.json").read_bytes()
    manifest = (work / "bench" / "corpus" / "manifest.jsonl").read_bytes()
    env = project_env(tmp_path / "site")
    env["PYTHONPATH"] = str(work)
    for stage in ("fetch", "validate", "evaluate"):
        proc = subprocess.run([sys.executable, "-m", f"stages.{stage}"], cwd=work, env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == 1, (stage, proc.stderr)
        assert proc.stderr.strip().splitlines() == [
            "error: params.yaml: chunking.pdf.stratgy: unknown key (did you mean 'strategy'?); known here: strategy, window_tokens, overlap_tokens"], stage
    assert (work / "reports" / "metrics" / "dev.json").read_bytes() == dev_json
    assert (work / "bench" / "corpus" / "manifest.jsonl").read_bytes() == manifest
    assert not (work / "data").exists()  # nothing created either
