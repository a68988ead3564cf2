"""DVC stage resolve: gold regions of dev entries -> overlapping atom codes, each region
placed in its modality's unit (+ TREC qrels).

The served atoms are read partition by partition (data/served/<modality>/<dataset>.parquet),
keeping only the rows of gold sources: bench.evaluation.resolve.resolve_partitions."""

from __future__ import annotations

import click

from bench.evaluation.memory_gold import read_memories, with_memories
from bench.evaluation.resolve import resolve_partitions
from bench.evaluation.retrieve import trec_qrels
from bench.ingest.partitions import partitions
from bench.io import iter_jsonl, write_json, write_parquet, write_text
from bench.project.layout import MEMORIES, REPORTS, RESOLVED, SEGMENTS, SERVED, VALID_DIR, fail


@click.command()
def main() -> None:
    entries = [e for _, e in iter_jsonl(VALID_DIR / "dev.jsonl")]
    if not SEGMENTS.is_dir() or not any(SEGMENTS.glob("*/*.parquet")):
        fail("no segments; run the extract stage first")
    # the atoms the system under test serves (its own, or the harness chunks): see stages/retrieve.py
    served = partitions(SERVED)
    found = resolve_partitions(entries, served, SEGMENTS)
    # the run's memory hits resolve by their provenance (bench/evaluation/memory_gold.py)
    memories, units, hits, replay = read_memories(MEMORIES)
    with_mem = with_memories(entries, found.gold, found.gold_atom_ids, found.gold_segments, memories, units, hits,
                             given_atoms=not replay.get("replay", False))
    gold, regions = with_mem.gold, found.regions
    write_parquet(RESOLVED / "gold.parquet", gold)  # atoms as codes into data/served, memories after (bench/evaluation/atom_codes.py)
    write_parquet(RESOLVED / "regions.parquet", regions)
    for name, frame in (("memories", with_mem.memories), ("memory_units", with_mem.units), ("memory_boxes", with_mem.boxes), ("memory_hits", hits)):
        write_parquet(RESOLVED / f"{name}.parquet", frame)
    # answerable entries whose gold has no text to find (e.g. a text-less PDF page): the report lists them
    write_json(RESOLVED / "unreadable_gold.json", found.unreadable)
    write_text(REPORTS / "runs" / "dev.qrels", trec_qrels(gold.assign(atom_id=with_mem.atom_ids.to_numpy(), query_id=gold["query_id"].astype(str))))
    missed = int((regions["n_atoms"] == 0).sum())
    click.echo(
        f"resolve: {len(regions)} gold regions of {len(entries)} entries -> {len(gold)} (region, atom) pairs "
        f"over {len(served)} served partitions; {missed} regions overlap no atom"
    )


if __name__ == "__main__":
    main()
