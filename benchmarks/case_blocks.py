"""Case: peak memory of the evaluate stage's run-dependent work against run rows, in core
(the run read whole into pandas) and out of core (DuckDB query blocks,
bench.evaluation.blocks), each in a fresh process (peak RSS: VmHWM, benchmarks.common.peak_rss_kib).

The synthetic run is case_metrics.make_codes's (100 atoms a query, 10 % unanswerable,
realistic gold), written as the retrieve stage writes it: atom codes, query
ids categorical. The work measured is what the evaluate stage does with the run: read
it (atoms stay codes), per-query metrics, ties and the curves' hits per block, then the
cross-query steps and the cells.
The chunk-fair metrics are left out (their cost is per top-k row and per query, not
per run row). The figure gives the bytes of peak RSS per run row in core: what
params executor.in_core_rows is set from (docs/scale.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.common import ROOT, figure, peak_rss_kib

K = 10


def write_files(n_queries: int, folder: Path) -> dict[str, int]:
    """run.parquet, gold.parquet, entries.parquet, atoms.parquet, latency.parquet of `n_queries` x 100."""
    from benchmarks.case_metrics import make_codes

    data = make_codes(n_queries)
    folder.mkdir(parents=True, exist_ok=True)
    data["run"].to_parquet(folder / "run.parquet", row_group_size=1_000_000)
    data["gold"].to_parquet(folder / "gold.parquet")
    data["entries"].to_parquet(folder / "entries.parquet")
    data["atoms"].assign(atom_id=[f"a{i:08d}" for i in range(len(data["atoms"]))]).to_parquet(folder / "atoms.parquet")
    data["latency"].to_parquet(folder / "latency.parquet")
    return {"run_rows": len(data["run"]), "gold_rows": len(data["gold"]), "queries": n_queries}


def work(folder: Path, in_core_rows: int | None) -> dict[str, Any]:
    """The evaluate stage's run-dependent work on the files of `folder` (in a fresh process):
    in core when `in_core_rows` is None, else blocks of about that many run rows from DuckDB."""
    import time

    from bench.evaluation.blocks import DuckDBBlocks, FrameBlocks, parquet_rows, queries_per_block
    from bench.evaluation.cells import aggregate
    from bench.evaluation.evaluate import curve_hits
    from bench.evaluation.measures.scores import tied_positions
    from bench.evaluation.per_query import finish_per_query, query_block

    entries = pd.read_parquet(folder / "entries.parquet").sort_values("query_id").reset_index(drop=True)
    atoms = pd.read_parquet(folder / "atoms.parquet")
    latency = pd.read_parquet(folder / "latency.parquet")
    ids = entries["query_id"].astype(str).tolist()
    base = peak_rss_kib()
    t = time.perf_counter()
    rows = parquet_rows(folder / "run.parquet")
    per_block = None if in_core_rows is None else queries_per_block(rows, len(ids), in_core_rows)
    with tempfile.TemporaryDirectory() as spill:
        if per_block is None:
            source: Any = FrameBlocks(pd.read_parquet(folder / "run.parquet"), pd.read_parquet(folder / "gold.parquet"))
        else:
            source = DuckDBBlocks(folder / "run.parquet", folder / "gold.parquet", per_block, temp_dir=Path(spill),
                                  memory_limit="1GB").__enter__()
        parts, ties, hits = [], [], []
        for b in source.blocks(ids):
            parts.append(query_block(entries.iloc[b.start:b.stop], b.run, b.gold, atoms, k=K, failed=[], responses=latency))
            ties.append(tied_positions(b.run, K))
            hits.append(curve_hits(b.run, b.gold, []))
            del b
        pq = finish_per_query(pd.concat(parts, ignore_index=True), k=K)
        cells = aggregate(pq, latency, k=K)
        n_hits = int(sum(len(h) for h in hits))
        if per_block is not None:
            source.__exit__(None, None, None)
    seconds = time.perf_counter() - t
    peak = peak_rss_kib()
    return {"seconds": seconds, "peak_kib": peak, "base_kib": base, "run_rows": rows, "blocks": source.block_count,
            "recall": cells["overall"]["recall@10"]["value"], "hits": n_hits}


def _fresh(folder: Path, in_core_rows: int | None) -> dict[str, Any]:
    code = ("import json, sys\nfrom pathlib import Path\nfrom benchmarks.case_blocks import work\n"
            f"print(json.dumps(work(Path({str(folder)!r}), {in_core_rows!r})))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def run_case(sizes: list[int], block_rows: int) -> list[dict]:
    """Per size (queries x 100): peak RSS in core and out of core (blocks of `block_rows` run rows)."""
    figures = []
    per_row = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            folder = Path(tmp) / f"q{n}"
            shape = write_files(n, folder)
            core = _fresh(folder, None)
            ooc = _fresh(folder, block_rows)
            same = core["recall"] == ooc["recall"] and core["hits"] == ooc["hits"]
            grow = (core["peak_kib"] - core["base_kib"]) * 1024 / shape["run_rows"]
            per_row.append(grow)
            figures.append(figure(
                f"evaluate {shape['run_rows'] / 1e6:g}M run rows: peak RSS out of core / in core", ooc["peak_kib"] / 1024**2,
                core["peak_kib"] / 1024**2, "the same work in core, fresh process (peak RSS, GiB, not seconds)",
                "out of core peak below in core and equal results", goal_ratio=1.0, unit="GiB",
                in_core_bytes_per_run_row=round(grow, 1), in_core_s=round(core["seconds"], 2), out_of_core_s=round(ooc["seconds"], 2),
                out_of_core_blocks=ooc["blocks"], block_rows=block_rows, base_rss_gib=round(core["base_kib"] / 1024**2, 3),
                equal_results=same, statistic="one run each", **shape))
            figures[-1]["met"] = bool(figures[-1]["met"]) and same
    figures[-1]["in_core_bytes_per_run_row_max"] = round(float(np.max(per_row)), 1)
    return figures
