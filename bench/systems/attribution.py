"""Attribution: provenance for a memory that cites nothing (docs/systems.md, *Attribution*).

A memory server that returns bare text (MCP's reference memory server, most products
behind MCP tools) names no source. The harness then derives the memory's provenance
itself, from what the system was *shown at or before the question* (under replay: the
events it was sent), by the support rule (bench.systems.support) and nothing else:

1. **Candidates**: the shown units judged by their text (at least ``MIN_STEMS`` content
   stems) that support the memory: ``|C(u) & C(m)| >= MIN_STEMS`` and that share is at
   least ``SHARE`` of the smaller stem set. A unit without such text is never a candidate
   (cited alone it would count as supported unjudged).
2. **Holder**: when some candidates are of the question's holder, only those stay (a
   memory about "painting" is taken to be this person's); otherwise the others stay, and
   the memory is then a leak of another holder's memory, as the leak measures count it.
3. **Fewest units**: a greedy cover of the memory's content stems: the candidate that
   covers the most stems not yet covered is cited first (ties: the larger share, then the
   unit with the fewest stems beyond the memory's, then the unit shown first), and so on
   while a candidate adds at least one stem. A verbatim turn
   is attributed to that turn alone; a summary of three turns to the turns that carry its
   words; the whole history pasted as one text to the units that carry its vocabulary.
4. **Nothing supports it**: the memory is cited to the latest unit of the question's
   holder judged by its text (else the latest shown unit so judged): that unit does not
   support it, so it is credited nothing, but the memory stays in the ranking and is
   paid its own text like every memory hit. With nothing shown at all there is nothing
   to cite (:meth:`Shown.attribute` returns no citation; the caller drops the memory).

The derived citations are then judged like any system's (bench.gold.memories):
each cited unit supports the memory by construction, so each is credited, and the memory
costs its own text (characters) under every budget measure.

Limits (measured on LoCoMo, docs/systems.md): a paraphrase that shares fewer than
``SHARE`` of its content stems with its turn is not attributed; a generic memory whose
words occur in several turns of its holder is attributed to the turns that cover it,
which may not be the one it came from.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.systems.support import MIN_STEMS, SHARE, content_stems

__all__ = ["Shown", "candidates", "cover"]


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


def cover(memory: frozenset[str], units: list[frozenset[str]], found: list[tuple[int, float]]) -> list[int]:
    """The greedy cover of `memory`'s stems by the candidates `found` (step 3): unit indices, in cited order."""
    left = set(memory)
    tie = {i: (-s, len(units[i] - memory), i) for i, s in found}
    heap = [(-len(units[i] & left), *tie[i]) for i, _ in found]
    heapq.heapify(heap)
    chosen: list[int] = []
    while heap and left:
        i = heapq.heappop(heap)[-1]
        gain = len(units[i] & left)
        if gain == 0:
            continue
        if heap and (-gain, *tie[i]) > heap[0]:  # its gain went down: it waits its turn again
            heapq.heappush(heap, (-gain, *tie[i]))
            continue
        chosen.append(i)
        left -= units[i]
    return chosen


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

    def units(self, text: str, holder: str | None) -> list[int]:
        """The shown units `text` is attributed to (module docstring), in shown order; empty
        only when nothing judged by its text was shown. The first is a non-supporting
        fallback when :meth:`supported` finds none."""
        found = self.supported(text, holder)
        if found:
            return found
        fallback = self.latest_judged.get(holder, self.latest_judged.get("\x00any"))
        return [] if fallback is None else [fallback]

    def supported(self, text: str, holder: str | None) -> list[int]:
        """Steps 1-3: the supporting units the memory is attributed to (empty: none supports it)."""
        memory = content_stems(text)
        if len(memory) < MIN_STEMS:
            return []
        overlap: Counter[int] = Counter()
        for s in memory:
            overlap.update(self.postings.get(s, ()))
        found = candidates(memory, self.stems, overlap)
        mine = [(i, s) for i, s in found if self.holder[i] == holder]
        return sorted(cover(memory, self.stems, mine or found))

    def attribute(self, text: str, holder: str | None) -> list[dict[str, Any]]:
        """The derived provenance: one citation ``{source_id, extent}`` per attributed unit."""
        return [{"source_id": self.source_id[i], "extent": self.extent[i]} for i in self.units(text, holder)]
