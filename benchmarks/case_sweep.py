"""Case 12: the queued sweep -- the README's 3 x 3 chunking sweep through `dvc exp run
--queue` and `dvc queue start -j 1`, against the same number of queued experiments that
change nothing (DVC's own cost of an experiment: a copy of the workspace, fetch again,
the stage checks, the lock file and the experiment's commit), in the same run
(docs/performance.md, *The queued sweep*).

In a copy of the project on `[mmlongbench, locomo]` (OCR caches seeded from the suite's),
after a cold `dvc repro` committed:

1. nine experiments `chunking.pdf.strategy` page, window, whole x
   `chunking.conversation.strategy` turn, window, session, queued and run by one worker;
   timed from `dvc queue start` until no experiment is queued or running;
2. the same count of experiments whose params equal the committed ones (DVC still runs
   each in its own copy: fetch again, every other stage skipped), timed the same way.

Before each, DVC's run cache and the memo (bench/memo.py) are emptied and earlier
experiments removed, so neither reuses the other's results. Every experiment must end
in Success; each of the nine's pdf and conversation recall@10, recall@budget and MRR are kept.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.case_dvc import project_copy, seed_ocr_caches, sh
from benchmarks.common import figure

#: the README's sweep
SWEEP = ("chunking.pdf.strategy=page,window,whole", "chunking.conversation.strategy=turn,window,session")
#: the sweep's goal on 2 cores (issue 41)
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


def run_queue(work: Path, env: dict, sets: list[str], poll_s: float = 1.0) -> tuple[float, dict[str, str]]:
    """Queue one experiment per combination of `sets` (each a `-S` argument), run them with
    one worker; (wall seconds from `dvc queue start` until none is queued or running, final states)."""
    for path in (work / ".dvc" / "cache" / "runs", work / ".dvc" / "tmp" / "bench-memo"):
        shutil.rmtree(path, ignore_errors=True)
    sh(["dvc", "exp", "remove", "--all", "--queue"], work, env)
    earlier = set(queue_states(work, env))  # finished tasks stay listed: only this queue's count
    sh(["dvc", "exp", "run", "--queue", *(a for s in sets for a in ("-S", s))], work, env)
    start = time.perf_counter()
    sh(["dvc", "queue", "start", "-j", "1"], work, env)
    while True:
        states = {name: state for name, state in queue_states(work, env).items() if name not in earlier}
        if states and not any(s in ("Queued", "Running") for s in states.values()):
            return time.perf_counter() - start, states
        time.sleep(poll_s)


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


def unchanged(work: Path) -> list[str]:
    """Two `-S` grids of three values each that equal params.yaml's: nine experiments that change nothing."""
    chunking = yaml.safe_load((work / "params.yaml").read_text())["chunking"]
    return [f"chunking.{m}.strategy=" + ",".join([str(chunking[m]["strategy"])] * 3) for m in ("image", "code")]


def run_case(datasets: list[str]) -> list[dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        work, env = project_copy(base, datasets)
        seed_ocr_caches(work)
        sh(["dvc", "repro"], work, env)
        sh(["git", "add", "-A"], work, env)
        sh(["git", "commit", "-q", "-m", "run"], work, env)
        sweep_s, states = run_queue(work, env, list(SWEEP))
        values = sweep_values(work, env)
        floor_s, floor_states = run_queue(work, env, unchanged(work))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    n, n_floor = len(states), len(floor_states)
    ok = n == 9 and set(states.values()) == {"Success"} and len(values) == 9 and set(floor_states.values()) == {"Success"}
    return [
        figure("9 queued experiments (README's 3 x 3 chunking sweep, dvc queue start -j 1)", round(sweep_s, 3), round(floor_s, 3),
               f"{n_floor} queued experiments that change no param (DVC's own work per experiment, fetch included)",
               f"<= {GOAL_S:g} s", goal_abs_s=GOAL_S, experiments=n, all_succeeded=ok, per_experiment_s=round(sweep_s / max(n, 1), 3),
               floor_per_experiment_s=round(floor_s / max(n_floor, 1), 3), values=values),
    ]


def main() -> None:  # python -m benchmarks.case_sweep [datasets ...]: the case alone, figures as JSON
    import sys

    print(json.dumps(run_case(sys.argv[1:] or ["mmlongbench", "locomo"]), indent=1))


if __name__ == "__main__":
    main()
