"""Timing helpers and the machine description shared by the benchmark cases."""

from __future__ import annotations

import gc
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MIRROR = ROOT.parent / "shared" / "mirror"


def best_of(fn: Callable[[], Any], repeats: int) -> tuple[float, list[float], Any]:
    """Run `fn` `repeats` times (gc collected before each); (best wall s, all, last result)."""
    times: list[float] = []
    result = None
    for _ in range(max(1, repeats)):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), times, result


def machine() -> dict[str, Any]:
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "load_average_at_start": [round(x, 2) for x in load] if load else None,
    }


def ratio(ours: float | None, ref: float | None) -> float | None:
    if ours is None or ref is None or ref <= 0:
        return None
    return ours / ref


def figure(name: str, ours_s: float | None, ref_s: float | None, reference: str, goal: str, goal_ratio: float | None = None,
           goal_abs_s: float | None = None, **details: Any) -> dict[str, Any]:
    """One benchmark figure: our time, the reference's, their ratio and the goal."""
    r = ratio(ours_s, ref_s)
    met = None
    if goal_ratio is not None and r is not None:
        met = r <= goal_ratio
    if goal_abs_s is not None and ours_s is not None:
        met = (met if met is not None else True) and ours_s <= goal_abs_s
    return {"name": name, "ours_s": ours_s, "reference": reference, "reference_s": ref_s, "ratio": r,
            "goal": goal, "met": met, **details}
