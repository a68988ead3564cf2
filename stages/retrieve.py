"""DVC stage retrieve: run the system under test on the valid dev entries."""

from __future__ import annotations

import time

import click
import pandas as pd

from bench.corpus import load_segments  # noqa: F401  (kept for symmetry with other stages)
from bench.io import iter_jsonl, write_json, write_parquet, write_text
from bench.retrieve import run_system, trec_run
from bench.systems import build_system
from stages.common import ATOMS, REPORTS, RUNS, VALID_DIR, fail, params

COMMON = ["atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at"]


def load_atoms() -> pd.DataFrame:
    frames = [pd.read_parquet(p, columns=COMMON) for p in sorted(ATOMS.glob("*.parquet"))]
    if not frames:
        fail(f"no atoms in {ATOMS.name}/; run the chunk stage first")
    return pd.concat(frames, ignore_index=True)


@click.command()
def main() -> None:
    cfg = params()["system"]
    entries = [e for _, e in iter_jsonl(VALID_DIR / "dev.jsonl")]
    atoms = load_atoms()
    start = time.perf_counter()
    try:
        system = build_system(cfg["name"], atoms)
    except ValueError as exc:
        fail(f"params.yaml {exc}")
    build_s = time.perf_counter() - start
    run, latency = run_system(system, entries, int(cfg["depth"]))
    write_parquet(RUNS / "dev.parquet", run)
    write_parquet(RUNS / "latency.parquet", latency)
    write_json(RUNS / "system.json", {"name": system.name, "depth": int(cfg["depth"]), "atoms": len(atoms), "index_build_s": round(build_s, 3), "warm": True, "concurrency": 1})
    write_text(REPORTS / "runs" / "dev.run", trec_run(run, system.name))
    click.echo(f"retrieve: {system.name}: {len(entries)} queries over {len(atoms)} atoms; index {build_s:.1f}s; p50 {latency['latency_ms'].median():.2f} ms")


if __name__ == "__main__":
    main()
