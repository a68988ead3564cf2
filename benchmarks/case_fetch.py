"""Case 3: the fetch stage's code over the mirrored files vs a bare hashlib.sha256 pass.

Both sides run on a warm page cache (a first fetch, untimed, reads every file and
lists the data sets), and their repeats alternate (ours, reference, ours, ...), so a
change in the machine's load during the case reaches both alike. Beside the wall
times the case keeps each side's CPU time (all threads, user + system): on a shared
machine the second core is not always free, and CPU time shows what fetch does
besides hashing (listing the corpus from the annotations, making store folders and
links, unpacking archive members).
"""

from __future__ import annotations

import gc
import hashlib
import shutil
import tempfile
import time
from pathlib import Path

from bench.corpus_sources import datasets
from bench.ingest.fetch import FetchJob, FetchLog, fetch_datasets
from benchmarks.common import MIRROR, figure

CHUNK = 1 << 20


def _fetch(keys: list[str], store: Path) -> list[dict]:
    """What the fetch stage runs: every data set fetched from the mirror (data sets concurrently)."""
    return fetch_datasets([FetchJob(datasets()[key], [MIRROR], False) for key in keys], store, FetchLog())


def _bare(files: list[Path]) -> int:
    total = 0
    for path in files:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            while block := fh.read(CHUNK):
                h.update(block)
                total += len(block)
        h.hexdigest()
    return total


def _timed(fn) -> tuple[float, float, object]:
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def run_case(keys: list[str], repeats: int) -> list[dict]:
    keys = [k for k in keys if (MIRROR / datasets()[k].mirror_key).is_dir()]
    tmp = Path(tempfile.mkdtemp(prefix="bench-fetch-"))
    ours_s: list[float] = []
    ours_cpu: list[float] = []
    ref_s: list[float] = []
    ref_cpu: list[float] = []
    try:
        rows = _fetch(keys, tmp / "warm")  # warms the page cache and lists the files
        files = [MIRROR / datasets()[r["key"]].mirror_key / r["path"] for r in rows
                 if r["status"] == "present" and "!/" not in r["path"]]
        files = [f for f in files if f.is_file()]
        members = sum(r["status"] == "present" and "!/" in r["path"] for r in rows)
        _bare(files)
        total = 0
        rerun_s: list[float] = []
        for i in range(max(1, repeats)):
            wall, cpu, _ = _timed(lambda i=i: _fetch(keys, tmp / f"store{i}"))
            ours_s.append(wall)
            ours_cpu.append(cpu)
            rerun_s.append(_timed(lambda: _fetch(keys, tmp / "warm"))[0])  # every stored file hashed, nothing linked
            wall, cpu, got = _timed(lambda: _bare(files))
            ref_s.append(wall)
            ref_cpu.append(cpu)
            total = int(got)  # type: ignore[call-overload]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mib = total / 2**20
    t_ours, t_ref = min(ours_s), min(ref_s)
    return [figure(f"fetch {len(keys)} data sets ({len(files)} files, {mib:.0f} MiB)", t_ours, t_ref,
                   "hashlib.sha256 over the same mirror files, 1 MiB reads, same process, warm page cache, "
                   "repeats alternating with ours",
                   "ratio <= 1.2", goal_ratio=1.2, datasets=keys, files=len(files), archive_members=members,
                   mib=round(mib, 1), ours_mib_per_s=mib / t_ours, reference_mib_per_s=mib / t_ref,
                   all_ours_s=ours_s, all_reference_s=ref_s, ours_cpu_s=min(ours_cpu), reference_cpu_s=min(ref_cpu),
                   cpu_ratio=min(ours_cpu) / min(ref_cpu) if min(ref_cpu) > 0 else None,
                   repeats=repeats, statistic="best of repeats"),
            figure(f"fetch again into the complete store ({len(files)} files)", min(rerun_s), t_ref,
                   "the same hashlib.sha256 pass (a rerun hashes every stored file and lists the corpus again)",
                   "informational", all_ours_s=rerun_s, repeats=repeats, statistic="best of repeats")]
