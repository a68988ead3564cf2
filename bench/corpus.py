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
    IntegrityError,
    Manifest,
    extract_datasets,
    load_segments,
    local_path,
    segment_files,
    verified_files,
    verify_file,
)

__all__ = ["MANIFEST_FIELDS", "IntegrityError", "Manifest", "extract_all", "extract_datasets", "load_segments", "local_path",
           "segment_files", "verified_files", "verify_file"]


def extract_all(manifest: Manifest, store: Path) -> dict[str, pd.DataFrame]:
    """Segments of every registered dataset that has present files: dataset key -> frame."""
    return extract_datasets(manifest, store, datasets().values())
