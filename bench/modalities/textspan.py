"""Helpers shared by modalities whose atoms are spans of a source's text."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

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


# -- many sources at once (gold resolution and placement, bench/gold/resolve.py) ----------


@dataclass(frozen=True)
class Laid:
    """`layout` of many sources' segments at once, as arrays in (source, seq) order."""

    code: np.ndarray  # each segment's source, as a code into `sources`
    sources: pa.Array  # the source ids of the codes
    start: np.ndarray  # char_start in its source's joined text
    end: np.ndarray  # char_end
    columns: dict[str, np.ndarray]  # the asked-for integer columns, in the same order


def layout_codes(segments: pd.DataFrame, columns: tuple[str, ...] = ()) -> Laid:
    """`layout` of every source in `segments` (offsets restart per source), with the integer
    `columns` (e.g. page, block, turn) in the same order.

    Source ids are dictionary-encoded and text lengths counted in C (pyarrow: code
    points, as Python's len); one stable sort and one running sum over all sources.
    """
    encoded = pc.dictionary_encode(pa.array(segments["source_id"], from_pandas=True))
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.lexsort((segments["seq"].to_numpy(), codes))
    lengths = text_lengths(segments["text"])[order]
    end = np.cumsum(lengths + 1)
    c = codes[order]
    first = np.ones(len(c), dtype=bool)
    first[1:] = c[1:] != c[:-1]
    base = (end - (lengths + 1))[first]  # the running sum before each source's first segment
    start = end - (lengths + 1) - np.repeat(base, np.diff(np.append(np.flatnonzero(first), len(c))))
    extra = {name: segments[name].to_numpy(dtype=np.int64)[order] for name in columns}
    return Laid(c, encoded.dictionary, start, start + lengths, extra)


def text_lengths(text: pd.Series) -> np.ndarray:
    """Characters (code points, as Python's len) of every text: counted in C for an
    Arrow-backed column, by len() for Python strings (no copy into Arrow)."""
    if isinstance(text.array, pd.arrays.ArrowStringArray) or isinstance(text.dtype, pd.ArrowDtype):
        counted = pc.utf8_length(pa.array(text, from_pandas=True)).fill_null(0)
        return counted.to_numpy(zero_copy_only=False).astype(np.int64)
    return np.fromiter(map(len, text.tolist()), dtype=np.int64, count=len(text))


def span_table(keys: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct keys (sorted) with the min of `lo` and the max of `hi` over each key's rows."""
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    starts = np.flatnonzero(np.concatenate(([True], k[1:] != k[:-1])))
    return k[starts], np.minimum.reduceat(lo[order], starts), np.maximum.reduceat(hi[order], starts)


def source_codes(laid: Laid, sources: Any) -> np.ndarray:
    """Each of `sources` (region source ids) as a code of `laid.sources`; -1 when it has no segments."""
    found = pc.index_in(pa.array(sources, from_pandas=True), value_set=laid.sources).fill_null(-1)
    return found.to_numpy(zero_copy_only=False).astype(np.int64)


def key_spans(laid: Laid, names: tuple[str, ...], region_code: np.ndarray, region_keys: tuple[np.ndarray, ...],
              rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the regions `rows` (source code, and one non-negative value per column of
    `names`): (found, char span start, char span end) of the segments of the same source
    with the same values -- min char_start and max char_end over them, as `layout` and
    a selection on those columns give. Found is False where no segment matches."""
    n = len(region_code)
    found, lo, hi = np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    rows = rows[region_code[rows] >= 0]
    if not len(rows) or not len(laid.code):
        return found, lo, hi
    s_key, r_key = laid.code.copy(), region_code[rows].copy()
    for name, values in zip(names, region_keys, strict=True):
        span = int(max(laid.columns[name].max(initial=0), values[rows].max(initial=0))) + 2
        s_key, r_key = s_key * span + laid.columns[name], r_key * span + values[rows]
    keys, k_lo, k_hi = span_table(s_key, laid.start, laid.end)
    pos = np.minimum(np.searchsorted(keys, r_key), len(keys) - 1)
    hit = keys[pos] == r_key
    found[rows[hit]], lo[rows[hit]], hi[rows[hit]] = True, k_lo[pos[hit]], k_hi[pos[hit]]
    return found, lo, hi
