"""Writing annotation sets produced by importers (bench/sets/<key>.jsonl)."""

from __future__ import annotations

from pathlib import Path

from bench.io import sha256_file, write_json, write_jsonl
from bench.modalities.base import Dataset, ImportResult


def write_set(ds: Dataset, result: ImportResult, sets_dir: Path) -> Path:
    """Write the set and its import record; identical inputs give identical bytes."""
    out = sets_dir / f"{ds.key}.jsonl"
    write_jsonl(out, result.entries)
    splits: dict[str, int] = {}
    for e in result.entries:
        splits[e["split"]] = splits.get(e["split"], 0) + 1
    reasons: dict[str, int] = {}
    for x in result.excluded:
        kind = x["reason"].split(": ")[0]
        reasons[kind] = reasons.get(kind, 0) + 1
    write_json(
        sets_dir / "imports" / f"{ds.key}.json",
        {
            "dataset": ds.name,
            "revision": ds.revision,
            "set": f"bench/sets/{ds.key}.jsonl",
            "set_sha256": sha256_file(out),
            "entries": len(result.entries),
            "by_split": dict(sorted(splits.items())),
            "unanswerable": sum(1 for e in result.entries if e["unanswerable"]),
            "excluded": len(result.excluded),
            "excluded_by_reason": dict(sorted(reasons.items())),
            "excluded_rows": result.excluded,
            "notes": result.notes,
        },
    )
    return out
