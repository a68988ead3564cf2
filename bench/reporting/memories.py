"""dev.md's sections on a replayed run and on memory hits (docs/systems.md, *Replay*, *Memory hits*)."""

from __future__ import annotations

import html
import re
from typing import Any

__all__ = ["memory_html", "memory_sections", "replay_section", "memories_section"]


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
    return [*out, "", *facts_lines(replay)]


def facts_lines(replay: dict[str, Any]) -> list[str]:
    """Empty at start, time until searchable, and what an MCP server's answers held (bench.systems.replayed, mcp)."""
    out = []
    start = replay.get("start_empty")
    if start is not None:
        if not start.get("checked"):
            out.append(f"**Empty at start: not checked** — the search before the first event failed: {start.get('reason')}.")
        elif start.get("empty"):
            out.append(f"**Empty at start: yes** — a search before the first event (`{start.get('question')}`) handed over nothing.")
        else:
            out.append(f"**NOT EMPTY AT START** — a search before the first event (`{start.get('question')}`) handed over "
                       f"{start.get('returned')} hits: the system held memories it was never sent, and its results may rest on them.")
    found = replay.get("searchable")
    if found is not None:
        if not found.get("every"):
            out.append("Time until an observed fact is searchable: **not measured** (system.probe_every is 0).")
        else:
            out.append(f"Time until an observed fact is searchable: p50 {_ms(found.get('p50_ms'))} ms, p95 {_ms(found.get('p95_ms'))} ms "
                       f"over {found.get('found')} of {found.get('probes')} probes (one every {found['every']} events, for the event's "
                       f"rarest words); {found.get('not_found')} not found within {found.get('wait_s')} s.")
    mem = replay.get("memories")
    if mem is not None:
        out.append(f"Memories the server returned: {mem.get('returned', 0)} — cited {mem.get('cited', 0)}, attributed "
                   f"{mem.get('attributed', 0)}, unattributed (no sent unit supports them) {mem.get('unattributed', 0)}, left out "
                   f"(returned before any unit was sent) {mem.get('left_out', 0)}; attributed on a tie {mem.get('tied', 0)} "
                   f"(between holders {mem.get('tied_holders', 0)}: the unit sent first was taken, never the asker's).")
    scores = replay.get("scores")
    if scores in ("rank", "own and rank"):
        out.append(f"Scores: **{'none' if scores == 'rank' else 'not on every answer'}** from the server "
                   f"({replay.get('answers_rank_scores', 0)} answers ranked in its order, scored 1/rank): every such answer's top "
                   "memory scores 1, so the calibrated false recall reads no confidence and is **not measurable** unless the "
                   "system abstains; recall, MRR and nDCG read ranks only.")
    return [line for x in out for line in (x, "")]


def memories_section(doc: dict[str, Any]) -> list[str]:
    """The memory hits per modality: citations, their support, what memories cost ([] without memory hits)."""
    block = doc.get("memories")
    if not block:
        return []
    k = (doc.get("run") or {}).get("k", 10)
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
    return [*out, "", *handed_over(block, k)]


def handed_over(block: dict[str, Any], k: int) -> list[str]:
    """What the run handed over, by where each memory's provenance came from, and recall@k by each kind."""
    if not any("by_kind" in row for row in block.values()):
        return []
    out = ["What the run handed over, by where each memory's provenance came from: **cited** (its own citations), **attributed** "
           "(none of its own: attributed by the harness to the sent units that support it), **unattributed** (no sent unit "
           f"supports it: credited nothing). recall@{k} by a kind counts the regions its memories find alone (a region found by "
           "two kinds counts in both).", "",
           f"| modality | kind | memory hits | memories | recall@{k} by them | n / denominator |", "|---|---|---:|---:|---:|---:|"]
    for modality, row in block.items():
        for kind, part in (row.get("by_kind") or {}).items():
            rec = part.get(f"recall@{k}") or {}
            value = "—" if rec.get("value") is None else f"{rec['value']:.4f}"
            out.append(f"| {modality} | {kind} | {part['memory_hits']} | {part['memories']} | {value} | "
                       f"{rec.get('n', '—')} / {rec.get('denominator', '—')} |")
    return [*out, ""]


def memory_sections(doc: dict[str, Any]) -> list[str]:
    return [*replay_section(doc.get("run") or {}), *memories_section(doc)]


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def memory_html(doc: dict[str, Any]) -> str:
    """dev.html's replay and memory sections: dev.md's (:func:`memory_sections`) as HTML."""
    out: list[str] = []
    rows: list[list[str]] = []
    for line in [*memory_sections(doc), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-:") for c in cells):
                rows.append(cells)
            continue
        if rows:
            head, *body = rows
            out.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>" + "".join(
                "<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in body) + "</table>")
            rows = []
        if line.startswith("## "):
            out.append(f"<h2>{_inline(line[3:])}</h2>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    return "\n".join(out)
