"""A replayed run: the events and the queries interleaved on one channel (docs/systems.md, *Replay*).

The order is bench.systems.replay's: every event observed at or before a query's
``as_of`` is sent before it, none after. Each event is timed (``ingest_ms``: send, the
system's work, its ``{"event": id, "ok": true}``), apart from the queries' latency. An
event that times out, crashes the system or is answered otherwise stops the run with
one line naming the event and its source (:class:`ReplayError`): a memory that missed
part of the stream would be evaluated on a corpus it never had. Events after the last
query are never sent (no query can depend on them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from bench.systems.adapters import EventRefused, SystemCrash, SystemTimeout
from bench.systems.replay import event_message, schedule

__all__ = ["INGEST_COLUMNS", "ReplayError", "no_ingest", "replay_queries"]

INGEST_COLUMNS = ["event", "source_id", "modality", "ingest_ms"]


class ReplayError(RuntimeError):
    """A replayed system failed an event, or cannot be replayed as configured; str() is the one line."""


def no_ingest() -> pd.DataFrame:
    return pd.DataFrame({"event": pd.Series(dtype=str), "source_id": pd.Series(dtype=str), "modality": pd.Series(dtype=str),
                         "ingest_ms": pd.Series(dtype=float)})


def _where(row: Any) -> str:
    return f"event {row.event} ({row.source_id}, {row.modality} {row.extent})"


def replay_queries(channel: Any, events: pd.DataFrame, entries: list[dict], ask: Callable[[int], Any], *, timeout_s: float,
                   clock: Callable[[], float], event_file: Callable[[dict[str, Any], str], str] | None = None,
                   stopped: Callable[[], bool] = lambda: False) -> tuple[list[Any], pd.DataFrame]:
    """Send the events and queries in replay order over `channel`; `ask(i)` sends entry i and
    returns its outcome. Returns (outcomes in entry order, one ingest row per event sent)."""
    plan = schedule(events, entries)
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
        outcomes[position] = ask(position)
        if stopped():
            break
    ingest = pd.DataFrame(rows, columns=INGEST_COLUMNS) if rows else no_ingest()
    return outcomes, ingest
