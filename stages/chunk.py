"""DVC stage chunk: segments -> atoms (data/atoms/<modality>.parquet) per params chunking.*."""

from __future__ import annotations

import click

from bench.executor import ExecutorError, open_executor
from bench.ingest.chunking import atom_stats, chunk_files
from bench.ingest.store import segment_files
from bench.io import write_json, write_parquet
from bench.params import ParamsError, check_executor
from bench.project.layout import ATOMS, SEGMENTS, fail
from bench.project.selection import params


@click.command()
def main() -> None:
    cfg = params()
    try:
        where = check_executor(cfg.get("executor"))  # not a DVC param: it never changes a result
    except ParamsError as exc:
        fail(str(exc))
    files = segment_files(SEGMENTS) if SEGMENTS.is_dir() else []
    if not files:
        fail(f"no segments in {SEGMENTS.name}/<modality>/; run the extract stages first")
    try:
        # one task per segment file (modality and data set), reading only that file
        with open_executor(where["kind"], where["address"], where["workers"]) as ex:
            atoms = chunk_files(files, cfg["chunking"], ex)
    except ExecutorError as exc:
        fail(str(exc))
    except (ValueError, KeyError) as exc:
        fail(f"params.yaml chunking: {exc}")
    ATOMS.mkdir(parents=True, exist_ok=True)
    stats = {}
    for modality, frame in atoms.items():
        write_parquet(ATOMS / f"{modality}.parquet", frame)
        stats[modality] = atom_stats(frame)
        click.echo(f"chunk: {modality}: {stats[modality]}")
    for stale in ATOMS.glob("*.parquet"):
        if stale.stem not in atoms:
            stale.unlink()
    write_json(ATOMS / "stats.json", stats)


if __name__ == "__main__":
    main()
