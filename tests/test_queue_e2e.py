"""Queued experiments (`dvc exp run --queue` + `dvc queue start`) run in a copy of the
project under .dvc/tmp/exps/, where a relative mirror root does not resolve from the
copy: the fetch stage resolves it against the original repository. The queued results
differ from each other, and the non-default one equals a workspace run of the same params
(latency aside: it is measured time)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import MIRROR, need_mirror
from tests.project_copy import copy_project, project_env, run

pytestmark = pytest.mark.e2e

STRATEGIES = ("turn", "window")


def comparable(doc: dict) -> dict:
    """dev.json without what a run measures in time (latency cells, the run's timing)."""
    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if "latency" not in k}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node
    return strip(doc)


def numbers(node, prefix: str = "") -> dict[str, float]:
    """Numeric leaves by dotted path (what `dvc exp show` keeps of a metrics file)."""
    if isinstance(node, dict):
        out: dict[str, float] = {}
        for k, v in node.items():
            out.update(numbers(v, f"{prefix}{k}."))
        return out
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return {prefix.rstrip("."): node}
    return {}


def experiments(show: list) -> dict[str, tuple[str, dict]]:
    """strategy -> (git rev, dev.json numbers) of each experiment in `dvc exp show --json`."""
    found: dict[str, tuple[str, dict]] = {}

    def walk(node, depth: int = 0) -> None:
        if isinstance(node, dict):
            data = node.get("data")
            if isinstance(data, dict) and "metrics" in data and node.get("name") and depth > 0:
                params = data["params"]["params.yaml"]["data"]
                metrics = data["metrics"].get("reports/metrics/dev.json", {}).get("data")
                if metrics:
                    found[params["chunking"]["conversation"]["strategy"]] = (node["rev"], metrics)
            for v in node.values():
                walk(v, depth + 1)
        elif isinstance(node, list):
            for v in node:
                walk(v, depth + 1)

    for baseline in show:
        for exp in baseline.get("experiments") or []:
            walk(exp, 1)
    return found


def test_queued_sweep_equals_workspace_runs(tmp_path: Path) -> None:
    need_mirror("locomo")
    base = tmp_path / "e2e"
    (base / "shared").mkdir(parents=True)
    (base / "shared" / "mirror").symlink_to(MIRROR, target_is_directory=True)
    work = copy_project(base / "project", datasets=["locomo"])
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["fetch"]["mirror_dirs"] = ["../shared/mirror"]  # relative: as committed in the real project
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = project_env(base / "site-cache", drop=("BENCH_MIRROR_DIRS",))
    for args in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "copy"]):
        run(args, work, env)

    for strategy in STRATEGIES:
        run(["dvc", "exp", "run", "--queue", "-S", f"chunking.conversation.strategy={strategy}"], work, env)
    run(["dvc", "queue", "start"], work, env)
    deadline = time.monotonic() + 600
    while True:
        status = run(["dvc", "queue", "status"], work, env).stdout
        if not any(word in status for word in ("Queued", "Running")):
            break
        assert time.monotonic() < deadline, status
        time.sleep(3)
    assert "Failed" not in status, run(["dvc", "queue", "logs", status.split()[-1]], work, env, ok=False).stdout + status

    show = json.loads(run(["dvc", "exp", "show", "--json"], work, env).stdout)
    queued = experiments(show)
    assert set(queued) == set(STRATEGIES), (list(queued), show)

    # the non-default params run in the workspace (one repro: the queue is what is under test)
    for strategy in STRATEGIES[1:]:
        params["chunking"]["conversation"]["strategy"] = strategy
        (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        run(["dvc", "repro"], work, env)
        mine = json.loads((work / "reports/metrics/dev.json").read_text())
        conv = mine["by_modality"]["conversation"]["recall@10"]
        assert conv["denominator"] > 0 and conv["n"] == conv["denominator"]  # the mirror was found: real entries
        rev, shown = queued[strategy]
        # the experiment's whole dev.json, from its git commit
        theirs = json.loads(run(["git", "show", f"{rev}:reports/metrics/dev.json"], work, env).stdout)
        assert comparable(theirs) == comparable(mine), strategy
        kept = numbers(comparable(shown))
        assert len(kept) > 50 and kept == {k: v for k, v in numbers(comparable(mine)).items() if k in kept}
    assert numbers(queued["turn"][1]) != numbers(queued["window"][1])  # the sweep changed something
