"""Small data-set selections for the end-to-end system tests: a reproduced project's set files cut to
the dev entries of a few LoCoMo conversations and MMLongBench documents (every test entry kept, so
the split lock is unchanged). The corpus, and so the atoms a system serves, stays whole: a system
that leaked another conversation or document into its answers is still caught."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path


def group_of(entry: dict) -> str:
    """What an entry asks about: its LoCoMo conversation (the holder) or its MMLongBench document."""
    return entry["scope"]["holder"] if entry["modality"] == "conversation" else entry["query_id"].rsplit(":", 1)[0]


def dev_groups(work: Path, key: str) -> list[str]:
    """The groups of data set `key` that have dev entries in `work`'s set file, in name order."""
    lines = (work / "bench" / "sets" / f"{key}.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted({group_of(e) for e in map(json.loads, filter(str.strip, lines)) if e["split"] == "dev"})


def cut_dev(work: Path, key: str, keep: Callable[[str], bool]) -> int:
    """Drop from `work`'s set file of `key` the dev entries whose group `keep` refuses; returns the dev
    entries kept. Lines are kept verbatim (the set file's own order and text)."""
    path = work / "bench" / "sets" / f"{key}.jsonl"
    kept, dev = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        if entry["split"] == "dev":
            if not keep(group_of(entry)):
                continue
            dev += 1
        kept.append(line + "\n")
    path.write_text("".join(kept), encoding="utf-8")
    return dev
