"""DVC stage validate: check every set; pass only valid dev entries downstream.

Writes data/sets/dev.jsonl (valid dev entries), data/sets/invalid.jsonl (entries that
are invalid as samples here, with the reason) and data/sets/summary.json (counts and
the sha256 of the manifest and of every set file). Test entries never leave this
stage: they are counted, not written (only the acceptance stage, run by `bench accept`,
evaluates them; it validates the sets again itself). Every set is also checked against
the split lock bench/sets/splits.lock (bench/annotations/splits.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from bench.annotations.splits import committed_lock, load_lock
from bench.annotations.validate import ValidationResult, format_table, invalid_counts, validate
from bench.ingest.store import Manifest, load_segments, read_unreadable
from bench.io import LineError, atomic_dir, sha256_file, write_json, write_jsonl
from bench.project.layout import MANIFEST, ROOT, SEGMENTS, SPLIT_LOCK, VALID_DIR, fail
from bench.project.selection import set_files


@click.command()
def main() -> None:
    paths = set_files()
    try:
        manifest = Manifest.load(MANIFEST)
        lock = load_lock(SPLIT_LOCK, SPLIT_LOCK.relative_to(ROOT).as_posix()) if SPLIT_LOCK.is_file() else None
    except LineError as exc:
        fail(str(exc))
    if lock is None:
        fail(f"{SPLIT_LOCK.relative_to(ROOT).as_posix()}: no split lock; freeze the splits with `bench splits freeze --reason ...`")
    committed = committed_lock(ROOT, SPLIT_LOCK.relative_to(ROOT).as_posix())
    try:
        unreadable = read_unreadable(SEGMENTS)
    except LineError as exc:
        fail(str(exc))
    result = validate(paths, manifest, load_segments(SEGMENTS), root=ROOT, lock=lock, committed=committed, unreadable=unreadable)
    if not result.ok:
        click.echo(format_table(result.errors), err=True)
        fail(f"{len(result.errors)} problems in {result.errors['file'].nunique()} set file(s); nothing written")
    dev = result.dev()
    by_split: dict[str, int] = {}
    for e in result.entries:
        by_split[e["split"]] = by_split.get(e["split"], 0) + 1
    # the three files replace the previous data/sets/ together, only after success
    with atomic_dir(VALID_DIR) as out:
        _write(out, result, dev, by_split, paths)
    click.echo(f"validate: {len(result.entries)} entries in {len(paths)} sets; {len(dev)} valid dev; invalid: {invalid_counts(result.invalid)}")


def _write(out: Path, result: ValidationResult, dev: list[dict], by_split: dict[str, int], paths: list[Path]) -> None:
    write_jsonl(out / "dev.jsonl", dev)
    write_jsonl(out / "invalid.jsonl", [r for r in result.invalid if r["split"] == "dev"])
    write_json(
        out / "summary.json",
        {
            "entries": len(result.entries),
            "by_split": dict(sorted(by_split.items())),
            "valid_dev": len(dev),
            "invalid": invalid_counts(result.invalid),
            "sha256": {
                "manifest": sha256_file(MANIFEST),
                "sets": {os.path.relpath(p.resolve(), ROOT).replace(os.sep, "/"): sha256_file(p) for p in paths},
                "split_lock": sha256_file(SPLIT_LOCK),
            },
        },
    )


if __name__ == "__main__":
    main()
