"""Integer atom codes: how runs and resolved gold name atoms from retrieve to the cells.

The served atoms (data/served/<modality>/<dataset>.parquet: modalities in name order,
then data sets in key order, rows in file order; bench.ingest.partitions) form one
table; an atom's *code* is its row in that table. The retrieve stage writes the run
with codes (column ``atom``, int32) instead of atom-id strings (:func:`to_codes`), the
resolve step writes the gold the same way, and both write query ids as a categorical
column (one dictionary of ids plus an integer per row). The evaluation reads codes
only: the metrics index arrays by code, the extent measures and the curves join on
codes. Strings come back only in the writers, where people or other tools read them:
the TREC qrels (:func:`partition_ids`, bench/gold/step.py), the HTML drill-down
(:func:`with_atom_ids`, bench.reporting.outputs); the TREC run is written from the
system's own ids before they are encoded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from bench.ingest.partitions import Partition

__all__ = ["ATOM_CODE", "HIT_COLUMNS", "MEMORY_TABLE_COLUMNS", "UNIT_TABLE_COLUMNS", "AtomCodeError", "decode", "encode", "partition_ids", "served_ids", "to_codes", "with_atom_ids"]

#: the integer code column of runs, gold and memories: the atom's row in the served table (memories after)
ATOM_CODE = "atom"
#: codes fit int32 up to 2**31 - 1 atoms
CODE_DTYPE = np.int32
#: the memory tables of a run, by code (written by the retrieve stage, bench.systems.credit.provenance; read by resolve):
#: the ranks at which memories were returned (data/memories/hits.parquet; also the resolved memory_hits)
HIT_COLUMNS = ["query_id", "rank", ATOM_CODE]
MEMORY_TABLE_COLUMNS = [ATOM_CODE, "memory_id", "text", "provenance"]  # data/memories/memories.parquet
UNIT_TABLE_COLUMNS = [ATOM_CODE, "citation", "unit", "source_id", "modality", "extent", "observed_at", "holder", "text"]  # units.parquet


class AtomCodeError(ValueError):
    """An atom id that is not served, or a code outside the served table."""


def _strings(values: pd.Series) -> pa.Array:
    """`values` as one large_string Arrow array (a column concatenated from several
    partitions is Arrow-backed in chunks: they are combined)."""
    arr = pa.array(values.astype(str), type=pa.large_string(), from_pandas=True)
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def served_ids(frames: Mapping[str, pd.DataFrame], memories: Sequence[str] = ()) -> pa.Array:
    """Atom ids of the served table: modalities in name order, rows in frame order; then the
    ids of a run's `memories` in code order (their codes follow the served atoms',
    bench.systems.credit.provenance)."""
    parts = [_strings(frames[m]["atom_id"]) for m in sorted(frames)]
    if len(memories):
        parts.append(pa.array(list(memories), type=pa.large_string()))
    return pa.concat_arrays(parts) if parts else pa.array([], type=pa.large_string())


def encode(ids: pd.Series, table: pa.Array, what: str = "atom_id") -> np.ndarray:
    """Codes (int32) of `ids` in `table`; AtomCodeError naming up to five ids it lacks."""
    values = _strings(ids)
    found = pc.index_in(values, value_set=table)
    if found.null_count:
        missing = list(dict.fromkeys(values.filter(found.is_null()).to_pylist()))[:5]
        raise AtomCodeError(f"{what}: {found.null_count} value(s) are not served atoms, e.g. {missing}")
    if len(table) > np.iinfo(CODE_DTYPE).max:
        raise AtomCodeError(f"{len(table)} atoms do not fit int32 codes")
    return found.to_numpy(zero_copy_only=False).astype(CODE_DTYPE)


def decode(codes: np.ndarray | pd.Series, table: pa.Array) -> pd.Series:
    """Atom-id strings of `codes` (one take, no hashing)."""
    arr = np.asarray(codes, dtype=np.int64)
    if len(arr) and (arr.min() < 0 or arr.max() >= len(table)):
        raise AtomCodeError(f"atom codes outside the {len(table)} served atoms: {arr[(arr < 0) | (arr >= len(table))][:5].tolist()}")
    return pd.Series(table.take(pa.array(arr)).to_pandas(types_mapper=None), dtype="str", name="atom_id")


def partition_ids(codes: np.ndarray | pd.Series, served: Sequence[Partition], memories: Sequence[str] = ()) -> pd.Series:
    """Atom-id strings of `codes`, read partition by partition (the ``atom_id`` column alone)
    from the served partitions that hold them: for a writer that does not hold the served
    table. A code past the served atoms names the run's memory of that row of `memories`
    (their ids in code order)."""
    import pyarrow.parquet as pq

    arr = np.asarray(codes, dtype=np.int64)
    out = np.empty(len(arr), dtype=object)
    done = np.zeros(len(arr), dtype=bool)
    first = sum(part.rows for part in served)
    mem = np.flatnonzero((arr >= first) & (arr < first + len(memories)))
    if len(mem):
        out[mem] = np.asarray(list(memories), dtype=object)[arr[mem] - first]
        done[mem] = True
    for part in served:
        mine = np.flatnonzero((arr >= part.offset) & (arr < part.offset + part.rows))
        if len(mine):
            ids = pq.read_table(part.path, columns=["atom_id"]).column("atom_id").combine_chunks()
            out[mine] = ids.take(pa.array(arr[mine] - part.offset)).to_pylist()
            done[mine] = True
    if not done.all():
        raise AtomCodeError(f"atom codes outside the served partitions: {arr[~done][:5].tolist()}")
    return pd.Series(out, dtype="str", name="atom_id")


def to_codes(frame: pd.DataFrame, table: pa.Array, what: str) -> pd.DataFrame:
    """`frame` with its atom_id column replaced by codes (``atom``, same position) and
    query_id made categorical: the form data/runs/dev.parquet and data/resolved/gold.parquet hold."""
    codes = encode(frame["atom_id"], table, f"{what}.atom_id")
    out = frame.copy()
    out["query_id"] = out["query_id"].astype(str).astype("category")
    out.insert(list(out.columns).index("atom_id"), ATOM_CODE, codes)
    return out.drop(columns="atom_id")


def with_atom_ids(frame: pd.DataFrame, table: pa.Array) -> pd.DataFrame:
    """`frame` (with ``atom`` codes) plus the atom_id strings after the codes, and its
    query ids as plain strings, for readers that need names (reports, drill-down, TREC
    export); the codes stay."""
    out = frame.copy()
    out["query_id"] = out["query_id"].astype(str)
    out.insert(list(out.columns).index(ATOM_CODE) + 1, "atom_id", decode(out[ATOM_CODE].to_numpy(), table).to_numpy())
    return out
