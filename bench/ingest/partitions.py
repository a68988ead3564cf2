"""Atoms on disk, partitioned by modality and data set.

The chunk stage writes ``data/atoms/<modality>/<dataset>.parquet`` (one file per
segment file, so per modality and data set) and the retrieve stage copies them, or
the system's own atoms split the same way, to ``data/served/``. A reader takes one
partition at a time: resolve streams the partitions and keeps only the rows of gold
sources (bench.gold.resolve.resolve_files), so no step of it holds the corpus.

The *served table* is the partitions in code order (modality name, then data set
key) with rows in file order; an atom's code is its row there
(bench.ingest.atom_codes). :func:`partitions` gives each partition's first code
from the files' Parquet footers, without reading a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.io import write_parquet

__all__ = ["Partition", "concat_partitions", "partition_files", "partitions", "read_modalities", "scan_files", "scan_sources",
           "write_partitions"]


@dataclass(frozen=True)
class Partition:
    """One partition file of a served table."""

    modality: str
    dataset: str
    path: Path
    offset: int  # code of its first atom (rows of the partitions before it)
    rows: int


def partition_files(folder: Path) -> list[Path]:
    """``<folder>/<modality>/<dataset>.parquet`` in code order: modality name, then data set key."""
    return sorted(Path(folder).glob("*/*.parquet"), key=lambda p: (p.parent.name, p.stem))


def partitions(folder: Path) -> list[Partition]:
    """The partitions under `folder` with their first codes (row counts from the Parquet footers)."""
    out: list[Partition] = []
    start = 0
    for path in partition_files(folder):
        rows = pq.ParquetFile(path).metadata.num_rows
        out.append(Partition(path.parent.name, path.stem, path, start, rows))
        start += rows
    return out


def concat_partitions(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """One modality's partitions as one frame, rows in partition order; empty partitions
    are left out (their all-null columns would change the dtypes) unless all are empty."""
    parts = [f for f in frames if len(f)] or frames[:1]
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)


def read_modalities(folder: Path) -> dict[str, pd.DataFrame]:
    """modality -> its partitions read and concatenated (the served table, in code order)."""
    by_modality: dict[str, list[pd.DataFrame]] = {}
    for part in partitions(folder):
        by_modality.setdefault(part.modality, []).append(pd.read_parquet(part.path))
    return {m: concat_partitions(frames) for m, frames in by_modality.items()}


def write_partitions(folder: Path, parts: Iterable[tuple[str, str, pd.DataFrame]], keep: Iterable[Path] = ()) -> list[Path]:
    """Write (modality, dataset, frame) partitions under `folder`, each atomically, and
    remove partition files that are neither among them nor in `keep` (files the caller
    wrote); other files of `folder` stay. Returns the written paths."""
    written: list[Path] = []
    for modality, dataset, frame in parts:
        path = Path(folder) / modality / f"{dataset}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_parquet(path, frame)
        written.append(path)
    keep = {*written, *keep}
    for stale in Path(folder).glob("*/*.parquet"):
        if stale not in keep:
            stale.unlink()
    for sub in Path(folder).iterdir() if Path(folder).is_dir() else []:
        if sub.is_dir() and not any(sub.iterdir()):
            sub.rmdir()
    return written


def scan_sources(path: Path, sources: pa.Array, batch_rows: int = 65_536) -> Iterator[tuple[pd.DataFrame, pa.Array]]:
    """The rows of one Parquet file whose ``source_id`` is in `sources`, batch by batch:
    (rows as pandas, their row positions in the file). Reads `batch_rows` rows at a time,
    so memory holds one batch plus the kept rows, whatever the file's size."""
    start = 0
    file = pq.ParquetFile(path)
    for batch in file.iter_batches(batch_size=batch_rows):
        column = batch.column("source_id")
        if pa.types.is_null(column.type):  # every source_id null (a frame written without one): no row is wanted
            start += batch.num_rows
            continue
        mask = pc.is_in(column.cast(sources.type), value_set=sources)
        kept = pc.indices_nonzero(mask)
        if len(kept):
            table = pa.Table.from_batches([batch.take(kept)], schema=file.schema_arrow)
            yield table.to_pandas(), pc.add(kept.cast(pa.int64()), start)
        start += batch.num_rows


def scan_files(paths: Iterable[Path], sources: pa.Array, batch_rows: int = 65_536) -> pd.DataFrame:
    """The rows of `sources` in every file of `paths` (in that order), as one frame (only a
    ``source_id`` column when there are none): e.g. the gold sources' segments."""
    frames = [rows for path in paths for rows, _ in scan_sources(path, sources, batch_rows)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["source_id"])
