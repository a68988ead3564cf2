"""Chunk parsed segments into atoms with each modality's configured strategy.

Every atom carries ``text_source``: ``ocr`` when its text (or part of it) was read
by the harness's OCR engine, ``layer`` when it comes from the source's own text
(a PDF text layer, transcripts, code, captions). A modality whose chunker does
not set it gets its `Modality.text_source`.

The atoms a chunking makes are bounded by the machine's memory: `atom_limit` atoms in
all (BYTES_PER_ATOM each, an estimate of what the later stages hold per atom); more is
refused with one line naming params.yaml `chunking.<modality>` before anything is
written. Windowed strategies are bounded before any work by bench/params.py
(MAX_WINDOW_REPEATS).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from bench.ingest.partitions import concat_partitions, write_partitions
from bench.io import sha256_file, write_bytes
from bench.memo import Memo
from bench.modalities import modalities

if TYPE_CHECKING:
    from bench.executor import Executor

#: the atom columns atom_stats reads
STAT_COLUMNS = ["text", "source_id", "text_source"]
#: what the stages after chunking hold per atom (text, extents, served copy, gold pairs), an estimate
BYTES_PER_ATOM = 4096


class AtomLimitError(ValueError):
    """A chunking makes more atoms than the machine holds (one line naming the params key)."""


def atom_limit(memory_bytes: int) -> int:
    """The most atoms a run may have on a machine with `memory_bytes` of memory."""
    return memory_bytes // BYTES_PER_ATOM


def chunk_modality(modality: str, segments: pd.DataFrame, config: dict[str, Any]) -> pd.DataFrame:
    """Atoms of one modality; `config` is that modality's block of params (strategy + the
    options its strategy reads: bench.params.check_chunking fills them all in)."""
    mod = modalities()[modality]
    strategy = config["strategy"]
    if strategy not in mod.strategies:
        raise ValueError(f"chunking.{modality}.strategy: {strategy!r} is not one of {list(mod.strategies)}")
    atoms = mod.chunk(segments, strategy, config)
    if atoms["atom_id"].duplicated().any():
        dup = atoms.loc[atoms["atom_id"].duplicated(), "atom_id"].iloc[0]
        raise ValueError(f"{modality} chunker {strategy!r} produced a duplicate atom id {dup}")
    atoms["observed_at"] = pd.to_datetime(atoms["observed_at"], utc=True)
    if "text_source" not in atoms.columns:
        atoms["text_source"] = mod.text_source
    return atoms.reset_index(drop=True)


def chunk_partition(task: tuple[str, str, dict[str, Any]]) -> pd.DataFrame:
    """Atoms of one segment file ``<modality>/<dataset>.parquet``: (modality, file, config)."""
    modality, path, config = task
    return chunk_modality(modality, pd.read_parquet(path), config)


@dataclass
class ChunkReuse:
    """Partitions reused by content (bench.memo): each partition's key (its segment file's
    sha256, modality and chunking block), and the stored Parquet bytes of those found."""

    memo: Memo
    keys: dict[tuple[str, str], str] = field(default_factory=dict)
    found: dict[tuple[str, str], bytes] = field(default_factory=dict)


def chunk_files(files: list[Path], params: dict[str, dict[str, Any]], executor: Executor | None = None,
                max_atoms: int | None = None, reuse: ChunkReuse | None = None) -> list[tuple[str, str, pd.DataFrame]]:
    """(modality, dataset, atoms) partitions, one per segment file ``<modality>/<dataset>.parquet``,
    in code order (modality name, then data set key: bench.ingest.partitions).

    `params` maps every modality of `files` to its chunking block; more than `max_atoms`
    atoms in all (None: no bound) raise AtomLimitError naming the modality that passed it.

    One task per file on `executor` (None: in this process); each reads only its own
    partition, so a modality's columns never pick up another's (a pdf `page` stays an
    integer whatever else the run holds). Chunkers work per source, so a partition's
    atoms are the rows chunking its modality's segments together would give for it.
    Two data sets of one modality must not produce the same atom id.

    ``reuse``: a partition whose key is stored is read back from the Parquet file
    :func:`write_atoms` wrote for it instead of chunked again.
    """
    from bench.executor import SerialExecutor

    tasks = [(path.parent.name, str(path), params[path.parent.name]) for path in files]
    names = [(m, Path(f).stem) for m, f, _ in tasks]
    if reuse is not None:
        for name, (m, f, cfg) in zip(names, tasks, strict=True):
            reuse.keys[name] = reuse.memo.key("atoms", sha256_file(f), m, cfg)
            if (data := reuse.memo.get("atoms", reuse.keys[name])) is not None:
                reuse.found[name] = data
    found = reuse.found if reuse is not None else {}
    todo = [t for name, t in zip(names, tasks, strict=True) if name not in found]
    computed = iter((executor or SerialExecutor()).map(chunk_partition, todo, label="chunk", describe=lambda t: t[1]) if todo else [])
    frames = [pd.read_parquet(io.BytesIO(found[name])) if name in found else next(computed) for name in names]
    parts = sorted(((m, ds, frame) for (m, ds), frame in zip(names, frames, strict=True)), key=lambda p: (p[0], p[1]))
    if max_atoms is not None:
        check_atom_count(parts, max_atoms)
    for modality in sorted({m for m, _, _ in parts}):
        ids = pd.concat([frame["atom_id"] for m, _, frame in parts if m == modality], ignore_index=True)
        if ids.duplicated().any():
            raise ValueError(f"{modality}: two data sets produced the atom id {ids[ids.duplicated()].iloc[0]}")
    return parts


def write_atoms(folder: Path, parts: list[tuple[str, str, pd.DataFrame]], reuse: ChunkReuse | None = None) -> None:
    """Write the partitions (bench.ingest.partitions.write_partitions); a reused one as the
    bytes stored for it, a new one stored for the next run (``reuse``)."""
    if reuse is None:
        write_partitions(folder, parts)
        return
    fresh = [p for p in parts if (p[0], p[1]) not in reuse.found]
    kept = []
    for (m, ds), data in reuse.found.items():
        path = Path(folder) / m / f"{ds}.parquet"
        write_bytes(path, data)
        kept.append(path)
    for path in write_partitions(folder, fresh, keep=kept):
        reuse.memo.put("atoms", reuse.keys[(path.parent.name, path.stem)], path.read_bytes())


def check_atom_count(parts: list[tuple[str, str, pd.DataFrame]], max_atoms: int) -> None:
    """AtomLimitError when the partitions hold more than `max_atoms` atoms in all."""
    total = 0
    for modality, dataset, frame in parts:
        total += len(frame)
        if total > max_atoms:
            raise AtomLimitError(f"params.yaml: chunking.{modality}: {total:,} atoms by {modality}/{dataset}, more than this machine "
                                 f"holds ({max_atoms:,} atoms of {BYTES_PER_ATOM} bytes); choose a coarser strategy or larger windows")


def modality_stats(parts: list[tuple[str, str, pd.DataFrame]]) -> dict[str, dict[str, Any]]:
    """modality -> :func:`atom_stats` over its partitions (only the columns the counts read)."""
    out: dict[str, dict[str, Any]] = {}
    for modality in sorted({m for m, _, _ in parts}):
        frames = [f[[c for c in STAT_COLUMNS if c in f.columns]] for m, _, f in parts if m == modality]
        out[modality] = atom_stats(concat_partitions(frames))
    return out


def atom_stats(atoms: pd.DataFrame) -> dict[str, Any]:
    """Counts of one modality's atoms; shares have the atom count as denominator.

    `empty_text`: atoms whose text is empty; `ocr_text`: atoms with non-empty text
    that (partly) comes from OCR (text_source ``ocr``).
    """
    lengths = atoms["text"].fillna("").str.len()
    n = int(len(atoms))
    empty = int((lengths == 0).sum())
    source = atoms["text_source"] if "text_source" in atoms.columns else pd.Series("layer", index=atoms.index)
    ocr = int(((source == "ocr") & (lengths > 0)).sum())
    return {
        "atoms": n,
        "sources": int(atoms["source_id"].nunique()),
        "empty_text": empty,
        "empty_text_share": empty / n if n else None,
        "ocr_text": ocr,
        "ocr_text_share": ocr / n if n else None,
        "median_chars": float(lengths.median()) if n else 0.0,
    }
