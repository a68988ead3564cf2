"""Run the system under test over the dev entries, timing each call."""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Collection

import pandas as pd

from bench.systems import Query, System

RUN_COLUMNS = ["query_id", "rank", "atom_id", "score"]
LATENCY_COLUMNS = ["query_id", "latency_ms", "n_returned"]


def query_of(entry: dict, k: int) -> Query:
    """What the system is allowed to see of an entry: never gold, answer or split."""
    scope = entry["scope"]
    return Query(
        question=entry["question"],
        as_of=pd.Timestamp(entry["as_of"]),
        holder=scope.get("holder"),
        session=scope.get("session"),
        scenario=scope.get("scenario"),
        k=k,
    )


class SystemResultError(ValueError):
    """A system returned a result the harness cannot score; str() names the query."""


def check_hit(query_id: str, rank: int, atom_id: object, score: object, seen: set[str], known: Collection[str] | None) -> None:
    """Refuse a NaN/infinite/non-numeric score, an unknown atom id or an atom returned twice."""
    if not isinstance(atom_id, str) or not atom_id:
        raise SystemResultError(f"query {query_id}: rank {rank}: atom id must be a non-empty string, got {atom_id!r}")
    if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score):
        raise SystemResultError(f"query {query_id}: rank {rank}: atom {atom_id} has score {score!r}, not a finite number")
    if known is not None and atom_id not in known:
        raise SystemResultError(f"query {query_id}: rank {rank}: unknown atom id {atom_id} (not among the chunked atoms)")
    if atom_id in seen:
        raise SystemResultError(f"query {query_id}: rank {rank}: system returned atom {atom_id} twice")


def run_system(system: System, entries: list[dict], k: int, known_atoms: Collection[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (run: query_id, rank, atom_id, score) and (latency per query in ms).

    Latency is wall-clock around the call, from question to ranked list ("compile
    latency"); the index is built before the first call and is not timed. A hit with a
    NaN or infinite score, an atom id not in `known_atoms` (when given) or an atom
    returned twice raises SystemResultError naming the query.
    """
    run_rows: list[tuple[str, int, str, float]] = []
    lat_rows: list[tuple[str, float, int]] = []
    for entry in entries:
        query = query_of(entry, k)
        start = time.perf_counter()
        hits = system.search(query)
        elapsed = (time.perf_counter() - start) * 1000.0
        seen: set[str] = set()
        for rank, hit in enumerate(hits, start=1):
            check_hit(entry["query_id"], rank, hit.atom_id, hit.score, seen, known_atoms)
            seen.add(hit.atom_id)
            run_rows.append((entry["query_id"], rank, hit.atom_id, hit.score))
        lat_rows.append((entry["query_id"], elapsed, len(hits)))
    return pd.DataFrame(run_rows, columns=RUN_COLUMNS), pd.DataFrame(lat_rows, columns=LATENCY_COLUMNS)


def trec_run(run: pd.DataFrame, tag: str) -> str:
    # full precision (repr), so tools that re-sort by score see exactly our scores
    lines = [f"{r.query_id} Q0 {r.atom_id} {r.rank} {r.score!r} {tag}" for r in run.itertuples(index=False)]
    return "\n".join(lines) + ("\n" if lines else "")


def trec_qrels(gold: pd.DataFrame) -> str:
    pairs = gold[["query_id", "atom_id"]].drop_duplicates().sort_values(["query_id", "atom_id"])
    lines = [f"{q} 0 {a} 1" for q, a in pairs.itertuples(index=False)]
    return "\n".join(lines) + ("\n" if lines else "")
