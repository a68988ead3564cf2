"""DVC stage resolve: gold regions of dev entries -> overlapping atom codes, each region
typed and placed in its modality's unit, the gold sources' segments (data/resolved/,
bench.evaluation.resolved) and the TREC qrels.

The served atoms are read partition by partition (data/served/<modality>/<dataset>.parquet),
keeping only the rows of gold sources: bench.evaluation.resolve.resolve_files."""

from __future__ import annotations

import click

from bench.evaluation.atom_codes import partition_ids
from bench.evaluation.resolve import resolve_files
from bench.evaluation.resolved import write_resolved
from bench.evaluation.retrieve import trec_qrels
from bench.ingest.partitions import partitions
from bench.io import iter_jsonl, write_text
from bench.project.layout import REPORTS, RESOLVED, SEGMENTS, SERVED, VALID_DIR, fail


@click.command()
def main() -> None:
    entries = [e for _, e in iter_jsonl(VALID_DIR / "dev.jsonl")]
    if not SEGMENTS.is_dir() or not any(SEGMENTS.glob("*/*.parquet")):
        fail("no segments; run the extract stage first")
    # the atoms the system under test serves (its own, or the harness chunks): see stages/retrieve.py
    served = partitions(SERVED)
    found = resolve_files(entries, served, SEGMENTS)
    # gold (atom codes into data/served), typed and placed regions, the gold sources' segments, unreadable gold
    write_resolved(RESOLVED, found)
    gold, regions = found.gold, found.regions
    qrels = gold.assign(atom_id=partition_ids(gold["atom"], served).to_numpy(), query_id=gold["query_id"].astype(str))
    write_text(REPORTS / "runs" / "dev.qrels", trec_qrels(qrels))
    missed = int((regions["n_atoms"] == 0).sum())
    click.echo(
        f"resolve: {len(regions)} gold regions of {len(entries)} entries -> {len(gold)} (region, atom) pairs "
        f"over {len(served)} served partitions; {missed} regions overlap no atom"
    )


if __name__ == "__main__":
    main()
