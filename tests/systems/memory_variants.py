"""Dishonest variants of the consolidating example memory (tests only): the same memories,
the same ranking, only their provenance changed.

* ``every_turn`` -- each memory cites every turn, separately, of every session it cites;
* ``whole_session`` -- each memory cites every session it cites as one range of all its turns;
* ``other_holder`` -- each memory also cites the first session of another holder's stream.

Each is a python-adapter factory with ``replay = True`` (bench.systems.Replayed)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from examples.consolidating_memory import ConsolidatingMemory


class Variant(ConsolidatingMemory):
    mode = "honest"

    def __init__(self, atoms: Any = None) -> None:
        super().__init__(atoms)
        self.turns: dict[str, list[int]] = defaultdict(list)  # source -> the turns sent so far
        self.first_source: dict[str, str] = {}  # holder -> its first session

    def observe(self, event: dict[str, Any]) -> None:
        self.turns[event["source_id"]].append(int(event["extent"]["turn"]))
        self.first_source.setdefault(event["holder"], event["source_id"])
        super().observe(event)

    def provenance(self, cites: list[dict[str, Any]], holder: str) -> list[dict[str, Any]]:
        sources = list(dict.fromkeys(c["source_id"] for c in cites))
        if self.mode == "every_turn":
            return [{"source_id": s, "extent": {"turn": t}} for s in sources for t in self.turns[s]]
        if self.mode == "whole_session":
            return [{"source_id": s, "extent": {"turn_start": min(self.turns[s]), "turn_end": max(self.turns[s])}} for s in sources]
        other = next((s for h, s in sorted(self.first_source.items()) if h != holder), None)
        return cites + ([{"source_id": other, "extent": {"turn": min(self.turns[other])}}] if other else [])

    def search(self, query: Any) -> list[dict[str, Any]]:
        holder = query["scope"]["holder"] if isinstance(query, dict) else query.holder
        return [{**h, "provenance": self.provenance(h["provenance"], holder)} for h in super().search(query)]


class EveryTurn(Variant):
    mode = "every_turn"


class WholeSession(Variant):
    mode = "whole_session"


class OtherHolder(Variant):
    mode = "other_holder"
