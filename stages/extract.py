"""DVC stage extract: parse present corpus files into segments (data/segments/<key>.parquet)."""

from __future__ import annotations

import click

from bench.corpus import UNREADABLE, IntegrityError, Manifest, extract_all
from bench.io import write_json, write_parquet
from bench.modalities.local import LocalDataError
from stages.common import MANIFEST, SEGMENTS, STORE, fail, local_datasets


@click.command()
def main() -> None:
    local_datasets()  # folders of params local_datasets take part (docs/local-data.md)
    unreadable: list[dict] = []  # files extract cannot read: their entries become invalid (validate)
    try:
        frames = extract_all(Manifest.load(MANIFEST), STORE, unreadable)
    except (IntegrityError, LocalDataError) as exc:
        fail(str(exc))
    write_json(SEGMENTS / UNREADABLE, unreadable)
    for row in unreadable:
        click.echo(f"extract: unreadable: {row['key']}/{row['path']}: {row['reason']}", err=True)
    # each file is replaced atomically; files of datasets that no longer have segments go
    SEGMENTS.mkdir(parents=True, exist_ok=True)
    for key, frame in frames.items():
        write_parquet(SEGMENTS / f"{key}.parquet", frame)
        click.echo(f"extract: {key}: {len(frame)} segments from {frame['source_id'].nunique()} sources")
    for stale in SEGMENTS.glob("*.parquet"):
        if stale.stem not in frames:
            stale.unlink()

if __name__ == "__main__":
    main()
