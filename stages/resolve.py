"""DVC stage resolve: gold regions of dev entries -> overlapping atom ids (+ TREC qrels)."""

from __future__ import annotations

import click

from bench.evaluation.atom_codes import load_served, served_ids, with_atom_ids
from bench.evaluation.placement import place_regions
from bench.evaluation.resolve import resolve
from bench.evaluation.retrieve import trec_qrels
from bench.ingest.store import load_segments
from bench.io import iter_jsonl, write_json, write_parquet, write_text
from bench.modalities import unreadable_gold
from bench.project.layout import REPORTS, RESOLVED, SEGMENTS, SERVED, VALID_DIR, fail


@click.command()
def main() -> None:
    entries = [e for _, e in iter_jsonl(VALID_DIR / "dev.jsonl")]
    segments = load_segments(SEGMENTS)
    if segments is None:
        fail("no segments; run the extract stage first")
    # the atoms the system under test serves (its own, or the harness chunks): see stages/retrieve.py
    atoms = load_served(SERVED)
    gold, regions = resolve(entries, atoms, segments)
    # each region placed once, in its modality's unit (the chunk-fair metrics read these columns)
    regions = place_regions(regions, segments)
    write_parquet(RESOLVED / "gold.parquet", gold)  # atoms as codes into data/served (bench/evaluation/atom_codes.py)
    write_parquet(RESOLVED / "regions.parquet", regions)
    # answerable entries whose gold has no text to find (e.g. a text-less PDF page): the report lists them
    write_json(RESOLVED / "unreadable_gold.json", unreadable_gold(entries, segments))
    write_text(REPORTS / "runs" / "dev.qrels", trec_qrels(with_atom_ids(gold, served_ids(atoms))))
    missed = int((regions["n_atoms"] == 0).sum())
    click.echo(f"resolve: {len(regions)} gold regions of {len(entries)} entries -> {len(gold)} (region, atom) pairs; {missed} regions overlap no atom")


if __name__ == "__main__":
    main()
