"""DVC stage fetch: corpus files into data/corpus/, listed in bench/corpus/manifest.jsonl.

Params are checked first (bench.project.selection.config). Every file lands in the store
atomically; the manifest is replaced atomically at the end; folders of data sets no
longer selected are removed only after that success. An unsafe archive (absolute or
'..' member, a link, a bomb) stops the stage with one line naming archive and member,
and, like any refusal, leaves the previous manifest and store as they were (the
outputs are `persist` in dvc.yaml, so DVC does not delete them before the run).

Local data sets (params `local_datasets`, docs/local-data.md) are fetched from their
folder like a mirror: every file is hashed into the manifest under the folder's
revision. `--fingerprint FOLDER` is the command of the `local` stage (one per
folder, whose DVC dependency is the folder itself): it records the folder's file
hashes in bench/corpus/local/<key>.json, a dependency of this stage, so that a
change in the folder re-runs fetch.
"""

from __future__ import annotations

import shutil

import click

from bench.archive import ArchiveError
from bench.corpus_sources import datasets
from bench.ingest.fetch import FetchJob, FetchLog, fetch_datasets, network_available, sort_manifest
from bench.io import write_json, write_jsonl
from bench.project.layout import LOCAL_FINGERPRINTS, MANIFEST, ROOT, STORE, fail
from bench.project.selection import config, enabled_datasets, mirror_roots


def fingerprint(folder: str) -> None:
    from bench.modalities.local import LocalDataError, load
    from bench.modalities.local import fingerprint as of

    try:
        ds = load(ROOT / folder, folder)
    except LocalDataError as exc:
        fail(str(exc))
    write_json(LOCAL_FINGERPRINTS / f"{ds.key}.json", of(ds))
    click.echo(f"local: {folder}: {len(ds.paths)} corpus files of {ds.key} at revision {ds.revision}")


@click.command()
@click.option("--download", type=click.Choice(["auto", "never", "always"]), default=None, help="override fetch.download")
@click.option("--fingerprint", "local_folder", default=None, help="record a local data set folder's file hashes (the `local` stage)")
def main(download: str | None, local_folder: str | None) -> None:
    if local_folder is not None:
        fingerprint(local_folder)
        return
    cfg = config().fetch
    keys = enabled_datasets()
    mode = download or cfg.download
    allow = mode == "always" or (mode == "auto" and network_available())
    roots = mirror_roots(list(cfg.mirror_dirs))  # $BENCH_MIRROR_DIRS overrides; relative to the repo root
    log = FetchLog()
    jobs = []
    for key in keys:
        ds = datasets()[key]
        local = getattr(ds, "folder", None)
        if local is not None:  # a local data set: its folder is its only "mirror", never downloaded
            jobs.append(FetchJob(ds, [local.resolve().parent], False))
        else:
            jobs.append(FetchJob(ds, roots, allow))
    try:
        rows = fetch_datasets(jobs, STORE, log)  # data sets concurrently (bench.ingest.fetch)
    except ArchiveError as exc:
        fail(f"fetch: refused: {str(exc).replace(str(ROOT) + '/', '')}; nothing written to the manifest")
    write_jsonl(MANIFEST, sort_manifest(rows))
    # after success only: data sets no longer selected leave the store
    for folder in sorted(STORE.iterdir()) if STORE.is_dir() else []:
        if folder.is_dir() and not folder.name.startswith(".") and folder.name not in keys:
            shutil.rmtree(folder)
    present = sum(r["status"] == "present" for r in rows)
    click.echo(f"fetch: {len(rows)} files, {present} present, {len(rows) - present} unavailable (downloads {'on' if allow else 'off'})")
    for line in log.quarantined:
        click.echo(f"quarantined: {line}", err=True)
    for line in log.problems:
        click.echo(f"note: {line}", err=True)


if __name__ == "__main__":
    main()
