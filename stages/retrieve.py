"""DVC stage retrieve: run the system under test on the valid dev entries.

1. The served atoms: the harness's chunks (data/atoms) or, with `system.atoms`, the
   system's own atoms file, checked against the contract and turned into the
   modality columns; written to data/served/ (resolve and evaluate read them).
2. The system, through the adapter `system.adapter` names (docs/systems.md). A
   command system runs sandboxed in a fresh working folder (bench/systems/sandbox.py)
   under a per-checkout temp root; folders left by killed runs are swept first.
3. Every dev query, timed; failures recorded, malformed answers stop the stage.
"""

from __future__ import annotations

import os
import time

import click
import pandas as pd

from bench.evaluation.atom_codes import AtomCodeError, load_served, served_ids, to_codes
from bench.evaluation.retrieve import SYSTEM_COLUMNS, latency_percentiles, run_queries, trec_run
from bench.executor import ExecutorError, open_executor, using
from bench.ingest.partitions import partition_files, write_partitions
from bench.io import atomic_writer, iter_jsonl, sha256_file, write_json, write_parquet, write_text
from bench.params import ParamsError, check_executor
from bench.project.layout import ATOMS, MANIFEST, REPORTS, ROOT, RUNS, SEGMENTS, SERVED, STORE, VALID_DIR, fail
from bench.project.selection import checked_params
from bench.systems import MissingExtra
from bench.systems.adapters import SystemCrash
from bench.systems.atoms import AtomsError, load_system_atoms
from bench.systems.config import system_config
from bench.systems.sandbox import SandboxError, protected_paths, system_temp_root
from bench.systems.session import open_system


def served_atoms(atoms_file: str | None) -> tuple[list[tuple[str, str, pd.DataFrame]] | None, dict]:
    """(partitions to write, or None to copy data/atoms as is; provenance)."""
    if atoms_file is None:
        if not partition_files(ATOMS):
            fail(f"no atoms in {ATOMS.name}/; run the chunk stage first")
        return None, {"source": "harness chunking (data/atoms)"}
    from bench.ingest.corpus import load_segments

    path = (ROOT / atoms_file).resolve()
    try:
        frames = load_system_atoms(path, load_segments(SEGMENTS))
    except AtomsError as exc:
        fail(str(exc))
    if not frames:
        fail(f"{atoms_file}: system.atoms: the file holds no atoms")
    # the system's atoms partitioned like the harness's: by modality, then data set
    parts = [(m, str(ds), part.reset_index(drop=True)) for m in sorted(frames) for ds, part in frames[m].groupby("dataset", sort=True)]
    return parts, {"source": "system", "file": atoms_file, "sha256": sha256_file(path)}


def write_served(parts: list[tuple[str, str, pd.DataFrame]] | None) -> None:
    SERVED.mkdir(parents=True, exist_ok=True)
    if parts is None:  # byte copies: an unchanged chunking leaves resolve up to date
        keep = set()
        for src in partition_files(ATOMS):
            dst = SERVED / src.parent.name / src.name
            dst.parent.mkdir(parents=True, exist_ok=True)
            with atomic_writer(dst, "wb") as fh:
                fh.write(src.read_bytes())
            keep.add(dst)
        write_partitions(SERVED, [], keep=keep)
    else:
        write_partitions(SERVED, parts)


@click.command()
def main() -> None:
    doc = checked_params()
    try:
        cfg = system_config(doc["system"])
    except ValueError as exc:
        fail(f"params.yaml {exc}")
    try:
        where = check_executor(doc.get("executor"))  # not a DVC param: it never changes a result
    except ParamsError as exc:
        fail(str(exc))
    entries = [e for _, e in iter_jsonl(VALID_DIR / "dev.jsonl")]
    frames, provenance = served_atoms(cfg.atoms)
    write_served(frames)
    served = load_served(SERVED)
    atoms = pd.concat([f[SYSTEM_COLUMNS] for f in served.values()], ignore_index=True)

    from bench.ingest.corpus import Manifest, load_segments

    try:
        with open_executor(where.kind, where.address, where.workers) as ex, using(ex):
            start = time.perf_counter()
            with open_system(
                cfg, served, atoms,
                segments=load_segments(SEGMENTS) if cfg.adapter == "command" else None,
                manifest_rows=list(Manifest.load(MANIFEST).rows) if cfg.adapter == "command" else [],
                store=STORE, root=ROOT, temp_root=system_temp_root(ROOT), protected=protected_paths(ROOT), host_env=os.environ,
            ) as opened:
                build_s = time.perf_counter() - start  # a Python system's index build (a command system starts in the run)
                start = time.perf_counter()
                result = run_queries(
                    opened.adapter, entries, cfg.depth, timeout_s=cfg.timeout_s, concurrency=cfg.concurrency,
                    warmup=cfg.warmup, known_atoms=set(atoms["atom_id"].astype(str)), executor=ex,
                )
                run_s = time.perf_counter() - start
                declared = bool(getattr(opened.adapter, "abstains", False))
                sandbox_info = opened.info
    except (SandboxError, ExecutorError) as exc:
        fail(str(exc))
    except MissingExtra as exc:
        fail(f"params.yaml system: {exc}")
    except SystemCrash as exc:
        fail(f"system {cfg.name!r} could not be started: {exc}")
    except (ValueError, RuntimeError) as exc:
        fail(f"system {cfg.name!r}: {exc}")

    lat = latency_percentiles(result.latency["latency_ms"])
    info = {
        "name": cfg.name,
        "adapter": cfg.adapter,
        "entry": cfg.entry,
        "depth": cfg.depth,
        "atoms": len(atoms),
        "atoms_source": provenance,
        "concurrency": cfg.concurrency,
        "timeout_s": cfg.timeout_s,
        "warmup_queries": result.info["warmup_queries"],
        "warm": result.info["warm"],
        "restarts": result.info["restarts"],
        "queries": len(entries),
        "failed": len(result.failures),
        "failed_by_kind": {str(k): int(v) for k, v in result.failures["kind"].value_counts().sort_index().items()},
        "latency": lat,
        "index_build_s": round(build_s, 3),
        "isolation": sandbox_info["isolation"],
        "isolation_note": sandbox_info.get("isolation_note", ""),
        "sandbox": cfg.sandbox,
        "abstains": declared or bool(result.latency["abstain"].any()),
        "abstains_declared": declared,
        "run_s": round(run_s, 3),
        # where the queries ran (params executor; never part of dev.json)
        "executor": where.kind,
        "in_flight": result.info["in_flight"],
        "answered_on": result.info["answered_on"],
    }
    try:  # atoms as integer codes into the served table, query ids categorical (bench/evaluation/atom_codes.py)
        coded = to_codes(result.run, served_ids(served), "run")
    except AtomCodeError as exc:
        fail(f"system {cfg.name!r}: {exc}")
    write_parquet(RUNS / "dev.parquet", coded)
    write_parquet(RUNS / "latency.parquet", result.latency)
    write_parquet(RUNS / "failures.parquet", result.failures)
    write_json(RUNS / "system.json", info)
    write_json(SERVED / "served.json", {**provenance, "atoms": {m: int(n) for m, n in atoms["modality"].value_counts().sort_index().items()}})
    write_text(REPORTS / "runs" / "dev.run", trec_run(result.run, cfg.name.replace(" ", "_")))
    p50 = "—" if lat["p50_ms"] is None else f"{lat['p50_ms']:.2f} ms"
    click.echo(
        f"retrieve: {cfg.name} ({cfg.adapter}): {len(entries)} queries over {len(atoms)} atoms; "
        f"failed {len(result.failures)}; p50 {p50} (n={lat['n']}, concurrency {cfg.concurrency}, warm-up {result.info['warmup_queries']})"
    )


if __name__ == "__main__":
    main()
