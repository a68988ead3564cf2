"""DVC stage retrieve: run the system under test on the valid dev entries.

1. The sandbox of a command system is chosen first (bench/systems/sandbox/isolation.py); a
   refusal writes nothing, and the run's outputs are `persist`: they stay as they were.
2. The served atoms: the harness's chunks (data/atoms) or, with `system.atoms`, the
   system's own atoms file, checked against the contract; written to data/served/.
3. The system, through the adapter `system.adapter` names (docs/systems.md), in a fresh
   working folder under a per-checkout temp root, shown only its declared code
   (`system.code`); every dev query timed, failures recorded, malformed answers and a
   run of consecutive failures stop the stage. A built-in system's answers whose every input
   (query, params, code, the served atoms of the parts it reads) an earlier run had are reused
   with their latency (bench.systems.partwise; the latency table names the run that measured each).
4. The run's gold (bench.gold.step), once the system has answered every query: written to
   data/resolved/ and reports/runs/dev.qrels with the run, in one atomic block. Not a stage of
   its own: it changes only with the run, and a stage costs a Python start and DVC's own work.

The steps are bench.systems.step (serve, then retrieve) and bench.gold.step; this script reads
params and paths and writes.
"""

from __future__ import annotations

import os

import click

from bench.gold.step import resolve_run, write_gold
from bench.ingest.partitions import partitions
from bench.io import atomic_outputs, iter_jsonl, write_json, write_parquet, write_text
from bench.memo import Memo
from bench.project import layout
from bench.project.layout import ATOMS, MANIFEST, MEMORIES, REPORTS, ROOT, RUNS, SEGMENTS, SERVED, STORE, VALID_DIR, fail, memo_dir
from bench.project.selection import config, mirror_roots
from bench.systems.config import check_system
from bench.systems.step import RetrievePaths, StepError, SystemPlaces, retrieve, serve, write_served
from bench.trec.files import trec_qrels, trec_run


@click.command()
def main() -> None:
    cfg = config()
    try:
        system = check_system(cfg.system)
    except ValueError as exc:
        fail(str(exc))
    entries = [e for _, e in iter_jsonl(VALID_DIR / "dev.jsonl")]
    if not SEGMENTS.is_dir() or not any(SEGMENTS.glob("*/*.parquet")):
        fail("no segments; run the extract stage first")
    places = SystemPlaces.of_project(ROOT, STORE, os.environ, mirror_roots(list(cfg.fetch.mirror_dirs), os.environ, ROOT),
                                     list(cfg.local_datasets))
    paths = RetrievePaths(atoms=ATOMS, segments=SEGMENTS, manifest=MANIFEST, served=SERVED)
    try:  # where: params executor, not a DVC param (it never changes a result)
        serving = serve(system, paths, places)  # a refused sandbox or atoms file: nothing written
        write_served(serving.parts, paths)  # the atoms the system reads
        tag = system.name.replace(" ", "_")
        out = retrieve(system, entries, serving, paths=paths, places=places, where=cfg.executor, memo=Memo(memo_dir(ROOT)),
                       text=lambda run: trec_run(run, tag))
    except StepError as exc:
        fail(str(exc))
    # the run's gold, over the atoms it served and the memories it wrote
    gold = resolve_run(entries, partitions(SERVED), SEGMENTS, out.memories, out.units, out.hits, replay=bool(out.info["replay"]))
    with atomic_outputs(on_disk_full=fail):  # the run's files change together or not at all
        write_parquet(RUNS / "dev.parquet", out.run)
        write_parquet(RUNS / "latency.parquet", out.result.latency)
        write_parquet(RUNS / "failures.parquet", out.result.failures)
        write_parquet(RUNS / "ingest.parquet", out.result.ingest)
        write_json(RUNS / "system.json", out.info)
        write_parquet(MEMORIES / "memories.parquet", out.memories)
        write_parquet(MEMORIES / "units.parquet", out.units)
        write_parquet(MEMORIES / "hits.parquet", out.hits)
        write_json(MEMORIES / "replay.json", {"replay": out.info["replay"], "given_atoms": out.info["given_atoms"]})
        write_json(SERVED / "served.json", out.served)
        write_text(REPORTS / "runs" / "dev.run", trec_run(out.result.run, tag) if out.trec is None else out.trec)
        write_gold(layout.RESOLVED, gold)
        write_text(REPORTS / "runs" / "dev.qrels", trec_qrels(gold.qrels))
    click.echo(out.summary)
    click.echo(f"retrieve: gold of {len(entries)} entries: {gold.summary}")


if __name__ == "__main__":
    main()
