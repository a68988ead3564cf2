#!/usr/bin/env python3
"""A consolidating memory, written without an LLM: it watches the stream and writes its own memories.

Pure Python standard library, no harness import. It asks for replay (docs/systems.md,
*Replay*): it is given no atoms, only the corpus as events in time order, and it answers
with memory hits that cite where each memory came from (*Memory hits*). Two kinds of memory:

* **episodes** -- consecutive units of one source (turns of a session, pages, cues, ...)
  merged while they hold together: an episode closes after ``EPISODE_UNITS`` units, or when
  a new unit shares no content word with it. Its text is its units' text, verbatim (a turn
  keeps its "Speaker: ..." prefix); its provenance is one citation of the range it spans.
* **facts** -- per holder and topic word (a capitalised word inside a sentence: a place,
  a name, a brand; not a speaker's name), the latest ``FACT_UNITS`` units that mention it,
  across sessions, once at least two do ("LGBTQ: [8 May 2023] ... [25 May 2023] ...").
  Its text is those units, verbatim, each after its date; its provenance cites each unit
  separately, so a fact drawn from turn 3 of session 1 and turn 17 of session 4 cites
  exactly those two.

The provenance is honest by construction: every cited unit's text is in the memory's
text, so the harness's support rule (bench/systems/credit/support.py) credits all of it.

Search: BM25 (k1 1.2, b 0.75) over the memories of the query's holder (it is only ever
shown the past, so nothing after ``as_of`` exists yet); ties by memory id.

Run by the harness as a command system (sandboxed; no ``{atoms}`` on its command line)::

    system: {name: consolidating, adapter: command, entry: "{python} examples/consolidating_memory.py"}

or in process with the python adapter (``entry: examples.consolidating_memory:build``).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

EPISODE_UNITS = 4
FACT_UNITS = 6
K1, B = 1.2, 0.75
WORD = re.compile(r"\w\w+")
TOPIC = re.compile(r"(?<=[a-z,;:] )([A-Z][A-Za-z]{2,})")
SPEAKER = re.compile(r"^([A-Z][A-Za-z]+): ")
STOP = frozenset(
    "a about after again all also am an and any are as at be because been before being but by can could did do does doing "
    "down for from had has have having he her here hers him his how i if in into is it its just me more most my no nor not "
    "now of off on once only or other our out over own same she should so some such than that the their them then there "
    "these they this those through to too under until up very was we were what when where which while who whom why will "
    "with would you your yours yeah oh hey hi wow really so".split())


def words(text: str) -> list[str]:
    return [w for w in WORD.findall(text.lower()) if w not in STOP]


class ConsolidatingMemory:
    """The system: observe(event) consolidates, search(query) ranks the holder's memories."""

    replay = True  # the harness builds it with no atoms and sends it the stream
    name = "consolidating-memory"

    def __init__(self, atoms: Any = None) -> None:
        self.memories: dict[str, dict[str, Any]] = {}  # memory_id -> holder, text, provenance, source
        self.by_holder: dict[str, set[str]] = defaultdict(set)
        self.open: dict[str, dict[str, Any]] = {}  # source_id -> its open episode
        self.topics: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)  # (holder, topic) -> units
        self.tf: dict[str, Counter[str]] = {}
        self.df: Counter[str] = Counter()
        self.postings: dict[str, set[str]] = defaultdict(set)
        self.seq = 0
        self.speakers: set[str] = set()  # "Name: ..." prefixes seen: names are no topic

    # -- writing memories ------------------------------------------------------------
    def _store(self, memory_id: str, holder: str, text: str, provenance: list[dict]) -> None:
        old = self.tf.get(memory_id)
        if old is not None:
            for w in old:
                self.df[w] -= 1
                self.postings[w].discard(memory_id)
        tf = Counter(words(text))
        for w in tf:
            self.df[w] += 1
            self.postings[w].add(memory_id)
        self.tf[memory_id] = tf
        self.memories[memory_id] = {"holder": holder, "text": text, "provenance": provenance, "length": sum(tf.values())}
        self.by_holder[holder].add(memory_id)

    def observe(self, event: dict[str, Any]) -> None:
        sid, holder, text = event["source_id"], event["holder"], event["text"] or ""
        unit = {"text": text, "extent": event["extent"], "day": datetime.fromisoformat(event["observed_at"]).strftime("%-d %B %Y")}
        episode = self.open.get(sid)
        fresh = set(words(text))
        if episode is None or len(episode["units"]) >= EPISODE_UNITS or (len(episode["units"]) > 1 and not fresh & episode["words"]):
            self.seq += 1
            episode = {"id": f"ep{self.seq}", "units": [], "words": set()}
            self.open[sid] = episode
        episode["units"].append(unit)
        episode["words"] |= fresh
        self._store(episode["id"], holder, "\n".join(u["text"] for u in episode["units"] if u["text"]) or "(no text)",
                    [{"source_id": sid, "extent": e} for e in spans(episode["units"])])
        if m := SPEAKER.match(text):
            self.speakers.add(m.group(1))
        for topic in sorted(set(TOPIC.findall(text)) - self.speakers):
            units = self.topics[(holder, topic)]
            units.append({**unit, "source_id": sid})
            del units[:-FACT_UNITS]  # a fact keeps its latest mentions
            if len(units) >= 2:
                self._store(f"fact:{holder}:{topic}", holder, f"{topic}:\n" + "\n".join(f"[{u['day']}] {u['text']}" for u in units),
                            [{"source_id": u["source_id"], "extent": u["extent"]} for u in units])

    # -- answering -------------------------------------------------------------------
    def search(self, query: Any) -> list[dict[str, Any]]:
        question, holder, k = (query["question"], query["scope"]["holder"], query["k"]) if isinstance(query, dict) else (
            query.question, query.holder, query.k)
        mine = self.by_holder.get(holder, set())
        if not mine:
            return []
        n = len(mine)
        avg = sum(self.memories[m]["length"] for m in mine) / n
        scores: dict[str, float] = defaultdict(float)
        for w in sorted(set(words(question))):
            hits = self.postings.get(w, set()) & mine
            if not hits:
                continue
            idf = math.log(1 + (n - len(hits) + 0.5) / (len(hits) + 0.5))
            for m in hits:
                tf = self.tf[m][w]
                scores[m] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * self.memories[m]["length"] / max(avg, 1e-9)))
        ranked = sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:k]
        return [{"memory_id": m, "score": s, "text": self.memories[m]["text"], "provenance": self.memories[m]["provenance"]}
                for m, s in ranked]


def spans(units: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The citations of a run of consecutive units of one source: one range where the
    modality's extent terms have ranges (turns, pages, a time window), else one per unit."""
    first, last = units[0]["extent"], units[-1]["extent"]
    if len(units) == 1:
        return [first]
    if "turn" in first:
        return [{"turn_start": first["turn"], "turn_end": last["turn"]}]
    if "page" in first:
        return [{"page_start": first["page"], "page_end": last["page"]}]
    if "t_start" in first:
        return [{"t_start": first["t_start"], "t_end": max(u["extent"]["t_end"] for u in units)}]
    return [u["extent"] for u in units]  # code files: each file its own citation


def build(atoms: Any = None) -> ConsolidatingMemory:
    """The python adapter's factory (called with no atoms: replay)."""
    return ConsolidatingMemory(atoms)


build.replay = True  # type: ignore[attr-defined]


def main() -> int:
    system = ConsolidatingMemory()
    print(json.dumps({"ready": True, "replay": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if "observe" in request:
            system.observe(request["observe"])
            reply: dict[str, Any] = {"event": request["observe"]["event"], "ok": True}
        else:
            reply = {"id": request["id"], "hits": system.search(request)}
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
