"""Gold regions placed in their modality's unit: the box and extent amount of each region.

The resolve stage places every gold region once (:func:`place_regions`) and stores
the result beside it in data/resolved/regions.parquet (columns ``region_part``,
``region_x0`` .. ``region_y1``, ``region_extent``); the chunk-fair metrics
(bench/evaluation/measures/extent.py) read those columns through :func:`region_extents`, so
evaluation neither decodes region JSON nor reads segments to place a region.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from bench.modalities import modalities

__all__ = ["BOX", "PLACED_COLUMNS", "REGION_EXTENT_COLUMNS", "place_regions", "region_extents"]

BOX = ["x0", "x1", "y0", "y1"]
REGION_EXTENT_COLUMNS = ["query_id", "gold_idx", "source_id", "part", *BOX, "extent"]
#: what the resolve stage adds to each region row (data/resolved/regions.parquet): the
#: region's part, box and extent amount (REGION_EXTENT_COLUMNS' names, prefixed)
PLACED_COLUMNS = [f"region_{c}" for c in ["part", *BOX, "extent"]]


def place_regions(regions: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
    """`regions` (bench.evaluation.resolve) with each region's box and extent beside it
    (columns part, x0, x1, y0, y1, extent: :func:`region_extents`), as the resolve stage
    writes data/resolved/regions.parquet, so evaluation never places a region again."""
    wanted = segments["source_id"].isin(set(regions["source_id"].astype(str))).to_numpy() if len(segments) else np.zeros(0, bool)
    by_source = {str(s): g for s, g in segments.take(np.flatnonzero(wanted)).groupby("source_id", sort=False)} if len(segments) else {}
    empty = segments.iloc[0:0]
    ext = region_extents(regions, lambda sid: by_source.get(sid, empty))
    placed = ext[["part", *BOX, "extent"]].set_axis(PLACED_COLUMNS, axis=1)
    return pd.concat([regions.reset_index(drop=True), placed], axis=1)


def region_extents(regions: pd.DataFrame, segments_of: Any = None) -> pd.DataFrame:
    """Box and amount of every gold region.

    ``regions``: query_id, gold_idx, modality, source_id, region (JSON text, as
    data/resolved/regions.parquet holds). ``segments_of(source_id)`` returns that
    source's segments. A region its modality cannot place gets extent 0 and NaN box.
    When ``regions`` already holds the boxes (:func:`place_regions`), they are
    returned as they are: nothing is decoded or read.
    """
    if set(PLACED_COLUMNS) <= set(regions.columns):
        out = regions[["query_id", "gold_idx", "source_id", *PLACED_COLUMNS]].reset_index(drop=True)
        out = out.set_axis(REGION_EXTENT_COLUMNS, axis=1)
        return out.astype({"query_id": str, "source_id": str, "part": str, "gold_idx": int})
    if segments_of is None:
        raise ValueError("regions are not placed (no extent columns): pass segments_of")
    mods = modalities()
    rows = []
    cache: dict[str, pd.DataFrame] = {}
    for r in regions.itertuples(index=False):
        sid = str(r.source_id)
        if sid not in cache:
            cache[sid] = segments_of(sid)
        region = json.loads(r.region) if isinstance(r.region, str) else r.region
        box = mods[str(r.modality)].region_extent(region, cache[sid]) if len(cache[sid]) else None
        if box is None:
            rows.append((str(r.query_id), int(r.gold_idx), sid, "", np.nan, np.nan, np.nan, np.nan, 0.0))
        else:
            part, x0, x1, y0, y1 = box
            rows.append((str(r.query_id), int(r.gold_idx), sid, str(part), x0, x1, y0, y1, max(x1 - x0, 0.0) * max(y1 - y0, 0.0)))
    return pd.DataFrame(rows, columns=REGION_EXTENT_COLUMNS)
