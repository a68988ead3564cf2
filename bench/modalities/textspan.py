"""Helpers shared by modalities whose atoms are spans of a source's text."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

TOKEN = re.compile(r"\S+")


def layout(segments: pd.DataFrame) -> pd.DataFrame:
    """Give ordered segments of one source char offsets in the source's joined text.

    Segments are joined with one newline, so segment i spans [char_start, char_end).
    """
    seg = segments.sort_values("seq", kind="stable").reset_index(drop=True)
    lengths = seg["text"].str.len().to_numpy()
    starts = np.zeros(len(seg), dtype=np.int64)
    if len(seg) > 1:
        starts[1:] = np.cumsum(lengths[:-1] + 1)
    seg["char_start"] = starts
    seg["char_end"] = starts + lengths
    return seg


def joined_text(seg: pd.DataFrame) -> str:
    return "\n".join(seg["text"].tolist())


def token_spans(text: str) -> tuple[np.ndarray, np.ndarray]:
    spans = [(m.start(), m.end()) for m in TOKEN.finditer(text)]
    if not spans:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    arr = np.asarray(spans, dtype=np.int64)
    return arr[:, 0], arr[:, 1]


def windows(n_tokens: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Token index windows [i, j) of `size` with `overlap`; the last one ends at n_tokens."""
    if size <= 0 or overlap < 0 or overlap >= size:
        raise ValueError(f"window size {size} and overlap {overlap}: need size > overlap >= 0")
    out: list[tuple[int, int]] = []
    step = size - overlap
    start = 0
    while start < n_tokens:
        end = min(start + size, n_tokens)
        out.append((start, end))
        if end == n_tokens:
            break
        start += step
    return out


def intersects(lo: np.ndarray, hi: np.ndarray, g_lo: float, g_hi: float) -> np.ndarray:
    """Half-open intervals [lo, hi) against [g_lo, g_hi): positive-length intersection."""
    return (np.minimum(hi, g_hi) - np.maximum(lo, g_lo)) > 0
