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
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["per_query", "aggregate", "metric_keys"]

ENTRY_COLUMNS = ("query_id", "modality", "unanswerable", "as_of", "holder", "n_regions")
RUN_COLUMNS = ("query_id", "atom_id", "rank", "score")
GOLD_COLUMNS = ("query_id", "gold_idx", "atom_id")
ATOM_COLUMNS = ("atom_id", "holder", "observed_at")
LATENCY_COLUMNS = ("query_id", "latency_ms")

Failed = Iterable[str] | pd.Series | None
MetricCell = dict[str, Any]


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


def _by_query(values: pd.Series, index: pd.Index, fill: float) -> np.ndarray:
    """Align a query_id-indexed Series to `index`, filling absent queries."""
    return values.reindex(index).fillna(fill).to_numpy(dtype=float)


def _idcg_table(k: int) -> np.ndarray:
    """idcg[g] = ideal DCG with g relevant atoms at ranks 1..g (g <= k)."""
    discounts = 1.0 / np.log2(np.arange(2, k + 2, dtype=float))
    return np.concatenate(([0.0], np.cumsum(discounts)))


def _safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros_like(num, dtype=float)
    np.divide(num, den, out=out, where=den > 0)
    return out


# --------------------------------------------------------------------------- input prep


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


def _prep_run(run: pd.DataFrame, ent: pd.DataFrame, failed: set[str]) -> pd.DataFrame:
    """Run rows of evaluated, non-failed queries, sorted by (query_id, rank)."""
    _require(run, RUN_COLUMNS, "run")
    out = pd.DataFrame(
        {
            "query_id": _ids(run["query_id"]),
            "atom_id": _ids(run["atom_id"]),
            "rank": run["rank"].astype(int),
            "score": run["score"].astype(float),
        }
    )
    keep = out["query_id"].isin(ent.index) & ~out["query_id"].isin(failed)
    out = out.loc[keep]
    if (out["rank"] < 1).any():
        raise ValueError("run.rank must be 1-based")
    if out.duplicated(["query_id", "rank"]).any():
        raise ValueError("run has duplicate (query_id, rank)")
    if out.duplicated(["query_id", "atom_id"]).any():
        raise ValueError("run has duplicate (query_id, atom_id)")
    return out.sort_values(["query_id", "rank"], kind="stable").reset_index(drop=True)


def _prep_gold(gold: pd.DataFrame, ent: pd.DataFrame) -> pd.DataFrame:
    _require(gold, GOLD_COLUMNS, "gold")
    out = pd.DataFrame(
        {
            "query_id": _ids(gold["query_id"]),
            "gold_idx": gold["gold_idx"].astype(int),
            "atom_id": _ids(gold["atom_id"]),
        }
    )
    out = out.loc[out["query_id"].isin(ent.index)].drop_duplicates()
    if ent["unanswerable"].to_numpy()[ent.index.get_indexer(out["query_id"])].any():
        raise ValueError("gold rows given for an unanswerable entry")
    regions = out.groupby("query_id")["gold_idx"].nunique()
    if (regions > ent.loc[regions.index, "n_regions"]).any():
        raise ValueError("gold has more distinct gold_idx than entries.n_regions")
    return out


def _prep_atoms(atoms: pd.DataFrame) -> pd.DataFrame:
    _require(atoms, ATOM_COLUMNS, "atoms")
    out = pd.DataFrame(
        {
            "atom_holder": atoms["holder"].astype(str).to_numpy(),
            "observed_at": _utc_naive(pd.to_datetime(atoms["observed_at"], utc=True)),
        },
        index=pd.Index(_ids(atoms["atom_id"]), name="atom_id"),
    )
    if out.index.has_duplicates:
        raise ValueError("atoms.atom_id must be unique")
    return out


def _attach(run: pd.DataFrame, ent: pd.DataFrame, atoms: pd.DataFrame) -> pd.DataFrame:
    """Add the entry's as_of/holder and the atom's holder/observed_at to every run row."""
    apos = atoms.index.get_indexer(run["atom_id"])
    if (apos < 0).any():
        missing = run.loc[apos < 0, "atom_id"].unique()[:5]
        raise ValueError(f"run atoms missing from atoms: {list(missing)}")
    qpos = ent.index.get_indexer(run["query_id"])
    out = run.assign(
        as_of=_utc_naive(ent["as_of"])[qpos],
        holder=ent["holder"].to_numpy()[qpos],
        atom_holder=atoms["atom_holder"].to_numpy()[apos],
        observed_at=atoms["observed_at"].to_numpy()[apos],
    )
    if out["observed_at"].isna().any():
        raise ValueError("atoms.observed_at is missing for a returned atom")
    return out


# --------------------------------------------------------------------------- per-query parts


def _ranking_metrics(run: pd.DataFrame, gold: pd.DataFrame, ent: pd.DataFrame, k: int) -> pd.DataFrame:
    """recall@k, atom_recall@k, mrr, ndcg@k, n_gold_atoms, first_hit_rank."""
    idx = ent.index
    gold_atoms = gold[["query_id", "atom_id"]].drop_duplicates()
    n_gold = gold_atoms.groupby("query_id").size().reindex(idx, fill_value=0).to_numpy()

    rel = pd.MultiIndex.from_frame(run[["query_id", "atom_id"]]).isin(
        pd.MultiIndex.from_frame(gold_atoms)
    )
    topk = run["rank"].to_numpy() <= k
    hits = run.loc[rel]
    first_hit = _by_query(hits.groupby("query_id")["rank"].min(), idx, np.nan)

    top_hits = run.loc[rel & topk]
    gains = pd.Series(1.0 / np.log2(top_hits["rank"].to_numpy() + 1.0), index=top_hits["query_id"])
    dcg = _by_query(gains.groupby(level=0).sum(), idx, 0.0)
    n_top_hits = _by_query(top_hits.groupby("query_id").size(), idx, 0.0)
    idcg = _idcg_table(k)[np.minimum(n_gold, k)]

    covered = gold.merge(run.loc[topk, ["query_id", "atom_id"]], on=["query_id", "atom_id"])
    n_covered = _by_query(covered.groupby("query_id")["gold_idx"].nunique(), idx, 0.0)

    return pd.DataFrame(
        {
            "n_gold_atoms": n_gold,
            "first_hit_rank": first_hit,
            f"recall@{k}": _safe_ratio(n_covered, ent["n_regions"].to_numpy(dtype=float)),
            f"atom_recall@{k}": _safe_ratio(n_top_hits, n_gold.astype(float)),
            "mrr": np.where(np.isnan(first_hit), 0.0, 1.0 / first_hit),
            f"ndcg@{k}": _safe_ratio(dcg, idcg),
        },
        index=idx,
    )


def _leak_metrics(run: pd.DataFrame, ent: pd.DataFrame, k: int) -> pd.DataFrame:
    """temporal_ok / holder_ok over the top-k atoms (run rows carry `_attach` columns)."""
    top = run.loc[run["rank"] <= k]
    leaks = pd.DataFrame(
        {
            "future": (top["observed_at"] > top["as_of"]).to_numpy(dtype=bool),
            "foreign": (top["atom_holder"] != top["holder"]).to_numpy(dtype=bool),
        },
        index=top["query_id"].to_numpy(),
    )
    any_leak = leaks.groupby(level=0).any().reindex(ent.index, fill_value=False)
    return pd.DataFrame(
        {
            "temporal_ok": (~any_leak["future"].astype(bool)).astype(float).to_numpy(),
            "holder_ok": (~any_leak["foreign"].astype(bool)).astype(float).to_numpy(),
        },
        index=ent.index,
    )


def _returned_metrics(run: pd.DataFrame, ent: pd.DataFrame, strong_score: float) -> pd.DataFrame:
    """n_returned and the raw false-recall flag (whole returned list)."""
    grouped = run.groupby("query_id")
    n_returned = grouped.size().reindex(ent.index, fill_value=0).astype(int)
    strong = (grouped["score"].max() >= strong_score).reindex(ent.index, fill_value=False)
    return pd.DataFrame(
        {"n_returned": n_returned.to_numpy(), "false_recall": strong.astype(float).to_numpy()},
        index=ent.index,
    )


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
    failed_ids = _failed_ids(failed)
    ent = _prep_entries(entries)
    ran = _attach(_prep_run(run, ent, failed_ids), ent, _prep_atoms(atoms))
    gld = _prep_gold(gold, ent)

    out = pd.concat(
        [
            ent[["modality", "unanswerable", "n_regions"]],
            _ranking_metrics(ran, gld, ent, k),
            _returned_metrics(ran, ent, strong_score),
            _leak_metrics(ran, ent, k),
        ],
        axis=1,
    )
    out.insert(2, "failed", out.index.isin(list(failed_ids)))

    unans = out["unanswerable"].to_numpy()
    answerable_cols = [f"recall@{k}", f"atom_recall@{k}", "mrr", f"ndcg@{k}"]
    out.loc[unans, answerable_cols] = np.nan
    out.loc[~unans, "false_recall"] = np.nan
    out.loc[out["failed"].to_numpy(), list(metric_keys(k).values())] = np.nan
    return out.rename_axis("query_id").reset_index()


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
