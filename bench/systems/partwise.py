"""A built-in system's answers reused by content, query group by query group (docs/performance.md).

A built-in system scores a query only in the parts of the served atoms it may see
(bench.systems.builtin.bm25: one index per modality; `parts_read`: every part, or for a scoped
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bench.io import digest_paths
from bench.memo import Memo
from bench.systems.builtin.bm25 import part_holders, parts_read
from bench.systems.replayed import no_ingest
from bench.systems.run import FAILURE_COLUMNS, LATENCY_COLUMNS, RUN_COLUMNS, RunResult, query_of

if TYPE_CHECKING:
    from bench.params import SystemParams

__all__ = ["LIGHT_COLUMNS", "MEASURED_IN", "PARTWISE", "Group", "Plan", "Text", "new_run_id", "part_digests", "plan", "reusable", "with_measured_in"]

#: the built-in systems that score a query only in the parts it may see -> whether they are scoped
PARTWISE: dict[str, bool] = {"bm25": False, "bm25-scoped": True, "dense": False, "dense-scoped": True,
                             "hybrid": False, "hybrid-scoped": True}
#: the latency table's column naming the run that measured each query
MEASURED_IN = "measured_in"
#: what the run's record keeps of a stored group besides its frames (system.json's fields)
INFO_FIELDS = ("warm", "warmup_queries", "restarts", "in_flight", "answered_on", "adapter", "isolation", "isolation_note",
               "abstains_declared", "description")


def new_run_id() -> str:
    """A run's name in the latency record: when it started (UTC) and a random suffix."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


#: formats a run's rows as TREC run lines (bench.trec.files.trec_run with the run's tag; the stage passes it)
Text = Callable[[pd.DataFrame], str]


@dataclass
class Group:
    parts: tuple[str, ...]  # the parts its queries are scored in
    rows: list[int]  # positions of its entries
    key: str
    stored: dict[str, bytes] | None  # run.feather, latency.feather, info.json (and run.trec) of the run that answered it


def _frame(data: bytes) -> pd.DataFrame:
    return pd.read_feather(io.BytesIO(data))


def _feather(frame: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.reset_index(drop=True).to_feather(buf, compression="uncompressed")  # read back in a few ms
    return buf.getvalue()


def _spans(latency: pd.DataFrame) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(query ids, first row, rows) of each answered query of a run whose rows are grouped by
    query in its latency table's order (a query's rows: its `n_returned` hits)."""
    counts = latency["n_returned"].to_numpy(dtype=np.int64)
    return latency["query_id"].astype(str).tolist(), np.cumsum(counts) - counts, counts


def _rows(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The row positions start, start + 1, ... of each span, span after span."""
    total = int(counts.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    shift = np.repeat(starts - (np.cumsum(counts) - counts), counts)
    return np.arange(total, dtype=np.int64) + shift


def _line_starts(text: str, spans: tuple[list[str], np.ndarray, np.ndarray], lines: list[int]) -> dict[int, int]:
    """Where each of `lines` (ascending; each 0, the number of lines, or a query's first line)
    starts in `text`, the TREC lines of a run whose rows are grouped by query as `spans` says.
    A query's first line is the first line that starts with its id (ids hold no whitespace), found
    by one forward search from the previous one: one pass over the text, not a split into lines."""
    ids, starts, counts = spans
    first = {int(s): q for q, s, c in zip(ids, starts.tolist(), counts.tolist(), strict=True) if c}
    total = int(counts.sum())
    out, at = {}, 0
    for line in lines:
        if line == 0 or line == total:
            out[line] = 0 if line == 0 else len(text)
            continue
        found = text.find(f"\n{first[line]} Q0 ", at)
        if found < 0:
            raise ValueError(f"TREC lines of query {first[line]} not found")
        at = out[line] = found + 1
    return out


def _stretches(wanted: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The rows `wanted` ((frame, first row, rows) per query, in order) as stretches of consecutive
    rows of one frame: (frame, first row, end row); a handful when the entries of a group follow each other."""
    runs: list[list[int]] = []
    for f, s, c in wanted:
        if not c:
            continue
        if runs and runs[-1][0] == f and runs[-1][2] == s:
            runs[-1][2] = s + c
        else:
            runs.append([f, s, s + c])
    return [(f, s, e) for f, s, e in runs]


def _splice(texts: list[str], frames: list[tuple[list[str], np.ndarray, np.ndarray]], stretches: list[tuple[int, int, int]]) -> str:
    """The TREC lines of the rows `stretches` names (`_stretches`) cut out of `texts` (each the lines
    of a run grouped by query as the matching `frames` span says): the same text as splitting every
    text into lines and taking those rows, one slice per stretch."""
    bounds = [_line_starts(texts[f], frames[f], sorted({b for g, s, e in stretches if g == f for b in (s, e)})) for f in range(len(texts))]
    return "".join([texts[f][bounds[f][s]:bounds[f][e]] for f, s, e in stretches])


#: put a run together from its stretches' slices up to this many stretches, else by one take of its rows
MAX_SLICES = 64


def _pick(frames: list[pd.DataFrame], stretches: list[tuple[int, int, int]], rows: np.ndarray) -> pd.DataFrame:
    """The rows of `frames` put end to end that `stretches` names (`rows`: the same rows as positions
    into the frames put end to end), as one frame: a few slices cost nothing, where a take of
    every row over Arrow string columns costs a copy of each."""
    if 0 < len(stretches) <= MAX_SLICES:
        return pd.concat([frames[f].iloc[s:e] for f, s, e in stretches], ignore_index=True)
    return pd.concat(frames, ignore_index=True).iloc[rows].reset_index(drop=True)


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

    def store(self, entries: Sequence[dict], fresh: RunResult, info: Mapping[str, Any], trec: str | None = None) -> int:
        """Store each group that ran with every query answered (with its TREC lines, cut from
        `trec`: the fresh run's, formatted once by the caller); returns the groups stored."""
        failed = set(fresh.failures["query_id"].astype(str))
        spans = _spans(fresh.latency)
        ids, starts, counts = spans
        where = {q: i for i, q in enumerate(ids)}
        done = 0
        for g in self.todo:
            mine = [where.get(str(entries[i]["query_id"]), -1) for i in g.rows]
            if failed.intersection(str(entries[i]["query_id"]) for i in g.rows) or min(mine, default=0) < 0:
                continue
            pos = np.asarray(mine, dtype=np.int64)
            run = fresh.run.iloc[_rows(starts[pos], counts[pos])].reset_index(drop=True)
            blobs = {"run.feather": _feather(run), "latency.feather": _feather(fresh.latency.iloc[pos]),
                     "info.json": json.dumps({k: info.get(k) for k in INFO_FIELDS}, sort_keys=True).encode()}
            if trec is not None:
                wanted = [(0, int(s), int(c)) for s, c in zip(starts[pos].tolist(), counts[pos].tolist(), strict=True)]
                blobs["run.trec"] = _splice([trec], [spans], _stretches(wanted)).encode("utf-8")
            self.memo.put_blobs("answers", g.key, blobs)
            done += 1
        return done

    def merge(self, entries: Sequence[dict], fresh: RunResult | None, text: Text | None = None,
              trec: str | None = None) -> tuple[RunResult, str | None]:
        """The run of every entry in entry order (the reused groups' rows and the fresh run's),
        and, when `text` formats a run, its TREC lines in the same order (a reused group's as stored;
        the fresh run's `trec` when the caller formatted them already)."""
        runs, lats, texts = [], [], []
        for g in self.groups:
            if g.stored is not None:
                runs.append(_frame(g.stored["run.feather"]))
                lats.append(_frame(g.stored["latency.feather"]))
                texts.append(g.stored["run.trec"].decode("utf-8") if "run.trec" in g.stored else None)
        if fresh is not None:
            runs.append(fresh.run)
            lats.append(fresh.latency)
            texts.append(trec)
        # each frame's queries as row spans in the frames put end to end, then every span in entry order
        spans: dict[str, tuple[int, int, int]] = {}
        frames = [_spans(lat) for lat in lats]
        offsets = np.cumsum([0, *(len(frame) for frame in runs)]).tolist()
        for f, (ids, starts, counts) in enumerate(frames):
            spans.update((q, (f, int(s), int(c))) for q, s, c in zip(ids, starts.tolist(), counts.tolist(), strict=True))
        found = [spans[q] for q in (str(e["query_id"]) for e in entries) if q in spans]
        rows = _rows(np.asarray([offsets[f] + s for f, s, _ in found], dtype=np.int64), np.asarray([c for _, _, c in found], dtype=np.int64))
        stretches = _stretches(found)
        run = _pick(runs, stretches, rows) if runs else pd.DataFrame(columns=RUN_COLUMNS)
        lat_all = pd.concat(lats, ignore_index=True) if lats else pd.DataFrame(columns=[*LATENCY_COLUMNS, MEASURED_IN])
        lat_index = {q: i for i, q in enumerate(lat_all["query_id"].astype(str).tolist())}
        lat = lat_all.iloc[[lat_index[q] for q in (str(e["query_id"]) for e in entries) if q in lat_index]].reset_index(drop=True)
        run = run.astype({"rank": "int64", "score": "float64"})
        lat = lat.astype({"latency_ms": "float64", "n_returned": "int64", "abstain": "bool", "confidence": "float64"})
        lines = None
        if text is not None:
            lines = _splice([t if t is not None else text(r) for t, r in zip(texts, runs, strict=True)], frames, stretches)
        if fresh is None:
            return RunResult(run, lat, pd.DataFrame(columns=FAILURE_COLUMNS), {}, ingest=no_ingest()), lines
        return RunResult(run, lat, fresh.failures, dict(fresh.info), fresh.memories, fresh.ingest), lines


def part_digests(served: Path, parts: Sequence[str], root: Path) -> dict[str, str]:
    """Each part's served atoms by content: the sha256 of the files of data/served/<part>/."""
    return {p: digest_paths([served / p], root) for p in parts}


#: the atom columns a reusing run reads of every served atom (the rest only of the parts it builds)
LIGHT_COLUMNS = ["atom_id", "modality", "holder"]


def reusable(cfg: SystemParams, memo: Memo | None) -> bool:
    """Whether a run of `cfg`'s system may reuse answers (a partwise built-in system, reuse on)."""
    return memo is not None and memo.root is not None and cfg.adapter == "builtin" and cfg.name in PARTWISE


def plan(cfg: SystemParams, entries: Sequence[dict], served: Mapping[str, pd.DataFrame], digests: Mapping[str, str],
         memo: Memo, where: str) -> Plan | None:
    """The query groups of a run of a partwise built-in system (PARTWISE) and which of them an
    earlier run answered from the same inputs; None: every query is sent (another system, or reuse off)."""
    if not reusable(cfg, memo) or not served:
        return None
    scoped = PARTWISE[cfg.name]
    holders = part_holders(pd.concat([f[["modality", "holder"]] for f in served.values()], ignore_index=True))
    by_parts: dict[tuple[str, ...], list[int]] = {}
    queries = []
    read: dict[str | None, tuple[str, ...]] = {}  # what a query reads depends on its holder alone (parts_read)
    for i, e in enumerate(entries):
        scope = e["scope"]  # what the system is sent of the entry (bench.systems.run.query_of), as the entry gives it
        queries.append([str(e["query_id"]), e["question"], e["as_of"], scope.get("holder"), scope.get("session"), scope.get("scenario"),
                        cfg.depth])
        holder = scope.get("holder")
        if holder not in read:
            read[holder] = tuple(parts_read(holders, query_of(e, cfg.depth), scoped))
        by_parts.setdefault(read[holder], []).append(i)
    groups = []
    for parts, rows in sorted(by_parts.items()):
        key = memo.key("answers", asdict(cfg), where, [[p, digests[p]] for p in parts], [queries[i] for i in rows])
        groups.append(Group(parts, rows, key, memo.files("answers", key)))
    return Plan(memo, groups)


def with_measured_in(latency: pd.DataFrame, run_id: str) -> pd.DataFrame:
    """The latency table of a run's own queries, each marked as measured in `run_id`."""
    return latency.assign(**{MEASURED_IN: run_id})
