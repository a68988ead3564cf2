"""A built-in system's answers reused by content, query group by query group (docs/performance.md).

A built-in system scores a query only in the parts of the served atoms it may see
(bench.systems.bm25: one index per modality; `parts_read`: every part, or for a scoped
system the parts holding an atom of the query's holder). Its answer -- and the time it
took -- is computed from nothing else than the query as sent (question, as_of, scope, k),
the system's code and params, and those parts' atoms. So a query whose every input is
byte-identical to that of a query answered in an earlier run is not sent again: its
answer *and* its latency are that run's (the same computation on the same inputs; a
latency is never carried to an answer computed from other inputs), and the latency
table says which run measured each query (`measured_in`). An external system is always
sent every query: the harness cannot know what its answer depends on.

Queries are grouped by the parts they read. A group is looked up, and stored after it
ran, under the sha256 of: the whole `system` block of params, the executor kind, the code
of the retrieve step (bench.memo KIND_CODE "answers": the modules it imports), each read
part's served atoms (the bytes of data/served/<part>/), and the group's queries in order
(query id, question, as_of, scope, k). A group with a failed query (timeout, crash) is
never stored: a failure is measured again. The system is built over the parts the groups
to run read, and nothing is built when every group is reused.
"""

from __future__ import annotations

import io
import json
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bench.io import digest_paths
from bench.memo import Memo
from bench.systems.bm25 import part_holders, parts_read
from bench.systems.replayed import no_ingest
from bench.systems.run import FAILURE_COLUMNS, LATENCY_COLUMNS, RUN_COLUMNS, RunResult, query_of

if TYPE_CHECKING:
    from bench.params import SystemParams

__all__ = ["MEASURED_IN", "PARTWISE", "Group", "Plan", "new_run_id", "part_digests", "plan", "with_measured_in"]

#: the built-in systems that score a query only in the parts it may see -> whether they are scoped
PARTWISE: dict[str, bool] = {"bm25": False, "bm25-scoped": True, "dense": False, "dense-scoped": True,
                             "hybrid": False, "hybrid-scoped": True}
#: the latency table's column naming the run that measured each query
MEASURED_IN = "measured_in"
#: what the run's record keeps of a stored group besides its frames (system.json's fields)
INFO_FIELDS = ("warm", "warmup_queries", "restarts", "in_flight", "answered_on", "adapter", "isolation", "isolation_note",
               "abstains_declared")


def new_run_id() -> str:
    """A run's name in the latency record: when it started (UTC) and a random suffix."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


@dataclass
class Group:
    parts: tuple[str, ...]  # the parts its queries are scored in
    rows: list[int]  # positions of its entries
    key: str
    stored: dict[str, bytes] | None  # run.parquet, latency.parquet, info.json of the run that answered it


def _frame(data: bytes) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(data))


def _parquet(frame: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.reset_index(drop=True).to_parquet(buf, index=False)
    return buf.getvalue()


@dataclass
class Plan:
    """Which query groups a run reuses and which it sends (:func:`plan`)."""

    memo: Memo
    groups: list[Group]

    @property
    def todo(self) -> list[Group]:
        return [g for g in self.groups if g.stored is None]

    def rows_to_run(self) -> list[int]:
        return sorted(i for g in self.todo for i in g.rows)

    def parts_to_build(self) -> list[str]:
        return sorted({p for g in self.todo for p in g.parts})

    def reused(self) -> int:
        return sum(len(g.rows) for g in self.groups if g.stored is not None)

    def stored_info(self) -> dict[str, Any]:
        """The record of the runs that answered the reused groups (their common fields)."""
        infos = [json.loads(g.stored["info.json"]) for g in self.groups if g.stored is not None]
        out = dict(infos[0]) if infos else {}
        if infos:
            out["warm"] = all(bool(i.get("warm")) for i in infos)
            out["restarts"] = sum(int(i.get("restarts", 0)) for i in infos)
        return out

    def store(self, entries: Sequence[dict], fresh: RunResult, info: Mapping[str, Any]) -> int:
        """Store each group that ran with every query answered; returns the groups stored."""
        failed = set(fresh.failures["query_id"].astype(str))
        run_by, lat_by = fresh.run.groupby("query_id", sort=False), fresh.latency.set_index("query_id", drop=False)
        runs = {str(q): g for q, g in run_by}
        done = 0
        for g in self.todo:
            ids = [str(entries[i]["query_id"]) for i in g.rows]
            if failed.intersection(ids) or not set(ids) <= set(lat_by.index.astype(str)):
                continue
            run = pd.concat([runs[q] for q in ids if q in runs], ignore_index=True) if any(q in runs for q in ids) else fresh.run.iloc[0:0]
            record = {k: info.get(k) for k in INFO_FIELDS}
            self.memo.put_blobs("answers", g.key, {"run.parquet": _parquet(run), "latency.parquet": _parquet(lat_by.loc[ids]),
                                                   "info.json": json.dumps(record, sort_keys=True).encode()})
            done += 1
        return done

    def merge(self, entries: Sequence[dict], fresh: RunResult | None) -> RunResult:
        """The run of every entry in entry order: the reused groups' and the fresh run's rows."""
        runs, lats = [], []
        for g in self.groups:
            if g.stored is not None:
                runs.append(_frame(g.stored["run.parquet"]))
                lats.append(_frame(g.stored["latency.parquet"]))
        if fresh is not None:
            runs.append(fresh.run)
            lats.append(fresh.latency)
        order = {str(e["query_id"]): i for i, e in enumerate(entries)}
        run = _in_entry_order(pd.concat(runs, ignore_index=True) if runs else pd.DataFrame(columns=RUN_COLUMNS), order, ["rank"])
        lat = _in_entry_order(pd.concat(lats, ignore_index=True) if lats else pd.DataFrame(columns=[*LATENCY_COLUMNS, MEASURED_IN]),
                              order, [])
        run = run.astype({"rank": "int64", "score": "float64"})
        lat = lat.astype({"latency_ms": "float64", "n_returned": "int64", "abstain": "bool", "confidence": "float64"})
        if fresh is None:
            return RunResult(run, lat, pd.DataFrame(columns=FAILURE_COLUMNS), {}, ingest=no_ingest())
        return RunResult(run, lat, fresh.failures, dict(fresh.info), fresh.memories, fresh.ingest)


def _in_entry_order(frame: pd.DataFrame, order: Mapping[str, int], then: list[str]) -> pd.DataFrame:
    """Rows sorted by their query's entry position, then by `then` (each frame's rows of a query are contiguous)."""
    q = pd.Categorical(frame["query_id"].astype(str) if not isinstance(frame["query_id"].dtype, pd.CategoricalDtype)
                       else frame["query_id"], categories=list(order))
    keys = [frame[c].to_numpy() for c in reversed(then)]
    return frame.iloc[np.lexsort((*keys, q.codes))].reset_index(drop=True)


def part_digests(served: Path, parts: Sequence[str], root: Path) -> dict[str, str]:
    """Each part's served atoms by content: the sha256 of the files of data/served/<part>/."""
    return {p: digest_paths([served / p], root) for p in parts}


def plan(cfg: SystemParams, entries: Sequence[dict], served: Mapping[str, pd.DataFrame], digests: Mapping[str, str],
         memo: Memo, where: str) -> Plan | None:
    """The query groups of a run of a partwise built-in system (PARTWISE) and which of them an
    earlier run answered from the same inputs; None: every query is sent (another system, or reuse off)."""
    if memo.root is None or cfg.adapter != "builtin" or cfg.name not in PARTWISE or not served:
        return None
    scoped = PARTWISE[cfg.name]
    holders = part_holders(pd.concat([f[["modality", "holder"]] for f in served.values()], ignore_index=True))
    by_parts: dict[tuple[str, ...], list[int]] = {}
    queries = []
    for i, e in enumerate(entries):
        q = query_of(e, cfg.depth)
        queries.append([str(e["query_id"]), q.question, q.as_of.isoformat(), q.holder, q.session, q.scenario, q.k])
        by_parts.setdefault(tuple(parts_read(holders, q, scoped)), []).append(i)
    groups = []
    for parts, rows in sorted(by_parts.items()):
        key = memo.key("answers", asdict(cfg), where, [[p, digests[p]] for p in parts], [queries[i] for i in rows])
        groups.append(Group(parts, rows, key, memo.files("answers", key)))
    return Plan(memo, groups)


def with_measured_in(latency: pd.DataFrame, run_id: str) -> pd.DataFrame:
    """The latency table of a run's own queries, each marked as measured in `run_id`."""
    return latency.assign(**{MEASURED_IN: run_id})
