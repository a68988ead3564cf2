"""DVC stage fetch: corpus files into data/corpus/, listed in bench/corpus/manifest.jsonl."""

from __future__ import annotations

import click

from bench.fetch import FetchLog, fetch_dataset, network_available, sort_manifest
from bench.io import write_jsonl
from bench.modalities import datasets
from stages.common import MANIFEST, STORE, enabled_datasets, mirror_roots, params


@click.command()
@click.option("--download", type=click.Choice(["auto", "never", "always"]), default=None, help="override fetch.download")
def main(download: str | None) -> None:
    cfg = params()["fetch"]
    mode = download or cfg.get("download", "auto")
    allow = mode == "always" or (mode == "auto" and network_available())
    roots = mirror_roots(cfg["mirror_dirs"])  # $BENCH_MIRROR_DIRS overrides; relative to the repo root
    log = FetchLog()
    rows: list[dict] = []
    for key in enabled_datasets():
        ds = datasets()[key]
        rows.extend(fetch_dataset(ds, STORE, roots, allow, log))
    write_jsonl(MANIFEST, sort_manifest(rows))
    present = sum(r["status"] == "present" for r in rows)
    click.echo(f"fetch: {len(rows)} files, {present} present, {len(rows) - present} unavailable (downloads {'on' if allow else 'off'})")
    for line in log.quarantined:
        click.echo(f"quarantined: {line}", err=True)
    for line in log.problems:
        click.echo(f"note: {line}", err=True)


if __name__ == "__main__":
    main()
