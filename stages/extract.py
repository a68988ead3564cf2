"""DVC stage extract@<modality>: parse one modality's present corpus files into segments.

    python -m stages.extract pdf    ->  data/segments/pdf/<dataset key>.parquet

Imports only that modality's code (bench.modalities.load), so a change to another
modality's folder leaves this stage up to date (dvc.yaml: one stage per modality).
The modality's persistent OCR cache folder, data/ocr-cache/<modality>, is passed on.
"""

from __future__ import annotations

import click

from bench.executor import ExecutorError, open_executor
from bench.ingest.store import UNREADABLE, IntegrityError, Manifest, extract_datasets
from bench.io import write_json, write_parquet
from bench.modalities import load, names
from bench.modalities.local import LocalDataError
from bench.modalities.local import load as load_local
from bench.params import ParamsError, check_extract
from bench.project.layout import MANIFEST, OCR_CACHE, ROOT, SEGMENTS, STORE, fail, read_params


@click.command()
@click.argument("modality")
def main(modality: str) -> None:
    if modality not in names():
        fail(f"extract: unknown modality {modality!r}; known: {', '.join(names())}")
    package = load(modality)
    try:
        cfg = check_extract(read_params(), package.MODALITY)
        # local data sets of this modality (params local_datasets; docs/local-data.md)
        local = [ds for ds in (load_local(ROOT / f, str(f)) for f in cfg.local_datasets) if ds.modality == modality]
    except (ParamsError, LocalDataError) as exc:
        fail(str(exc))
    where = cfg.executor  # where the work runs (not a DVC param: it never changes a result)
    cache = OCR_CACHE / modality
    cache.mkdir(parents=True, exist_ok=True)
    unreadable: list[dict] = []  # files extract cannot read: their entries become invalid (validate)
    ocr_stats: dict[str, dict[str, int]] = {}
    try:
        with open_executor(where.kind, where.address, where.workers) as ex:
            frames = extract_datasets(Manifest.load(MANIFEST), STORE, [*package.DATASETS, *local], ocr_cache=cache, unreadable=unreadable,
                                      ocr_stats=ocr_stats, options=cfg.options, executor=ex)
    except (IntegrityError, LocalDataError, ExecutorError) as exc:
        fail(str(exc))
    # each file is replaced atomically; files of datasets that no longer have segments go
    out = SEGMENTS / modality
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / UNREADABLE, unreadable)
    for row in unreadable:
        click.echo(f"extract: unreadable: {row['key']}/{row['path']}: {row['reason']}", err=True)
    for key, frame in frames.items():
        write_parquet(out / f"{key}.parquet", frame)
        click.echo(f"extract: {modality}/{key}: {len(frame)} segments from {frame['source_id'].nunique()} sources")
        if key in ocr_stats:
            st = ocr_stats[key]
            click.echo(f"extract: {modality}/{key}: OCR cache {st['hits']} hits, {st['misses']} misses, {st.get('bad', 0)} bad entries re-OCR'd")
    for stale in out.glob("*.parquet"):
        if stale.stem not in frames:
            stale.unlink()
    if not frames:
        click.echo(f"extract: {modality}: no present corpus files of its data sets in the manifest")


if __name__ == "__main__":
    main()
