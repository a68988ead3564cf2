"""DVC stage extract: parse present corpus files into segments (data/segments/<key>.parquet)."""

from __future__ import annotations

import click

from bench.corpus import IntegrityError, Manifest, extract_all
from bench.io import write_parquet
from stages.common import MANIFEST, ROOT, SEGMENTS, STORE, fail


@click.command()
def main() -> None:
    ocr_stats: dict[str, dict[str, int]] = {}
    try:
        frames = extract_all(Manifest.load(MANIFEST), STORE, ocr_cache=ROOT / "data" / "ocr-cache", ocr_stats=ocr_stats)
    except IntegrityError as exc:
        fail(str(exc))
    # each file is replaced atomically; files of datasets that no longer have segments go
    SEGMENTS.mkdir(parents=True, exist_ok=True)
    for key, frame in frames.items():
        write_parquet(SEGMENTS / f"{key}.parquet", frame)
        click.echo(f"extract: {key}: {len(frame)} segments from {frame['source_id'].nunique()} sources")
        if key in ocr_stats:
            click.echo(f"extract: {key}: OCR cache {ocr_stats[key]['hits']} hits, {ocr_stats[key]['misses']} misses")
    for stale in SEGMENTS.glob("*.parquet"):
        if stale.stem not in frames:
            stale.unlink()

if __name__ == "__main__":
    main()
