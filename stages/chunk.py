"""DVC stage chunk: segments -> atoms per params chunking.*, partitioned like the segments:
data/atoms/<modality>/<dataset>.parquet (bench.ingest.partitions), counts in data/atoms/stats.json."""

from __future__ import annotations

import click

from bench.executor import ExecutorError, open_executor
from bench.ingest.chunking import AtomLimitError, ChunkReuse, atom_limit, chunk_files, modality_stats, write_atoms
from bench.ingest.store import segment_files
from bench.io import write_json
from bench.memo import Memo
from bench.project.layout import ATOMS, ROOT, SEGMENTS, fail, memo_dir
from bench.project.selection import config, machine_memory


@click.command()
def main() -> None:
    cfg = config()
    where = cfg.executor  # not a DVC param: it never changes a result
    files = segment_files(SEGMENTS) if SEGMENTS.is_dir() else []
    if not files:
        fail(f"no segments in {SEGMENTS.name}/<modality>/; run the extract stages first")
    memory = machine_memory()
    reuse = ChunkReuse(Memo(memo_dir(ROOT)))  # a partition whose segments and chunking block were chunked before: reused (bench/memo.py)
    try:
        # one task per segment file (modality and data set), reading only that file
        with open_executor(where.kind, where.address, where.workers) as ex:
            atoms = chunk_files(files, cfg.chunking, ex, None if memory is None else atom_limit(memory), reuse)
    except (ExecutorError, AtomLimitError) as exc:
        fail(str(exc))
    except (ValueError, KeyError) as exc:
        fail(f"params.yaml chunking: {exc}")
    ATOMS.mkdir(parents=True, exist_ok=True)
    write_atoms(ATOMS, atoms, reuse)
    stats = modality_stats(atoms)
    for modality, st in stats.items():
        click.echo(f"chunk: {modality}: {st}")
    write_json(ATOMS / "stats.json", stats)


if __name__ == "__main__":
    main()
