"""DVC stage chunk: segments -> atoms (data/atoms/<modality>.parquet) per params chunking.*."""

from __future__ import annotations

import click

from bench.ingest.chunking import atom_stats, chunk_all
from bench.ingest.store import load_segments
from bench.io import write_json, write_parquet
from bench.project.layout import ATOMS, SEGMENTS, fail
from bench.project.selection import params


@click.command()
def main() -> None:
    segments = load_segments(SEGMENTS)
    if segments is None:
        fail(f"no segments in {SEGMENTS.name}/<modality>/; run the extract stages first")
    try:
        atoms = chunk_all(segments, params()["chunking"])
    except (ValueError, KeyError) as exc:
        fail(f"params.yaml chunking: {exc}")
    ATOMS.mkdir(parents=True, exist_ok=True)
    stats = {}
    for modality, frame in atoms.items():
        write_parquet(ATOMS / f"{modality}.parquet", frame)
        stats[modality] = atom_stats(frame)
        click.echo(f"chunk: {modality}: {stats[modality]}")
    for stale in ATOMS.glob("*.parquet"):
        if stale.stem not in atoms:
            stale.unlink()
    write_json(ATOMS / "stats.json", stats)


if __name__ == "__main__":
    main()
