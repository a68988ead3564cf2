"""Case 3: the fetch stage's code over the mirrored files vs a bare hashlib.sha256 pass."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from bench.ingest.fetch import FetchJob, FetchLog, fetch_datasets
from bench.modalities import datasets
from benchmarks.common import MIRROR, best_of, figure

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


def run_case(keys: list[str], repeats: int) -> list[dict]:
    keys = [k for k in keys if (MIRROR / datasets()[k].mirror_key).is_dir()]
    tmp = Path(tempfile.mkdtemp(prefix="bench-fetch-"))
    try:
        rows = _fetch(keys, tmp / "warm")  # warms the page cache and lists the files
        files = [MIRROR / datasets()[r["key"]].mirror_key / r["path"] for r in rows
                 if r["status"] == "present" and "!/" not in r["path"]]
        files = [f for f in files if f.is_file()]
        n = [0]

        def ours() -> None:
            n[0] += 1
            _fetch(keys, tmp / f"store{n[0]}")

        t_ours, all_ours, _ = best_of(ours, repeats)
        t_ref, all_ref, total = best_of(lambda: _bare(files), repeats)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mib = total / 2**20
    return [figure(f"fetch {len(keys)} data sets ({len(files)} files, {mib:.0f} MiB)", t_ours, t_ref,
                   "hashlib.sha256 over the same mirror files, 1 MiB reads, same process, warm page cache",
                   "ratio <= 1.2", goal_ratio=1.2, datasets=keys, files=len(files), mib=round(mib, 1),
                   ours_mib_per_s=mib / t_ours, reference_mib_per_s=mib / t_ref, all_ours_s=all_ours,
                   all_reference_s=all_ref, repeats=repeats, statistic="best of repeats")]
