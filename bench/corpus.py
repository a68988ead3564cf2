"""Reading the fetched corpus: the manifest, integrity checks and parsed segments."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.fetch import hash_file, hash_tree, stored_path
from bench.io import LineError, iter_jsonl
from bench.modalities import datasets
from bench.modalities.base import Dataset

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
    if row.get("form") == "tree" and local.is_dir():  # an unpacked tree: its digest (bench/fetch.py)
        sha, size, _ = hash_tree(local)
        if (sha, size) != (row["sha256"], row["bytes"]):
            raise IntegrityError(f"{row['key']}/{row['path']}: tree digest {sha} ({size} bytes) on disk, manifest says {row['sha256']} ({row['bytes']} bytes)")
        return
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
        local = stored_path(store, row)
        verify_file(row, local)
        files[row["path"]] = local
    return files


#: beside the segment frames: corpus files extraction could not read ({key, path, reason})
UNREADABLE = "unreadable.json"


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or exc.__class__.__name__
    return f"{exc.__class__.__name__}: {text}"[:300]


def extract_dataset(ds: Dataset, files: dict[str, Path]) -> tuple[pd.DataFrame, list[dict]]:
    """Segments of one data set, and the files it could not read.

    The whole set is extracted at once (the fast path). If that fails, every corpus
    file is retried on its own, with the data set's annotation files beside it: a file
    that still fails (a corrupt or encrypted PDF, a truncated image ...) is left out
    and listed as {key, path, reason}; the others' segments are returned. A failure
    with the annotation files alone cannot be pinned on one corpus file and is raised.
    """
    try:
        return ds.extract(files), []
    except Exception:  # noqa: BLE001, S110 - any reader error: find the file(s) by retrying one by one
        pass
    annotations = {p: f for p, f in files.items() if p in ds.annotation_files}
    ds.extract(dict(annotations))  # raises when the annotations themselves are the problem
    frames: list[pd.DataFrame] = []
    bad: list[dict] = []
    for path, local in sorted(files.items()):
        if path in annotations:
            continue
        try:
            frames.append(ds.extract({**annotations, path: local}))
        except Exception as exc:  # noqa: BLE001 - recorded with the file and the reason
            bad.append({"key": ds.key, "path": path, "reason": _reason(exc)})
    frames = [f for f in frames if not f.empty]
    seg = pd.concat(frames, ignore_index=True) if frames else ds.extract(dict(annotations))
    return seg, bad


def read_unreadable(folder: Path) -> list[dict]:
    """The unreadable-file list the extract stage wrote beside the segments ([] if none)."""
    import json

    path = folder / UNREADABLE
    if not path.is_file():
        return []
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LineError(str(path), None, "<file>", f"not readable JSON ({exc.__class__.__name__})") from None
    if not isinstance(rows, list):
        raise LineError(str(path), None, "<file>", "must be a list of {key, path, reason}")
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not {"key", "path", "reason"} <= set(row):
            raise LineError(str(path), None, f"[{i}]", "must be an object with key, path and reason")
    return rows


def extract_all(manifest: Manifest, store: Path, unreadable: list[dict] | None = None) -> dict[str, pd.DataFrame]:
    """Segments of every dataset that has present files: dataset key -> frame.

    Files extraction cannot read are appended to `unreadable` ({key, path, reason})
    and the run goes on; without that list such a file stops the run, named."""
    out: dict[str, pd.DataFrame] = {}
    for key, ds in datasets().items():
        files = verified_files(manifest, key, store)
        if not files:
            continue
        seg, bad = extract_dataset(ds, files)
        if bad:
            if unreadable is None:
                raise IntegrityError(f"{key}/{bad[0]['path']}: cannot be read ({bad[0]['reason']})")
            unreadable.extend(bad)
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
