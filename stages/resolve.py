"""DVC stage resolve: gold regions of dev entries -> overlapping atom codes, each region
typed and placed in its modality's unit, the gold sources' segments (data/resolved/,
bench.gold.table), the memory hits' gold by provenance (bench.gold.memories)
and the TREC qrels.

The served atoms are read partition by partition (data/served/<modality>/<dataset>.parquet),
keeping only the rows of gold sources: bench.gold.resolve.resolve_files."""

from __future__ import annotations

import dataclasses

import click

from bench.gold.memories import read_memories, with_memories, write_memories
from bench.gold.resolve import resolve_files
from bench.gold.table import write_resolved
from bench.ingest.atom_codes import ATOM_CODE, partition_ids
from bench.ingest.partitions import partitions
from bench.io import iter_jsonl, write_text
from bench.project.layout import MEMORIES, REPORTS, RESOLVED, SEGMENTS, SERVED, VALID_DIR, fail
from bench.trec.files import trec_qrels


@click.command()
def main() -> None:
    entries = [e for _, e in iter_jsonl(VALID_DIR / "dev.jsonl")]
    if not SEGMENTS.is_dir() or not any(SEGMENTS.glob("*/*.parquet")):
        fail("no segments; run the extract stage first")
    # the atoms the system under test serves (its own, or the harness chunks): see stages/retrieve.py
    served = partitions(SERVED)
    found = resolve_files(entries, served, SEGMENTS)
    # the run's memory hits resolve by their provenance (bench/gold/memories.py); codes after the served atoms'
    memories, units, hits, replay = read_memories(MEMORIES)
    mem = with_memories(entries, found.gold, found.segments, memories, units, hits, given_atoms=not replay.get("replay", False))
    # gold (atom codes into data/served, memories after), typed and placed regions, the gold sources' segments, unreadable gold
    write_resolved(RESOLVED, dataclasses.replace(found, gold=mem.gold))
    write_memories(RESOLVED, mem, hits)
    gold, regions = mem.gold, found.regions
    qrels = gold.assign(atom_id=partition_ids(gold[ATOM_CODE], served, mem.ids).to_numpy(), query_id=gold["query_id"].astype(str))
    write_text(REPORTS / "runs" / "dev.qrels", trec_qrels(qrels))
    missed = int((regions["n_atoms"] == 0).sum())
    click.echo(
        f"resolve: {len(regions)} gold regions of {len(entries)} entries -> {len(gold)} (region, atom) pairs "
        f"over {len(served)} served partitions; {missed} regions overlap no atom"
    )


if __name__ == "__main__":
    main()
