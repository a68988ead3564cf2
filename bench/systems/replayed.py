"""A replayed run: the events and the queries interleaved on one channel (docs/systems.md, *Replay*).

The order is bench.systems.replay's: every event observed at or before a query's
``as_of`` is sent before it, none after. Each event is timed (``ingest_ms``: send, the
system's work, its ``{"event": id, "ok": true}``), apart from the queries' latency. An
event that times out, crashes the system or is answered otherwise stops the run with
one line naming the event and its source (:class:`ReplayError`): a memory that missed
part of the stream would be evaluated on a corpus it never had. Events after the last
query are never sent (no query can depend on them).

What a buyer asks of a memory system besides its answers (:class:`Probes`, docs/systems.md,
*Replay*): **is it empty at start** -- before the first event one search, for the stream's
most common content words (it names no event), must hand over nothing, else the run is
marked "not empty at start"; and **how soon is an observed fact searchable** -- after
every ``every``-th event, a search for that event's rarest words so far is repeated until a
memory citing the event's unit, or whose text the unit supports (bench.systems.credit.support), comes
back, or ``wait_s`` passes. Probes are not questions: they are in no metric, their
answers are read only for this, and they are sent only when asked for (``every`` 0: not
measured; a system whose search changes its memory, e.g. raises what it returned, is
changed by them).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bench.systems import Query
from bench.systems.adapters.external import EventRefused, SystemCrash, SystemTimeout
from bench.systems.adapters.protocol import parse_response, request_of
from bench.systems.replay import event_message, schedule

__all__ = ["INGEST_COLUMNS", "Probes", "ReplayError", "no_ingest", "probe_search", "replay_facts", "replay_queries"]

INGEST_COLUMNS = ["event", "source_id", "modality", "ingest_ms"]


class ReplayError(RuntimeError):
    """A replayed system failed an event, or cannot be replayed as configured; str() is the one line."""


def no_ingest() -> pd.DataFrame:
    return pd.DataFrame({"event": pd.Series(dtype=str), "source_id": pd.Series(dtype=str), "modality": pd.Series(dtype=str),
                         "ingest_ms": pd.Series(dtype=float)})


def _where(row: Any) -> str:
    return f"event {row.event} ({row.source_id}, {row.modality} {row.extent})"


_WORD = re.compile(r"(?u)\b[^\W\d_]{3,}\b")
PROBE_WORDS = 4  # the rarest words of an event in its probe
START_WORDS = 8  # the stream's most common words in the start-empty search


@dataclass
class Probes:
    """The start-empty check and the searchable probes (module docstring). `search(question,
    as_of, holder)` sends one search and returns its hits (MemoryHit or Hit); it raises on a
    failed call. `facts` is filled in: ``start_empty`` and ``searchable``."""

    search: Callable[[str, str, str | None], list[Any]]
    every: int = 0
    wait_s: float = 5.0
    interval_s: float = 0.05
    facts: dict[str, Any] = field(default_factory=dict)
    seen: Counter[str] = field(default_factory=Counter)  # events sent so far holding each word
    found_ms: list[float] = field(default_factory=list)
    missed: int = 0

    def start(self, events: pd.DataFrame, first_holder: str | None) -> None:
        """One search before any event: it must hand over nothing."""
        common = Counter(w for t in events["text"].astype(str) for w in {w.lower() for w in _WORD.findall(t)} - _stop())
        question = " ".join(sorted(common, key=lambda w: (-common[w], w))[:START_WORDS]) or "memory"
        first = pd.Timestamp(events["observed_at"].iloc[0]) if len(events) else pd.Timestamp.now(tz="UTC")
        as_of = (first - pd.Timedelta(seconds=1)).isoformat()  # before anything was observed
        try:
            returned = len(self.search(question, as_of, first_holder))
        except Exception as exc:  # a failed search says nothing about what the store holds
            self.facts["start_empty"] = {"checked": False, "question": question, "reason": " ".join(str(exc).split())[:300]}
            return
        self.facts["start_empty"] = {"checked": True, "question": question, "returned": returned, "empty": returned == 0}

    def after(self, n: int, message: dict[str, Any], clock: Callable[[], float]) -> None:
        """After the n-th event: remember its words; every `every`-th, probe for it until found or wait_s."""
        words = {w.lower() for w in _WORD.findall(str(message.get("text") or ""))} - _stop()
        self.seen.update(words)
        if not self.every or n % self.every or len(words) < 2:
            return
        question = " ".join(sorted(words, key=lambda w: (self.seen[w], w))[:PROBE_WORDS])
        start = clock()
        while True:
            try:
                hits = self.search(question, str(message["observed_at"]), message.get("holder"))
            except Exception:
                hits = []
            if any(_holds(h, message) for h in hits):
                self.found_ms.append((clock() - start) * 1000.0)
                return
            if clock() - start >= self.wait_s:
                self.missed += 1
                return
            time.sleep(self.interval_s)

    def finish(self) -> dict[str, Any]:
        if self.every:
            found = np.asarray(self.found_ms, dtype=float)
            self.facts["searchable"] = {
                "every": self.every, "wait_s": self.wait_s, "probes": len(found) + self.missed, "found": len(found),
                "not_found": self.missed, "p50_ms": float(np.percentile(found, 50)) if len(found) else None,
                "p95_ms": float(np.percentile(found, 95)) if len(found) else None}
        else:
            self.facts["searchable"] = {"every": 0, "not_measured": "system.probe_every is 0"}
        return self.facts


def _stop() -> frozenset[str]:
    from bench.systems.credit.support import stop_words

    return stop_words()


def _holds(hit: Any, message: dict[str, Any]) -> bool:
    """A hit that holds the event: a memory citing its unit, or whose text its unit supports."""
    from bench.systems.credit.support import support_mask

    cites = getattr(hit, "provenance", None) or []
    if any(c.source_id == message["source_id"] and c.extent == message["extent"] for c in cites):
        return True
    text = getattr(hit, "text", None)
    return isinstance(text, str) and bool(support_mask(text, [str(message.get("text") or "")])[0][0])


def replay_queries(channel: Any, events: pd.DataFrame, entries: list[dict], ask: Callable[[int], Any], *, timeout_s: float,
                   clock: Callable[[], float], event_file: Callable[[dict[str, Any], str], str] | None = None,
                   stopped: Callable[[], bool] = lambda: False, probes: Probes | None = None) -> tuple[list[Any], pd.DataFrame]:
    """Send the events and queries in replay order over `channel`; `ask(i)` sends entry i and
    returns its outcome. Returns (outcomes in entry order, one ingest row per event sent);
    `probes` (the start-empty check, the searchable probes) fills in its facts."""
    plan = schedule(events, entries)
    if probes is not None:
        first = entries[int(plan.order[0])]["scope"].get("holder") if len(plan.order) else None
        probes.start(events, first)
    outcomes: list[Any] = [None] * len(entries)
    rows: list[tuple[str, str, str, float]] = []
    sent = 0
    stream = list(events.itertuples(index=False))
    for position, before in zip(plan.order.tolist(), plan.events_before.tolist(), strict=True):
        while sent < before:
            row = stream[sent]
            message = event_message(row, None)
            if event_file is not None:
                try:
                    message["source_file"] = event_file(message, str(row.dataset))
                except (OSError, ValueError) as exc:
                    raise ReplayError(f"{_where(row)}: its source file could not be placed: {exc}") from None
            start = clock()
            try:
                channel.observe(message, timeout_s)
            except (SystemTimeout, SystemCrash, EventRefused) as exc:
                raise ReplayError(f"{_where(row)} failed: {exc}") from None
            rows.append((str(row.event), str(row.source_id), str(row.modality), (clock() - start) * 1000.0))
            sent += 1
            if probes is not None:
                probes.after(sent, message, clock)
        outcomes[position] = ask(position)
        if stopped():
            break
    ingest = pd.DataFrame(rows, columns=INGEST_COLUMNS) if rows else no_ingest()
    if probes is not None:
        probes.finish()
    return outcomes, ingest


def replay_facts(adapter: Any, probes: Probes | None) -> dict[str, Any]:
    """A replayed run's facts besides its answers: empty at start, time until searchable, and (an
    MCP server's) what it handed over; nothing for a run that was not replayed."""
    if probes is None:
        return {}
    facts = getattr(adapter, "replay_facts", None)
    return {"replay_facts": {**probes.facts, **(facts() if callable(facts) else {})}}


def probe_search(channel: Any, k: int, known: Collection[str] | None, timeout_s: float) -> Callable[[str, str, str | None], list[Any]]:
    """One search outside the questions (bench.systems.replayed.Probes): its hits; raises on a failed call."""
    sent = [0]

    def search(question: str, as_of: str, holder: str | None) -> list[Any]:
        sent[0] += 1
        prepare = getattr(channel, "prepare", None)
        if prepare is not None:
            prepare()
        request = request_of(Query(question, pd.Timestamp(as_of), holder, None, None, k), f"probe-{sent[0]}")
        return list(parse_response(channel.call(request, timeout_s), k, known, expect_id=request["id"]).hits)

    return search
