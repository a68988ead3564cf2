"""Queued experiments (`dvc exp run --queue` + `dvc queue start`) run in a copy of the
project under .dvc/tmp/exps/, where a relative mirror root does not resolve from the
copy: the fetch stage resolves it against the original repository. The queued results
differ from each other, and a non-default one equals a workspace run of the same params
(latency aside: it is measured time). Then the sweep is decided as a user would:
`bench leaderboard --all` (ranks with intervals, Holm-corrected p-values, the Pareto
frontier, in Markdown and JSON) and `bench gate` (exit 0 against the identical queued
run, exit 1 against one the workspace run is significantly worse than).

One test (a clone of the session's reproduced project, three queued experiments, one workspace
run) on MMLongBench-Doc (text layer: page OCR off in test copies) and LoCoMo, so the cost stays a
few minutes."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import MIRROR, need_mirror
from tests.project_copy import clone_project, project_env, run

pytestmark = pytest.mark.e2e

STRATEGIES = ("turn", "window", "session")  # chunking.conversation.strategy; pdf stays page


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


def test_queued_sweep_equals_workspace_runs_and_is_decided_by_leaderboard_and_gate(tmp_path: Path, reproduced: Path) -> None:
    need_mirror("locomo", "mmlongbench-doc")
    base = tmp_path / "e2e"
    (base / "shared").mkdir(parents=True)
    (base / "shared" / "mirror").symlink_to(MIRROR, target_is_directory=True)
    # a clone of the session's reproduced project (its DVC cache and run cache): the relative mirror
    # root changes fetch's params, so every queued experiment runs fetch from its copy and resolves it
    work = clone_project(reproduced, base / "project")
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["fetch"]["mirror_dirs"] = ["../shared/mirror"]  # relative: as committed in the real project
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = project_env(base / "site-cache", drop=("BENCH_MIRROR_DIRS",))
    for args in (["git", "add", "-A"], ["git", "commit", "-q", "-m", "relative mirror root"]):
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

    # a non-default params run in the workspace (one repro: the queue is what is under test)
    for strategy in STRATEGIES[1:2]:
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
    decide(work, env, {strategy: name_of(show, rev) for strategy, (rev, _) in queued.items()}, tmp_path)


def name_of(show: list, rev: str) -> str:
    """The experiment name `dvc exp show --json` gives the commit `rev`."""
    found: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if node.get("rev") == rev and node.get("name"):
                found.append(node["name"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(show)
    assert found, rev
    return found[0]


def decide(work: Path, env: dict, names: dict[str, str], tmp_path: Path) -> None:
    """The workspace holds the window run (the repro above): the leaderboard of every
    experiment against the turn experiment, and the gate."""
    bench = [sys.executable, "-m", "bench.cli"]
    board = run([*bench, "leaderboard", "--all", "--baseline", names["turn"], "--json", str(tmp_path / "board.json"),
                 "--resamples", "200"], work, env).stdout
    doc = json.loads((tmp_path / "board.json").read_text())
    assert [r["label"] for r in doc["runs"]] == [names["turn"], *sorted(n for s, n in names.items() if s != "turn")]
    assert {r["label"]: r["changed"] for r in doc["runs"]} == {
        names["turn"]: {}, names["window"]: {"chunking.conversation.strategy": "window"},
        names["session"]: {"chunking.conversation.strategy": "session"}}
    groups = {g["group"]: g for g in doc["groups"]}
    assert set(groups) == {"conversation", "pdf", "overall"}
    conv = {r["run"]: r for r in groups["conversation"]["rows"]}
    for row in conv.values():
        lo, hi = row["rank_ci95"]
        assert 1 <= lo <= row["rank"] <= hi <= 3 and row["values"]["recall@budget"] is not None
        assert row["false_recall_rule"] == "abstention"
    # sessions buy recall@10 with atom size: the top 10 costs more, and at equal cost they fall behind
    assert conv[names["session"]]["values"]["recall@10"] > conv[names["turn"]]["values"]["recall@10"]
    assert conv[names["session"]]["cartridge_p50@10"] > 5 * conv[names["turn"]]["cartridge_p50@10"]
    assert conv[names["session"]]["values"]["recall@budget"] < conv[names["window"]]["values"]["recall@budget"]
    assert conv[names["turn"]]["frontier"]  # the cheapest cartridge: nothing dominates it
    diffs = groups["conversation"]["diffs"]
    assert {d["run"] for d in diffs} == {names["window"], names["session"]}
    assert all(d["p_holm"] >= d["p"] for d in diffs) and any(d["significant"] for d in diffs)
    for needle in ("# Leaderboard: 3 runs against", "## conversation", "| rank (95%) |", "p_holm", "◆", "## Minimum detectable effects"):
        assert needle in board, needle
    assert set(doc["mde"]["conversation"]) == {"recall@10", "recall@budget"}

    # the gate, in the workspace (its run: window): the identical queued run passes; against
    # turn, window's false recall is significantly worse (it returns more strong evidence)
    same = run([*bench, "gate", names["window"]], work, env, ok=False)
    assert same.returncode == 0 and same.stdout.startswith("gate: passed"), same.stdout + same.stderr
    worse = run([*bench, "gate", names["turn"]], work, env, ok=False)
    assert worse.returncode == 1, worse.stdout + worse.stderr
    *reasons, last = worse.stdout.strip().splitlines()
    assert reasons and all(line.startswith("gate: ") and " is worse: " in line for line in reasons), reasons
    assert last.startswith("gate: failed: ") and "queries: " in last, last
