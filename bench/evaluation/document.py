"""The dev.json document: the contract's keys first (per modality and overall, each measure's
cell with its n and denominator; the invalid entries and why), then the hashes of what was read
and what the run was. The evaluate stage writes it; the reports, compare and the gate read it."""

from __future__ import annotations

from typing import Any


def metrics_document(
    aggregated: dict[str, Any],
    invalid: list[dict],
    sha256: dict[str, Any],
    run_info: dict[str, Any],
) -> dict[str, Any]:
    """dev.json: the contract keys first, then what the run was."""
    reasons: dict[str, int] = {}
    for row in invalid:
        kind = row["reason"].split(": ")[0]
        reasons[kind] = reasons.get(kind, 0) + 1
    return {
        "by_modality": aggregated["by_modality"],
        "overall": aggregated["overall"],
        "invalid_entries": len(invalid),
        "invalid_by_reason": dict(sorted(reasons.items())),
        "sha256": sha256,
        "run": run_info,
    }
