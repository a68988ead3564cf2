"""Attribution: provenance for a memory that cites nothing (docs/systems.md, *Attribution*).

A memory server that returns bare text (MCP's reference memory server, most products
behind MCP tools) names no source. The harness then derives the memory's provenance
itself, from what the system was *shown at or before the question* (under replay: the
events it was sent), by the support rule (bench.systems.credit.support) and nothing else:

1. **Candidates**: the shown units judged by their text (at least ``MIN_STEMS`` content
   stems) that support the memory: ``|C(u) & C(m)| >= MIN_STEMS`` and that share is at
   least ``SHARE`` of the smaller stem set. A unit without such text is never a candidate
   (cited alone it would count as supported unjudged). **Every unit sent so far is a
   candidate, whoever's it is**: the question's holder decides what a memory may be
   *credited* for (a memory of another holder's unit is a holder leak), never where it
   *came from*.
2. **Fewest units**: a greedy cover of the memory's content stems: the candidate that
   covers the most stems not yet covered is cited first (ties: the larger share, then the
   unit with the fewest stems beyond the memory's, then the unit shown first -- never the
   asker's), and so on while a candidate adds at least one stem. A choice another
   candidate equalled on all three is a *tie*, and said (:attr:`Attribution.tied`; across
   holders: :attr:`Attribution.tied_holders`). A verbatim turn is attributed to that turn
   alone (to the first of several identical turns, a tie); a summary of three turns to
   the turns that carry its words; the whole history pasted as one text to the units that
   carry its vocabulary.
3. **Nothing supports it** (*unattributed*): the memory is cited to the latest unit of the
   question's holder judged by its text (else the latest shown unit so judged): that unit
   does not support it, so it is credited nothing and, its origin unknown, counted as no
   leak; it stays in the ranking and is paid its own text like every memory hit. With
   nothing shown at all there is nothing to cite (:meth:`Shown.attribution` returns no
   unit; the caller leaves the memory out).

The derived citations are then judged like any system's (bench.gold.memories):
each cited unit supports the memory by construction, so each is credited, and the memory
costs its own text (characters) under every budget measure.

Limits (measured on LoCoMo, docs/systems.md): a paraphrase that shares fewer than
``SHARE`` of its content stems with its turn is not attributed; a generic memory whose
words occur in several turns is attributed to the turns that cover it, which may not be
the one it came from (a tie when they cover it equally).
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.systems.credit.support import MIN_STEMS, SHARE, content_stems

__all__ = ["Attribution", "Shown", "candidates", "cover"]


def candidates(memory: frozenset[str], units: list[frozenset[str]], overlap: dict[int, int]) -> list[tuple[int, float]]:
    """(unit, share) of the units that support `memory` (module docstring, step 1); `overlap`
    is unit -> number of shared stems, for the units sharing any."""
    out = []
    for i, shared in overlap.items():
        size = len(units[i])
        if size < MIN_STEMS or shared < MIN_STEMS:
            continue
        share = shared / min(size, len(memory))
        if share >= SHARE:
            out.append((i, share))
    return out


def cover(memory: frozenset[str], units: list[frozenset[str]], found: list[tuple[int, float]]) -> tuple[list[int], list[list[int]]]:
    """The greedy cover of `memory`'s stems by the candidates `found` (step 2): (unit indices in
    cited order, and for each the other candidates that equalled it when it was chosen)."""
    left = set(memory)
    tie = {i: (-s, len(units[i] - memory), i) for i, s in found}
    heap = [(-len(units[i] & left), *tie[i]) for i, _ in found]
    heapq.heapify(heap)
    chosen: list[int] = []
    equals: list[list[int]] = []
    while heap and left:
        i = heapq.heappop(heap)[-1]
        gain = len(units[i] & left)
        if gain == 0:
            continue
        if heap and (-gain, *tie[i]) > heap[0]:  # its gain went down: it waits its turn again
            heapq.heappush(heap, (-gain, *tie[i]))
            continue
        key = (-gain, *tie[i][:2])
        equals.append([j for j, _ in found if j != i and j not in chosen and (-len(units[j] & left), *tie[j][:2]) == key])
        chosen.append(i)
        left -= units[i]
    return chosen, equals


@dataclass(frozen=True)
class Attribution:
    """Where a memory came from: the shown units it is attributed to (in shown order), whether
    they support it (False: the unattributed fallback), and whether a choice was a tie."""

    units: list[int]
    supported: bool
    tied: bool = False  # another unit covered the memory as well at some step (the first shown was taken)
    tied_holders: bool = False  # ... and it was another holder's


@dataclass
class Shown:
    """The units a system was shown so far, in the order it was shown them, indexed by stem."""

    source_id: list[str] = field(default_factory=list)
    extent: list[dict[str, Any]] = field(default_factory=list)
    holder: list[str | None] = field(default_factory=list)
    stems: list[frozenset[str]] = field(default_factory=list)
    postings: dict[str, list[int]] = field(default_factory=dict)
    latest_judged: dict[str | None, int] = field(default_factory=dict)  # holder -> its latest unit judged by its text

    def add(self, source_id: str, extent: dict[str, Any], text: str, holder: str | None) -> None:
        i = len(self.stems)
        stems = content_stems(text)
        self.source_id.append(source_id)
        self.extent.append(extent)
        self.holder.append(holder)
        self.stems.append(stems)
        for s in stems:
            self.postings.setdefault(s, []).append(i)
        if len(stems) >= MIN_STEMS:
            self.latest_judged[holder] = i
            self.latest_judged["\x00any"] = i

    def __len__(self) -> int:
        return len(self.stems)

    def attribution(self, text: str, holder: str | None) -> Attribution:
        """The shown units `text` is attributed to (module docstring): the supporting ones, else the
        latest unit of `holder` judged by its text (step 3); no unit when nothing judged was shown."""
        memory = content_stems(text)
        if len(memory) >= MIN_STEMS:
            overlap: Counter[int] = Counter()
            for s in memory:
                overlap.update(self.postings.get(s, ()))
            chosen, equals = cover(memory, self.stems, candidates(memory, self.stems, overlap))
            if chosen:
                holders = [{self.holder[j] for j in js} - {self.holder[i]} for i, js in zip(chosen, equals, strict=True)]
                return Attribution(sorted(chosen), True, any(equals), any(holders))
        fallback = self.latest_judged.get(holder, self.latest_judged.get("\x00any"))
        return Attribution([] if fallback is None else [fallback], False)

    def supported(self, text: str) -> list[int]:
        """The supporting units the memory is attributed to (empty: none supports it)."""
        found = self.attribution(text, None)
        return found.units if found.supported else []

    def citations(self, units: list[int]) -> list[dict[str, Any]]:
        """One citation ``{source_id, extent}`` per unit."""
        return [{"source_id": self.source_id[i], "extent": self.extent[i]} for i in units]
