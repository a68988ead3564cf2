"""Temporally unanswerable entries derived from human gold and real timestamps.

A derived entry is a human question asked at a moment *before* its human-annotated
gold was observed, so a memory cannot hold the answer yet (the construction of
OVO-Bench's forward tasks, and of the LoCoMo replay). It keeps the source entry's
question (verbatim), scope and split, and has empty gold, answer null,
``unanswerable: true``, its own ``as_of`` and query_id ``<source query_id>:<rule>``.
``origin`` keeps the spec's four fields; ``origin.item`` names both the source item
and the rule: ``"<source item>|derived:<rule>"``, so the entry traces to the human
annotation and a report can count derived entries by that marker.

Which source entries may be derived from (each data set module decides, and lists the
others with a reason in ``bench/sets/imports/<key>.json`` under
``notes.derived_unanswerable``):

* the question text (trimmed, case and white space folded) is gold in exactly one
  source: a text that is gold in several sources could be answered from another
  source that is already in memory;
* a moment before the gold is observed exists (data set rule, e.g. the gold window
  does not begin in the first seconds of a video).

Share: per split, of the eligible source entries the first ``needed(n)`` in a salted
sha256 order of their query_id are derived, where n is the split's count of source
entries and needed(n) = ceil(n * 3 / 17) is the least count that makes derived
entries >= 15 % of the split (d / (n + d) >= 0.15, the spec's target). Deterministic:
no RNG, no dependence on input order.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

MARKER = "|derived:"
#: the spec's target share of unanswerable entries, as a fraction 3/20
TARGET_NUM, TARGET_DEN = 3, 20


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


def needed(n_source: int) -> int:
    """Least d with d / (n_source + d) >= 15 %."""
    num = TARGET_NUM * n_source
    den = TARGET_DEN - TARGET_NUM
    return -(-num // den)


def derive(entry: dict, as_of: datetime, rule: str) -> dict:
    """The unanswerable twin of a human entry, asked at `as_of`."""
    return {
        "query_id": f"{entry['query_id']}:{rule}",
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


def derive_subset(
    entries: list[dict],
    moment: Callable[[dict], tuple[datetime | None, str | None]],
    rule: str,
    salt: str,
) -> tuple[list[dict], dict[str, Any]]:
    """Derived entries for a deterministic subset of `entries`, and the notes to record.

    `moment(entry)` gives the derived as_of, or (None, reason) when the entry has no
    honest moment before its gold. Entries whose question is gold in several sources
    are left out here. Returns the derived entries (in source order) and notes with
    counts and every left-out source entry with its reason.
    """
    repeated = repeated_questions(entries)
    eligible: dict[str, list[tuple[dict, datetime]]] = defaultdict(list)
    left_out: list[dict] = []
    n_by_split: dict[str, int] = defaultdict(int)
    for e in entries:
        n_by_split[e["split"]] += 1
        item = derived_item(e["origin"]["item"], rule)
        if question_key(e["question"]) in repeated:
            left_out.append({"item": item, "reason": "question text is gold in more than one source"})
            continue
        when, reason = moment(e)
        if when is None:
            left_out.append({"item": item, "reason": str(reason)})
            continue
        eligible[e["split"]].append((e, when))
    chosen: set[str] = set()
    for split, cands in eligible.items():
        order = sorted(cands, key=lambda c: hashlib.sha256(f"{salt}\x00{c[0]['query_id']}".encode()).hexdigest())
        chosen.update(c[0]["query_id"] for c in order[: needed(n_by_split[split])])
    out = [derive(e, when, rule) for split in sorted(eligible) for e, when in eligible[split] if e["query_id"] in chosen]
    position = {e["query_id"]: i for i, e in enumerate(entries)}
    out.sort(key=lambda d: position[d["query_id"][: -len(rule) - 1]])
    reasons: dict[str, int] = defaultdict(int)
    for x in left_out:
        reasons[x["reason"]] += 1
    notes = {
        "rule": rule,
        "source_entries": len(entries),
        "eligible": sum(len(c) for c in eligible.values()),
        "derived": len(out),
        "derived_by_split": {s: sum(d["split"] == s for d in out) for s in sorted(n_by_split)},
        "not_eligible_by_reason": dict(sorted(reasons.items())),
        "not_eligible": left_out,
    }
    return out, notes
