"""The drill-down picture of a code query (Modality.pictures, reports/dev.html): the gold
symbol's lines with line numbers and, per line, the ranks of the returned atoms whose line
range covers it (at most CODE_LINES lines shown); code text comes from the parsed segments."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from bench.modalities.code.symbols import split_lines
from bench.modalities.drawing import as_dict, elsewhere, escape, missing, same_source

CODE_LINES = 60


def code_lines_html(lines: list[str], first: int, last: int, atoms: list[tuple[int, int, int]], max_lines: int = CODE_LINES) -> str:
    """Lines first..last (1-based, inclusive) with, per line, the ranks of the atoms covering it."""
    end = min(last, first + max_lines - 1)
    rows = ["<table class=code><tr><th>line</th><th>returned at rank</th><th>gold symbol</th></tr>"]
    for n in range(first, end + 1):
        ranks = [r for r, a, b in sorted(atoms) if a <= n <= b]
        cls = " class=hitline" if ranks else ""
        text = lines[n - 1] if 0 < n <= len(lines) else ""
        rows.append(f"<tr{cls}><td class=num>{n}</td><td class=num>{', '.join(map(str, ranks))}</td>"
                    f"<td><pre>{escape(text)}</pre></td></tr>")
    rows.append("</table>")
    if end < last:
        rows.append(f"<p class=muted>… {last - end} more lines of the symbol not shown.</p>")
    return "".join(rows)


#: the code modality's region_span: (path, first line, last line) of a region, or a problem
Span = Callable[[dict, pd.DataFrame], tuple[tuple[str, int, int] | None, str | None]]


def symbol_pictures(q: dict, segments: dict[str, pd.DataFrame], region_span: Span) -> str:
    out = []
    for g in q["gold"]:
        seg = segments.get(g["source_id"])
        region = as_dict(g["region"])
        if seg is None or not region:
            out.append(missing(g["source_id"]))
            continue
        span, problem = region_span(region, seg)
        if span is None:
            out.append(f"<p class=muted>No lines: {escape(problem)}</p>")
            continue
        path, first, last = span
        text = str(seg.loc[seg["path"] == path, "text"].iloc[0])
        atoms = []
        outside = []
        other_files = []
        for a in same_source(q["top"], g["source_id"]):
            e = as_dict(a["extent"])
            if e.get("path") != path or "line_start" not in e:
                other_files.append(str(a["rank"]))
                continue
            a0, a1 = int(e["line_start"]), int(e["line_end"])
            atoms.append((a["rank"], a0, a1))
            if a1 < first or a0 > last:
                outside.append(f"rank {a['rank']}: lines {a0}–{a1}")
        out.append(f"<p class=muted><code>{escape(path)}</code> lines {first}–{last} (gold)"
                   + (f"; same file, outside the symbol: {escape('; '.join(outside))}" if outside else "")
                   + (f"; ranks in other files: {', '.join(other_files)}" if other_files else "") + "</p>")
        out.append(code_lines_html(split_lines(text), first, last, atoms))
    return "".join(out) + elsewhere(q["top"], {g["source_id"] for g in q["gold"]})
