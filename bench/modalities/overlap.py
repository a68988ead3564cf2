"""The vectorised overlap join of gold resolution (bench/gold/resolve.py): each
modality's `overlap_pairs` finds candidate (region, atom) pairs with `candidate_pairs`
and keeps those its exact overlap rule accepts."""

from __future__ import annotations

import weakref
from typing import Any, Generic, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

T = TypeVar("T")


class SameFrame(Generic[T]):
    """What a modality worked out from one segments frame, kept for the next call on that very frame.

    Gold resolution hands the same gold segments to a modality's join (`overlap_pairs`) and then
    to its placement (`place_regions`); both need each region's span in those segments, so the
    first keeps what it found and the second reads it instead of laying the sources out again.
    Kept only while that frame object lives (a weak reference) and for that object alone: a
    frame is read only once handed to the hooks, so the same object holds the same rows."""

    def __init__(self) -> None:
        self._frame: weakref.ref[pd.DataFrame] | None = None
        self._value: T | None = None

    def get(self, frame: pd.DataFrame) -> T | None:
        return self._value if self._frame is not None and self._frame() is frame else None

    def put(self, frame: pd.DataFrame, value: T) -> None:
        self._frame, self._value = weakref.ref(frame), value


def pairs_frame(region_rows: Any, atom_rows: Any) -> pd.DataFrame:
    return pd.DataFrame({
        "region_row": np.asarray(region_rows, dtype=np.int64),
        "atom_row": np.asarray(atom_rows, dtype=np.int64),
    })


def _arrow_strings(values: Any) -> pa.Array | pa.ChunkedArray:
    """Strings as a pyarrow array (zero-copy for pandas' Arrow-backed ``str`` columns)."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    if isinstance(values, pd.Series | pd.Index):
        return pa.array(values, from_pandas=True)
    return pa.array(np.asarray(values, dtype=object), from_pandas=True)


def group_codes(a_group: Any, r_group: Any) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of the atoms' and the regions' groups (e.g. source ids) in one space.

    The atoms' values are dictionary-encoded once (pyarrow, in C), the regions' looked
    up in that dictionary; a region group no atom has gets -1 (it has no candidates).
    Integer arrays are codes already and are returned as they are.
    """
    a_arr, r_arr = np.asarray(a_group) if not isinstance(a_group, pd.Series) else a_group, r_group
    if isinstance(a_arr, np.ndarray) and a_arr.dtype.kind in "iu":
        return a_arr.astype(np.int64, copy=False), np.asarray(r_group).astype(np.int64, copy=False)
    encoded = pc.dictionary_encode(_arrow_strings(a_group))
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks() if encoded.num_chunks != 1 else encoded.chunk(0)
    a_code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    r_code = pc.index_in(_arrow_strings(r_arr), value_set=encoded.dictionary).fill_null(-1)
    return a_code, r_code.to_numpy(zero_copy_only=False).astype(np.int64)


def _int_valued(values: np.ndarray) -> bool:
    return values.dtype.kind in "iu" or (values.dtype.kind == "f" and bool(np.isfinite(values).all()) and bool((values == np.round(values)).all()))


def candidate_pairs(
    r_group: Any, r_lo: Any, r_hi: Any, a_group: Any, a_lo: Any, a_hi: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted-array interval join: (region, atom) positions with the same group and
    a_lo <= r_hi and a_hi >= r_lo (closed bounds, so a superset of every half-open or
    point rule; callers apply their exact rule to the pairs).

    Groups are strings (coded by `group_codes`) or integer codes already (a region code
    of -1 matches nothing). Integer bounds are used as they are; other values are
    replaced by their dense ranks over all four arrays (order and ties kept exactly,
    floats included). Offset by the group's code, one `searchsorted` per side finds
    each region's candidate run among the atoms sorted by (group, a_lo); the running
    maximum of a_hi bounds the run from below. Cost is O((R + A) log(R + A) + pairs)
    for atoms of similar length within a group.
    """
    a_code, r_code = group_codes(a_group, r_group)
    bounds = [np.asarray(v) for v in (a_lo, a_hi, r_lo, r_hi)]
    n_a, n_r = len(a_code), len(r_code)
    if all(_int_valued(v) for v in bounds) and (n_a + n_r):
        ints = [v.astype(np.int64) for v in bounds]
        low = min(int(v.min()) for v in ints if len(v))
        ra_lo, ra_hi, rr_lo, rr_hi = (v - low for v in ints)
        m = np.int64(max(int(v.max()) for v in (ra_lo, ra_hi, rr_lo, rr_hi) if len(v)) + 2)
        if (int(max(a_code.max(initial=0), r_code.max(initial=0))) + 2) * int(m) >= 2**62:
            _, ranks = np.unique(np.concatenate(ints), return_inverse=True)
            ra_lo, ra_hi = ranks[:n_a], ranks[n_a: 2 * n_a]
            rr_lo, rr_hi = ranks[2 * n_a: 2 * n_a + n_r], ranks[2 * n_a + n_r:]
            m = np.int64(len(ranks) + 1)
    else:
        values = np.concatenate([v.astype(float) for v in bounds])
        _, ranks = np.unique(values, return_inverse=True)
        ranks = ranks.astype(np.int64)
        ra_lo, ra_hi = ranks[:n_a], ranks[n_a: 2 * n_a]
        rr_lo, rr_hi = ranks[2 * n_a: 2 * n_a + n_r], ranks[2 * n_a + n_r:]
        m = np.int64(len(values) + 1)
    lo_all = a_code * m + ra_lo
    order = np.argsort(lo_all, kind="stable")  # by (group, a_lo): one key, one sort
    lo_key = lo_all[order]
    hi_key = np.maximum.accumulate(a_code[order] * m + ra_hi[order]) if n_a else np.zeros(0, np.int64)
    first = np.searchsorted(hi_key, r_code * m + rr_lo, side="left")
    last = np.searchsorted(lo_key, r_code * m + rr_hi, side="right")
    counts = np.where(r_code >= 0, np.clip(last - first, 0, None), 0)
    total = int(counts.sum())
    r_idx = np.repeat(np.arange(n_r, dtype=np.int64), counts)
    starts = np.repeat(first - (np.cumsum(counts) - counts), counts)
    a_idx = order[starts + np.arange(total, dtype=np.int64)] if total else np.zeros(0, np.int64)
    return r_idx, a_idx.astype(np.int64)
