"""Retrieval metrics engine (schema b-2, section 4): pure, vectorised, no I/O.

Everything here is a pure function of pandas DataFrames; nothing is read from disk
or from the environment.  Two public entry points:

* :func:`per_query` -- one row per annotated entry with every per-query metric.
* :func:`aggregate` -- the contract-shaped report ``{"by_modality": ..., "overall": ...}``.

Inputs
------
``entries``  query_id (unique), modality, unanswerable (bool), as_of (UTC), holder
             (the entry's ``scope.holder``), n_regions (number of gold regions; 0 for
             unanswerable entries).
``run``      query_id, atom_id, rank (1-based), score.  A query may be absent: the
             system returned nothing; it still counts in every denominator.
``gold``     query_id, gold_idx, atom_id: atom ``atom_id`` overlaps gold region
             ``gold_idx`` of the query.  A region no atom overlaps has no rows and
             stays a miss, because ``n_regions`` still counts it.
``atoms``    atom_id, holder, observed_at (UTC) for every atom that may be in ``run``.
``latency``  query_id, latency_ms for timed queries.
``failed``   query ids whose system call failed.  Their run rows (if any) are ignored.

Ranks and ties
--------------
The ``rank`` column of ``run`` is authoritative and is never recomputed from
``score``.  Ranks are assigned upstream by (score descending, atom_id ascending),
so ties in score are already broken deterministically.  (trec_eval / ranx re-sort
by score themselves; they agree with us whenever scores are distinct.)

Per-query definitions (``k`` = cut-off, default 10; "gold atom set" = distinct
atom ids in the query's ``gold`` rows; "top-k" = run rows with ``rank <= k``)
--------------------------------------------------------------------------------
``recall@k``       share of the entry's ``n_regions`` gold regions overlapped by some
                   top-k atom (region coverage: an atom overlapping two regions
                   covers both).  0 when n_regions == 0.  NaN for unanswerable.
``atom_recall@k``  |top-k ∩ gold atom set| / |gold atom set|; 0 when the gold atom
                   set is empty.  NaN for unanswerable.
``mrr``            1 / rank of the first returned atom (any depth) in the gold atom
                   set, else 0.  NaN for unanswerable.
``ndcg@k``         binary relevance (rel = 1 iff atom in gold atom set);
                   DCG = sum_{r<=k} rel_r / log2(r + 1), IDCG = DCG of
                   min(|gold atom set|, k) hits at ranks 1..; 0 when the gold atom
                   set is empty.  Equals trec_eval / ranx / ir_measures nDCG@k on
                   queries with non-empty qrels.  NaN for unanswerable.
``false_recall``   unanswerable entries only, under the rule of the entry's modality
                   (see *False recall* below); NaN for answerable entries and where
                   the rule is "not measurable".
``abstained``      1 if the system answered ``"abstain": true``, else 0.
``temporal_ok``    1 if no top-k atom has ``observed_at > as_of``, else 0.
``holder_ok``      1 if no top-k atom has ``holder != entry holder``, else 0.
Extra columns: ``failed``, ``n_regions``, ``n_gold_atoms``, ``n_returned`` (whole
list), ``first_hit_rank`` (NaN if no gold atom was returned), ``top1_score`` (score of
the rank-1 hit, NaN when nothing was returned), ``confidence`` (declared, or NaN),
``separation`` (the AUROC signal, below), ``false_recall_rule``,
``false_recall_threshold`` (calibrated rule only, in the system's own score units) and
``false_recall_reason`` (why a modality is not measurable).

False recall (spec section 4: "strong evidence outside gold was returned")
-------------------------------------------------------------------------
What counts as *strong* is read from what the system itself stands behind, never
from a fixed score, so no number depends on the system's score scale:

``abstention``     the run declares abstention (``abstains`` passed in: the system
                   said so once) or any response abstained.  An unanswerable entry
                   is a false recall when the system did *not* abstain and returned
                   at least one hit.  Applies to every modality of the run.
``calibrated``     a system that never abstains: per modality, the threshold is the
                   top-1 score that ``calibration_recall`` (e.g. 0.9) of the
                   modality's answerable entries reach (an order statistic of their
                   top-1 scores: entries with no hit, and failed ones, rank lowest).
                   An unanswerable entry is a false recall when its top-1 score is
                   >= that threshold.  When fewer than that share got a hit at all,
                   the threshold is the lowest top-1 score of an answerable hit.
                   ``thresholds`` (from the dev run) replaces the calibration: the
                   acceptance run reuses dev's thresholds and never recalibrates.
``not measurable`` the top-1 scores of the answerable entries do not separate (all
                   equal, or none returned anything), there is no answerable entry to
                   calibrate on, or the dev run gave no threshold for the modality.

Any positive scaling or shift of a system's scores leaves every metric unchanged
(order statistics and comparisons only).  Scores within a relative ``REL_TIE`` (1e-9)
of each other count as equal: the same terms summed in another order differ in the
last bit, and such a difference must not turn into a tie (or out of one) when the
scores are rescaled.  :func:`false_recall_rules` summarises the
rules per modality for dev.json.

AUROC (``auroc_unanswerable``, threshold-free)
----------------------------------------------
How well the system's signal separates answerable (positive) from unanswerable
entries: the Mann-Whitney probability that an answerable entry's signal exceeds an
unanswerable one's (ties count one half).  The signal is the declared
``confidence`` when the system sent one with every answered query, else the top-1
score (an empty answer ranks lowest).  Only ranks are used.

For a failed query every applicable metric is NaN in :func:`per_query` (there is no
result to score); :func:`aggregate` counts it as the worst case: 0 for the metrics
where higher is better, 1 for ``false_recall`` and ``abstention_rate``, and for the
AUROC a failed answerable entry ranks below every other entry and a failed
unanswerable one above every other entry.

Aggregation (per modality, and ``overall`` = all entries pooled, micro average)
------------------------------------------------------------------------------
``denominator``  number of annotated entries the metric is defined over: answerable
                 entries for recall@k / atom_recall@k / mrr / ndcg@k, unanswerable
                 entries for false_recall, answerable entries for abstention_rate,
                 all entries for temporal / holder correctness, AUROC and latency.
                 Never the number of hits.
``n``            entries of the denominator that have a system result (not failed);
                 an empty but successful result counts in ``n``.
``value``        sum of per-query values over the denominator's entries /
                 denominator, with failed queries contributing their worst case
                 (0, or 1 for false_recall and abstention_rate).  ``None`` when
                 denominator == 0, and ``None`` with a ``reason`` where the metric
                 cannot be measured (false recall under "not measurable"; the overall
                 false recall when any modality with unanswerable entries is not
                 measurable; AUROC without both kinds of entries).
Latency          value = p50 / p95 (numpy linear percentile) of latency_ms over the
                 group's timed, non-failed queries; n = number of those; denominator
                 = all entries of the group; value ``None`` when n == 0.
All numbers are plain Python ``float`` / ``int`` (JSON-serialisable); nothing is
rounded.  Modalities are sorted alphabetically.

Implementation
--------------
Query and atom ids become integer codes once (query code = position among the
entries sorted by query_id, atom code = row of ``atoms``), by a pyarrow hash lookup;
every duplicate check, sort, membership test and per-query reduction then runs in
numpy on those codes (``np.bincount`` over query codes, pair keys
``query * n_atoms + atom``).  The run is sorted by (query, rank) only when it does
not already come in that order.

:func:`per_query` is :func:`query_block` (everything one query's own rows decide, run
block by block over the entries by bench.evaluation.evaluate when the run is big)
followed by :func:`finish_per_query` (the false-recall rules and the AUROC signal,
which need every query of a modality), so one block and many give the same table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from bench.evaluation.catalogue import Measure, counted, in_denominator, measures

__all__ = ["FalseRecallRule", "aggregate", "auroc_codes", "auroc_from_codes", "calibrate", "false_recall_rules", "finish_per_query",
           "group_cells", "metric_keys", "per_query", "query_block"]

ENTRY_COLUMNS = ("query_id", "modality", "unanswerable", "as_of", "holder", "n_regions")
RUN_COLUMNS = ("query_id", "rank", "score")  # and atom_id or atom
GOLD_COLUMNS = ("query_id", "gold_idx")  # and atom_id or atom
#: integer atom code column: the atom's row in ``atoms`` (bench.evaluation.atom_codes)
ATOM_CODE = "atom"
ATOM_COLUMNS = ("atom_id", "holder", "observed_at")
LATENCY_COLUMNS = ("query_id", "latency_ms")

Failed: TypeAlias = Iterable[str] | pd.Series | None
MetricCell = dict[str, Any]
Ids: TypeAlias = pa.Array | pa.ChunkedArray


# --------------------------------------------------------------------------- helpers


def _require(df: pd.DataFrame, columns: Iterable[str], name: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{name} is missing columns {missing}")


def _failed_ids(failed: Failed) -> set[str]:
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

    A categorical column (as the retrieve and resolve stages write query ids) is
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
        _require(frame, ("atom_id",), name)
        return None
    codes = frame[ATOM_CODE].to_numpy()
    if not np.issubdtype(codes.dtype, np.integer):
        raise ValueError(f"{name}.{ATOM_CODE} must hold integer atom codes (rows of atoms)")
    return codes.astype(np.int64, copy=False)


def _distinct(*cols: np.ndarray) -> np.ndarray:
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


def _count(q: np.ndarray, n: int) -> np.ndarray:
    """Number of occurrences of every query code 0..n-1."""
    return np.bincount(q, minlength=n)


def _idcg_table(k: int) -> np.ndarray:
    """idcg[g] = ideal DCG with g relevant atoms at ranks 1..g (g <= k)."""
    discounts = 1.0 / np.log2(np.arange(2, k + 2, dtype=float))
    return np.concatenate(([0.0], np.cumsum(discounts)))


def _safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros_like(num, dtype=float)
    np.divide(num, den, out=out, where=den > 0)
    return out


# --------------------------------------------------------------------------- input prep


@dataclass(frozen=True)
class _Entries:
    """Entries sorted by query_id; a query's code is its row here."""

    frame: pd.DataFrame  # indexed by query_id: modality, unanswerable, as_of, holder, n_regions
    ids: Ids
    failed: np.ndarray  # bool per entry
    as_of: np.ndarray  # naive-UTC datetime64
    holder: np.ndarray  # holder code (shared with _Atoms.holder)


@dataclass(frozen=True)
class _Atoms:
    """Atoms in input order; an atom's code is its row here."""

    holder: np.ndarray  # holder code (shared with _Entries.holder; never equal when missing)
    observed_at: np.ndarray  # naive-UTC datetime64


@dataclass(frozen=True)
class _Run:
    """Run rows of evaluated, non-failed queries as codes, sorted by (query, rank)."""

    q: np.ndarray
    a: np.ndarray
    rank: np.ndarray
    score: np.ndarray


@dataclass(frozen=True)
class _Gold:
    """Distinct (query, gold_idx, atom) rows of evaluated entries, as codes."""

    q: np.ndarray
    g: np.ndarray
    a: np.ndarray


def _prep_entries(entries: pd.DataFrame) -> pd.DataFrame:
    _require(entries, ENTRY_COLUMNS, "entries")
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
) -> tuple[_Entries, _Atoms, list[np.ndarray]]:
    """Entries, atoms (holder codes over one vocabulary) and the atom codes of `lookups`
    (id columns; none when run and gold come as codes, and then atom ids are not read)."""
    ent = _prep_entries(entries)
    _require(atoms, ATOM_COLUMNS[1:] if not lookups else ATOM_COLUMNS, "atoms")
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
    holders, _ = pd.factorize(pd.concat([ent["holder"].reset_index(drop=True), atom_holder], ignore_index=True))
    n = len(ent)
    # a missing holder equals nothing, not even another missing one (as `!=` on strings)
    atm = _Atoms(np.where(holders[n:] < 0, -2, holders[n:]), observed)
    failed_mask = ent.index.isin(list(failed))
    return _Entries(ent, _arrow_ids(ent.index), failed_mask, _utc_naive(ent["as_of"]), holders[:n]), atm, codes


def _has_duplicate_pairs(q: np.ndarray, a: np.ndarray) -> bool:
    """True when some query (rows grouped by query) lists one atom code twice.

    Each query's atoms are sorted in a row of a (queries x depth) matrix padded with
    distinct negative values: sorting many short rows is about ten times faster than
    one sort of 10M (query, atom) keys. A very uneven run falls back to that sort."""
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


def _prep_run(run: pd.DataFrame, atom_ids: Ids | None, atom_codes: np.ndarray, ent: _Entries, atoms: _Atoms) -> _Run:
    """Rows of the evaluated, non-failed queries, sorted by (query, rank), checked.

    ``atom_ids``: the atom ids the codes were looked up from (for error messages), or
    None when the run came as codes."""
    q = _query_codes(run["query_id"], ent.ids)
    rank = run["rank"].to_numpy()
    rank = rank.astype(np.int64, copy=False) if np.issubdtype(rank.dtype, np.integer) else run["rank"].astype(int).to_numpy()
    score = run["score"].to_numpy(dtype=float)
    a = atom_codes
    drop = q < 0
    if ent.failed.any():
        drop |= ent.failed[q]
    rows = np.flatnonzero(~drop) if drop.any() else None
    if rows is not None:
        q, rank = q[rows], rank[rows]
    if len(rank) and rank.min() < 1:
        raise ValueError("run.rank must be 1-based")
    max_rank = int(rank.max()) if len(rank) else 0
    if len(ent.ids) * (max_rank + 1) < 2**62:  # one int key per (query, rank): fewer passes
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
    return _Run(q, a, rank, score)


def _prep_gold(gold: pd.DataFrame, atom_codes: np.ndarray, ent: _Entries, n_atoms: int | None) -> _Gold:
    """Distinct gold rows of the evaluated entries; ``n_atoms``: the range codes given as
    codes must fall in (None when they were looked up from ids)."""
    q = _query_codes(gold["query_id"], ent.ids)
    g = gold["gold_idx"].astype(int).to_numpy()
    if n_atoms is not None and len(atom_codes) and (atom_codes.min() < 0 or atom_codes.max() >= n_atoms):
        bad = atom_codes[(atom_codes < 0) | (atom_codes >= n_atoms)]
        raise ValueError(f"gold atom codes outside the {n_atoms} atoms: {bad[:5].tolist()}")
    rows = np.flatnonzero(q >= 0)
    rows = rows[_distinct(q[rows], g[rows], atom_codes[rows])]
    q, g, a = q[rows], g[rows], atom_codes[rows]
    if ent.frame["unanswerable"].to_numpy()[q].any():
        raise ValueError("gold rows given for an unanswerable entry")
    regions = _count(q[_distinct(q, g)], len(ent.ids))
    if (regions > ent.frame["n_regions"].to_numpy()).any():
        raise ValueError("gold has more distinct gold_idx than entries.n_regions")
    return _Gold(q, g, a)


# --------------------------------------------------------------------------- per-query parts


def _ranking_metrics(run: _Run, gold: _Gold, ent: _Entries, k: int) -> dict[str, np.ndarray]:
    """recall@k, atom_recall@k, mrr, ndcg@k, n_gold_atoms, first_hit_rank."""
    n = len(ent.ids)
    n_codes = int(max(run.a.max(initial=0), gold.a.max(initial=0))) + 1
    gold_keys = gold.q * n_codes + gold.a
    gold_atoms = _distinct(gold.q, gold.a)
    n_gold = _count(gold.q[gold_atoms], n)

    is_gold_atom = np.zeros(n_codes, dtype=bool)
    is_gold_atom[gold.a] = True
    maybe = np.flatnonzero(is_gold_atom[run.a])  # cheap filter before the pair lookup
    rel = np.zeros(len(run.q), dtype=bool)
    maybe_keys = run.q[maybe] * n_codes + run.a[maybe]
    rel[maybe] = pd.Series(maybe_keys, copy=False).isin(gold_keys[gold_atoms]).to_numpy()
    topk = run.rank <= k
    hit_q, hit_rank = run.q[rel], run.rank[rel]
    first = np.ones(len(hit_q), dtype=bool)
    first[1:] = hit_q[1:] != hit_q[:-1]  # rows come sorted by (query, rank)
    first_hit = np.full(n, np.nan)
    first_hit[hit_q[first]] = hit_rank[first]

    top_hit = rel & topk
    top_q = run.q[top_hit]
    dcg = np.bincount(top_q, weights=1.0 / np.log2(run.rank[top_hit] + 1.0), minlength=n)
    n_top_hits = _count(top_q, n).astype(float)
    idcg = _idcg_table(k)[np.minimum(n_gold, k)]

    # a gold row is covered when its (query, atom) is a top-k hit: top-k gold hits only
    top_keys = top_q * n_codes + run.a[top_hit]
    covered = pd.Series(gold_keys, copy=False).isin(top_keys).to_numpy()
    cq, cg = gold.q[covered], gold.g[covered]
    n_covered = _count(cq[_distinct(cq, cg)], n).astype(float)

    return {
        "n_gold_atoms": n_gold,
        "first_hit_rank": first_hit,
        f"recall@{k}": _safe_ratio(n_covered, ent.frame["n_regions"].to_numpy(dtype=float)),
        f"atom_recall@{k}": _safe_ratio(n_top_hits, n_gold.astype(float)),
        "mrr": np.where(np.isnan(first_hit), 0.0, 1.0 / first_hit),
        f"ndcg@{k}": _safe_ratio(dcg, idcg),
    }


def _returned_metrics(run: _Run, ent: _Entries) -> dict[str, np.ndarray]:
    """n_returned and the rank-1 score (NaN when nothing was returned)."""
    n = len(ent.ids)
    first = np.ones(len(run.q), dtype=bool)
    first[1:] = run.q[1:] != run.q[:-1]  # rows come sorted by (query, rank)
    top1 = np.full(n, np.nan)
    top1[run.q[first]] = run.score[first]
    return {"n_returned": _count(run.q, n), "top1_score": top1}


def _responses(responses: pd.DataFrame | None, ent: _Entries) -> tuple[np.ndarray, np.ndarray]:
    """(abstained, confidence) per entry; an entry without a response row did not abstain."""
    n = len(ent.ids)
    abstained = np.zeros(n, dtype=bool)
    confidence = np.full(n, np.nan)
    if responses is None or not len(responses):
        return abstained, confidence
    _require(responses, ("query_id",), "responses")
    q = _lookup(_arrow_ids(responses["query_id"]), ent.ids)
    keep = q >= 0
    if "abstain" in responses.columns:
        abstained[q[keep]] = responses["abstain"].fillna(False).astype(bool).to_numpy()[keep]
    if "confidence" in responses.columns:
        confidence[q[keep]] = pd.to_numeric(responses["confidence"], errors="coerce").to_numpy(dtype=float)[keep]
    return abstained, confidence


# --------------------------------------------------------------------------- false recall rules

#: scores closer than this, relative to their magnitude, are equal (floating-point rounding)
REL_TIE = 1e-9


def reaches(values: np.ndarray, threshold: float) -> np.ndarray:
    """values >= threshold, where values within REL_TIE of the threshold count as equal (NaN: False)."""
    v = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        near = np.isfinite(v) & (np.abs(v - threshold) <= REL_TIE * np.maximum(np.abs(v), abs(threshold)))
        return (v >= threshold) | near


def tie_groups(values: np.ndarray) -> np.ndarray:
    """Dense rank (0, 1, ...) of finite or infinite values, neighbours within REL_TIE merged."""
    v = np.asarray(values, dtype=float)
    uniq, inverse = np.unique(v, return_inverse=True)
    if len(uniq) > 1:
        with np.errstate(invalid="ignore"):
            gap = np.abs(np.diff(uniq)) > REL_TIE * np.maximum(np.abs(uniq[1:]), np.abs(uniq[:-1]))
        gap |= ~np.isfinite(uniq[1:]) | ~np.isfinite(uniq[:-1])
        group = np.concatenate(([0], np.cumsum(gap)))
    else:
        group = np.zeros(len(uniq), dtype=np.int64)
    return group[inverse.reshape(-1)]


ABSTENTION = "abstention"
CALIBRATED = "calibrated"
NOT_MEASURABLE = "not measurable"


@dataclass(frozen=True)
class FalseRecallRule:
    """How one modality's false recall is read (module docstring, *False recall*)."""

    rule: str
    threshold: float | None = None  # calibrated: top-1 score that counts as strong (system's units)
    reason: str | None = None  # not measurable: why
    kept: int = 0  # answerable entries whose top-1 reaches the threshold
    answerable: int = 0
    calibrated_on: str | None = None  # "this run" or "the dev run" (thresholds passed in)


def calibrate(top1: np.ndarray, share: float) -> FalseRecallRule:
    """Threshold that `share` of the answerable entries' top-1 scores reach.

    ``top1``: one value per answerable entry, NaN where it has no hit (or failed).
    The threshold is an order statistic of the values (never interpolated), so it
    moves with any positive scaling or shift of the scores.
    """
    if not 0.0 < share <= 1.0:
        raise ValueError("calibration_recall must be in (0, 1]")
    n = len(top1)
    if n == 0:
        return FalseRecallRule(NOT_MEASURABLE, reason="no answerable entry to calibrate a threshold on")
    hits = np.sort(top1[~np.isnan(top1)])[::-1]
    if len(hits) == 0:
        return FalseRecallRule(NOT_MEASURABLE, reason=f"none of the {n} answerable entries got a hit: top-1 scores do not separate", answerable=n)
    if reaches(hits[-1:], float(hits[0]))[0]:
        return FalseRecallRule(NOT_MEASURABLE, reason=f"top-1 scores do not separate: all {len(hits)} answerable entries with a hit have the same top-1 score", answerable=n)
    want = max(1, math.ceil(share * n - 1e-9))
    threshold = float(hits[min(want, len(hits)) - 1])
    return FalseRecallRule(CALIBRATED, threshold, kept=int(reaches(hits, threshold).sum()), answerable=n, calibrated_on="this run")


def _rules(
    mods: np.ndarray, unanswerable: np.ndarray, failed: np.ndarray, top1: np.ndarray, abstains: bool, share: float,
    thresholds: dict[str, float | None] | None,
) -> dict[str, FalseRecallRule]:
    answerable = ~unanswerable & ~failed
    rules = {}
    for m in sorted(set(mods)):
        in_mod = mods == m
        if abstains:
            rules[m] = FalseRecallRule(ABSTENTION)
        elif thresholds is not None:
            t = thresholds.get(m)
            if t is None:
                rules[m] = FalseRecallRule(NOT_MEASURABLE, reason=f"the dev run has no calibrated threshold for {m}")
            else:
                vals = top1[in_mod & answerable]
                n_ans = int((in_mod & ~unanswerable).sum())
                rules[m] = FalseRecallRule(CALIBRATED, float(t), kept=int(reaches(vals, float(t)).sum()), answerable=n_ans, calibrated_on="the dev run")
        else:
            in_den = in_mod & ~unanswerable
            rules[m] = calibrate(np.where(failed[in_den], np.nan, top1[in_den]), share)
    return rules


def _false_recall(
    mods: np.ndarray, n_returned: np.ndarray, top1: np.ndarray, abstained: np.ndarray, rules: dict[str, FalseRecallRule]
) -> dict[str, np.ndarray]:
    n = len(mods)
    fr = np.full(n, np.nan)
    rule = np.empty(n, dtype=object)
    threshold = np.full(n, np.nan)
    reason = np.full(n, None, dtype=object)
    for m, r in rules.items():
        at = mods == m
        rule[at] = r.rule
        reason[at] = r.reason
        if r.rule == ABSTENTION:
            fr[at] = (~abstained[at] & (n_returned[at] > 0)).astype(float)
        elif r.rule == CALIBRATED:
            assert r.threshold is not None
            threshold[at] = r.threshold
            fr[at] = reaches(top1[at], r.threshold).astype(float)
    return {"false_recall": fr, "false_recall_rule": rule, "false_recall_threshold": threshold, "false_recall_reason": reason}


def _separation(top1: np.ndarray, confidence: np.ndarray, failed: np.ndarray) -> tuple[np.ndarray, str]:
    """The AUROC signal per entry: declared confidence when every answered query has one,
    else the top-1 score (-inf for an empty answer); NaN for failed queries."""
    answered = ~failed
    use_conf = bool(answered.any()) and not np.isnan(confidence[answered]).any()
    signal = confidence if use_conf else np.where(np.isnan(top1), -np.inf, top1)
    return np.where(failed, np.nan, signal), "confidence" if use_conf else "top1_score"


def auroc_codes(separation: np.ndarray, positive: np.ndarray, failed: np.ndarray) -> np.ndarray:
    """Integer codes 2 * key + positive whose keys order the entries by signal, with the
    worst case for failed queries (answerable: below all; unanswerable: above all)."""
    sep = np.asarray(separation, dtype=float)
    pos = np.asarray(positive, dtype=bool)
    bad = np.asarray(failed, dtype=bool)
    key = np.zeros(len(sep), dtype=np.int64)
    ok = ~bad
    if ok.any():
        key[ok] = tie_groups(sep[ok]) + 1
    top = int(key.max(initial=0)) + 1
    key[bad & ~pos] = top
    key[bad & pos] = 0
    return 2 * key + pos.astype(np.int64)


def auroc_from_codes(codes: np.ndarray) -> np.ndarray:
    """AUROC along the last axis of :func:`auroc_codes` codes (NaN where a class is absent)."""
    c = np.atleast_2d(np.asarray(codes, dtype=np.int64))
    b, _ = c.shape
    key, pos = c // 2, c % 2
    width = int(key.max(initial=0)) + 1
    flat = (np.arange(b)[:, None] * width + key).ravel()
    p = np.bincount(flat, weights=pos.ravel().astype(float), minlength=b * width).reshape(b, width)
    allc = np.bincount(flat, minlength=b * width).reshape(b, width).astype(float)
    neg = allc - p
    below = np.cumsum(neg, axis=1) - neg
    u = (p * (below + 0.5 * neg)).sum(axis=1)
    n_pos, n_neg = p.sum(axis=1), neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where((n_pos > 0) & (n_neg > 0), u / (n_pos * n_neg), np.nan)
    return out if np.asarray(codes).ndim > 1 else out.reshape(())


def _leak_metrics(run: _Run, ent: _Entries, atoms: _Atoms, k: int) -> dict[str, np.ndarray]:
    """temporal_ok / holder_ok over the top-k atoms."""
    n = len(ent.ids)
    top = run.rank <= k
    q, a = run.q[top], run.a[top]
    future = atoms.observed_at[a] > ent.as_of[q]
    foreign = atoms.holder[a] != ent.holder[q]
    return {
        "temporal_ok": (_count(q[future], n) == 0).astype(float),
        "holder_ok": (_count(q[foreign], n) == 0).astype(float),
    }


# --------------------------------------------------------------------------- public API


def metric_keys(k: int = 10) -> dict[str, str]:
    """Contract metric name -> per-query column of the mean metrics :func:`per_query`
    computes, in report order (bench.evaluation.catalogue; AUROC and latency excluded)."""
    return {m.name: m.column for m in measures(k) if m.family == "core" and m.statistic == "mean"}


AUROC = next(m.name for m in measures() if m.statistic == "auroc")


def per_query(
    entries: pd.DataFrame,
    run: pd.DataFrame,
    gold: pd.DataFrame,
    atoms: pd.DataFrame,
    *,
    k: int = 10,
    failed: Failed = None,
    responses: pd.DataFrame | None = None,
    abstains: bool = False,
    calibration_recall: float = 0.9,
    thresholds: dict[str, float | None] | None = None,
) -> pd.DataFrame:
    """One row per entry (sorted by query_id) with every per-query metric.

    ``responses``: query_id, abstain, confidence per answered query (the retrieve
    stage's latency table); ``abstains``: the system declared abstention once (its
    ready line or attribute); ``thresholds``: per modality, the dev run's calibrated
    top-1 score (None: not measurable) -- given, the calibration is not redone.
    See the module docstring for definitions.  Not-applicable metrics are NaN
    (answerable-only metrics on unanswerable entries and vice versa); every metric
    of a failed query is NaN as well, and its ``failed`` column is True.

    The same as :func:`finish_per_query` over :func:`query_block` of all entries: a
    block-wise evaluation (bench.evaluation.evaluate) calls the two apart.
    """
    block = query_block(entries, run, gold, atoms, k=k, failed=failed, responses=responses)
    return finish_per_query(block, k=k, abstains=abstains, calibration_recall=calibration_recall, thresholds=thresholds)


def query_block(
    entries: pd.DataFrame,
    run: pd.DataFrame,
    gold: pd.DataFrame,
    atoms: pd.DataFrame,
    *,
    k: int = 10,
    failed: Failed = None,
    responses: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The per-query part of :func:`per_query` for a block of entries: every column that
    depends on one query's own rows only (ranking, returned, leak, abstained as bool,
    confidence). ``run`` and ``gold`` may hold rows of other queries (they are ignored).
    Blocks of disjoint entries, concatenated in query_id order, give
    :func:`finish_per_query` what one block of all entries gives it."""
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError("k must be a positive int")
    k = int(k)
    _require(run, RUN_COLUMNS, "run")
    _require(gold, GOLD_COLUMNS, "gold")
    run_given, gold_given = _given_codes(run, "run"), _given_codes(gold, "gold")
    run_atoms = _arrow_ids(run["atom_id"]) if run_given is None else None
    lookups = [] if run_atoms is None else [run_atoms]
    if gold_given is None:
        lookups.append(_arrow_ids(gold["atom_id"]))
    ent, atm, looked = _prep(entries, atoms, _failed_ids(failed), lookups)
    found = iter(looked)
    run_codes = run_given if run_given is not None else next(found)
    gold_codes = gold_given if gold_given is not None else next(found)
    ran = _prep_run(run, run_atoms, run_codes, ent, atm)
    gld = _prep_gold(gold, gold_codes, ent, len(atm.observed_at) if gold_given is not None else None)
    abstained, confidence = _responses(responses, ent)
    frame = ent.frame
    columns: dict[str, Any] = {
        "modality": frame["modality"],
        "unanswerable": frame["unanswerable"],
        "failed": ent.failed,
        "n_regions": frame["n_regions"],
        **_ranking_metrics(ran, gld, ent, k),
        **_returned_metrics(ran, ent),
        "abstained": abstained & ~ent.failed,
        "confidence": confidence,
        **_leak_metrics(ran, ent, atm, k),
    }
    return pd.DataFrame(columns, index=frame.index).rename_axis("query_id").reset_index()


def finish_per_query(
    blocks: pd.DataFrame,
    *,
    k: int = 10,
    abstains: bool = False,
    calibration_recall: float = 0.9,
    thresholds: dict[str, float | None] | None = None,
) -> pd.DataFrame:
    """:func:`per_query`'s table from :func:`query_block` rows of all entries (sorted by
    query_id): the steps that need every query -- the false-recall rules (calibration
    over a modality's answerable entries), the AUROC signal -- and the NaN masks."""
    k = int(k)
    blocks = blocks.reset_index(drop=True)
    mods = blocks["modality"].to_numpy()
    unans = blocks["unanswerable"].to_numpy(dtype=bool)
    failed = blocks["failed"].to_numpy(dtype=bool)
    top1 = blocks["top1_score"].to_numpy(dtype=float)
    abstained = blocks["abstained"].to_numpy(dtype=bool)
    confidence = blocks["confidence"].to_numpy(dtype=float)
    declared = bool(abstains) or bool(abstained.any())
    rules = _rules(mods, unans, failed, top1, declared, float(calibration_recall), thresholds)
    separation, signal = _separation(top1, confidence, failed)
    ranking = ("n_gold_atoms", "first_hit_rank", f"recall@{k}", f"atom_recall@{k}", "mrr", f"ndcg@{k}")
    columns: dict[str, Any] = {
        "query_id": blocks["query_id"],
        "modality": blocks["modality"],
        "unanswerable": blocks["unanswerable"],
        "failed": failed,
        "n_regions": blocks["n_regions"],
        **{c: blocks[c].to_numpy() for c in ranking},
        "n_returned": blocks["n_returned"].to_numpy(),
        "top1_score": top1,
        **_false_recall(mods, blocks["n_returned"].to_numpy(), top1, abstained, rules),
        "abstained": abstained.astype(float),
        "confidence": confidence,
        "separation": separation,
        "separation_signal": signal,
        "temporal_ok": blocks["temporal_ok"].to_numpy(),
        "holder_ok": blocks["holder_ok"].to_numpy(),
    }
    for col in (f"recall@{k}", f"atom_recall@{k}", "mrr", f"ndcg@{k}", "abstained"):
        columns[col] = np.where(unans, np.nan, columns[col])
    columns["false_recall"] = np.where(unans, columns["false_recall"], np.nan)
    for col in metric_keys(k).values():
        columns[col] = np.where(failed, np.nan, columns[col])
    for col in ("top1_score", "confidence"):
        columns[col] = np.where(failed, np.nan, columns[col])
    return pd.DataFrame(columns).reset_index(drop=True)


def false_recall_rules(per_query_df: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per modality (and ``overall``) the false-recall rule that applied, for dev.json's
    ``run.false_recall_rule``: rule, threshold (calibrated only, in the system's own
    score units), how many answerable entries keep their top-1 hit at it, and why a
    modality is not measurable."""
    df = per_query_df
    out: dict[str, dict[str, Any]] = {}
    for m, g in df.groupby("modality", sort=True):
        rule = str(g["false_recall_rule"].iloc[0])
        ans = ~g["unanswerable"].astype(bool)
        row: dict[str, Any] = {"rule": rule, "unanswerable": int((~ans).sum())}
        if rule == CALIBRATED:
            t = float(g["false_recall_threshold"].iloc[0])
            top = g.loc[ans & ~g["failed"].astype(bool), "top1_score"].to_numpy(float)
            row.update({"threshold_score": t, "kept": int(reaches(top, t).sum()), "answerable": int(ans.sum())})
        reason = g["false_recall_reason"].iloc[0]
        if reason is not None and not (isinstance(reason, float) and np.isnan(reason)):
            row["reason"] = str(reason)
        out[str(m)] = row
    rules = {r["rule"] for r in out.values() if r["unanswerable"]}
    overall: dict[str, Any] = {"rule": rules.pop() if len(rules) == 1 else ("mixed" if rules else NOT_MEASURABLE)}
    if not rules and not any(r["unanswerable"] for r in out.values()):
        overall["reason"] = "no unanswerable entries"
    out["overall"] = overall
    return out


def _infer_k(columns: Iterable[str]) -> int:
    found = {int(m.group(1)) for c in columns if (m := re.fullmatch(r"recall@(\d+)", str(c)))}
    if len(found) != 1:
        raise ValueError("cannot infer k from per-query columns; pass k explicitly")
    return found.pop()


def _cell(value: float | None, n: int, denominator: int, reason: str | None = None) -> MetricCell:
    cell: MetricCell = {
        "value": None if value is None else float(value),
        "n": int(n),
        "denominator": int(denominator),
    }
    if reason is not None and value is None:
        cell["reason"] = reason
    return cell


def _mean_cell(measure: Measure, group: pd.DataFrame) -> MetricCell:
    """Sum of per-query values over the denominator / denominator (the catalogue's rule:
    a failed query counts its worst case)."""
    contrib, ok = counted(measure, group[measure.column].to_numpy(dtype=float), group["unanswerable"].to_numpy(dtype=bool),
                          group["failed"].to_numpy(dtype=bool))
    n, denominator = int(ok.sum()), len(contrib)
    if denominator == 0:
        return _cell(None, n, denominator)
    return _cell(float(contrib.sum()) / denominator, n, denominator)


def _latency_cell(measure: Measure, group: pd.DataFrame) -> MetricCell:
    """A latency percentile over the timed queries (failed ones carry no latency); all entries are the denominator."""
    lat_ms = group[measure.column].to_numpy(dtype=float)
    denominator = int(in_denominator(measure.scope, group["unanswerable"].to_numpy(dtype=bool)).sum())
    timed = lat_ms[~np.isnan(lat_ms)]
    value = float(np.percentile(timed, float(measure.statistic[1:]))) if len(timed) and denominator else None
    return _cell(value, len(timed), denominator)


def _false_recall_cell(measure: Measure, group: pd.DataFrame) -> MetricCell:
    cell = _mean_cell(measure, group)
    unans = group["unanswerable"].to_numpy(dtype=bool)
    if not unans.any():
        return cell
    rules = group.loc[unans, ["modality", "false_recall_rule", "false_recall_reason"]].drop_duplicates("modality")
    lost = rules.loc[rules["false_recall_rule"] == NOT_MEASURABLE]
    if len(lost):
        why = "; ".join(f"{m}: {r}" for m, r in zip(lost["modality"], lost["false_recall_reason"], strict=True))
        return _cell(None, cell["n"], cell["denominator"], f"not measurable ({why})")
    return cell


def _auroc_cell(measure: Measure, group: pd.DataFrame) -> MetricCell:
    unans = group["unanswerable"].to_numpy(dtype=bool)
    ok = ~group["failed"].to_numpy(dtype=bool)
    n, denominator = int(ok.sum()), int(in_denominator(measure.scope, unans).sum())
    if unans.all() or not unans.any():
        return _cell(None, n, denominator, "needs both answerable and unanswerable entries")
    codes = auroc_codes(group[measure.column].to_numpy(dtype=float), ~unans, ~ok)
    return _cell(float(auroc_from_codes(codes)), n, denominator)


def _measure_cell(measure: Measure, group: pd.DataFrame) -> MetricCell:
    """The cell of one catalogue measure over the entries of `group`."""
    if measure.statistic == "auroc":
        return _auroc_cell(measure, group)
    if measure.statistic != "mean":
        return _latency_cell(measure, group)
    if measure.column == "false_recall":
        return _false_recall_cell(measure, group)
    return _mean_cell(measure, group)


def group_cells(group: pd.DataFrame, k: int, families: tuple[str, ...] = ("core", "latency")) -> dict[str, MetricCell]:
    """Cells of the catalogue's measures of `families` over the entries of `group`, in report
    order. ``group``: modality, unanswerable, failed and the measures' per-query columns
    (:func:`per_query`'s, ``latency_ms`` as :func:`aggregate` adds it, or the chunk-fair ones)."""
    return {m.name: _measure_cell(m, group) for m in measures(k) if m.family in families}


def _latency_by_query(latency: pd.DataFrame | None) -> pd.Series:
    if latency is None:
        return pd.Series(dtype=float)
    _require(latency, LATENCY_COLUMNS, "latency")
    lat = pd.Series(
        latency["latency_ms"].astype(float).to_numpy(), index=_ids(latency["query_id"]).to_numpy()
    )
    if lat.index.duplicated().any():
        raise ValueError("latency has duplicate query_id")
    return lat


def aggregate(
    per_query_df: pd.DataFrame,
    latency: pd.DataFrame | None,
    failed: Failed = None,
    *,
    k: int | None = None,
) -> dict[str, Any]:
    """Contract-shaped report ``{"by_modality": {...}, "overall": {...}}``.

    ``per_query_df`` is the output of :func:`per_query`; ``failed`` is unioned with
    its ``failed`` column.  ``k`` (the metric suffix) is inferred from the columns
    when not given.
    """
    k = _infer_k(per_query_df.columns) if k is None else int(k)
    _require(per_query_df, ("query_id", "modality", "unanswerable", *metric_keys(k).values(), "false_recall_rule",
                           "false_recall_reason", "separation"), "per_query_df")
    df = per_query_df.assign(query_id=_ids(per_query_df["query_id"]))
    if df["query_id"].duplicated().any():
        raise ValueError("per_query_df.query_id must be unique")
    df = df.sort_values("query_id", kind="stable").reset_index(drop=True)
    prior = df["failed"].astype(bool) if "failed" in df.columns else False
    df["failed"] = prior | df["query_id"].isin(_failed_ids(failed))
    lat = _latency_by_query(latency).reindex(df["query_id"]).to_numpy(dtype=float)
    df["latency_ms"] = np.where(df["failed"].to_numpy(), np.nan, lat)

    by_modality = {
        str(mod): group_cells(df.loc[df["modality"] == mod], k)
        for mod in sorted(df["modality"].astype(str).unique())
    }
    return {"by_modality": by_modality, "overall": group_cells(df, k)}
