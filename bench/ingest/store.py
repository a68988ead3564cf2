"""The local corpus store: the manifest, verified files, extraction and segment files.

This module imports no modality: extraction takes the data sets to parse as an
argument, so a per-modality stage imports only its own modality's code
(bench.modalities.load). bench.ingest.corpus re-exports these names and adds
``extract_all`` over every registered data set.

Layout: corpus files in ``<store>/<dataset key>/<path>`` (archive members under
``<zip>.unpacked/``); segments in ``<segments>/<modality>/<dataset key>.parquet``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from bench.io import LineError, iter_jsonl, sha256_file
from bench.modalities.base import Dataset

if TYPE_CHECKING:
    from bench.executor import Executor

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


TREE_SUFFIX = ".tar.gz"


def tree_path(path: str) -> str | None:
    """Manifest path of an archive -> the path of its unpacked folder form (with '/'), or None."""
    if "!/" in path or not path.endswith(TREE_SUFFIX) or len(path) == len(TREE_SUFFIX):
        return None
    return path[: -len(TREE_SUFFIX)] + "/"


def stored_path(store: Path, row: dict) -> Path:
    """Where a manifest row's file (or unpacked tree) lives in the local store."""
    if row.get("form") == "tree":
        folder = tree_path(row["path"])
        if folder is not None:
            return store / row["key"] / folder.rstrip("/")
    return local_path(store, row["key"], row["path"])


def tree_files(root: Path) -> list[tuple[str, Path]]:
    """(relative posix path, path) of every regular file under `root`, sorted by path; links not followed."""
    out: list[tuple[str, Path]] = []
    for dirpath, _dirnames, filenames in os.walk(root, followlinks=False):
        for name in filenames:
            full = Path(dirpath) / name
            if full.is_symlink() or not full.is_file():
                continue
            out.append((full.relative_to(root).as_posix(), full))
    return sorted(out, key=lambda item: item[0])


def hash_tree(root: Path) -> tuple[str, int, int]:
    """(tree digest, total bytes, file count) of a folder (see the module docstring)."""
    digest = hashlib.sha256()
    total = 0
    files = tree_files(root)
    for rel, full in files:
        sha, size = sha256_file(full), full.stat().st_size
        digest.update(f"{sha}  {rel}\n".encode())
        total += size
    return digest.hexdigest(), total, len(files)


def verify_file(row: dict, local: Path) -> None:
    """Stop with the file named when its size or sha256 differs from the manifest."""
    if row.get("form") == "tree" and local.is_dir():  # an unpacked tree: its digest (bench/ingest/fetch.py)
        sha, size, _ = hash_tree(local)
        if (sha, size) != (row["sha256"], row["bytes"]):
            raise IntegrityError(f"{row['key']}/{row['path']}: tree digest {sha} ({size} bytes) on disk, manifest says {row['sha256']} ({row['bytes']} bytes)")
        return
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
        local = stored_path(store, row)
        verify_file(row, local)
        files[row["path"]] = local
    return files


#: beside the segment frames: corpus files extraction could not read ({key, path, reason})
UNREADABLE = "unreadable.json"


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or exc.__class__.__name__
    return f"{exc.__class__.__name__}: {text}"[:300]


def extract_dataset(ds: Dataset, files: dict[str, Path], options: Mapping[str, Any] | None = None) -> tuple[pd.DataFrame, list[dict]]:
    """Segments of one data set, and the files it could not read.

    The whole set is extracted at once (the fast path). If that fails, every corpus
    file is retried on its own, with the data set's annotation files beside it: a file
    that still fails (a corrupt or encrypted PDF, a truncated image ...) is left out
    and listed as {key, path, reason}; the others' segments are returned. A failure
    with the annotation files alone cannot be pinned on one corpus file and is raised.
    `options` (params.yaml `extraction.<modality>`) go to the data set's extract.
    """
    opts = dict(options or {})
    try:
        return ds.extract(files, **opts), []
    except Exception:
        pass
    annotations = {p: f for p, f in files.items() if p in ds.annotation_files}
    ds.extract(dict(annotations), **opts)  # raises when the annotations themselves are the problem
    frames: list[pd.DataFrame] = []
    bad: list[dict] = []
    for path, local in sorted(files.items()):
        if path in annotations:
            continue
        try:
            frames.append(ds.extract({**annotations, path: local}, **opts))
        except Exception as exc:
            bad.append({"key": ds.key, "path": path, "reason": _reason(exc)})
    frames = [f for f in frames if not f.empty]
    seg = pd.concat(frames, ignore_index=True) if frames else ds.extract(dict(annotations), **opts)
    return seg, bad


def read_unreadable(folder: Path) -> list[dict]:
    """The unreadable-file lists the extract stages wrote beside their segments
    (``<folder>/<modality>/unreadable.json``, or ``<folder>/unreadable.json``); [] if none."""
    import json

    rows: list[dict] = []
    for path in sorted([*folder.glob(UNREADABLE), *folder.glob(f"*/{UNREADABLE}")]):
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise LineError(str(path), None, "<file>", f"not readable JSON ({exc.__class__.__name__})") from None
        if not isinstance(found, list):
            raise LineError(str(path), None, "<file>", "must be a list of {key, path, reason}")
        for i, row in enumerate(found):
            if not isinstance(row, dict) or not {"key", "path", "reason"} <= set(row):
                raise LineError(str(path), None, f"[{i}]", "must be an object with key, path and reason")
        rows += found
    return rows


def extract_datasets(
    manifest: Manifest,
    store: Path,
    datasets: Iterable[Dataset],
    ocr_cache: Path | None = None,
    unreadable: list[dict] | None = None,
    ocr_stats: dict[str, dict[str, int]] | None = None,
    options: Mapping[str, Any] | None = None,
    executor: Executor | None = None,
) -> dict[str, pd.DataFrame]:
    """Segments of each given dataset that has present files: dataset key -> frame.

    `ocr_cache` is the modality's persistent OCR cache folder (data/ocr-cache/<modality>,
    a DVC `persist` output); the OCR cache itself is bench.modalities.ocr's business.
    Files extraction cannot read are appended to `unreadable` ({key, path, reason})
    and the run goes on; without that list such a file stops the run, named. Per data
    set that OCRs, its cache hits and misses go into `ocr_stats`. The per-source work
    (PDF text layers, OCR) runs on `executor` (bench.executor; None: a local pool per
    call); results do not depend on it.
    """
    from bench.executor import using

    with using(executor) if executor is not None else contextlib.nullcontext():
        return _extract_each(manifest, store, datasets, ocr_cache, unreadable, ocr_stats, options)


def _extract_each(manifest: Manifest, store: Path, datasets: Iterable[Dataset], ocr_cache: Path | None, unreadable: list[dict] | None,
                  ocr_stats: dict[str, dict[str, int]] | None, options: Mapping[str, Any] | None) -> dict[str, pd.DataFrame]:
    from bench import progress
    from bench.modalities.ocr import use_cache

    out: dict[str, pd.DataFrame] = {}
    for ds in datasets:
        files = verified_files(manifest, ds.key, store)
        if not files:
            continue
        cache = use_cache(ocr_cache)
        with progress.scope(f"extract {ds.key}"):
            seg, bad = extract_dataset(ds, files, options)
        if cache is not None and ocr_stats is not None and cache.hits + cache.misses:
            ocr_stats[ds.key] = cache.stats()
        if bad:
            if unreadable is None:
                raise IntegrityError(f"{ds.key}/{bad[0]['path']}: cannot be read ({bad[0]['reason']})")
            unreadable.extend(bad)
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
