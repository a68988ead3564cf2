"""Reading the fetched corpus: the manifest, integrity checks and parsed segments.

The store itself (manifest, verification, per-dataset extraction, segment files) is
bench.ingest.store, which imports no modality; this module adds ``extract_all`` over every
registered data set (the `bench validate` CLI and the tests use it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from bench.corpus_sources import datasets
from bench.ingest.store import (
    MANIFEST_FIELDS,
    UNREADABLE,
    IntegrityError,
    Manifest,
    extract_dataset,
    extract_datasets,
    load_segments,
    local_path,
    read_unreadable,
    segment_files,
    stored_path,
    verified_files,
    verify_file,
)

__all__ = ["MANIFEST_FIELDS", "UNREADABLE", "IntegrityError", "Manifest", "extract_all", "extract_dataset", "extract_datasets",
           "load_segments", "local_path", "read_unreadable", "segment_files", "stored_path", "verified_files", "verify_file"]


def extract_all(
    manifest: Manifest,
    store: Path,
    unreadable: list[dict] | None = None,
    ocr_cache: Path | None = None,
    ocr_stats: dict[str, dict[str, int]] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, pd.DataFrame]:
    """Segments of every registered dataset that has present files: dataset key -> frame.

    Files extraction cannot read are appended to `unreadable` ({key, path, reason}) and
    the run goes on; without that list such a file stops the run, named. `ocr_cache`
    holds one OCR cache folder per modality; `options` maps a modality to its
    extraction options (params.yaml `extraction`)."""
    out: dict[str, pd.DataFrame] = {}
    by_modality: dict[str, list] = {}
    for ds in datasets().values():
        by_modality.setdefault(ds.modality, []).append(ds)
    for modality, group in sorted(by_modality.items()):
        out.update(extract_datasets(manifest, store, group, ocr_cache=None if ocr_cache is None else ocr_cache / modality,
                                    unreadable=unreadable, ocr_stats=ocr_stats, options=(options or {}).get(modality)))
    return dict(sorted(out.items()))
