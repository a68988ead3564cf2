"""Case 12: the 3 x 3 chunking sweep through DVC experiments -- run in the workspace one
after another (docs/comparing.md's commands), against the same sweep queued (`dvc exp run
--queue`, `dvc queue start -j 1`, and `-j 2` on two cores), and against nine workspace
experiments that change nothing (DVC's own cost of an experiment there), in the same run
(docs/performance.md, *The sweep*).

In a copy of the project on `[mmlongbench, locomo]` (OCR caches seeded from the suite's),
after a cold `dvc repro` committed:

1. the nine experiments `chunking.pdf.strategy` page, window, whole x
   `chunking.conversation.strategy` turn, window, session, each a `dvc exp run -S ... -S ...`
   in the workspace, one after another; timed from the first command to the last one's end;
2. the same nine queued and run by one worker, then by two (`dvc queue start -j N`), each
   timed from `dvc queue start` until no experiment is queued or running;
3. nine workspace experiments whose params equal the committed ones (DVC's checks, lock
   file, checkout and experiment commit; every stage skipped).

Before each, DVC's run cache and the memo (bench/memo.py) are put back as the committed
run left them (what a user who ran `dvc repro` has), earlier experiments removed and the
workspace reset to the committed run, so none reuses another's results.
Every experiment must succeed; each of the nine's pdf and conversation recall@10,
recall@budget and MRR are kept, and the workspace sweep's must equal the queued sweep's
(each queued experiment runs alone in its own copy: a sequential run's values).
`SWEEP_SYSTEM` (environment) names the system to sweep (default: params.yaml's).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from itertools import product
from pathlib import Path
from typing import Any

import yaml

from benchmarks.case_dvc import project_copy, ran_stages, seed_ocr_caches, sh
from benchmarks.case_loop import children_cpu
from benchmarks.common import figure

#: the README's sweep: each strategy of the pdf and conversation modalities
GRID = (("pdf", ("page", "window", "whole")), ("conversation", ("turn", "window", "session")))
SWEEP = tuple(f"chunking.{m}.strategy=" + ",".join(values) for m, values in GRID)
#: the sweep's goal on 2 cores (issues 41 and 50): 90 s, bar 150 s
GOAL_S = 90.0


def queue_states(work: Path, env: dict) -> dict[str, str]:
    """Experiment name -> its state, as `dvc queue status` prints them."""
    out = sh(["dvc", "queue", "status"], work, env)
    states = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] not in ("Task", "Worker") and parts[-1] in ("Queued", "Running", "Success", "Failed"):
            states[parts[1]] = parts[-1]
    return states


#: what reuse a project keeps between runs: DVC's run cache and the memo (bench/memo.py)
KEPT = (Path(".dvc") / "cache" / "runs", Path(".dvc") / "tmp" / "bench-memo")


def snapshot(work: Path, dest: Path) -> None:
    """Keep the run cache and memo as the committed run left them (restored by :func:`fresh`)."""
    for rel in KEPT:
        if (work / rel).is_dir():
            shutil.copytree(work / rel, dest / rel)


def fresh(work: Path, env: dict, kept: Path) -> None:
    """No reuse between measurements: the run cache and memo as :func:`snapshot` kept them,
    earlier experiments removed, the committed run checked out."""
    for rel in KEPT:
        shutil.rmtree(work / rel, ignore_errors=True)
        if (kept / rel).is_dir():
            shutil.copytree(kept / rel, work / rel)
    sh(["dvc", "exp", "remove", "--all", "--queue"], work, env)
    sh(["git", "checkout", "-q", "--", "."], work, env)
    sh(["dvc", "checkout", "-q"], work, env)


def run_queue(work: Path, env: dict, sets: list[str], kept: Path, jobs: int = 1, poll_s: float = 1.0) -> tuple[float, dict[str, str]]:
    """Queue one experiment per combination of `sets` (each a `-S` argument), run them with
    `jobs` workers; (wall seconds from `dvc queue start` until none is queued or running, final states)."""
    fresh(work, env, kept)
    earlier = set(queue_states(work, env))  # finished tasks stay listed: only this queue's count
    sh(["dvc", "exp", "run", "--queue", *(a for s in sets for a in ("-S", s))], work, env)
    start = time.perf_counter()
    # not through sh(): a worker `dvc queue start -j 2` leaves running would hold its output pipe open
    subprocess.run(["dvc", "queue", "start", "-j", str(jobs)], cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    try:
        while True:
            states = {name: state for name, state in queue_states(work, env).items() if name not in earlier}
            if states and not any(s in ("Queued", "Running") for s in states.values()):
                return time.perf_counter() - start, states
            time.sleep(poll_s)
    finally:
        sh(["dvc", "queue", "stop"], work, env)  # idle workers end


def run_workspace(work: Path, env: dict, combos: list[tuple[str, ...]], kept: Path) -> tuple[float, list[float], list[list[str]], list[float]]:
    """One `dvc exp run -S ...` per combination (each a tuple of `-S` values), in the
    workspace, one after another; (wall seconds, each experiment's, the stages each ran, each
    one's CPU seconds: DVC and every stage it ran, user + system)."""
    fresh(work, env, kept)
    each, ran, cpu = [], [], []
    start = time.perf_counter()
    for combo in combos:
        t, c = time.perf_counter(), children_cpu()
        out = sh(["dvc", "exp", "run", *(a for s in combo for a in ("-S", s))], work, env)
        each.append(round(time.perf_counter() - t, 3))
        cpu.append(round(children_cpu() - c, 3))
        ran.append(ran_stages(out))
    return time.perf_counter() - start, each, ran, cpu


def grid() -> list[tuple[str, ...]]:
    """The nine (pdf, conversation) strategy pairs as `-S` values, pdf outermost (as DVC expands the grid)."""
    (m1, v1), (m2, v2) = GRID
    return [(f"chunking.{m1}.strategy={a}", f"chunking.{m2}.strategy={b}") for a, b in product(v1, v2)]


#: the values kept of each experiment's dev.json, per modality of the two data sets
SHOWN = ("recall@10", "recall@budget", "mrr")


def sweep_values(work: Path, env: dict) -> dict[str, dict[str, dict[str, float]]]:
    """Each experiment's pdf and conversation values (SHOWN), by its two strategies."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for base in json.loads(sh(["dvc", "exp", "show", "--json"], work, env)):
        for exp in base.get("experiments") or []:
            for rev in exp.get("revs", []):
                data = rev.get("data") or {}
                params = data.get("params", {}).get("params.yaml", {}).get("data", {})
                doc = data.get("metrics", {}).get("reports/metrics/dev.json", {}).get("data", {})
                if doc:
                    label = f"{params['chunking']['pdf']['strategy']} x {params['chunking']['conversation']['strategy']}"
                    out[label] = {m: {v: doc["by_modality"][m][v]["value"] for v in SHOWN} for m in ("pdf", "conversation")}
    return out


def unchanged(work: Path) -> list[tuple[str, ...]]:
    """Nine `-S` pairs that equal params.yaml's: nine experiments that change nothing."""
    chunking = yaml.safe_load((work / "params.yaml").read_text())["chunking"]
    return [tuple(f"chunking.{m}.strategy={chunking[m]['strategy']}" for m in ("image", "code"))] * 9


def _system(work: Path, env: dict, name: str | None) -> None:
    if name:
        params = yaml.safe_load((work / "params.yaml").read_text())
        params["system"]["name"] = name
        (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def run_case(datasets: list[str], system: str | None = None) -> list[dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        work, env = project_copy(base, datasets)
        _system(work, env, system or os.environ.get("SWEEP_SYSTEM"))
        seed_ocr_caches(work)
        sh(["dvc", "repro"], work, env)
        sh(["git", "add", "-A"], work, env)
        sh(["git", "commit", "-q", "-m", "run"], work, env)
        kept = base / "kept"
        snapshot(work, kept)
        ws_s, ws_each, ws_ran, ws_cpu = run_workspace(work, env, grid(), kept)
        ws_values = sweep_values(work, env)
        floor_s, floor_each, _, floor_cpu = run_workspace(work, env, unchanged(work), kept)
        q1_s, q1_states = run_queue(work, env, list(SWEEP), kept, jobs=1)
        q1_values = sweep_values(work, env)
        q2_s, q2_states = run_queue(work, env, list(SWEEP), kept, jobs=2)
        q2_values = sweep_values(work, env)
        used = yaml.safe_load((work / "params.yaml").read_text())["system"]["name"]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    same = len(ws_values) == 9 and ws_values == q1_values == q2_values
    queued_ok = all(set(s.values()) == {"Success"} and len(s) == 9 for s in (q1_states, q2_states))
    sweep = figure("9 workspace experiments (the 3 x 3 chunking sweep, dvc exp run one after another)", round(ws_s, 3), round(floor_s, 3),
                   "9 workspace experiments that change no param (DVC's own work per experiment)",
                   f"<= {GOAL_S:g} s (bar 150 s); values equal the queued (sequential) runs'", goal_abs_s=GOAL_S, system=used,
                   experiments=len(ws_each), per_experiment_s=ws_each, stages_run=ws_ran, floor_per_experiment_s=floor_each,
                   cpu_s=round(sum(ws_cpu), 3), per_experiment_cpu_s=ws_cpu, floor_cpu_s=round(sum(floor_cpu), 3),
                   values_equal_queued=same, values=ws_values)
    sweep["met"] = bool(sweep["met"]) and same and queued_ok
    return [
        sweep,
        figure("9 queued experiments, dvc queue start -j 1 (the sweep before issue 50)", round(q1_s, 3), round(ws_s, 3),
               "the same sweep in the workspace", "informational", system=used, all_succeeded=set(q1_states.values()) == {"Success"},
               experiments=len(q1_states), per_experiment_s=round(q1_s / max(len(q1_states), 1), 3)),
        figure("9 queued experiments, dvc queue start -j 2", round(q2_s, 3), round(ws_s, 3), "the same sweep in the workspace",
               "informational", system=used, all_succeeded=set(q2_states.values()) == {"Success"}, experiments=len(q2_states)),
    ]


def main() -> None:  # python -m benchmarks.case_sweep [datasets ...]: the case alone, figures as JSON
    import sys

    print(json.dumps(run_case(sys.argv[1:] or ["mmlongbench", "locomo"]), indent=1))


if __name__ == "__main__":
    main()
