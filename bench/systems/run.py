"""Run the system under test over the dev entries through an adapter, timing each call.

What a system is sent is built by `query_of` + `protocol.request_of` only: the
question, as_of, scope and k, under an opaque request id. Never gold, answer,
answer_format, split, unanswerable, the query id or a path of the sets.

Robustness rules (docs/systems.md):

* every call has a timeout; a timed-out or crashed call makes its query *failed*:
  it has no run rows, no latency, a row in `failures`, and it stays in every
  denominator (evaluate passes the failed ids to the metrics);
* a malformed response (not the protocol's shape, wrong types, NaN/inf scores,
  unknown or duplicate atom ids, more than k hits, scores rising down the list)
  stops the run with a ValueError naming the query;
* `concurrency` channels carry at most that many queries at once;
* a system that starts failing (MAX_WINDOW_FAILURES = 5 of the last FAILURE_WINDOW = 10
  timed queries time out or crash, counted in the order the answers come back: five in
  a row, or a system alternating crash and success) stops the run with
  ConsecutiveFailures naming the failed queries so far, instead of costing the full
  timeout (or a restart) on every remaining query;
* warm-up: before the timed run the first `warmup` queries are sent once each
  (spread over the channels), their answers checked and thrown away, their time
  not recorded. Then every query is sent and timed;
* a memory hit's citations are checked against the corpus as the answers come
  (bench.systems.credit.provenance.CitationCheck): a malformed memory stops the run too;
* a system that asked for replay is sent the corpus as events interleaved with the
  queries, over one channel, without warm-up (bench.systems.replayed).

Latency is the wall clock around the adapter call only (send, wait, receive and
decode), measured by the harness; checking the answer is not timed. The index
build (or a command system's start-up, until it prints `{"ready": true}`) happens
before and is not timed either.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bench import progress
from bench.io import gc_paused
from bench.systems import MemoryHit, Query, Response
from bench.systems.adapters.external import Adapter, Channel, SystemCrash, SystemTimeout
from bench.systems.adapters.protocol import MalformedResponse, parse_response, request_of
from bench.systems.replayed import Probes, ReplayError, no_ingest, probe_search, replay_facts, replay_queries

if TYPE_CHECKING:
    from bench.executor import Executor

RUN_COLUMNS = ["query_id", "rank", "atom_id", "score"]  # atom_id: the memory_id of a memory hit
#: one row per memory hit of the run (docs/systems.md, *Memory hits*)
MEMORY_COLUMNS = ["query_id", "rank", "memory_id", "text", "provenance"]
LATENCY_COLUMNS = ["query_id", "latency_ms", "n_returned", "abstain", "confidence"]
FAILURE_COLUMNS = ["query_id", "modality", "kind", "message", "elapsed_ms"]
#: the run stops once MAX_WINDOW_FAILURES of the last FAILURE_WINDOW timed answers were timeouts or crashes (docs/systems.md)
MAX_WINDOW_FAILURES, FAILURE_WINDOW = 5, 10
SHOWN_FAILED = 30  # failed query ids named in that message at most
#: the atom columns a system is given (the served atoms' common columns)
SYSTEM_COLUMNS = ["atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at"]


def latency_percentiles(latency_ms: pd.Series) -> dict[str, Any]:
    """A run's ``latency`` record: n and p50/p95/p99 of the timed queries (ms)."""
    values = latency_ms.to_numpy(dtype=float)
    if not len(values):
        return {"n": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None}
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {"n": int(len(values)), "p50_ms": float(p50), "p95_ms": float(p95), "p99_ms": float(p99)}


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


@dataclass
class RunResult:
    """What sending the entries to a system gave (run_queries): the ranked atoms by id, the
    latency of each answered query, the failed queries and the memory hits."""

    run: pd.DataFrame  # query_id, rank, atom_id, score
    latency: pd.DataFrame  # per answered query: query_id, latency_ms, n_returned, abstain, confidence
    failures: pd.DataFrame  # per failed query: query_id, modality, kind (timeout|crash), message, elapsed_ms
    info: dict[str, Any] = field(default_factory=dict)
    memories: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=MEMORY_COLUMNS))  # memory hits (MEMORY_COLUMNS)
    ingest: pd.DataFrame = field(default_factory=no_ingest)  # replay: one row per event sent (INGEST_COLUMNS)

    @property
    def failed(self) -> list[str]:
        return self.failures["query_id"].tolist()


@dataclass
class _Outcome:
    response: Response | None = None
    elapsed_ms: float = 0.0
    kind: str | None = None
    message: str = ""


def _elapsed(channel: Channel, start: float, clock: Callable[[], float]) -> float:
    remote = getattr(channel, "elapsed_ms", None)
    return float(remote) if remote is not None else (clock() - start) * 1000.0


def _remote_call(system: Any, request: dict, timeout_s: float) -> tuple[str | None, Any, float]:
    """One query of a Python system on a Dask worker, timed there: (failure kind or None, answer or message, ms)."""
    from bench.systems.adapters.external import PythonChannel

    channel = PythonChannel(system)
    start = time.perf_counter()
    try:
        raw = channel.call(request, timeout_s)
    except SystemTimeout as exc:
        return "timeout", str(exc), (time.perf_counter() - start) * 1000.0
    except SystemCrash as exc:
        return "crash", str(exc), (time.perf_counter() - start) * 1000.0
    finally:
        channel.close()
    return None, raw, (time.perf_counter() - start) * 1000.0


class DaskChannel:
    """Calls of a Python system on the Dask workers; the system was sent to each once.

    Latency is timed on the worker around the call, as PythonChannel is in process;
    the scheduler round trip is not part of it. A worker that dies mid-query has the
    query re-run by Dask on another worker."""

    def __init__(self, client: Any, system_ref: Any) -> None:
        self.client = client
        self.system_ref = system_ref
        self.elapsed_ms: float | None = None

    def call(self, request: dict[str, Any], timeout: float) -> Any:
        self.elapsed_ms = None
        future = self.client.submit(_remote_call, self.system_ref, request, timeout, pure=False)
        kind, payload, self.elapsed_ms = future.result()
        if kind == "timeout":
            raise SystemTimeout(payload)
        if kind == "crash":
            raise SystemCrash(payload)
        return payload

    def close(self) -> None:
        return None


class DaskPythonAdapter:
    """A PythonAdapter whose calls run on Dask workers (executor kind dask)."""

    def __init__(self, inner: Any, client: Any) -> None:
        self.inner = inner
        self.kind: str = inner.kind
        self.name: str = inner.name
        self.abstains: bool = inner.abstains
        self.isolation: str = inner.isolation
        self.replay: bool = False  # a replayed system is never sent to the workers
        self.given_atoms: bool = True
        self.client = client
        self.system_ref = client.scatter(inner.system, broadcast=True, hash=False)

    def open(self) -> DaskChannel:
        return DaskChannel(self.client, self.system_ref)

    def restarts(self) -> int:
        return 0


def _on_executor(adapter: Adapter, executor: Executor | None, concurrency: int) -> tuple[Adapter, int, str]:
    """Builtin and python systems go to the Dask workers (one query in flight per worker
    at least); command and HTTP systems, kind local, and a system that cannot be
    pickled (it holds a lock, a socket ...) keep their own channels here.
    Returns (adapter, channels, where the queries are answered)."""
    from bench.systems.adapters.external import PythonAdapter

    if executor is None or executor.kind != "dask" or not isinstance(adapter, PythonAdapter):
        return adapter, concurrency, "here"
    try:
        remote = DaskPythonAdapter(adapter, executor.client)  # type: ignore[attr-defined]
    except Exception as exc:
        return adapter, concurrency, f"here (the system cannot be sent to the workers: {type(exc).__name__})"
    return remote, max(concurrency, executor.workers), "dask workers"


class ConsecutiveFailures(RuntimeError):
    """The system failed too many of its recent timed queries; str() names the failed ones so far."""


class _Streak:
    """Failures among the last `window` timed answers, in the order the answers come back."""

    def __init__(self, limit: tuple[int, int] | None) -> None:
        self.limit, self.stopped, self.tripped = limit, False, 0
        self.recent: deque[bool] = deque(maxlen=limit[1] if limit else 1)
        self.failed: list[str] = []
        self.errors: Counter[str] = Counter()  # each distinct failure message, said once
        self.lock = threading.Lock()

    def record(self, query_id: str, failed: bool, message: str = "") -> None:
        with self.lock:
            self.recent.append(failed)
            if failed:
                self.failed.append(query_id)
                self.errors[message] += 1
            if self.limit is not None and sum(self.recent) >= self.limit[0]:
                self.stopped, self.tripped = True, max(self.tripped, sum(self.recent))

    def raise_if_stopped(self) -> None:
        if self.stopped and self.limit is not None:
            shown = ", ".join(self.failed[:SHOWN_FAILED]) + (f" and {len(self.failed) - SHOWN_FAILED} more" if len(self.failed) > SHOWN_FAILED else "")
            most, window = self.limit
            raise ConsecutiveFailures(
                f"{self.tripped} of the last {window} timed queries timed out or crashed after the warm-up (limit {most} of {window}); "
                f"stopped instead of waiting out every query; {len(self.failed)} failed so far: {shown}; {error_summary(self.errors)}")


def error_summary(errors: Counter[str], most: int = 3) -> str:
    """The distinct failure messages, each once with its count, the most frequent first."""
    said = [f"{n}x {message or '(no message)'}" for message, n in errors.most_common(most)] + [f"and {len(errors) - most} other errors"] * (len(errors) > most)
    return ("why: " if len(errors) == 1 else "why (each distinct error once): ") + " | ".join(said)


def _call(pool: queue.Queue[Channel], request: dict, timeout_s: float, k: int, known: Collection[str] | None, label: str,
          clock: Callable[[], float], check: Callable[[MemoryHit], None] | None = None) -> _Outcome:
    channel = pool.get()
    try:
        prepare = getattr(channel, "prepare", None)
        if prepare is not None:  # a restarted system starts and warms up here, untimed
            try:
                prepare()
            except SystemCrash as exc:
                return _Outcome(None, 0.0, "crash", str(exc))
        start = clock()
        # a channel that times its calls where they run (a Dask worker) says so in elapsed_ms
        try:
            raw = channel.call(request, timeout_s)
        except SystemTimeout as exc:
            return _Outcome(None, _elapsed(channel, start, clock), "timeout", str(exc))
        except SystemCrash as exc:
            return _Outcome(None, _elapsed(channel, start, clock), "crash", str(exc))
        except MalformedResponse as exc:
            raise ValueError(f"{label}: malformed response: {exc}") from None
        elapsed = _elapsed(channel, start, clock)
    finally:
        pool.put(channel)
    try:
        response = parse_response(raw, k, known, expect_id=request["id"])
        if check is not None:  # each memory's citations against the corpus (bench.systems.credit.provenance)
            for rank, hit in enumerate(response.hits, start=1):
                if isinstance(hit, MemoryHit):
                    check_memory(check, hit, rank)
    except MalformedResponse as exc:
        raise ValueError(f"{label}: malformed response: {exc}") from None
    return _Outcome(response, elapsed)


def check_memory(check: Callable[[MemoryHit], None], hit: MemoryHit, rank: int) -> None:
    try:
        check(hit)
    except MalformedResponse as exc:
        raise MalformedResponse(f"hit {rank} (memory {hit.memory_id}): {exc}") from None


def run_queries(
    adapter: Adapter,
    entries: list[dict],
    k: int,
    *,
    timeout_s: float = 30.0,
    concurrency: int = 1,
    warmup: int = 0,
    known_atoms: Collection[str] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    executor: Executor | None = None,
    max_failures: tuple[int, int] | None = (MAX_WINDOW_FAILURES, FAILURE_WINDOW),
    events: Callable[[], pd.DataFrame] | None = None,
    check_memory: Callable[[MemoryHit], None] | None = None,
    probe_every: int = 0,
    probe_wait_s: float = 5.0,
    warm_entries: list[dict] | None = None,
) -> RunResult:
    """Send every entry's query through `adapter`; see the module docstring for the rules.

    On an `executor` of kind dask a builtin or python system answers on the workers
    (DaskPythonAdapter), with at least one query in flight per worker; the answers are the same,
    only latency (timed on the worker) may differ. Once `max_failures` = (most, window): `most` of
    the last `window` timed queries timed out or crashed (None: never), no further query is sent
    and ConsecutiveFailures names the failed queries so far. A system that opted in to replay
    (``adapter.replay`` once its channel is open) is sent `events()` (bench.systems.replay.event_stream)
    interleaved with the queries (bench.systems.replayed), over one channel, without warm-up, and
    probed (`probe_every`, `probe_wait_s`: bench.systems.replayed.Probes). `check_memory` checks each
    memory hit's citations against the corpus (MalformedResponse); `warm_entries`: the entries whose
    queries warm up (default: the first `warmup` of `entries`)."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if not getattr(adapter, "replay", False):
        adapter, concurrency, answered_on = _on_executor(adapter, executor, concurrency)
    else:
        answered_on = "here"
    known = known_atoms if known_atoms is None or isinstance(known_atoms, (set, frozenset)) else set(known_atoms)
    pool: queue.Queue[Channel] = queue.Queue()
    channels: list[Channel] = []
    ingest = no_ingest()
    probes: Probes | None = None
    try:
        for _ in range(concurrency):
            channel = adapter.open()
            channels.append(channel)
            pool.put(channel)
            if getattr(adapter, "replay", False):
                break  # replay: one channel (refused below when more were asked for)
        replay = bool(getattr(adapter, "replay", False))
        if replay:
            replay_refusal(adapter, concurrency, events)
            if not getattr(adapter, "given_atoms", True):
                known = frozenset()  # it was handed no atoms: it can name none
        requests = [request_of(query_of(e, k), f"r{i + 1}") for i, e in enumerate(entries)]
        warming = entries[:warmup] if warm_entries is None else warm_entries
        n_warm = 0 if replay else len(warming)
        warm_requests = [request_of(query_of(e, k), f"w{i + 1}") for i, e in enumerate(warming[:n_warm])]
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bench-query") as pool_exec:
            warm = list(pool_exec.map(
                lambda i: _call(pool, warm_requests[i], timeout_s, k, known, f"warm-up query {warming[i]['query_id']}", clock, check_memory),
                range(n_warm),
            ))
            warm_failed = [o for o in warm if o.kind is not None]
            if n_warm and len(warm_failed) == n_warm:
                raise RuntimeError(f"the system answered none of the {n_warm} warm-up queries; first failure: {warm_failed[0].kind}: {warm_failed[0].message}")
            streak = _Streak(max_failures)
            # the collector paused: the answers' 800k new objects would start collections walking all of them
            with progress.bar(len(entries), "retrieve: queries", "queries", count_failed=True) as bar, gc_paused():

                def timed(i: int) -> _Outcome:
                    if streak.stopped:
                        return _Outcome(kind="skipped")
                    outcome = _call(pool, requests[i], timeout_s, k, known, f"query {entries[i]['query_id']}", clock, check_memory)
                    streak.record(entries[i]["query_id"], outcome.kind is not None, outcome.message)
                    bar.advance(failed=int(outcome.kind is not None))
                    return outcome

                if replay and events is not None:
                    probes = Probes(probe_search(channels[0], k, known, timeout_s), probe_every, probe_wait_s)
                    found, ingest = replay_queries(channels[0], events(), entries, timed, timeout_s=timeout_s, clock=clock,
                                                   event_file=getattr(adapter, "event_file", None), stopped=lambda: streak.stopped,
                                                   probes=probes)
                    outcomes = [o if o is not None else _Outcome(kind="skipped") for o in found]
                else:
                    outcomes = _each(timed, len(entries), pool_exec, concurrency)
            streak.raise_if_stopped()
    finally:
        for channel in channels:
            channel.close()
    result = _assemble(entries, outcomes, ingest)
    result.info = {
        "adapter": adapter.kind,
        "concurrency": concurrency,
        "timeout_s": timeout_s,
        "warmup_queries": n_warm,
        "warmup_failed": len(warm_failed),
        "warm": n_warm > 0 and len(warm_failed) < n_warm,
        "restarts": adapter.restarts(),
        "in_flight": len(channels) if replay else concurrency,  # channels: on Dask at least one per worker
        "answered_on": answered_on,
        "queries": len(entries),
        "failed": len(result.failures),
        "replay": replay,
        "given_atoms": bool(getattr(adapter, "given_atoms", True)),
    }
    result.info.update(replay_facts(adapter, probes))
    return result


def _each(timed: Callable[[int], _Outcome], n: int, pool_exec: ThreadPoolExecutor, concurrency: int) -> list[_Outcome]:
    """`timed(i)` for every query, in order; one channel: here, one after another (what the
    pool would do, without a hand-off per query)."""
    if concurrency == 1:
        return [timed(i) for i in range(n)]
    return list(pool_exec.map(timed, range(n)))


def replay_refusal(adapter: Adapter, concurrency: int, events: Callable[[], pd.DataFrame] | None) -> None:
    """A replayed system that was shown the atoms before its first event, asked for several
    channels, or run where no event stream is available, is refused (ReplayError)."""
    name = getattr(adapter, "name", "system")
    if events is None:
        raise ReplayError(f"system {name!r} asked for replay, but this run has no event stream")
    if getattr(adapter, "given_atoms", False):
        raise ReplayError(f"system {name!r} asked for replay in its ready line, but its command line names {{atoms}}: it was "
                          "handed every atom before its first event; drop {atoms} from system.entry so that it is shown only the past")
    if concurrency != 1:
        raise ReplayError(f"system {name!r} asked for replay, but system.concurrency is {concurrency}: the stream goes over "
                          "one channel; set system.concurrency: 1")


def _assemble(entries: list[dict], outcomes: list[_Outcome], ingest: pd.DataFrame) -> RunResult:
    """The run, latency, failures, memory and ingest frames of the outcomes, in entry order."""
    # the run's columns are built as lists, one per column (a frame of row tuples converts every cell)
    run_q: list[str] = []
    run_rank: list[int] = []
    run_id: list[str] = []
    run_score: list[float] = []
    lat_rows: list[tuple[str, float, int, bool, float | None]] = []
    fail_rows: list[tuple[str, str, str, str, float]] = []
    mem_rows: list[tuple[str, int, str, str, str]] = []
    for entry, outcome in zip(entries, outcomes, strict=True):
        qid = entry["query_id"]
        if outcome.response is None:
            fail_rows.append((qid, entry["modality"], str(outcome.kind), outcome.message, outcome.elapsed_ms))
            continue
        resp = outcome.response
        hits = resp.hits
        run_q.extend([qid] * len(hits))
        run_rank.extend(range(1, len(hits) + 1))
        run_id.extend([h.memory_id if isinstance(h, MemoryHit) else h.atom_id for h in hits])
        run_score.extend([h.score for h in hits])
        mem_rows.extend((qid, rank, h.memory_id, h.text, provenance_json(h)) for rank, h in enumerate(hits, start=1) if isinstance(h, MemoryHit))
        lat_rows.append((qid, outcome.elapsed_ms, len(hits), resp.abstain, resp.confidence))
    latency = pd.DataFrame(lat_rows, columns=LATENCY_COLUMNS)
    latency["confidence"] = latency["confidence"].astype(float)
    run = (pd.DataFrame(dict(zip(RUN_COLUMNS, (run_q, run_rank, run_id, run_score), strict=True))) if run_q
           else pd.DataFrame([], columns=RUN_COLUMNS))
    return RunResult(run, latency, pd.DataFrame(fail_rows, columns=FAILURE_COLUMNS), {}, pd.DataFrame(mem_rows, columns=MEMORY_COLUMNS), ingest)


def provenance_json(hit: MemoryHit) -> str:
    """A memory's provenance as canonical JSON (sorted keys): equal provenance, equal text."""
    return json.dumps([{"source_id": c.source_id, "extent": c.extent} for c in hit.provenance], sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)


__all__ = ["RUN_COLUMNS", "LATENCY_COLUMNS", "FAILURE_COLUMNS", "MEMORY_COLUMNS", "SYSTEM_COLUMNS", "ReplayError", "RunResult", "latency_percentiles", "query_of", "run_queries"]
