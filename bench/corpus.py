"""Reading the fetched corpus: the manifest, integrity checks and parsed segments.

The store itself (manifest, verification, per-dataset extraction, segment files) is
bench.store, which imports no modality; this module adds ``extract_all`` over every
registered data set (the `bench validate` CLI and the tests use it).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.modalities import datasets
from bench.store import (
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


def extract_all(manifest: Manifest, store: Path, unreadable: list[dict] | None = None) -> dict[str, pd.DataFrame]:
    """Segments of every registered dataset that has present files: dataset key -> frame.

    Files extraction cannot read are appended to `unreadable` ({key, path, reason}) and
    the run goes on; without that list such a file stops the run, named."""
    return extract_datasets(manifest, store, datasets().values(), unreadable=unreadable)
