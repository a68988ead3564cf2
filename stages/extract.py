"""DVC stage extract: parse present corpus files into segments (data/segments/<key>.parquet)."""

from __future__ import annotations

import click

from bench.corpus import IntegrityError, Manifest, extract_all
from bench.io import write_parquet
from bench.modalities.local import LocalDataError
from stages.common import MANIFEST, SEGMENTS, STORE, fail, local_datasets


@click.command()
def main() -> None:
    local_datasets()  # folders of params local_datasets take part (docs/local-data.md)
    try:
        frames = extract_all(Manifest.load(MANIFEST), STORE)
    except (IntegrityError, LocalDataError) as exc:
        fail(str(exc))
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
