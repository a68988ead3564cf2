"""`bench validate [FILES...]`: the set validator (bench.annotations.validate) as a command.

Reads the project's set files, manifest, segments and split lock, validates, and prints
one table of every failure (exit 1) or one line of counts. `bench/validate_sets.py FILE…`,
the validator the spec names, runs this same command. The validator is imported when the
command runs, so `bench --help` imports no pandas."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bench.project.layout import Layout, find_root
from bench.project.selection import local_datasets

if TYPE_CHECKING:
    import pandas as pd

    from bench.ingest.corpus import Manifest


def _segments(project: Layout, manifest: Manifest) -> pd.DataFrame | None:
    """data/segments, or (a checkout that never ran extract) the corpus parsed here."""
    import pandas as pd

    from bench.ingest.corpus import IntegrityError, extract_all, load_segments

    segments = load_segments(project.segments)
    if segments is not None:
        return segments
    try:
        frames = extract_all(manifest, project.store)
    except IntegrityError as exc:
        raise click.ClickException(str(exc)) from None
    return None if not frames else pd.concat(frames.values(), ignore_index=True)


@click.command("validate")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--manifest", type=click.Path(dir_okay=False), default=None, help="default: bench/corpus/manifest.jsonl")
def validate_command(files: tuple[str, ...], manifest: str | None) -> None:
    """Validate set files (default: bench/sets/*.jsonl and the local data sets'); exit 1 on any failure."""
    from bench.annotations.splits import committed_lock, load_lock
    from bench.annotations.validate import format_table, invalid_counts, validate
    from bench.ingest.corpus import Manifest, read_unreadable
    from bench.io import LineError

    project = Layout(find_root())
    root = project.root
    local = local_datasets(project)
    paths = [Path(f) for f in files] or sorted(project.sets_dir.glob("*.jsonl")) + [ds.set_path for ds in local]
    for p in paths:
        if not p.is_file():
            raise click.ClickException(f"{p}: no such set file")
    manifest_path = Path(manifest) if manifest else project.manifest
    if not manifest_path.is_file():
        raise click.ClickException(f"{manifest_path}: no manifest; run `dvc repro fetch` first")
    lock_path = project.split_lock
    try:
        man = Manifest.load(manifest_path)
        lock = load_lock(lock_path, "bench/sets/splits.lock") if lock_path.is_file() else None
        unreadable = read_unreadable(project.segments)
    except LineError as exc:
        raise click.ClickException(str(exc)) from None
    segments = _segments(project, man)
    result = validate(paths, man, segments, root=root, lock=lock, committed=committed_lock(root) if lock else None, unreadable=unreadable)
    if not result.ok:
        click.echo(format_table(result.errors))
        click.echo(f"{len(result.errors)} problems in {result.errors['file'].nunique()} file(s)", err=True)
        sys.exit(1)
    click.echo(f"ok: {len(result.entries)} entries in {len(paths)} file(s); invalid as samples here: {invalid_counts(result.invalid)}")
