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
``false_recall``   unanswerable entries only: 1 if any returned atom (any depth) has
                   ``score >= strong_score``, else 0.  NaN for answerable.
``temporal_ok``    1 if no top-k atom has ``observed_at > as_of``, else 0.
``holder_ok``      1 if no top-k atom has ``holder != entry holder``, else 0.
Extra columns: ``failed``, ``n_regions``, ``n_gold_atoms``, ``n_returned`` (whole
list), ``first_hit_rank`` (NaN if no gold atom was returned).

For a failed query every applicable metric is NaN in :func:`per_query` (there is no
result to score); :func:`aggregate` counts it as 0.

Aggregation (per modality, and ``overall`` = all entries pooled, micro average)
------------------------------------------------------------------------------
``denominator``  number of annotated entries the metric is defined over: answerable
                 entries for recall@k / atom_recall@k / mrr / ndcg@k, unanswerable
                 entries for false_recall, all entries for temporal / holder
                 correctness and latency.  Never the number of hits.
``n``            entries of the denominator that have a system result (not failed);
                 an empty but successful result counts in ``n``.
``value``        sum of per-query values over the denominator's entries /
                 denominator, with failed queries contributing 0.  Note that for
                 false_recall (lower is better) a failed query therefore also
                 contributes 0, i.e. it does not count as a false recall; ``n`` <
                 ``denominator`` exposes that.  ``None`` when denominator == 0.
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
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["per_query", "aggregate", "metric_keys"]

ENTRY_COLUMNS = ("query_id", "modality", "unanswerable", "as_of", "holder", "n_regions")
RUN_COLUMNS = ("query_id", "atom_id", "rank", "score")
GOLD_COLUMNS = ("query_id", "gold_idx", "atom_id")
ATOM_COLUMNS = ("atom_id", "holder", "observed_at")
LATENCY_COLUMNS = ("query_id", "latency_ms")

Failed = Iterable[str] | pd.Series | None
MetricCell = dict[str, Any]
Ids = pa.Array | pa.ChunkedArray


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


def _distinct(*cols: np.ndarray) -> np.ndarray:
    """Indices of one row per distinct tuple of the int columns `cols`, in tuple order."""
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
    """Entries, atoms (holder codes over one vocabulary) and the atom codes of `lookups`."""
    ent = _prep_entries(entries)
    _require(atoms, ATOM_COLUMNS, "atoms")
    observed = _utc_naive(pd.to_datetime(atoms["observed_at"], utc=True))
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


def _prep_run(run: pd.DataFrame, atom_ids: Ids, atom_codes: np.ndarray, ent: _Entries, atoms: _Atoms) -> _Run:
    """Rows of the evaluated, non-failed queries, sorted by (query, rank), checked."""
    q = _lookup(_arrow_ids(run["query_id"]), ent.ids)
    rank = run["rank"].astype(int).to_numpy()
    score = run["score"].astype(float).to_numpy()
    a = atom_codes
    drop = q < 0
    if ent.failed.any():
        drop |= ent.failed[q]
    rows = np.flatnonzero(~drop) if drop.any() else None
    if rows is not None:
        q, rank = q[rows], rank[rows]
    if (rank < 1).any():
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
    n_codes = int(a.max()) + 1 if len(a) else 1
    pairs = np.sort(q * n_codes + a)
    if (pairs[1:] == pairs[:-1]).any():
        raise ValueError("run has duplicate (query_id, atom_id)")
    if len(a) and a.max() >= len(atoms.observed_at):
        unknown = np.flatnonzero(a >= len(atoms.observed_at))
        at = unknown if rows is None else rows[unknown]
        missing = list(dict.fromkeys(atom_ids.take(pa.array(at)).to_pylist()))[:5]
        raise ValueError(f"run atoms missing from atoms: {missing}")
    if np.isnat(atoms.observed_at).any() and np.isnat(atoms.observed_at)[a].any():
        raise ValueError("atoms.observed_at is missing for a returned atom")
    return _Run(q, a, rank, score)


def _prep_gold(gold: pd.DataFrame, atom_codes: np.ndarray, ent: _Entries) -> _Gold:
    q = _lookup(_arrow_ids(gold["query_id"]), ent.ids)
    g = gold["gold_idx"].astype(int).to_numpy()
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

    top_keys = run.q[topk] * n_codes + run.a[topk]
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


def _returned_metrics(run: _Run, ent: _Entries, strong_score: float) -> dict[str, np.ndarray]:
    """n_returned and the raw false-recall flag (whole returned list)."""
    n = len(ent.ids)
    strong = _count(run.q[run.score >= strong_score], n) > 0
    return {"n_returned": _count(run.q, n), "false_recall": strong.astype(float)}


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
    """Map contract metric name -> per-query column, in report order (latency excluded)."""
    return {
        f"recall@{k}": f"recall@{k}",
        f"atom_recall@{k}": f"atom_recall@{k}",
        "mrr": "mrr",
        f"ndcg@{k}": f"ndcg@{k}",
        "false_recall": "false_recall",
        "temporal_correctness": "temporal_ok",
        "holder_correctness": "holder_ok",
    }


def per_query(
    entries: pd.DataFrame,
    run: pd.DataFrame,
    gold: pd.DataFrame,
    atoms: pd.DataFrame,
    *,
    k: int = 10,
    strong_score: float,
    failed: Failed = None,
) -> pd.DataFrame:
    """One row per entry (sorted by query_id) with every per-query metric.

    See the module docstring for definitions.  Not-applicable metrics are NaN
    (answerable-only metrics on unanswerable entries and vice versa); every metric
    of a failed query is NaN as well, and its ``failed`` column is True.
    """
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError("k must be a positive int")
    k = int(k)
    _require(run, RUN_COLUMNS, "run")
    _require(gold, GOLD_COLUMNS, "gold")
    run_atoms, gold_atoms = _arrow_ids(run["atom_id"]), _arrow_ids(gold["atom_id"])
    ent, atm, (run_codes, gold_codes) = _prep(entries, atoms, _failed_ids(failed), [run_atoms, gold_atoms])
    ran = _prep_run(run, run_atoms, run_codes, ent, atm)
    gld = _prep_gold(gold, gold_codes, ent)

    frame = ent.frame
    columns: dict[str, Any] = {
        "modality": frame["modality"],
        "unanswerable": frame["unanswerable"],
        "failed": ent.failed,
        "n_regions": frame["n_regions"],
        **_ranking_metrics(ran, gld, ent, k),
        **_returned_metrics(ran, ent, strong_score),
        **_leak_metrics(ran, ent, atm, k),
    }
    unans = frame["unanswerable"].to_numpy()
    for col in (f"recall@{k}", f"atom_recall@{k}", "mrr", f"ndcg@{k}"):
        columns[col] = np.where(unans, np.nan, columns[col])
    columns["false_recall"] = np.where(unans, columns["false_recall"], np.nan)
    for col in metric_keys(k).values():
        columns[col] = np.where(ent.failed, np.nan, columns[col])
    return pd.DataFrame(columns, index=frame.index).rename_axis("query_id").reset_index()


def _infer_k(columns: Iterable[str]) -> int:
    found = {int(m.group(1)) for c in columns if (m := re.fullmatch(r"recall@(\d+)", str(c)))}
    if len(found) != 1:
        raise ValueError("cannot infer k from per-query columns; pass k explicitly")
    return found.pop()


def _cell(value: float | None, n: int, denominator: int) -> MetricCell:
    return {
        "value": None if value is None else float(value),
        "n": int(n),
        "denominator": int(denominator),
    }


def _mean_cell(values: np.ndarray, in_denominator: np.ndarray, ok: np.ndarray) -> MetricCell:
    """Sum of per-query values (failed -> 0) over the denominator / denominator."""
    denominator = int(in_denominator.sum())
    n = int((in_denominator & ok).sum())
    if denominator == 0:
        return _cell(None, n, denominator)
    contrib = np.where(in_denominator & ok, np.nan_to_num(values, nan=0.0), 0.0)
    return _cell(float(contrib.sum()) / denominator, n, denominator)


def _latency_cells(lat_ms: np.ndarray, denominator: int) -> dict[str, MetricCell]:
    timed = lat_ms[~np.isnan(lat_ms)]
    cells = {}
    for name, q in (("latency_p50_ms", 50.0), ("latency_p95_ms", 95.0)):
        value = float(np.percentile(timed, q)) if len(timed) and denominator else None
        cells[name] = _cell(value, len(timed), denominator)
    return cells


def _group_report(group: pd.DataFrame, k: int) -> dict[str, MetricCell]:
    unans = group["unanswerable"].to_numpy(dtype=bool)
    ok = ~group["failed"].to_numpy(dtype=bool)
    every = np.ones(len(group), dtype=bool)
    scope = {"false_recall": unans, "temporal_ok": every, "holder_ok": every}
    report = {
        name: _mean_cell(group[col].to_numpy(dtype=float), scope.get(col, ~unans), ok)
        for name, col in metric_keys(k).items()
    }
    report.update(_latency_cells(group["latency_ms"].to_numpy(dtype=float), len(group)))
    return report


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
    _require(per_query_df, ("query_id", "modality", "unanswerable", *metric_keys(k).values()), "per_query_df")
    df = per_query_df.assign(query_id=_ids(per_query_df["query_id"]))
    if df["query_id"].duplicated().any():
        raise ValueError("per_query_df.query_id must be unique")
    df = df.sort_values("query_id", kind="stable").reset_index(drop=True)
    prior = df["failed"].astype(bool) if "failed" in df.columns else False
    df["failed"] = prior | df["query_id"].isin(_failed_ids(failed))
    lat = _latency_by_query(latency).reindex(df["query_id"]).to_numpy(dtype=float)
    df["latency_ms"] = np.where(df["failed"].to_numpy(), np.nan, lat)

    by_modality = {
        str(mod): _group_report(df.loc[df["modality"] == mod], k)
        for mod in sorted(df["modality"].astype(str).unique())
    }
    return {"by_modality": by_modality, "overall": _group_report(df, k)}
