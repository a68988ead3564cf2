"""The local corpus store: the manifest, verified files, extraction and segment files.

This module imports no modality: extraction takes the data sets to parse as an
argument, so a per-modality stage imports only its own modality's code
(bench.modalities.load). bench.corpus re-exports these names and adds
``extract_all`` over every registered data set.

Layout: corpus files in ``<store>/<dataset key>/<path>`` (archive members under
``<zip>.unpacked/``); segments in ``<segments>/<modality>/<dataset key>.parquet``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.io import LineError, iter_jsonl, sha256_file
from bench.modalities.base import Dataset

MANIFEST_FIELDS = ("source_id", "dataset", "key", "revision", "path", "sha256", "bytes", "url", "status")


class IntegrityError(RuntimeError):
    pass


@dataclass(frozen=True)
class Manifest:
    rows: tuple[dict, ...]

    @classmethod
    def load(cls, path: str | os.PathLike) -> Manifest:
        rows = []
        for lineno, row in iter_jsonl(path):
            if not isinstance(row, dict):
                raise LineError(str(path), lineno, "<row>", "manifest row must be an object")
            missing = [f for f in MANIFEST_FIELDS if f not in row]
            if missing:
                raise LineError(str(path), lineno, missing[0], "missing manifest field")
            rows.append(row)
        return cls(tuple(rows))

    def lookup(self) -> dict[tuple[str, str, str], dict]:
        """(dataset name, revision, path) -> row."""
        return {(r["dataset"], r["revision"], r["path"]): r for r in self.rows}

    def present(self, key: str) -> list[dict]:
        return [r for r in self.rows if r["key"] == key and r["status"] == "present"]


def local_path(store: Path, key: str, path: str) -> Path:
    """Where a manifest path lives in the local store (archive members: '<zip>.unpacked/')."""
    if "!/" in path:
        outer, member = path.split("!/", 1)
        return store / key / f"{outer}.unpacked" / member
    return store / key / path


def verify_file(row: dict, local: Path) -> None:
    """Stop with the file named when its size or sha256 differs from the manifest."""
    if not local.is_file():
        raise IntegrityError(f"{row['key']}/{row['path']}: listed as present in the manifest but missing from the store; run the fetch stage")
    size = local.stat().st_size
    if size != row["bytes"]:
        raise IntegrityError(f"{row['key']}/{row['path']}: {size} bytes on disk, manifest says {row['bytes']}")
    sha = sha256_file(local)
    if sha != row["sha256"]:
        raise IntegrityError(f"{row['key']}/{row['path']}: sha256 {sha} on disk, manifest says {row['sha256']}")


def verified_files(manifest: Manifest, key: str, store: Path) -> dict[str, Path]:
    """Present files of one dataset (manifest path -> local path), each verified first."""
    files: dict[str, Path] = {}
    for row in manifest.present(key):
        local = local_path(store, key, row["path"])
        verify_file(row, local)
        files[row["path"]] = local
    return files


def extract_datasets(manifest: Manifest, store: Path, datasets: Iterable[Dataset], ocr_cache: Path | None = None) -> dict[str, pd.DataFrame]:
    """Segments of each given dataset that has present files: dataset key -> frame.

    `ocr_cache` is the modality's persistent OCR cache folder (data/ocr-cache/<modality>,
    a DVC `persist` output); the OCR cache itself is bench.modalities.ocr's business.
    """
    del ocr_cache  # reserved: the extract stage passes it; the OCR cache uses it
    out: dict[str, pd.DataFrame] = {}
    for ds in datasets:
        files = verified_files(manifest, ds.key, store)
        if not files:
            continue
        seg = ds.extract(files)
        if seg.empty:
            continue  # e.g. only annotation files present: nothing to parse
        seg["observed_at"] = pd.to_datetime(seg["observed_at"], utc=True)
        out[ds.key] = seg.reset_index(drop=True)
    return out


def segment_files(folder: Path) -> list[Path]:
    """Segment files under `folder` (<modality>/<key>.parquet), in dataset-key order."""
    return sorted(folder.glob("*/*.parquet"), key=lambda p: (p.stem, p.parent.name))


def load_segments(folder: Path) -> pd.DataFrame | None:
    """All segment frames under `folder` (one parquet per dataset), or None if absent."""
    if not folder.is_dir():
        return None
    frames = [pd.read_parquet(p) for p in segment_files(folder)]
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True)
