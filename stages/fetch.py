"""DVC stage fetch: corpus files into data/corpus/, listed in bench/corpus/manifest.jsonl.

Local data sets (params `local_datasets`, docs/local-data.md) are fetched from their
folder like a mirror: every file is hashed into the manifest under the folder's
revision. `--fingerprint FOLDER` is the command of the `local` stage (one per
folder, whose DVC dependency is the folder itself): it records the folder's file
hashes in bench/corpus/local/<key>.json, a dependency of this stage, so that a
change in the folder re-runs fetch.
"""

from __future__ import annotations

import click

from bench.fetch import FetchLog, fetch_dataset, network_available, sort_manifest
from bench.io import write_json, write_jsonl
from bench.modalities import datasets
from stages.common import LOCAL_FINGERPRINTS, MANIFEST, ROOT, STORE, enabled_datasets, fail, params


def fingerprint(folder: str) -> None:
    from bench.modalities.local import LocalDataError, fingerprint as of, load

    try:
        ds = load(ROOT / folder, folder)
    except LocalDataError as exc:
        fail(str(exc))
    write_json(LOCAL_FINGERPRINTS / f"{ds.key}.json", of(ds))
    click.echo(f"local: {folder}: {len(ds.paths)} corpus files of {ds.key} at revision {ds.revision}")


@click.command()
@click.option("--download", type=click.Choice(["auto", "never", "always"]), default=None, help="override fetch.download")
@click.option("--fingerprint", "folder", default=None, help="record a local data set folder's file hashes (the `local` stage)")
def main(download: str | None, folder: str | None) -> None:
    if folder is not None:
        fingerprint(folder)
        return
    cfg = params()["fetch"]
    mode = download or cfg.get("download", "auto")
    allow = mode == "always" or (mode == "auto" and network_available())
    roots = [(ROOT / d).resolve() for d in cfg["mirror_dirs"]]
    log = FetchLog()
    rows: list[dict] = []
    for key in enabled_datasets():
        ds = datasets()[key]
        local = getattr(ds, "folder", None)
        # a local data set: its folder is its only "mirror", never downloaded
        rows.extend(fetch_dataset(ds, STORE, [local.resolve().parent], False, log) if local is not None else fetch_dataset(ds, STORE, roots, allow, log))
    write_jsonl(MANIFEST, sort_manifest(rows))
    present = sum(r["status"] == "present" for r in rows)
    click.echo(f"fetch: {len(rows)} files, {present} present, {len(rows) - present} unavailable (downloads {'on' if allow else 'off'})")
    for line in log.quarantined:
        click.echo(f"quarantined: {line}", err=True)
    for line in log.problems:
        click.echo(f"note: {line}", err=True)


if __name__ == "__main__":
    main()
