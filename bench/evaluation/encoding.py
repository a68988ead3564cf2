"""The per-query inputs checked and encoded once: entries, atoms, run and gold as
integer codes (no I/O).

Inputs
------
``entries``  query_id (unique), modality, unanswerable (bool), as_of (UTC), holder
             (the entry's ``scope.holder``), n_regions (number of gold regions; 0 for
             unanswerable entries).
``run``      query_id, atom (integer code: the atom's row in ``atoms``,
             bench.ingest.atom_codes) or atom_id, rank (1-based), score. A query
             may be absent: the system returned nothing; it still counts in every
             denominator.
``gold``     query_id, gold_idx, atom or atom_id: the atom overlaps gold region
             ``gold_idx`` of the query. A region no atom overlaps has no rows and
             stays a miss, because ``n_regions`` still counts it.
``atoms``    holder, observed_at (UTC) (and atom_id when run or gold name atoms by id)
             for every atom that may be in ``run``; row i is atom code i.
``failed``   query ids whose system call failed. Their run rows (if any) are ignored.

The ``rank`` column of ``run`` is authoritative and is never recomputed from
``score``: ranks are assigned upstream by (score descending, atom_id ascending), so
ties in score are already broken deterministically (trec_eval / ranx re-sort by score
themselves; they agree whenever scores are distinct).

A query's code is its position among the entries sorted by query_id; a categorical
query_id column (as the retrieve stage writes it) is looked up by its
categories only. Ids given as strings are looked up by one pyarrow hash lookup.
Every duplicate check, sort and membership test then runs in numpy on those codes
(pair keys ``query * n_atoms + atom``). The run is sorted by (query, rank) only when
it does not already come in that order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from bench.ingest.atom_codes import ATOM_CODE

__all__ = ["Atoms", "Entries", "GoldRows", "RunRows", "count_per_query", "distinct_rows", "Encoded", "encode_inputs",
           "failed_ids", "require_columns", "responses_per_entry"]

ENTRY_REQUIRED = ("query_id", "modality", "unanswerable", "as_of", "holder", "n_regions")
RUN_REQUIRED = ("query_id", "rank", "score")  # and atom_id or atom
GOLD_REQUIRED = ("query_id", "gold_idx")  # and atom_id or atom
ATOM_REQUIRED = ("atom_id", "holder", "observed_at")

Failed: TypeAlias = Iterable[str] | pd.Series | None
Ids: TypeAlias = pa.Array | pa.ChunkedArray


# --------------------------------------------------------------------------- helpers


def require_columns(df: pd.DataFrame, columns: Iterable[str], name: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{name} is missing columns {missing}")


def failed_ids(failed: Failed) -> set[str]:
    if failed is None:
        return set()
    return {str(q) for q in failed}


def _utc(values: pd.Series, name: str) -> pd.Series:
    out = pd.to_datetime(values, utc=True)
    if out.isna().any():
        raise ValueError(f"{name} contains missing timestamps")
    return out


def _utc_naive(values: pd.Series) -> np.ndarray:
    """tz-aware UTC timestamps -> naive-UTC datetime64 array (fast comparisons)."""
    return values.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()


def _ids(values: pd.Series) -> pd.Series:
    return values.astype(str)


def _arrow_ids(values: pd.Series | pd.Index) -> Ids:
    """Ids as a pyarrow string array (zero-copy for pandas' pyarrow-backed ``str``)."""
    return pa.array(values.astype(str), type=pa.large_string(), from_pandas=True)


def _lookup(values: Ids, universe: Ids) -> np.ndarray:
    """Position of every value in `universe` (whose values are unique); -1 where absent."""
    return pc.index_in(values, value_set=universe).fill_null(-1).to_numpy().astype(np.int64)


def _query_codes(values: pd.Series, universe: Ids) -> np.ndarray:
    """Position of every query id in `universe`; -1 where absent.

    A categorical column (as the retrieve stage writes query ids) is
    looked up by its categories only, then expanded by its integer codes, so the
    10M rows of a large run are never hashed as strings.
    """
    if isinstance(values.dtype, pd.CategoricalDtype):
        pos = _lookup(_arrow_ids(pd.Series(values.cat.categories)), universe)
        codes = values.cat.codes.to_numpy()
        if not len(pos):
            return np.full(len(codes), -1, dtype=np.int64)
        if len(pos) == len(universe) and np.array_equal(pos, np.arange(len(pos))):
            out = codes.astype(np.int64)  # the categories are the entries, in order
        else:
            out = pos[codes]
        return np.where(codes >= 0, out, -1) if len(codes) and codes.min() < 0 else out
    return _lookup(_arrow_ids(values), universe)


def _given_codes(frame: pd.DataFrame, name: str) -> np.ndarray | None:
    """The integer atom codes of `frame` (column ``atom``: row of ``atoms``), or None
    when it names atoms by ``atom_id`` only."""
    if ATOM_CODE not in frame.columns:
        require_columns(frame, ("atom_id",), name)
        return None
    codes = frame[ATOM_CODE].to_numpy()
    if not np.issubdtype(codes.dtype, np.integer):
        raise ValueError(f"{name}.{ATOM_CODE} must hold integer atom codes (rows of atoms)")
    return codes.astype(np.int64, copy=False)


def distinct_rows(*cols: np.ndarray) -> np.ndarray:
    """Indices of one row per distinct tuple of the int columns `cols`, in tuple order."""
    if not len(cols[0]):
        return np.zeros(0, dtype=np.int64)
    spans = [int(c.max()) + 1 for c in cols]
    if all(c.min() >= 0 for c in cols) and math.prod(spans) < 2**62:  # one combined key: one sort
        key = cols[0].astype(np.int64)
        for col, span in zip(cols[1:], spans[1:], strict=True):
            key = key * span + col
        order = np.argsort(key, kind="stable")
        s = key[order]
        changed = np.ones(len(order), dtype=bool)
        changed[1:] = s[1:] != s[:-1]
        return order[changed]
    order = np.lexsort(cols[::-1])
    changed = np.zeros(len(order), dtype=bool)
    changed[:1] = True
    for col in cols:
        s = col[order]
        changed[1:] |= s[1:] != s[:-1]
    return order[changed]


def count_per_query(q: np.ndarray, n: int) -> np.ndarray:
    """Number of occurrences of every query code 0..n-1."""
    return np.bincount(q, minlength=n)


# --------------------------------------------------------------------------- input prep


@dataclass(frozen=True)
class Entries:
    """Entries sorted by query_id; a query's code is its row here."""

    frame: pd.DataFrame  # indexed by query_id: modality, unanswerable, as_of, holder, n_regions
    ids: Ids
    failed: np.ndarray  # bool per entry
    as_of: np.ndarray  # naive-UTC datetime64
    holder: np.ndarray  # holder code (shared with Atoms.holder)


@dataclass(frozen=True)
class Atoms:
    """Atoms in input order; an atom's code is its row here."""

    holder: np.ndarray  # holder code (shared with Entries.holder; never equal when missing)
    observed_at: np.ndarray  # naive-UTC datetime64


@dataclass(frozen=True)
class RunRows:
    """Run rows of evaluated, non-failed queries as codes, sorted by (query, rank)."""

    q: np.ndarray
    a: np.ndarray
    rank: np.ndarray
    score: np.ndarray


@dataclass(frozen=True)
class GoldRows:
    """Distinct (query, gold_idx, atom) rows of evaluated entries, as codes."""

    q: np.ndarray
    g: np.ndarray
    a: np.ndarray


def _prep_entries(entries: pd.DataFrame) -> pd.DataFrame:
    require_columns(entries, ENTRY_REQUIRED, "entries")
    out = pd.DataFrame(
        {
            "query_id": _ids(entries["query_id"]),
            "modality": entries["modality"].astype(str),
            "unanswerable": entries["unanswerable"].astype(bool),
            "as_of": _utc(entries["as_of"], "entries.as_of"),
            "holder": entries["holder"].astype(str),
            "n_regions": entries["n_regions"].astype(int),
        }
    )
    if out["query_id"].duplicated().any():
        raise ValueError("entries.query_id must be unique")
    if (out["n_regions"] < 0).any():
        raise ValueError("entries.n_regions must be >= 0")
    return out.sort_values("query_id", kind="stable").set_index("query_id")


def _strictly_increasing(ids: Ids) -> bool:
    """True when the ids have no nulls and each is greater than the previous one."""
    if ids.null_count or len(ids) < 2:
        return not ids.null_count
    return bool(pc.all(pc.less(ids[:-1], ids[1:])).as_py())


def _atom_codes(atom_ids: Ids, columns: list[Ids]) -> list[np.ndarray]:
    """Atom code (row of `atom_ids`, first occurrence) of every id in each of `columns`,
    by one hash lookup over all of them; ids absent from the atoms get codes
    >= len(atom_ids), one per distinct id."""
    chunks = [chunk for col in columns for chunk in (col.chunks if isinstance(col, pa.ChunkedArray) else [col])]
    everything = pa.chunked_array(chunks, type=pa.large_string())
    codes = _lookup(everything, atom_ids)
    unknown = np.flatnonzero(codes < 0)
    if len(unknown):
        extra, _ = pd.factorize(everything.take(pa.array(unknown)).to_pandas(), use_na_sentinel=False)
        codes[unknown] = len(atom_ids) + extra
    return np.split(codes, np.cumsum([len(col) for col in columns])[:-1])


def _prep(
    entries: pd.DataFrame, atoms: pd.DataFrame, failed: set[str], lookups: list[Ids]
) -> tuple[Entries, Atoms, list[np.ndarray]]:
    """Entries, atoms (holder codes over one vocabulary) and the atom codes of `lookups`
    (id columns; none when run and gold come as codes, and then atom ids are not read)."""
    entries_checked = _prep_entries(entries)
    require_columns(atoms, ATOM_REQUIRED[1:] if not lookups else ATOM_REQUIRED, "atoms")
    observed = _utc_naive(pd.to_datetime(atoms["observed_at"], utc=True))
    codes: list[np.ndarray] = []
    if lookups:
        atom_ids = _arrow_ids(atoms["atom_id"])
        if _strictly_increasing(atom_ids):  # unique without a hash pass
            codes = _atom_codes(atom_ids, lookups)
        else:
            own, *codes = _atom_codes(atom_ids, [atom_ids, *lookups])
            if not np.array_equal(own, np.arange(len(own))):
                raise ValueError("atoms.atom_id must be unique")
    atom_holder = atoms["holder"].astype(str).reset_index(drop=True)
    holders, _ = pd.factorize(pd.concat([entries_checked["holder"].reset_index(drop=True), atom_holder], ignore_index=True))
    n = len(entries_checked)
    # a missing holder equals nothing, not even another missing one (as `!=` on strings)
    atoms_checked = Atoms(np.where(holders[n:] < 0, -2, holders[n:]), observed)
    failed_mask = entries_checked.index.isin(list(failed))
    return Entries(entries_checked, _arrow_ids(entries_checked.index), failed_mask, _utc_naive(entries_checked["as_of"]), holders[:n]), atoms_checked, codes


def _has_duplicate_pairs(q: np.ndarray, a: np.ndarray) -> bool:
    """True when some query (rows grouped by query) lists one atom code twice.

    Each query's atoms are sorted in a row of a (queries x depth) matrix padded with
    distinct negative values, because many short sorts cost less than one sort of all
    (query, atom) keys; a very uneven run (padding would dominate) takes that one sort."""
    if len(q) < 2:
        return False
    start = np.flatnonzero(np.concatenate(([True], q[1:] != q[:-1])))
    counts = np.diff(np.append(start, len(q)))
    width = int(counts.max())
    if width == 1:
        return False
    if len(start) * width > 4 * len(q) + 4096:
        n_codes = int(a.max()) + 1
        keys = np.sort(q * n_codes + a)
        return bool((keys[1:] == keys[:-1]).any())
    if (counts == width).all():
        matrix = a.reshape(len(start), width).copy()
    else:
        matrix = np.broadcast_to(-1 - np.arange(width, dtype=np.int64), (len(start), width)).copy()
        group = np.repeat(np.arange(len(start)), counts)
        matrix[group, np.arange(len(q)) - start[group]] = a
    matrix.sort(axis=1)
    return bool(((matrix[:, 1:] == matrix[:, :-1]) & (matrix[:, 1:] >= 0)).any())


def _prep_run(run: pd.DataFrame, atom_ids: Ids | None, atom_codes: np.ndarray, entries_checked: Entries, atoms: Atoms) -> RunRows:
    """Rows of the evaluated, non-failed queries, sorted by (query, rank), checked.

    ``atom_ids``: the atom ids the codes were looked up from (for error messages), or
    None when the run came as codes."""
    q = _query_codes(run["query_id"], entries_checked.ids)
    rank = run["rank"].to_numpy()
    rank = rank.astype(np.int64, copy=False) if np.issubdtype(rank.dtype, np.integer) else run["rank"].astype(int).to_numpy()
    score = run["score"].to_numpy(dtype=float)
    a = atom_codes
    drop = q < 0
    if entries_checked.failed.any():
        drop |= entries_checked.failed[q]
    rows = np.flatnonzero(~drop) if drop.any() else None
    if rows is not None:
        q, rank = q[rows], rank[rows]
    if len(rank) and rank.min() < 1:
        raise ValueError("run.rank must be 1-based")
    max_rank = int(rank.max()) if len(rank) else 0
    if len(entries_checked.ids) * (max_rank + 1) < 2**62:  # one int key per (query, rank): fewer passes
        key = q * (max_rank + 1) + rank
        ordered = bool((key[1:] > key[:-1]).all())
    else:
        ordered = bool(((q[1:] > q[:-1]) | ((q[1:] == q[:-1]) & (rank[1:] > rank[:-1]))).all())
    if not ordered:
        order = np.lexsort((rank, q))
        rows = order if rows is None else rows[order]
        q, rank = q[order], rank[order]
        if ((q[1:] == q[:-1]) & (rank[1:] == rank[:-1])).any():
            raise ValueError("run has duplicate (query_id, rank)")
    if rows is not None:
        a, score = a[rows], score[rows]
    n_atoms = len(atoms.observed_at)
    if len(a) and (a.min() < 0 or a.max() >= n_atoms):
        unknown = np.flatnonzero((a < 0) | (a >= n_atoms))
        if atom_ids is None:
            raise ValueError(f"run atom codes outside the {n_atoms} atoms: {a[unknown[:5]].tolist()}")
        at = unknown if rows is None else rows[unknown]
        missing = list(dict.fromkeys(atom_ids.take(pa.array(at)).to_pylist()))[:5]
        raise ValueError(f"run atoms missing from atoms: {missing}")
    if _has_duplicate_pairs(q, a):
        raise ValueError("run has duplicate (query_id, atom_id)")
    if np.isnat(atoms.observed_at).any() and np.isnat(atoms.observed_at)[a].any():
        raise ValueError("atoms.observed_at is missing for a returned atom")
    return RunRows(q, a, rank, score)


def _prep_gold(gold: pd.DataFrame, atom_codes: np.ndarray, entries_checked: Entries, n_atoms: int | None) -> GoldRows:
    """Distinct gold rows of the evaluated entries; ``n_atoms``: the range codes given as
    codes must fall in (None when they were looked up from ids)."""
    q = _query_codes(gold["query_id"], entries_checked.ids)
    g = gold["gold_idx"].astype(int).to_numpy()
    if n_atoms is not None and len(atom_codes) and (atom_codes.min() < 0 or atom_codes.max() >= n_atoms):
        bad = atom_codes[(atom_codes < 0) | (atom_codes >= n_atoms)]
        raise ValueError(f"gold atom codes outside the {n_atoms} atoms: {bad[:5].tolist()}")
    rows = np.flatnonzero(q >= 0)
    rows = rows[distinct_rows(q[rows], g[rows], atom_codes[rows])]
    q, g, a = q[rows], g[rows], atom_codes[rows]
    if entries_checked.frame["unanswerable"].to_numpy()[q].any():
        raise ValueError("gold rows given for an unanswerable entry")
    regions = count_per_query(q[distinct_rows(q, g)], len(entries_checked.ids))
    if (regions > entries_checked.frame["n_regions"].to_numpy()).any():
        raise ValueError("gold has more distinct gold_idx than entries.n_regions")
    return GoldRows(q, g, a)


def responses_per_entry(responses: pd.DataFrame | None, entries_checked: Entries) -> tuple[np.ndarray, np.ndarray]:
    """(abstained, confidence) per entry; an entry without a response row did not abstain."""
    n = len(entries_checked.ids)
    abstained = np.zeros(n, dtype=bool)
    confidence = np.full(n, np.nan)
    if responses is None or not len(responses):
        return abstained, confidence
    require_columns(responses, ("query_id",), "responses")
    q = _lookup(_arrow_ids(responses["query_id"]), entries_checked.ids)
    keep = q >= 0
    if "abstain" in responses.columns:
        abstained[q[keep]] = responses["abstain"].fillna(False).astype(bool).to_numpy()[keep]
    if "confidence" in responses.columns:
        confidence[q[keep]] = pd.to_numeric(responses["confidence"], errors="coerce").to_numpy(dtype=float)[keep]
    return abstained, confidence



@dataclass(frozen=True)
class Encoded:
    """One block's inputs as codes: entries, atoms, run rows, gold rows."""

    entries: Entries
    atoms: Atoms
    run: RunRows
    gold: GoldRows


def encode_inputs(entries: pd.DataFrame, run: pd.DataFrame, gold: pd.DataFrame, atoms: pd.DataFrame, failed: Failed) -> Encoded:
    """Check and encode one block's inputs (module docstring); ``run`` and ``gold`` may hold
    rows of other queries (they are ignored)."""
    require_columns(run, RUN_REQUIRED, "run")
    require_columns(gold, GOLD_REQUIRED, "gold")
    run_given, gold_given = _given_codes(run, "run"), _given_codes(gold, "gold")
    run_atoms = _arrow_ids(run["atom_id"]) if run_given is None else None
    lookups = [] if run_atoms is None else [run_atoms]
    if gold_given is None:
        lookups.append(_arrow_ids(gold["atom_id"]))
    checked_entries, checked_atoms, looked = _prep(entries, atoms, failed_ids(failed), lookups)
    found = iter(looked)
    run_codes = run_given if run_given is not None else next(found)
    gold_codes = gold_given if gold_given is not None else next(found)
    run_rows = _prep_run(run, run_atoms, run_codes, checked_entries, checked_atoms)
    n_atoms = len(checked_atoms.observed_at) if gold_given is not None else None
    gold_rows = _prep_gold(gold, gold_codes, checked_entries, n_atoms)
    return Encoded(checked_entries, checked_atoms, run_rows, gold_rows)
