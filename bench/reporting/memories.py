"""dev.md's sections on a replayed run and on memory hits (docs/systems.md, *Replay*, *Memory hits*)."""

from __future__ import annotations

from typing import Any

__all__ = ["memory_sections", "replay_section", "memories_section"]


def _ms(value: Any) -> str:
    return "—" if value is None else f"{value:.2f}"


def replay_section(run: dict[str, Any]) -> list[str]:
    """How a replayed system was shown the corpus, and its ingest time per modality ([] when not replayed)."""
    replay = run.get("replay")
    if not replay:
        return []
    out = [
        "## Replay",
        "",
        f"The system was shown the corpus as a stream: {replay.get('events', 0)} events (one per turn, page, cue, file, screenshot "
        "or photo) in `observed_at` order, each query sent after every event observed at or before its `as_of` and before any "
        "later one. **Its temporal correctness is 1.0 by construction** for what it was sent: the measure can only catch it "
        "naming what it was never shown (a guessed id, a citation of a region not yet sent); it is not an achievement.",
        "",
        "Ingest time per event (send, the system's work, its acknowledgement), apart from the queries' compile latency above:",
        "",
        "| modality | events | p50 ms | p95 ms |",
        "|---|---:|---:|---:|",
    ]
    for modality, row in (replay.get("ingest_ms") or {}).items():
        out.append(f"| {modality} | {row.get('n', 0)} | {_ms(row.get('p50_ms'))} | {_ms(row.get('p95_ms'))} |")
    return [*out, ""]


def memories_section(doc: dict[str, Any]) -> list[str]:
    """The memory hits per modality: citations, their support, what memories cost ([] without memory hits)."""
    block = doc.get("memories")
    if not block:
        return []
    k = doc["run"]["k"]
    out = [
        "## Memory hits (gold by provenance)",
        "",
        "A memory hit finds a gold region when a credited unit it cites overlaps the region (the modality's overlap rule). "
        "Each cited unit (turn, page, line, cue, OCR box) is supported when the memory's text holds most of the smaller of "
        "the two content-word sets (docs/systems.md, *Support*); a memory with fewer than half of its judged units supported "
        "is credited with its best-supported unit alone. A citation is supported when one of its units is. A memory costs "
        "its own text (characters) where the question's modality counts characters (elsewhere the extent and budget measures "
        "leave it out); its cited units are shown beside.",
        "",
        f"| modality | memory hits | in top {k} | memories | citations | supported | unsupported | units | supported units "
        "| credited units | no supported citation | median chars | median units |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for modality, row in block.items():
        none = row["no_supported_citation"]
        share = "—" if none["value"] is None else f"{none['value']:.3f} ({none['n']}/{none['denominator']})"
        out.append(f"| {modality} | {row['memory_hits']} | {row[f'memory_hits_top_{k}']} | {row['memories']} | {row['citations']} "
                   f"| {row['supported']} | {row['unsupported']} | {row['units']} | {row['units_supported']} | {row['units_credited']} "
                   f"| {share} | {_ms(row['text_chars_p50'])} | {_ms(row['units_p50'])} |")
    return [*out, ""]


def memory_sections(doc: dict[str, Any]) -> list[str]:
    return [*replay_section(doc["run"]), *memories_section(doc)]
