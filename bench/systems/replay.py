"""Replay: a system is shown the corpus as a stream of events, and only the past (docs/systems.md, *Replay*).

Events are the units of the harness's extraction (``Modality.replay_units``: a turn, a
page, a cue, a code file, a screenshot, a photo) of every source the served atoms come
from, one event each, in this order:

1. ``observed_at`` ascending (UTC);
2. then ``source_id`` ascending (code-point order);
3. then the unit's position in its source (turn, page, cue, file order).

Event ids are ``e1``, ``e2``, ... in that order. Queries are sorted by ``as_of`` ascending,
then by the sha256 of their query id (never sent; a query id names its data set's
upstream row, so id order would tell which rows come together, and with them which are
unanswerable: docs/moments.md); each query is sent after every event with
``observed_at <= as_of`` (an event observed at the very moment of the question comes
first) and before every later event. Both orders are total, so two runs send the same
lines in the same order.

An event on the wire (the ``observe`` object; ``source_file`` is null for the python and
HTTP adapters, which have no working folder)::

    {"event": "e1042", "source_id": "locomo:conv-26:session-3", "modality": "conversation",
     "extent": {"turn": 5}, "text": "...", "observed_at": "2023-05-08T13:56:00+00:00",
     "holder": "locomo:conv-26", "source_file": "corpus/locomo/locomo_conv-26_session-3.jsonl"}

Nothing of the sets is in an event: no query id, gold, answer or split.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.modalities import modalities

__all__ = ["EVENT_COLUMNS", "ReplayFiles", "Schedule", "event_message", "event_stream", "schedule"]

EVENT_COLUMNS = ["event", "source_id", "dataset", "modality", "holder", "observed_at", "extent", "text"]


def event_stream(segments: pd.DataFrame, sources: Iterable[str]) -> pd.DataFrame:
    """Every event of `sources` (their segments' units), in replay order (module docstring)."""
    wanted = set(sources)
    mods = modalities()
    parts = []
    seg = segments.loc[segments["source_id"].astype(str).isin(wanted)]
    for sid, grp in seg.groupby(seg["source_id"].astype(str), sort=True):
        first = grp.iloc[0]
        units = mods[str(first["modality"])].replay_units(grp)
        units.insert(0, "position", np.arange(len(units), dtype=np.int64))
        units.insert(0, "source_id", sid)
        parts.append(units.assign(dataset=str(first["dataset"]), modality=str(first["modality"]), holder=str(first["holder"])))
    if not parts:
        return pd.DataFrame(columns=EVENT_COLUMNS)
    events = pd.concat(parts, ignore_index=True)
    events["observed_at"] = pd.to_datetime(events["observed_at"], utc=True)
    events = events.sort_values(["observed_at", "source_id", "position"], kind="stable").reset_index(drop=True)
    events.insert(0, "event", [f"e{i + 1}" for i in range(len(events))])
    return events[EVENT_COLUMNS]


def event_message(row: Any, source_file: str | None) -> dict[str, Any]:
    """One event (an :func:`event_stream` row) as the ``observe`` object of the wire."""
    return {"event": row.event, "source_id": row.source_id, "modality": row.modality, "extent": row.extent, "text": row.text,
            "observed_at": pd.Timestamp(row.observed_at).isoformat(), "holder": row.holder, "source_file": source_file}


@dataclass(frozen=True)
class Schedule:
    """The queries in replay order and, for each, how many events are sent before it."""

    order: np.ndarray  # positions into the entries, in the order they are asked
    events_before: np.ndarray  # events sent before each of them (non-decreasing)


def _ns(values: Iterable[Any]) -> np.ndarray:
    stamps = pd.to_datetime(pd.Series(list(values), dtype=object), utc=True, format="ISO8601")
    return stamps.dt.tz_localize(None).to_numpy(dtype="datetime64[ns]").view(np.int64)


def schedule(events: pd.DataFrame, entries: list[dict]) -> Schedule:
    """Queries by as_of then the sha256 of their query id; each after every event observed at or before its as_of."""
    as_of = _ns(e["as_of"] for e in entries)
    qids = np.asarray([hashlib.sha256(str(e["query_id"]).encode()).hexdigest() for e in entries], dtype=object)
    order = np.lexsort((qids, as_of)) if len(entries) else np.zeros(0, dtype=np.int64)
    times = _ns(events["observed_at"]) if len(events) else np.zeros(0, dtype=np.int64)
    return Schedule(order, np.searchsorted(times, as_of[order], side="right"))


class ReplayFiles:
    """A replayed command system's corpus folder, filled as the events arrive.

    A source shown as parsed text gets the file ``corpus/<dataset>/<source>.jsonl`` holding
    one JSON line per event of it sent so far (the event object itself). A source whose
    upstream file is its medium alone (a PDF, a photo, a screenshot) has that file placed
    (hard-linked, else copied) when its first event is sent: it is shown whole from then
    on, later pages of a PDF included."""

    def __init__(self, workdir: Path, raw: Mapping[str, tuple[str, Path]]) -> None:
        from bench.systems.sandbox.workdir import safe_name

        self.workdir, self.raw, self.safe_name = workdir, raw, safe_name
        self.placed: set[str] = set()

    def place(self, message: dict[str, Any], dataset: str) -> str:
        """Put the event's source file in place; return its path relative to the working folder."""
        sid = message["source_id"]
        if sid in self.raw:
            rel, host = self.raw[sid]
            relpath = f"corpus/{self.safe_name(dataset)}/{rel}"
            target = self.workdir / relpath
            if not target.resolve().is_relative_to((self.workdir / "corpus").resolve()):
                raise ValueError(f"source {sid}: its file {relpath} would leave the corpus folder")
            if sid not in self.placed:
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(host, target)
                except OSError:
                    shutil.copyfile(host, target)
                self.placed.add(sid)
            return relpath
        relpath = f"corpus/{self.safe_name(dataset)}/{self.safe_name(sid)}.jsonl"
        target = self.workdir / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**message, "source_file": relpath}, ensure_ascii=False) + "\n")
        return relpath
