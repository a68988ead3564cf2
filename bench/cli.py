"""The `bench` command: validate sets, import data sets, list sources."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from bench.corpus import Manifest, load_segments
from bench.io import LineError


def project_root() -> Path:
    """The folder holding params.yaml: the current one or a parent."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "params.yaml").is_file() and (folder / "bench").is_dir():
            return folder
    return here


@click.group()
def cli() -> None:
    """Retrieval-evaluation harness for a multimodal memory system."""


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--manifest", type=click.Path(dir_okay=False), default=None, help="default: bench/corpus/manifest.jsonl")
def validate(files: tuple[str, ...], manifest: str | None) -> None:
    """Validate set files (default: bench/sets/*.jsonl); exit 1 on any failure."""
    from bench.corpus import IntegrityError, extract_all
    from bench.validate_sets import format_table, invalid_counts, validate as run_validate

    root = project_root()
    paths = [Path(f) for f in files] or sorted((root / "bench" / "sets").glob("*.jsonl"))
    for p in paths:
        if not p.is_file():
            raise click.ClickException(f"{p}: no such set file")
    manifest_path = Path(manifest) if manifest else root / "bench" / "corpus" / "manifest.jsonl"
    if not manifest_path.is_file():
        raise click.ClickException(f"{manifest_path}: no manifest; run `dvc repro fetch` first")
    try:
        man = Manifest.load(manifest_path)
    except LineError as exc:
        raise click.ClickException(str(exc)) from None
    segments = load_segments(root / "data" / "segments")
    if segments is None:
        try:
            frames = extract_all(man, root / "data" / "corpus")
        except IntegrityError as exc:
            raise click.ClickException(str(exc)) from None
        segments = None if not frames else __import__("pandas").concat(frames.values(), ignore_index=True)
    result = run_validate(paths, man, segments, root=root)
    if not result.ok:
        click.echo(format_table(result.errors))
        click.echo(f"{len(result.errors)} problems in {result.errors['file'].nunique()} file(s)", err=True)
        sys.exit(1)
    click.echo(f"ok: {len(result.entries)} entries in {len(paths)} file(s); invalid as samples here: {invalid_counts(result.invalid)}")


@cli.group()
def sets() -> None:
    """Annotation sets: import them from upstream data."""


@sets.command("import")
@click.argument("keys", nargs=-1, required=True)
@click.option("--mirror", type=click.Path(file_okay=False), default=None, help="mirror root (default: first of params fetch.mirror_dirs)")
def import_(keys: tuple[str, ...], mirror: str | None) -> None:
    """Import data sets by key (or 'all') into bench/sets/<key>.jsonl."""
    import yaml

    from bench.modalities import datasets
    from bench.sets_io import write_set

    root = project_root()
    if mirror is None:
        cfg = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
        mirror = str(root / cfg["fetch"]["mirror_dirs"][0])
    known = datasets()
    wanted = sorted(known) if keys == ("all",) else list(keys)
    for key in wanted:
        if key not in known:
            raise click.ClickException(f"unknown data set {key!r}; registered: {', '.join(sorted(known))}")
        ds = known[key]
        result = ds.import_set(Path(mirror) / ds.mirror_key)
        out = write_set(ds, result, root / "bench" / "sets")
        click.echo(f"{key}: {len(result.entries)} entries -> {out.relative_to(root)}; {len(result.excluded)} upstream rows excluded")


@cli.command()
def sources() -> None:
    """List every registered data set with its provenance."""
    from bench.modalities import datasets

    click.echo(json.dumps([ds.describe() for ds in datasets().values()], indent=2))


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
