"""Case 11: the chunking loop -- a one-parameter chunking change to its verdict through
`dvc repro`, against the no-op repro in the same run, with outputs checked against a
cold run's (docs/performance.md, *The chunking loop*).

In a copy of the project (case 5's copy, OCR caches seeded from the suite's), after a
cold `dvc repro`:

1. a no-op `dvc repro` (best of N);
2. `chunking.conversation.window_turns` 5 -> 6 (the strategy stays `turn`, so the atoms
   do not change: chunk and evaluate re-run, retrieve is skipped by DVC);
3. `chunking.conversation.strategy` turn -> window (the conversation atoms change: chunk,
   retrieve (which resolves the gold) and evaluate re-run);
4. `window_turns` 6 -> 3 under `window` (issue 50's example: the conversation atoms are
   rewritten again, into windows no run has seen);
5. back to the committed params (every stage's inputs were seen before).

Each repro's wall time, CPU time and the seconds of each stage (from the time its "Running
stage" line appears to the next) are kept, with what was reused: the answers of a built-in
system whose inputs were unchanged and the runs that measured their latency
(data/runs/system.json, bench.systems.partwise) and the queries whose per-query columns the
evaluation reused. After steps 3 and 4 the outputs are compared with a cold run of the same
params: chunk, retrieve and evaluate forced again with reuse turned off
(BENCH_MEMO_DIR=off); dev.json apart from latency, the per-query table apart from
latency_ms, dev.run and dev.qrels must be equal, and so must step 5's with step 0's.
`LOOP_SYSTEM` (environment) names the system (default: params.yaml's).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from benchmarks.case_dvc import project_copy, ran_stages, seed_ocr_caches, sh
from benchmarks.common import figure

#: the outputs compared with a cold run's (project-relative)
OUTPUTS = ("reports/metrics/dev.json", "reports/per_query/dev.parquet", "reports/runs/dev.run", "reports/runs/dev.qrels")
#: the repro's goal on 2 cores (issue 41): 10 s, bar 15 s
GOAL_S = 10.0


def stage_seconds(lines: list[tuple[float, str]], end: float) -> dict[str, float]:
    """Seconds from each "Running stage 'x'" line to the next such line (the last: to `end`)."""
    starts = [(t, line.split("'")[1]) for t, line in lines if line.startswith("Running stage")]
    out: dict[str, float] = {}
    for i, (t, name) in enumerate(starts):
        stop = starts[i + 1][0] if i + 1 < len(starts) else end
        out[name] = round(stop - t, 3)
    return out


#: CPU seconds (user + sys) of every `dvc repro` timed here and of all it started, by label
CPU: dict[str, float] = {}
#: each timed repro's printed lines, by label
TEXT: dict[str, str] = {}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_repro(work: Path, env: dict, *args: str, label: str = "") -> tuple[float, dict[str, float], list[str]]:
    """(wall s, seconds per stage run, stages run) of one `dvc repro`, its lines timestamped as they come;
    its CPU seconds (the command and every stage it ran) go into CPU[label]."""
    cpu0 = children_cpu()
    start = time.perf_counter()
    proc = subprocess.Popen(["dvc", "repro", *args], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = [(time.perf_counter(), line.rstrip("\n")) for line in proc.stdout]
    rc = proc.wait()
    wall = time.perf_counter() - start
    CPU[label] = round(children_cpu() - cpu0, 3)
    if rc != 0:
        raise RuntimeError("dvc repro failed:\n" + "\n".join(line for _, line in lines[-40:]))
    text = TEXT[label] = "\n".join(line for _, line in lines)
    return wall, stage_seconds(lines, start + wall), ran_stages(text)


def reused(work: Path, label: str) -> dict[str, Any]:
    """What the repro `label` reused: answers and the runs that measured their latency (when
    retrieve ran), and the evaluation's line on reused per-query columns."""
    out: dict[str, Any] = {}
    text = TEXT.get(label, "")
    if "Running stage 'retrieve'" in text:
        record = json.loads((work / "data" / "runs" / "system.json").read_text())
        out.update({k: record.get(k) for k in ("reused_queries", "parts_built", "latency_measured_in")})
    out["evaluate"] = [line for line in text.splitlines() if line.startswith("evaluate:") and "reused" in line]
    return out


def _no_latency(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _no_latency(v) for k, v in obj.items() if "latency" not in k}
    if isinstance(obj, list):
        return [_no_latency(v) for v in obj]
    return obj


def differences(a: Path, b: Path, *, chunking_apart: bool = False) -> list[str]:
    """Which of OUTPUTS differ between two copies of them (dev.json apart from every latency
    field, and from run.chunking when asked; the per-query table apart from latency_ms)."""
    out = []
    ja, jb = (_no_latency(json.loads((d / OUTPUTS[0]).read_text())) for d in (a, b))
    if chunking_apart:
        for j in (ja, jb):
            j.get("run", {}).pop("chunking", None)
    if ja != jb:
        out.append(OUTPUTS[0])
    pa, pb = (pd.read_parquet(d / OUTPUTS[1]).drop(columns=["latency_ms"], errors="ignore") for d in (a, b))
    if not pa.equals(pb):
        out.append(OUTPUTS[1])
    out += [rel for rel in OUTPUTS[2:] if (a / rel).read_bytes() != (b / rel).read_bytes()]
    return out


def keep(work: Path, dest: Path) -> Path:
    for rel in OUTPUTS:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(work / rel, dest / rel)
    return dest


def set_params(work: Path, **conversation: Any) -> None:
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["chunking"]["conversation"].update(conversation)
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _change(label: str, wall: float, noop: float, stages: dict[str, float], ran: list[str], **details: Any) -> dict:
    return figure(f"dvc repro after {label}", wall, noop, "no-op dvc repro of the same project, same run",
                  f"<= {GOAL_S:g} s (bar 15 s)", goal_abs_s=GOAL_S, stage_s=stages, stages_run=ran, **details)


def run_case(datasets: list[str] | str, repeats: int) -> list[dict]:
    base = Path(tempfile.mkdtemp(prefix="bench-loop-"))
    figures: list[dict] = []
    try:
        work, env = project_copy(base, datasets)  # type: ignore[arg-type]
        env.pop("BENCH_MEMO_DIR", None)  # the project's own memo folder (.dvc/tmp/bench-memo), empty at first
        if system := os.environ.get("LOOP_SYSTEM"):
            params = yaml.safe_load((work / "params.yaml").read_text())
            params["system"]["name"] = system
            (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        seed_ocr_caches(work)
        cold_s, cold_stages, _ = timed_repro(work, env, label="cold")
        sh(["git", "add", "-A"], work, env)
        sh(["git", "commit", "-q", "-m", "run"], work, env)
        first = keep(work, base / "cold-default")
        noops = [timed_repro(work, env, label=f"noop{i}") for i in range(repeats)]
        noop = min(w for w, _, _ in noops)
        figures.append(figure("dvc no-op repro (the loop's reference)", noop, None, "", "report", all_ours_s=[w for w, _, _ in noops],
                              repeats=repeats, statistic="best of repeats", cold_s=round(cold_s, 3), cold_stage_s=cold_stages,
                              cpu_s=min(CPU[f"noop{i}"] for i in range(repeats)), cold_cpu_s=CPU["cold"]))

        set_params(work, window_turns=6)
        wall, stages, ran = timed_repro(work, env, label="turns")
        figures.append(_change("chunking.conversation.window_turns 5 -> 6 (strategy turn: atoms unchanged)", wall, noop, stages, ran,
                               differs_from_cold=differences(first, work, chunking_apart=True), cpu_s=CPU["turns"]))

        cold_env = {**env, "BENCH_MEMO_DIR": "off"}  # the same stages again, forced, nothing reused
        for label, change, name in (("window", {"strategy": "window"}, "chunking.conversation.strategy turn -> window"),
                                    ("turns3", {"window_turns": 3}, "chunking.conversation.window_turns 6 -> 3 under window")):
            set_params(work, **change)
            wall, stages, ran = timed_repro(work, env, label=label)
            how = reused(work, label)
            warm = keep(work, base / f"warm-{label}")
            cold_change, cold_change_stages, _ = timed_repro(work, cold_env, "--force", "--single-item", "chunk", "retrieve", "evaluate",
                                                             label=f"{label}-cold")
            figures.append(_change(f"{name} (conversation atoms rewritten)", wall, noop, stages, ran, reused=how,
                                   differs_from_cold=differences(warm, work), cold_s=round(cold_change, 3),
                                   cold_stage_s=cold_change_stages, cpu_s=CPU[label], cold_cpu_s=CPU[f"{label}-cold"]))

        sh(["git", "checkout", "-q", "--", "params.yaml"], work, env)
        wall, stages, ran = timed_repro(work, env, label="back")
        figures.append(_change("returning to the committed chunking (inputs seen before)", wall, noop, stages, ran,
                               reused=reused(work, "back"), differs_from_cold=differences(first, work), cpu_s=CPU["back"]))
        for f in figures[1:]:
            f["met"] = bool(f["met"]) and not f["differs_from_cold"]
        memo = work / ".dvc" / "tmp" / "bench-memo"
        figures[0]["memo_mib"] = round(sum(p.stat().st_size for p in memo.rglob("*") if p.is_file()) / 2**20, 2) if memo.is_dir() else 0
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return figures


def main() -> None:  # python -m benchmarks.case_loop [datasets ...]: the case alone, figures as JSON
    import sys

    chosen = sys.argv[1:] or "all"
    print(json.dumps(run_case(chosen, int(os.environ.get("LOOP_REPEATS", "3"))), indent=1))


if __name__ == "__main__":
    main()
