"""A test helper: a whole segments frame chunked in memory, as the chunk stage chunks it file by file."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.ingest.chunking import chunk_modality


def chunk_all(segments: pd.DataFrame, params: dict[str, dict[str, Any]]) -> dict[str, pd.DataFrame]:
    """modality -> atoms (params: chunking.<modality>), for every modality that has segments."""
    out: dict[str, pd.DataFrame] = {}
    for modality, seg in segments.groupby("modality", sort=True):
        out[str(modality)] = chunk_modality(str(modality), seg, params[str(modality)])
    return out
