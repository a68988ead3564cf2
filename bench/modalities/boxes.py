"""Boxes of atoms and regions in a modality's own unit (bench/evaluation/measures/extent.py):
the helpers the modalities build their ``atom_extents``, ``place_regions`` and ``cut`` from.
A box is half-open ``[x0, x1) x [y0, y1)`` in a space (source_id, part); 1-D modalities
use y = [0, 1)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

#: the columns of `Modality.place_regions`' frame
PLACED = ["part", "x0", "x1", "y0", "y1"]


def placed_frame(part: Any, x0: Any, x1: Any, y0: Any, y1: Any) -> pd.DataFrame:
    """`Modality.place_regions`' frame from its columns (scalars broadcast)."""
    x0 = np.asarray(x0, dtype=float)
    n = len(x0)
    return pd.DataFrame({"part": np.broadcast_to(np.asarray(part, dtype=object), (n,)).copy(), "x0": x0,
                         "x1": np.broadcast_to(np.asarray(x1, dtype=float), (n,)).copy(),
                         "y0": np.broadcast_to(np.asarray(y0, dtype=float), (n,)).copy(),
                         "y1": np.broadcast_to(np.asarray(y1, dtype=float), (n,)).copy()}, columns=PLACED)


def placed_spans(found: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> pd.DataFrame:
    """Boxes of 1-D regions [lo, hi) on the line y = [0, 1) (part ""), NaN where not `found`."""
    nan = np.where(found, 0.0, np.nan)
    return placed_frame("", np.where(found, lo, np.nan), np.where(found, hi, np.nan), nan, nan + 1.0)


def leading_interval(boxes: np.ndarray, amounts: np.ndarray) -> np.ndarray:
    """1-D atoms cut to their leading part: [x0, min(x1, x0 + amount)) of each box (the
    cut of every modality whose extent runs along a line: characters in document order,
    seconds in time order)."""
    out = np.array(boxes, dtype=float, copy=True).reshape(-1, 4)
    out[:, 1] = np.minimum(out[:, 1], out[:, 0] + np.clip(np.asarray(amounts, dtype=float), 0, None))
    return out


def interval_extents(x0: Any, x1: Any, part: Any = "") -> pd.DataFrame:
    """Extent boxes of 1-D atoms: [x0, x1) on the line y = [0, 1) of `part`."""
    lo = np.asarray(x0, dtype=float)
    hi = np.asarray(x1, dtype=float)
    parts = np.broadcast_to(np.asarray(part, dtype=object), lo.shape)
    return pd.DataFrame({"part": parts, "x0": lo, "x1": hi, "y0": np.zeros_like(lo), "y1": np.ones_like(lo)})
