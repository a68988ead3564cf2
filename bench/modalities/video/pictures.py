"""The drill-down picture of a video query (Modality.pictures, reports/dev.html): an inline
SVG timeline of the video's length (end of its last cue, from the parsed segments) with the
gold span green and the top-k atoms of that video red, numbered by rank."""

from __future__ import annotations

import pandas as pd

from bench.modalities.drawing import GREEN, RED, as_dict, elsewhere, escape, same_source


def timeline_svg(duration: float, gold: list[tuple[float, float]], atoms: list[tuple[int, float, float]],
                 width: int = 640) -> str:
    """A strip of the video's length: gold spans green, atom spans red (one lane each, rank at the left)."""
    duration = max([duration, *(t1 for _, t1 in gold), *(t1 for _, _, t1 in atoms), 1e-9])
    pad, lane, top = 28, 11, 18
    inner = width - 2 * pad
    height = top + 14 + lane * max(1, len(atoms)) + 18

    def x(t: float) -> float:
        return pad + inner * max(0.0, min(t, duration)) / duration

    parts = [(f"<svg class='timeline' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
              f"viewBox='0 0 {width} {height}' role='img' aria-label='timeline'>"),
             f"<rect x='{pad}' y='{top}' width='{inner}' height='10' fill='#eee' stroke='#999'/>"]
    for t0, t1 in gold:
        parts.append(f"<rect class='gold' x='{x(t0):.1f}' y='{top - 4}' width='{max(2.0, x(t1) - x(t0)):.1f}' "
                     f"height='{height - top - 14}' fill='rgb{GREEN}' fill-opacity='0.25' stroke='rgb{GREEN}'/>")
    for i, (rank, t0, t1) in enumerate(sorted(atoms)):
        y = top + 14 + i * lane
        parts.append(f"<rect class='atom' x='{x(t0):.1f}' y='{y}' width='{max(2.0, x(t1) - x(t0)):.1f}' height='{lane - 3}' "
                     f"fill='rgb{RED}'><title>rank {rank}: {t0:.2f}–{t1:.2f} s</title></rect>"
                     f"<text x='{pad - 4}' y='{y + lane - 4}' font-size='9' text-anchor='end' fill='rgb{RED}'>{rank}</text>")
    parts.append(f"<text x='{pad}' y='12' font-size='10'>0 s</text>"
                 f"<text x='{width - pad}' y='12' font-size='10' text-anchor='end'>{duration:.1f} s</text>"
                 f"<text x='{pad}' y='{height - 4}' font-size='10' fill='#555'>green: gold span; red: top-k atoms of this video by rank</text>")
    parts.append("</svg>")
    return "".join(parts)


def timeline_pictures(q: dict, segments: dict[str, pd.DataFrame]) -> str:
    out = []
    for source_id in dict.fromkeys(g["source_id"] for g in q["gold"]):
        seg = segments.get(source_id)
        duration = float(seg["t_end"].max()) if seg is not None and "t_end" in seg and len(seg) else 0.0
        gold = [(float(r["t_start"]), float(r["t_end"])) for g in q["gold"] if g["source_id"] == source_id
                if (r := as_dict(g["region"])) and "t_start" in r]
        atoms = [(a["rank"], float(e["t_start"]), float(e["t_end"])) for a in same_source(q["top"], source_id)
                 if (e := as_dict(a["extent"])) and "t_start" in e]
        out.append(f"<p class=muted><code>{escape(source_id)}</code></p>" + timeline_svg(duration, gold, atoms))
    return "".join(out) + elsewhere(q["top"], {g["source_id"] for g in q["gold"]})
