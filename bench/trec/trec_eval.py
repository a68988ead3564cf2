"""`bench eval QRELS RUN`: evaluate any TREC run against any TREC qrels, as trec_eval does.

Semantics follow trec_eval (9.x):

* qrels lines are ``query iter doc relevance`` (relevance an integer); a document is
  relevant when its relevance is > 0; ``ndcg_cut_10`` uses the relevance itself as the
  gain (graded), negative relevance counting as 0.
* run lines are ``query Q0 doc rank score tag``; the rank column is ignored: each
  query's documents are ranked by score descending, ties by document id descending
  (byte order), as trec_eval sorts them.
* by default the mean (query ``all``) is over the queries present in both files;
  ``complete=True`` (trec_eval ``-c``) averages over every query of the qrels, a query
  the run lacks scoring 0 on every measure. Run queries absent from the qrels are
  never evaluated.

``recip_rank`` and ``recall_10`` come from the harness's own engine
(:func:`bench.evaluation.per_query.per_query`: each relevant document is one gold region, so its
region recall is trec_eval's recall and its ``mrr`` is ``recip_rank``); ``P_10``,
``map`` and graded ``ndcg_cut_10`` are computed here with the same kind of integer
codes, since the engine's nDCG is binary.

Bad files raise :class:`bench.io.LineError` (file, line, field) before anything is
evaluated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from bench.evaluation.per_query import per_query
from bench.io import LineError, short

__all__ = ["MEASURES", "Evaluation", "NoCommonQuery", "evaluate", "format_trec", "rank_run", "read_qrels", "read_run", "to_json"]

#: measures in trec_eval's print order
MEASURES = ("map", "recip_rank", "P_10", "recall_10", "ndcg_cut_10")
K = 10
_EPOCH = pd.Timestamp("2000-01-01", tz="UTC")
#: what C's atol/atof read, ASCII only (Python's int/float also take ``1_000``, ``١`` or ``infinity``);
#: the whole field must match: trec_eval would silently read ``1x`` as 1, here it is refused
_INTEGER = re.compile(r"[+-]?[0-9]+\Z", re.ASCII)
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z", re.ASCII)
#: trec_eval keeps a relevance in a C long (64 bits on Linux)
_LONG = 2**63 - 1


def parse_relevance(text: str, name: str, lineno: int) -> int:
    """A qrels relevance as trec_eval's atol reads it: ASCII digits with an optional sign,
    within a 64-bit long; LineError (file, line, field) otherwise."""
    if not _INTEGER.match(text):
        raise LineError(name, lineno, "relevance", "not an integer (ASCII digits, optional sign)", short(text))
    value = int(text)
    if abs(value) > _LONG:
        raise LineError(name, lineno, "relevance", f"out of range (|relevance| <= {_LONG})", short(text))
    return value


def parse_score(text: str, name: str, lineno: int) -> float:
    """A run score as trec_eval's atof reads a decimal number (ASCII only, no nan/inf);
    LineError (file, line, field) otherwise."""
    if not _DECIMAL.match(text):
        raise LineError(name, lineno, "score", "not a number (ASCII decimal, e.g. 1.5 or -2e-3)", short(text))
    value = float(text)
    if not math.isfinite(value):
        raise LineError(name, lineno, "score", "not a finite number", short(text))
    return value


def _lines(path: str | Path, display: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, whitespace-split fields) of every non-blank line."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise LineError(display, None, "<file>", exc.strerror or "cannot be read") from None
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise LineError(display, lineno, "<line>", "not valid UTF-8", f"byte {exc.start}") from None
            fields = text.split()
            if fields:
                yield lineno, fields


def read_qrels(path: str | Path, display: str | None = None) -> pd.DataFrame:
    """query_id, doc_id, rel (int) from a TREC qrels file (``query iter doc relevance``)."""
    name = display or str(path)
    qs: list[str] = []
    docs: list[str] = []
    rels: list[int] = []
    seen: dict[tuple[str, str], int] = {}
    for lineno, f in _lines(path, name):
        if len(f) != 4:
            raise LineError(name, lineno, "<line>", f"expected 4 fields (query iter doc relevance), found {len(f)}",
                            short(" ".join(f)))
        rel = parse_relevance(f[3], name, lineno)
        key = (f[0], f[2])
        if key in seen:
            raise LineError(name, lineno, "doc", f"judged twice for query {f[0]} (first at line {seen[key]})", short(f[2]))
        seen[key] = lineno
        qs.append(f[0])
        docs.append(f[2])
        rels.append(rel)
    if not qs:
        raise LineError(name, None, "<file>", "no judgments")
    return pd.DataFrame({"query_id": qs, "doc_id": docs, "rel": np.asarray(rels, dtype=np.int64)})


def read_run(path: str | Path, display: str | None = None) -> pd.DataFrame:
    """query_id, doc_id, score (float) from a TREC run file (``query Q0 doc rank score tag``)."""
    name = display or str(path)
    qs: list[str] = []
    docs: list[str] = []
    scores: list[float] = []
    seen: dict[tuple[str, str], int] = {}
    for lineno, f in _lines(path, name):
        if len(f) != 6:
            raise LineError(name, lineno, "<line>", f"expected 6 fields (query Q0 doc rank score tag), found {len(f)}",
                            short(" ".join(f)))
        score = parse_score(f[4], name, lineno)
        key = (f[0], f[2])
        if key in seen:
            raise LineError(name, lineno, "doc", f"returned twice for query {f[0]} (first at line {seen[key]})", short(f[2]))
        seen[key] = lineno
        qs.append(f[0])
        docs.append(f[2])
        scores.append(score)
    return pd.DataFrame({"query_id": qs, "doc_id": docs, "score": np.asarray(scores, dtype=float)})


def _desc_codes(values: pd.Series) -> np.ndarray:
    """Integer codes whose order is the byte order of the UTF-8 strings (code-point order)."""
    arr = pa.array(values.astype(str), type=pa.large_string(), from_pandas=True)
    return pc.rank(arr, sort_keys="ascending", tiebreaker="dense").to_numpy().astype(np.int64)


def rank_run(run: pd.DataFrame) -> pd.DataFrame:
    """The run with a 1-based ``rank`` per query: score descending, then doc_id descending."""
    if run.empty:
        return run.assign(rank=pd.Series(dtype=np.int64))
    q = _desc_codes(run["query_id"])
    d = _desc_codes(run["doc_id"])
    order = np.lexsort((-d, -run["score"].to_numpy(dtype=float), q))
    out = run.iloc[order].reset_index(drop=True)
    qs = q[order]
    start = np.ones(len(qs), dtype=bool)
    start[1:] = qs[1:] != qs[:-1]
    first = np.flatnonzero(start)
    pos = np.arange(len(qs))
    out["rank"] = pos - np.repeat(first, np.diff(np.append(first, len(qs)))) + 1
    return out


class NoCommonQuery(ValueError):
    """The run and the qrels share no query (and ``complete`` is off)."""


@dataclass(frozen=True)
class Evaluation:
    """Per-query values (index query_id, one column per measure) and the means."""

    per_query: pd.DataFrame
    means: dict[str, float]
    n: int  # queries in both files (evaluated with a result)
    # (per_query also holds, with -c, the judged queries the run lacks, all 0)
    denominator: int  # queries averaged over
    complete: bool
    run_only: int  # run queries absent from the qrels (not evaluated)
    in_both: pd.Index  # the queries of both files, sorted


def _graded(ranked: pd.DataFrame, qrels: pd.DataFrame, queries: pd.Index, k: int) -> pd.DataFrame:
    """P_k, map and graded ndcg_cut_k per query (index `queries`), numpy over query codes."""
    n = len(queries)
    qcode = queries.get_indexer(ranked["query_id"])
    keep = qcode >= 0
    r = ranked.loc[keep]
    qcode = qcode[keep]
    rel_of = qrels.set_index(["query_id", "doc_id"])["rel"]
    rel = pd.MultiIndex.from_arrays([r["query_id"], r["doc_id"]]).map(rel_of).to_numpy(dtype=float)
    rel = np.nan_to_num(rel, nan=0.0)
    rank = r["rank"].to_numpy(dtype=np.int64)
    relevant = rel > 0
    topk = rank <= k

    # P_k: relevant among the first k / k (fewer returned still divide by k)
    p_k = np.bincount(qcode[relevant & topk], minlength=n) / float(k)

    # map: sum of precision at each relevant rank / relevant judged
    qj = queries.get_indexer(qrels["query_id"])
    judged_rel = np.bincount(qj[(qj >= 0) & (qrels["rel"].to_numpy() > 0)], minlength=n)
    hq, hrank = qcode[relevant], rank[relevant]
    order = np.lexsort((hrank, hq))
    hq, hrank = hq[order], hrank[order]
    start = np.ones(len(hq), dtype=bool)
    start[1:] = hq[1:] != hq[:-1]
    first = np.flatnonzero(start)
    nth = np.arange(len(hq)) - np.repeat(first, np.diff(np.append(first, len(hq)))) + 1
    ap_sum = np.bincount(hq, weights=nth / hrank, minlength=n)
    ap = np.divide(ap_sum, judged_rel, out=np.zeros(n), where=judged_rel > 0)

    # ndcg_cut_k: gain = relevance (negative -> 0), discount log2(rank + 1); ideal from all judgments
    gain = np.clip(rel, 0, None)
    dcg = np.bincount(qcode[topk], weights=gain[topk] / np.log2(rank[topk] + 1.0), minlength=n)
    jq = qj[qj >= 0]
    jgain = np.clip(qrels["rel"].to_numpy(dtype=float)[qj >= 0], 0, None)
    order = np.lexsort((-jgain, jq))
    jq, jgain = jq[order], jgain[order]
    start = np.ones(len(jq), dtype=bool)
    start[1:] = jq[1:] != jq[:-1]
    first = np.flatnonzero(start)
    pos = np.arange(len(jq)) - np.repeat(first, np.diff(np.append(first, len(jq)))) + 1
    ideal = pos <= k
    idcg = np.bincount(jq[ideal], weights=jgain[ideal] / np.log2(pos[ideal] + 1.0), minlength=n)
    ndcg = np.divide(dcg, idcg, out=np.zeros(n), where=idcg > 0)
    return pd.DataFrame({"map": ap, f"P_{k}": p_k, f"ndcg_cut_{k}": ndcg}, index=queries)


def evaluate(qrels: pd.DataFrame, run: pd.DataFrame, *, complete: bool = False, k: int = K) -> Evaluation:
    """trec_eval's recip_rank, ndcg_cut_k, recall_k, P_k and map, per query and mean."""
    judged = pd.Index(sorted(qrels["query_id"].astype(str).unique()))
    in_run = set(run["query_id"].astype(str).unique())
    both = judged[judged.isin(list(in_run))]
    queries = judged if complete else both
    ranked = rank_run(run.loc[run["query_id"].isin(list(queries))])

    rel = qrels.loc[(qrels["rel"] > 0) & qrels["query_id"].isin(list(queries))]
    n_rel = rel.groupby("query_id").size().reindex(queries, fill_value=0)
    entries = pd.DataFrame({"query_id": queries, "modality": "trec", "unanswerable": False, "as_of": _EPOCH,
                            "holder": "", "n_regions": n_rel.to_numpy()})
    gold = pd.DataFrame({"query_id": rel["query_id"].to_numpy(),
                         "gold_idx": rel.groupby("query_id").cumcount().to_numpy(), "atom_id": rel["doc_id"].to_numpy()})
    docs = pd.Index(ranked["doc_id"].unique())
    atoms = pd.DataFrame({"atom_id": docs, "holder": "", "observed_at": _EPOCH})
    engine = per_query(entries, ranked[["query_id", "doc_id", "rank", "score"]].rename(columns={"doc_id": "atom_id"}),
                       gold, atoms, k=k).set_index("query_id").reindex(queries)
    graded = _graded(ranked, qrels, queries, k)
    table = pd.DataFrame({"map": graded["map"], "recip_rank": engine["mrr"], f"P_{k}": graded[f"P_{k}"],
                          f"recall_{k}": engine[f"recall@{k}"], f"ndcg_cut_{k}": graded[f"ndcg_cut_{k}"]},
                         index=queries).rename_axis("query_id").astype(float)
    if not len(queries):
        raise NoCommonQuery("no query of the run is judged in the qrels: a mean over 0 queries is undefined (use -c to score every judged query as 0)")
    means = {m: float(table[m].sum()) / len(queries) for m in table.columns}
    return Evaluation(table, means, n=len(both), denominator=len(queries), complete=complete, in_both=both,
                      run_only=len(in_run - set(judged)))


def format_trec(ev: Evaluation, *, per_query_lines: bool = False) -> str:
    """trec_eval's three columns: ``measure<TAB>query<TAB>value`` (``all`` for the mean)."""
    out = []
    if per_query_lines:  # as trec_eval -q: the queries of both files (with -c too)
        for q, row in ev.per_query.loc[ev.in_both].iterrows():
            out += [f"{m:<22}\t{q}\t{v:.4f}" for m, v in row.items()]
    out.append(f"{'num_q':<22}\tall\t{ev.denominator}")
    out += [f"{m:<22}\tall\t{v:.4f}" for m, v in ev.means.items()]
    return "\n".join(out) + "\n"


def to_json(ev: Evaluation, *, per_query_values: bool = False) -> dict[str, Any]:
    """Means as ``{"value", "n", "denominator"}`` cells, optionally every query's values."""
    doc: dict[str, Any] = {
        "averaged_over": "every judged query (missing ones score 0)" if ev.complete else "queries in both files",
        "run_queries_not_judged": ev.run_only,
        "all": {m: {"value": v, "n": ev.n, "denominator": ev.denominator} for m, v in ev.means.items()},
    }
    if per_query_values:
        doc["per_query"] = {str(q): {m: float(v) for m, v in row.items()} for q, row in ev.per_query.loc[ev.in_both].iterrows()}
    return doc
