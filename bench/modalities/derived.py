"""Question moments fixed before gold, and the temporally unanswerable entries they make.

A memory benchmark asks each question at a moment ``as_of``. If that moment is
computed from where the gold lies (just after the session holding the latest
evidence, one second before the gold cue), ``as_of`` tells a system where to look
and whether to abstain (issue 36; docs/moments.md measures it). So every importer
here fixes its moments from the corpus alone, *before* looking at any gold, and then
asks each human question at such a moment (OVO-Bench's forward setting):

* **answerable** where every gold unit was observed at or before the moment;
* **temporally unanswerable** where none was: the human question, asked before its
  gold existed in memory, with empty gold (a *derived* entry, below);
* **dropped** where the gold was partly observed (some evidence before, some after):
  such a question is neither answerable from memory (part of its evidence is
  missing) nor clearly unanswerable (part of it is there). It is listed with a
  reason in ``bench/sets/imports/<key>.json`` (``notes.moments.dropped``). Asking it
  at a later moment instead would pick the moment from the gold, the leak this
  construction removes.

A derived entry keeps the human entry's question (verbatim), scope and split and has
empty gold, answer null, ``unanswerable: true``, query_id ``<source query_id>:<rule>``
and ``origin.item`` = ``<source item>|derived:<rule>``, so it traces to the human
annotation and a report counts derived entries by that marker. A question text that
is gold in several sources is not made unanswerable (another source, already in
memory, may answer it): such an entry is dropped when its gold lies after the moment.

Single-moment sets (COCO, TutorialVQA, MedVidQA, ScreenAgent; MMLongBench-Doc and the
code sets have one constant ``as_of`` already) ask *every* entry, answerable and
unanswerable alike, at one constant moment: ``as_of`` then carries no information
about any entry. The moment lies after a fixed share (:data:`OBSERVED_SHARE`) of the
set's sources were fully observed (:func:`moment_after`), so about a third of the
questions are asked before their source (above the spec's 15 % target).
Deterministic: no RNG, no dependence on input order.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

MARKER = "|derived:"
#: the rule of every derived entry: asked at a fixed moment, before its gold was observed
RULE = "gold-later"
#: the spec's target share of unanswerable entries, as a fraction 3/20
TARGET_NUM, TARGET_DEN = 3, 20
#: single-moment sets: the moment follows this share (numerator, denominator) of the sources, in order of observation
OBSERVED_SHARE = (2, 3)
#: the moment is this long after the last observation it follows
AFTER = timedelta(seconds=1)


def derived_item(item: str, rule: str) -> str:
    return f"{item}{MARKER}{rule}"


def is_derived(entry: dict) -> bool:
    origin = entry.get("origin")
    return isinstance(origin, dict) and MARKER in str(origin.get("item", ""))


def question_key(text: str) -> str:
    """Question text compared for repeats: trimmed, white space collapsed, case folded."""
    return re.sub(r"\s+", " ", str(text)).strip().casefold()


def repeated_questions(entries: Iterable[dict]) -> set[str]:
    """Question keys whose gold names more than one source across `entries`."""
    sources: dict[str, set[str]] = defaultdict(set)
    for e in entries:
        for g in e["gold"]:
            sources[question_key(e["question"])].add(g["source_id"])
    return {q for q, s in sources.items() if len(s) > 1}


def meets_target(n_unanswerable: int, n: int) -> bool:
    """Whether n_unanswerable / n reaches the spec's 15 % (exact, in integers)."""
    return n > 0 and n_unanswerable * TARGET_DEN >= n * TARGET_NUM


def moment_after(fully_observed: Sequence[datetime], share: tuple[int, int] = OBSERVED_SHARE) -> datetime:
    """The moment right after the first ceil(share * n) of n sources were fully observed.

    `fully_observed` holds, per source, when its last unit was observed (read from the
    corpus, never from gold). The moment is that source's time plus :data:`AFTER`.
    """
    if not fully_observed:
        raise ValueError("no sources to place a moment among")
    ordered = sorted(fully_observed)
    num, den = share
    k = max(1, min(len(ordered), -(-num * len(ordered) // den)))
    return ordered[k - 1] + AFTER


def request_order(entries: list[dict], salt: str = "request-order") -> list[dict]:
    """Entries in a salted sha256 order of their query_id: the order a set file lists them in.

    Systems are sent a set's requests in file order (and, under replay, the requests of
    one moment in a hash order of their ids, bench/systems/replay.py). Upstream order
    groups rows by source, category or image, and with them the unanswerable ones (an
    oracle reading only a request's position within its moment told unanswerable from
    answerable with AUROC 0.80-0.89 on the earlier sets, docs/moments.md); a hash order
    tells nothing.
    """
    return sorted(entries, key=lambda e: hashlib.sha256(f"{salt}\x00{e['query_id']}".encode()).hexdigest())


def derive(entry: dict, as_of: datetime, rule: str = RULE, query_id: str | None = None) -> dict:
    """The temporally unanswerable twin of a human entry, asked at `as_of`."""
    return {
        "query_id": query_id or f"{entry['query_id']}:{rule}",
        "modality": entry["modality"],
        "question": entry["question"],
        "answer": None,
        "answer_format": "none",
        "gold": [],
        "scope": dict(entry["scope"]),
        "as_of": as_of.isoformat(),
        "unanswerable": True,
        "origin": {**entry["origin"], "item": derived_item(entry["origin"]["item"], rule)},
        "split": entry["split"],
    }


def status_at(times: Sequence[datetime], moment: datetime) -> str:
    """'answerable' (every gold unit observed by `moment`), 'later' (none) or 'partial'."""
    before = sum(t <= moment for t in times)
    if before == len(times):
        return "answerable"
    return "later" if before == 0 else "partial"


def ask_at(
    entries: list[dict],
    gold_times: Callable[[dict], Sequence[datetime] | None],
    moment: datetime,
    rule: str = RULE,
) -> tuple[list[dict], dict[str, Any]]:
    """Every human entry asked at one constant `moment` (module docstring), and the notes.

    `gold_times(entry)` gives when each gold unit of an answerable entry is observed
    (None: it cannot be placed, the entry is dropped). Human unanswerable entries are
    kept, asked at the moment. Output keeps the input order.
    """
    repeated = repeated_questions(entries)
    out: list[dict] = []
    dropped: list[dict] = []
    iso = moment.isoformat()
    for e in entries:
        if e["unanswerable"]:
            out.append({**e, "as_of": iso})
            continue
        times = gold_times(e)
        status = "unplaced" if not times else status_at(times, moment)
        if status == "answerable":
            out.append({**e, "as_of": iso})
        elif status == "later" and question_key(e["question"]) not in repeated:
            out.append(derive(e, moment, rule))
        else:
            dropped.append({"item": e["origin"]["item"], "reason": DROP_REASONS[status]})
    return out, moment_notes(entries, out, dropped, iso, rule)


DROP_REASONS = {
    "partial": "gold partly observed before the moment (some evidence before it, some after)",
    "later": "gold after the moment, but the question text is gold in more than one source",
    "unplaced": "gold has no observation time in the corpus",
}


def moment_notes(source: list[dict], out: list[dict], dropped: list[dict], moment: str, rule: str) -> dict[str, Any]:
    splits = sorted({e["split"] for e in source})
    return {
        "moment": moment,
        "rule": rule,
        "source_entries": len(source),
        "entries": {s: sum(e["split"] == s for e in out) for s in splits},
        "unanswerable": {s: sum(e["split"] == s and e["unanswerable"] for e in out) for s in splits},
        "derived": {s: sum(e["split"] == s and is_derived(e) for e in out) for s in splits},
        "meets_target": {s: meets_target(sum(e["split"] == s and e["unanswerable"] for e in out),
                                         sum(e["split"] == s for e in out)) for s in splits},
        "dropped_by_reason": dict(sorted(Counter(d["reason"] for d in dropped).items())),
        "dropped": dropped,
    }
