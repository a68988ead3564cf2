"""End to end on the real LoCoMo mirror: no metric depends on a system's score scale.

A real external system (examples/keyword_system.py, run through the command adapter
by a small wrapper that rescales its scores) is evaluated three times: scores x1,
x0.001 and x1000 + 1. Every metric in dev.json must be identical; only latency (wall
clock) and the recorded calibration threshold (in the system's own score units, so it
must scale exactly with the scores) may differ. A fourth run abstains on every query:
false recall 0, abstention rate 1.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from tests.project_copy import clone_project, project_env, run

pytestmark = pytest.mark.e2e

#: a real external command system: examples/keyword_system.py with its scores rescaled
WRAPPER = '''\
import importlib.util, json, sys
# the system's own code is named on its command line: the sandbox shows it (and only it)
code, path, scale, shift, *flags = sys.argv[1:]
spec = importlib.util.spec_from_file_location("keyword_system", code)
ks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ks)
atoms, index = ks.load(path)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    if line.strip():
        request = json.loads(line)
        hits = [{"atom_id": h["atom_id"], "score": h["score"] * float(scale) + float(shift)}
                for h in ks.search(request, atoms, index, "--scoped" in flags)]
        answer = {"id": request["id"], "hits": hits}
        if "--abstain" in flags:
            answer["abstain"] = True
        print(json.dumps(answer), flush=True)
'''


def _evaluate(work: Path, env: dict, args: str) -> dict:
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["system"].update(name="keyword-scaled", adapter="command", entry=f"{{python}} scaled_keyword.py examples/keyword_system.py {{atoms}} {args}", warmup=2,
                             code=["scaled_keyword.py", "examples/keyword_system.py"])  # both files the wrapper runs: declared
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run(["dvc", "repro"], work, env)
    return json.loads((work / "reports/metrics/dev.json").read_text())


def _without_latency(doc: dict) -> dict:
    out = copy.deepcopy(doc)
    for block in [*out["by_modality"].values(), out["overall"]]:
        block.pop("latency_p50_ms")
        block.pop("latency_p95_ms")
    out["run"].pop("latency")
    out["run"].pop("latency_measured_in", None)  # which run measured each latency (run ids)
    for rule in out["run"]["false_recall_rule"].values():
        rule.pop("threshold_score", None)
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, locomo_reproduced: Path) -> tuple[Path, dict]:
    """A clone of the session's reproduced LoCoMo project (conftest.locomo_reproduced, 200
    bootstrap resamples) with the wrapper: each evaluation re-runs retrieve onwards only."""
    work = clone_project(locomo_reproduced, tmp_path_factory.mktemp("false-recall") / "project")
    (work / "scaled_keyword.py").write_text(WRAPPER)
    return work, project_env(work.parent / "site-cache")


def test_scaling_or_shifting_scores_changes_no_metric(project):
    work, env = project
    base = _evaluate(work, env, "1 0")
    conv = base["by_modality"]["conversation"]
    rule = base["run"]["false_recall_rule"]["conversation"]
    # the keyword system never abstains: its false recall is read at a threshold calibrated on dev
    assert rule["rule"] == "calibrated" and rule["unanswerable"] == conv["false_recall"]["denominator"] > 0
    assert rule["kept"] >= 0.9 * rule["answerable"]
    assert conv["false_recall"]["value"] is not None and 0.0 < conv["false_recall"]["value"] < 1.0
    assert conv["abstention_rate"]["value"] == 0.0 and conv["abstention_rate"]["denominator"] == conv["recall@10"]["denominator"]
    assert 0.0 < conv["auroc_unanswerable"]["value"] < 1.0 and conv["auroc_unanswerable"]["ci95"][0] is not None
    assert base["run"]["auroc_signal"] == "top1_score" and "strong_score" not in base["run"]
    json.dumps(base, allow_nan=False)
    report = (work / "reports/dev.md").read_text()
    assert report.index("## Verdict") < report.index("## System under test") < report.index("## Overall")
    # shrinking, and growing with a shift (one run for the two: an affine map of the scores)
    for args, scale, shift in (("0.001 0", 0.001, 0.0), ("1000 1", 1000.0, 1.0)):
        doc = _evaluate(work, env, args)
        assert _without_latency(doc) == _without_latency(base), args
        # the recorded threshold is in the system's own units: it moves exactly with the scores
        got = doc["run"]["false_recall_rule"]["conversation"]["threshold_score"]
        assert got == pytest.approx(rule["threshold_score"] * scale + shift, rel=1e-12)
    # the threshold plot's x axis is the calibration share, not a score
    header = (work / "reports/plots/threshold.csv").read_text().splitlines()[0]
    assert header.startswith("calibration_recall,")


def test_a_system_that_always_abstains(project):
    work, env = project
    doc = _evaluate(work, env, "1 0 --abstain")
    assert doc["run"]["false_recall_rule"]["conversation"] == {"rule": "abstention", "unanswerable": doc["by_modality"]["conversation"]["false_recall"]["denominator"]}
    for block in [doc["by_modality"]["conversation"], doc["overall"]]:
        assert block["false_recall"]["value"] == 0.0 and block["false_recall"]["n"] == block["false_recall"]["denominator"] > 0
        assert block["abstention_rate"]["value"] == 1.0 and block["abstention_rate"]["denominator"] > 0
