"""Reading the fetched corpus: the manifest, integrity checks and parsed segments."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.fetch import hash_file, local_path
from bench.io import LineError, iter_jsonl
from bench.modalities import datasets

MANIFEST_FIELDS = ("source_id", "dataset", "key", "revision", "path", "sha256", "bytes", "url", "status")


class IntegrityError(RuntimeError):
    pass


@dataclass(frozen=True)
class Manifest:
    rows: tuple[dict, ...]

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Manifest":
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


def verify_file(row: dict, local: Path) -> None:
    """Stop with the file named when its size or sha256 differs from the manifest."""
    if not local.is_file():
        raise IntegrityError(f"{row['key']}/{row['path']}: listed as present in the manifest but missing from the store; run the fetch stage")
    size = local.stat().st_size
    if size != row["bytes"]:
        raise IntegrityError(f"{row['key']}/{row['path']}: {size} bytes on disk, manifest says {row['bytes']}")
    sha, _ = hash_file(local)
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


def extract_all(manifest: Manifest, store: Path, ocr_cache: Path | None = None,
                ocr_stats: dict[str, dict[str, int]] | None = None) -> dict[str, pd.DataFrame]:
    """Segments of every dataset that has present files: dataset key -> frame.

    `ocr_cache`: OCR results are cached under `ocr_cache/<modality>`; per data set
    that OCRs, its hits and misses go into `ocr_stats`.
    """
    from bench import progress
    from bench.modalities.ocr import use_cache

    out: dict[str, pd.DataFrame] = {}
    for key, ds in datasets().items():
        files = verified_files(manifest, key, store)
        if not files:
            continue
        cache = use_cache(ocr_cache / ds.modality if ocr_cache is not None else None)
        with progress.scope(f"extract {key}"):
            seg = ds.extract(files)
        if cache is not None and ocr_stats is not None and cache.hits + cache.misses:
            ocr_stats[key] = cache.stats()
        if seg.empty:
            continue  # e.g. only annotation files present: nothing to parse
        seg["observed_at"] = pd.to_datetime(seg["observed_at"], utc=True)
        out[key] = seg.reset_index(drop=True)
    return out


def load_segments(folder: Path) -> pd.DataFrame | None:
    """All segment frames in `folder` (one parquet per dataset), or None if absent."""
    if not folder.is_dir():
        return None
    frames = [pd.read_parquet(p) for p in sorted(folder.glob("*.parquet"))]
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True)
