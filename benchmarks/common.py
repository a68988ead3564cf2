"""Timing helpers and the machine description shared by the benchmark cases."""

from __future__ import annotations

import atexit
import gc
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MIRROR = ROOT.parent / "shared" / "mirror"
#: the images the OCR cases read (ScreenAgent screenshots, COCO photos)
SCREENS = MIRROR / "screenagent_test" / "data" / "ScreenAgent" / "test"
PHOTOS = MIRROR / "coco_captions_val2017" / "val2017"
#: the checkout's own OCR caches (data/ocr-cache/<modality>/, filled by `dvc repro`)
PROJECT_OCR_CACHE = ROOT / "data" / "ocr-cache"

_suite_ocr_cache: Path | None = None


def copy_ocr_cache(src: Path, dest: Path) -> int:
    """Copy every result file of the OCR cache `src` into the cache `dest` (files it
    already has are kept: a cache key fixes its content); returns the files copied."""
    copied = 0
    for path in sorted(src.glob("*/*.json")) if src.is_dir() else []:
        target = dest / path.parent.name / path.name
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        copied += 1
    return copied


def suite_ocr_cache() -> Path:
    """One OCR cache folder for the whole suite run, shared by the cases that do not
    measure OCR (pdf, dvc): a temp folder removed at exit, seeded with a copy of the
    checkout's data/ocr-cache/<modality>/ results when present (read, never written),
    and filled by the first case that OCRs a page. Keys are content hashes (image,
    engine, settings), so one folder serves every modality and a stale result is
    never read. The ocr case keeps its own fresh folders: it times OCR itself."""
    global _suite_ocr_cache
    if _suite_ocr_cache is None:
        folder = Path(tempfile.mkdtemp(prefix="bench-ocr-cache-"))
        atexit.register(shutil.rmtree, folder, True)
        for modality in sorted(PROJECT_OCR_CACHE.iterdir()) if PROJECT_OCR_CACHE.is_dir() else []:
            copy_ocr_cache(modality, folder)
        _suite_ocr_cache = folder
    return _suite_ocr_cache


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


def peak_rss_kib() -> int:
    """This process's peak resident set size in KiB: VmHWM of /proc/self/status (the
    high-water mark of its own address space). Not ru_maxrss: Linux keeps in it the
    peak of the address space an exec replaced, so a process started from a large
    benchmark process would report the parent's size (getrusage's fallback elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


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
