"""The leaderboard as people read it: Markdown (ready to paste into a pull-request
comment) and a self-contained HTML page, both leading with the decision.

Order: the ranked table (rank with its interval, a label naming only what differs from the
baseline, the leaderboard's primary measure -- the one it ranks by -- with its interval, the
frontier's cost per modality, latency, the verdict against the baseline, ◆), what the
numbers mean, then (the page) one picture per modality of the frontier's quality against
its cost with the line through the table's ◆ runs (bench.reporting.leaderboard_figures;
overall latency only when runs differ beyond the latency floor: below it latency is noise),
then each group's full table and its differences from the baseline, the minimum detectable
effects, and last the runs' full parameter strings. Input:
bench.comparison.leaderboard.leaderboard's result."""

from __future__ import annotations

import html
from typing import Any

from bench.numbers import number, p_value

__all__ = ["change_label", "markdown", "page", "page_name", "parse_labels", "ranked_lines", "runs_html", "short_labels"]

MARK_BETTER, MARK_WORSE, FRONTIER = "▲", "▼", "◆"


def _metrics(board: dict[str, Any]) -> list[str]:
    rows = board["groups"][0]["rows"] if board["groups"] else []
    return list(rows[0]["values"]) if rows else []


def _cart(board: dict[str, Any]) -> str:
    return f"cartridge_p50@{board['k']}"


def _rank(row: dict[str, Any]) -> str:
    if "rank" not in row:
        return "—"
    lo, hi = row["rank_ci95"]
    return f"{row['rank']} [{lo}, {hi}]"


def _packed(board: dict[str, Any]) -> str | None:
    """The frontier's cost column when it is not cartridge@k (already shown): what the budget packs."""
    cost = board.get("cost") or {}
    return cost.get("name") if cost.get("packed") else None


def _frontier_lines(board: dict[str, Any]) -> list[str]:
    cost = board.get("cost") or {}
    name = cost.get("name", _cart(board))
    quality = board.get("quality", board.get("frontier_quality", "recall@budget"))
    measured = f"{quality} and {name}" if cost.get("packed") else quality
    out = [f"- {FRONTIER}: on the Pareto frontier of quality against cost ({quality} higher; {name} and latency p50 lower; "
           "overall, each modality's cost is an axis of its own), differences within noise being ties: "
           f"{measured} when the {1 - board['alpha']:.0%} paired bootstrap interval of the two runs' difference holds 0 or fewer "
           f"clusters differ than the sign-flip test needs at alpha {board['alpha']:g}, latency p50 within "
           f"{board.get('latency_floor_ms', 5):g} ms. ≈: the runs a run ties with on every axis; below: the runs that dominate it."]
    if cost.get("note"):
        out.append(f"- Cost: {cost['note']}.")
    by_text: dict[str, list[str]] = {}
    for label, text in (board.get("sets") or {}).items():
        by_text.setdefault(text, []).append(label)
    if by_text:
        out.append("- Set files against the baseline: " + ("; ".join(
            text + ("" if len(by_text) == 1 else f" ({', '.join(labels)})") for text, labels in by_text.items())) + ".")
    return out


def _frontier(row: dict[str, Any]) -> str:
    """The frontier cell: ◆ and the runs tied with it, or the runs that dominate it."""
    def names(xs: list[str]) -> str:
        return ", ".join(xs[:3]) + (f" +{len(xs) - 3}" if len(xs) > 3 else "")

    if row.get("frontier"):
        return FRONTIER + (f" ≈ {names(row['tied_with'])}" if row.get("tied_with") else "")
    return f"below {names(row['dominated_by'])}" if row.get("dominated_by") else ""


def _changed(changed: dict[str, Any]) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in changed.items()) or "—"


def _diff(d: dict[str, Any] | None, higher: bool = True) -> str:
    if d is None:
        return "—"
    lo, hi = d["ci95"]
    mark = ""
    if d.get("significant"):
        mark = " " + (MARK_BETTER if (d["diff"] > 0) == d["higher_is_better"] else MARK_WORSE)
    ci = "" if lo is None else f" [{lo:+.4f}, {hi:+.4f}]"
    return f"{number(d['diff'], sign=True)}{ci} p_holm {p_value(d.get('p_holm'))}{mark}"


def change_label(changed: dict[str, Any]) -> str:
    """What a run changes from the baseline, short: ``chunking.<m>.strategy`` as ``<m>=<strategy>``,
    its other ``chunking.<m>.*`` options in brackets after it (``<m>=window(window_turns=3)``),
    any other key as ``key=value``; "same params" when nothing differs."""
    parts: dict[str, list[str]] = {}
    heads: dict[str, str] = {}
    other = []
    for key, value in changed.items():
        bits = key.split(".")
        if len(bits) == 3 and bits[0] == "chunking":
            if bits[2] == "strategy":
                heads[bits[1]] = f"={value}"
            else:
                parts.setdefault(bits[1], []).append(f"{bits[2]}={value}")
        else:
            other.append(f"{key}={value}")
    mods = sorted(set(heads) | set(parts))
    out = [m + heads.get(m, "") + (f"({','.join(parts[m])})" if m in parts else "") for m in mods] + other
    return ", ".join(out) or "same params"


def _primary(row: dict[str, Any], rank_by: str) -> str:
    """The ranked measure's value with its 95% interval (the row's ``primary``, else its value alone)."""
    p = row.get("primary") or {}
    lo, hi = (p.get("ci95") or [None, None])
    value = p.get("value", row["values"].get(rank_by))
    return number(value) + ("" if lo is None else f" [{number(lo)}, {number(hi)}]")


def _verdict(board: dict[str, Any], overall: dict[str, Any], run: str) -> str:
    """The ranked measure against the baseline: its difference, interval, Holm-corrected p and verdict."""
    if run == board["baseline"]:
        return "(baseline)"
    d = next((d for d in overall["diffs"] if d["run"] == run and d["metric"] == board["rank_by"]), None)
    if d is None:
        return "—"
    word = "not significant" if not d.get("significant") else "better" if (d["diff"] > 0) == d["higher_is_better"] else "worse"
    return f"**{word}** {_diff(d)}"


def ranked_rows(board: dict[str, Any]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The decision, every run ranked overall: the header and (run label, cells) per row."""
    groups = {g["group"]: g for g in board["groups"]}
    overall = groups.get("overall") or board["groups"][-1]
    modal = [g for g in board["groups"] if g is not overall]
    changes = {r["label"]: r.get("changed") or {} for r in board["runs"]}
    cost = (board.get("cost") or {}).get("name", _cart(board))
    units = {m: (c or {}).get("unit", "") for m, c in (board.get("budget") or {}).items()}
    head = ["rank (95%)", "run: what differs from the baseline", f"{board['rank_by']} (95% CI)", cost, "latency p50 (ms)",
            f"{board['rank_by']} against {board['baseline']}", "frontier"]
    rows = []
    for i, row in sorted(enumerate(overall["rows"]), key=lambda x: (x[1].get("rank", 10**9), x[1]["run"])):
        label = "baseline" if row["run"] == board["baseline"] else change_label(changes.get(row["run"], {}))
        costs = ", ".join(f"{g['group']} {number(g['rows'][i].get('cost'), 0)} {units.get(g['group'], '')}".rstrip() for g in modal)
        rows.append((row["run"], [_rank(row), f"**{label}** ({row['run']})", _primary(row, board["rank_by"]), costs or "—",
                                  number(row["latency_p50_ms"], 1), _verdict(board, overall, row["run"]), _frontier(row)]))
    return head, rows


def ranked_lines(board: dict[str, Any]) -> list[str]:
    """:func:`ranked_rows` as a Markdown table."""
    head, rows = ranked_rows(board)
    return ["| " + " | ".join(head) + " |", "|---|---|---:|---|---:|---|---|", *("| " + " | ".join(cells) + " |" for _, cells in rows)]


def _head(board: dict[str, Any]) -> list[str]:
    n_diffs = max((len(g["diffs"]) for g in board["groups"]), default=0)
    budget = board.get("budget") or {}
    budgets = ", ".join(f"{m} {'—' if c.get('amount') is None else format(c['amount'], ',g')} {c.get('unit', '')}"
                        for m, c in sorted(budget.items())) or "not recorded"
    left = ", ".join(f"{label}: {n}" for label, n in board["queries"]["left_out"].items() if n) or "none"
    return [
        f"- On the {board['queries']['common']} queries every run holds (left out: {left}); budgets: {budgets}.",
        f"- Rank by {board['rank_by']} with its 95% bootstrap interval ({board['resamples']} resamples of "
        f"{(board.get('clusters') or {}).get('over', 'queries')}, seed "
        f"{board['seed']}; each resample ranks every run, rank 1 the best): runs whose intervals overlap are tied.",
        *_frontier_lines(board),
        f"- Differences: run − baseline with a 95% paired bootstrap interval; p = two-sided paired randomization test "
        f"({board['permutations']} sign flips), p_holm Holm-corrected over each table's {n_diffs} differences (runs × "
        f"metrics); {MARK_BETTER}/{MARK_WORSE} significantly better/worse (p_holm < {board['alpha']}).",
        "",
    ]


def group_lines(board: dict[str, Any]) -> list[str]:
    """Each group's full table (values, costs, rank, frontier) and its differences from the baseline."""
    metrics, cart = _metrics(board), _cart(board)
    out = []
    for g in board["groups"]:
        first = next((d for d in g["diffs"] if d["metric"] == metrics[0]), None) if metrics else None
        packed = _packed(board)
        out += [f"## {g['group']}" + (f" (n = {first['n']} entries, {first.get('clusters', first['n'])} clusters)" if first else ""), "",
                "| rank (95%) | run | " + " | ".join(metrics) + f" | latency p50 (ms) | {cart} | " + (f"{packed} | " if packed else "")
                + "frontier |", "|---|---|" + "---:|" * (len(metrics) + 2 + bool(packed)) + "---|"]
        for row in sorted(g["rows"], key=lambda r: (r.get("rank", 10**9), r["run"])):
            vals = []
            for m in metrics:
                text = number(row["values"].get(m))
                if m == "false_recall" and row.get("false_recall_rule"):
                    text += f" {row['false_recall_rule']}"
                vals.append(text)
            out.append(f"| {_rank(row)} | {row['run']} | " + " | ".join(vals) + f" | {number(row['latency_p50_ms'], 1)} | {number(row[cart], 0)} | "
                       + (f"{number(row.get('cost'), 0)} | " if packed else "") + f"{_frontier(row)} |")
        if g["diffs"]:
            by = {(d["run"], d["metric"]): d for d in g["diffs"]}
            out += ["", f"Against {board['baseline']}:", "", "| run | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
            for run in dict.fromkeys(d["run"] for d in g["diffs"]):
                out.append(f"| {run} | " + " | ".join(_diff(by.get((run, m))) for m in metrics) + " |")
            if g["smallest_p_holm"] is not None and g["smallest_p_holm"] >= board["alpha"]:
                out += ["", f"**With {board['permutations']} sign flips no difference of this table can be significant** "
                        f"(the smallest Holm-corrected p is {g['smallest_p_holm']:.4f}): raise --permutations."]
        out.append("")
    return out


def runs_lines(board: dict[str, Any]) -> list[str]:
    """The runs in full: every changed parameter and how each was run (system, chunking, isolation)."""
    out = ["## Runs in full", "", "| run | changed params | how it was run |", "|---|---|---|"]
    for r in board["runs"]:
        name = f"{r['label']} (baseline)" if r["label"] == board["baseline"] else r["label"]
        out.append(f"| {name} | {_changed(r['changed'])} | {r.get('describe', '')} |")
    return [*out, ""]


def markdown(board: dict[str, Any]) -> str:
    """The leaderboard in Markdown (module docstring's order)."""
    return "\n".join([f"# Leaderboard: {len(board['runs'])} runs against {board['baseline']} (k = {board['k']})", "",
                      *ranked_lines(board), "", *_head(board), *group_lines(board), *mde_lines(board), *runs_lines(board)])


def mde_lines(board: dict[str, Any]) -> list[str]:
    """The minimum detectable effects per modality (bench.evaluation.stats.power), smallest first."""
    from bench.evaluation.stats.power import ALPHA, POWER
    from bench.reporting.report import MDE_NOTES, mde_upper

    names = sorted({name for cells in board["mde"].values() for name in cells}, key=lambda n: (n != f"recall@{board['k']}", n))
    if not names:
        return []
    out = ["## Minimum detectable effects", "",
           ("Paired, 80% power, α 0.05 (bench.evaluation.stats.power): *fewest* = a change that moves entries one way only (no "
            "change smaller can be seen), *typical* = the median spread of these runs' per-query differences from the "
            "baseline, *independent* = two unrelated runs (an upper bound); from the baseline's per-query values, over clusters "
            "of entries (n entries in C clusters); in brackets the same if the entries were independent."), "",
           "| group | " + " | ".join(f"{n}: n (C) fewest / typical / independent" for n in names) + " |",
           "|---|" + "---|" * len(names)]
    marks: set[str] = set()
    for group, cells in board["mde"].items():
        parts = []
        for name in names:
            c = cells.get(name, {})
            upper, mark = mde_upper(c, ALPHA, POWER)
            marks.add(mark)
            flat = c.get("entries") or {}
            parts.append(f"{c.get('n', 0)} ({c.get('clusters', c.get('n', 0))}) "
                         f"{number(c.get('fewest'), 3)} / {number(c.get('typical'), 3)} / {number(upper, 3)}{mark}"
                         + (f" [{number(flat.get('fewest'), 3)} / {number(flat.get('independent'), 3)}]" if flat else ""))
        out.append(f"| {group} | " + " | ".join(parts) + " |")
    out.append("")
    notes = [f"{m} {MDE_NOTES[m]}" for m in MDE_NOTES if m in marks]
    return out + ([" ".join(notes), ""] if notes else [])


def parse_labels(given: tuple[str, ...]) -> dict[str, str]:
    """--label NAME=RUN options as {NAME: RUN}; ValueError for a malformed or repeated NAME."""
    out: dict[str, str] = {}
    for item in given:
        name, sep, spec = item.partition("=")
        if not sep or not name.strip() or not spec.strip():
            raise ValueError(f"{item!r}: expected NAME=RUN")
        if name in out:
            raise ValueError(f"{name!r} is given twice")
        out[name.strip()] = spec.strip()
    return out


def short_labels(specs: list[str], given: dict[str, str]) -> list[str]:
    """A short label per run spec: the name ``--label NAME=RUN`` gave it, else a folder's base
    name (a parquet file's project folder), a commit hash's first 7 characters, or the
    experiment name or revision as written. Labels that would collide keep their spec in full
    (the first keeps the short one) so no two runs read alike."""
    import re
    from pathlib import Path

    by_spec = {spec: name for name, spec in given.items()}
    out: list[str] = []
    for spec in specs:
        if spec in by_spec:
            label = by_spec[spec]
        elif Path(spec).exists():
            path = Path(spec).resolve()
            label = (path.parent.parent.parent if path.is_file() else path).name or spec
        elif re.fullmatch(r"[0-9a-f]{12,40}", spec):
            label = spec[:7]
        else:
            label = spec
        out.append(spec if label in out else label)
    return out


def page_name(stem: str, label: str) -> str:
    """The file name of a run's A/B page beside the leaderboard page."""
    import re

    return f"{stem}.{re.sub(r'[^A-Za-z0-9._-]+', '_', label)}.html"


def _inline(text: str) -> str:
    """Escaped text with `code` and **bold** spans."""
    parts = html.escape(text).split("`")
    out = "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))
    bold = out.split("**")
    return "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(bold)) if len(bold) % 2 else out


def as_html(md: str) -> str:
    """The leaderboard's Markdown (headings, bullets, tables, paragraphs) as HTML."""
    out: list[str] = []
    table: list[list[str]] = []
    for line in [*md.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-:") for c in cells):
                table.append(cells)
            continue
        if table:
            head, *body = table
            out.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in body) + "</table>")
            table = []
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level + 1}>{_inline(line.lstrip('#').strip())}</h{level + 1}>")
        elif line.startswith("- "):
            out.append(f"<p>• {_inline(line[2:])}</p>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    return "\n".join(out)


def runs_html(board: dict[str, Any], sources: dict[str, str] | None, links: dict[str, str] | None) -> str:
    """The runs in full: which run each label names (folder, revision or experiment as given), every
    changed parameter, how it was run, and its A/B page."""
    head = ("<tr><th>label</th><th>run</th><th>changed params</th><th>how it was run</th>"
            + ("<th>every query against the baseline</th>" if links else "") + "</tr>")
    rows = []
    for r in board["runs"]:
        label = r["label"]
        rows.append(f"<tr><td><b>{html.escape(label)}</b></td><td><code>{html.escape((sources or {}).get(label, label))}</code></td>"
                    f"<td>{_inline(_changed(r.get('changed') or {}))}</td><td>{html.escape(r.get('describe', ''))}</td>"
                    f"{_link_cell(board, label, links) if links else ''}</tr>")
    return f"<table id=runs>{head}{''.join(rows)}</table>"


def _link_cell(board: dict[str, Any], label: str, links: dict[str, str] | None) -> str:
    link = (links or {}).get(label)
    if not link:
        return "<td>(the baseline)</td>" if label == board["baseline"] else "<td>—</td>"
    return f"<td><a href='{html.escape(link, quote=True)}'>{html.escape(label)} vs {html.escape(board['baseline'])}</a></td>"


def ranked_html(board: dict[str, Any], links: dict[str, str] | None) -> str:
    """:func:`ranked_rows` as the page's first table, each run linked to its A/B page."""
    head, rows = ranked_rows(board)
    tail = "<th>every query</th>" if links else ""
    body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in cells) + (_link_cell(board, run, links) if links else "") + "</tr>"
                   for run, cells in rows)
    return f"<table id=ranked><tr>{''.join(f'<th>{_inline(h)}</th>' for h in head)}{tail}</tr>{body}</table>"


def figures_html(board: dict[str, Any]) -> str:
    """One picture per modality: the frontier's quality against its cost, the line through the table's
    ◆ runs; overall latency only when the runs' latency p50 differ beyond the latency floor."""
    from bench.reporting.leaderboard_figures import frontier_svg

    index = {r["label"]: i for i, r in enumerate(board["runs"])}
    changes = {r["label"]: r.get("changed") or {} for r in board["runs"]}
    quality = board.get("frontier_quality", "recall@budget")
    cost = (board.get("cost") or {}).get("name", _cart(board))
    column = "cost" if board.get("cost") else _cart(board)
    floor = float(board.get("latency_floor_ms", 5.0))
    out = []
    for g in board["groups"]:
        overall = g["group"] == "overall"
        lat = [r["latency_p50_ms"] for r in g["rows"] if r["latency_p50_ms"] is not None]
        if overall and (not lat or max(lat) - min(lat) <= floor):
            out.append(f"<p class=note>No overall latency picture: every run's latency p50 lies within {floor:g} ms of the others "
                       f"({number(min(lat), 2) if lat else '—'}–{number(max(lat), 2) if lat else '—'} ms), differences the "
                       "frontier treats as noise.</p>")
            continue
        points = [{"label": r["run"] if r["run"] == board["baseline"] else f"{r['run']}: {change_label(changes.get(r['run'], {}))}",
                   "x": r["latency_p50_ms"] if overall else r.get(column), "y": r["values"].get(quality),
                   "frontier": bool(r.get("frontier")), "index": index.get(r["run"], i)} for i, r in enumerate(g["rows"])]
        unit = ((board.get("budget") or {}).get(g["group"]) or {}).get("unit", "")
        x_label = "latency p50 (ms)" if overall else f"{cost} ({unit})" if unit else cost
        svg, together = frontier_svg(points, x_label, quality, g["group"], line=not overall)
        apart = "; ".join(" = ".join(x.split(":")[0] for x in labels) for labels in together)
        out.append(f"<figure>{svg}<figcaption>{html.escape(g['group'])}: {html.escape(quality)} against {html.escape(x_label)}; "
                   f"filled: on the table's Pareto frontier ({FRONTIER}, which also weighs "
                   + ("each modality's cost" if overall else "latency p50") + ")"
                   + ("" if overall else "; grey line: through the ◆ runs in cost order")
                   + (f"; drawn side by side where values coincide or nearly: {html.escape(apart)}" if apart else "")
                   + "</figcaption></figure>")
    return "".join(out)


def page(board: dict[str, Any], *, sources: dict[str, str] | None = None, links: dict[str, str] | None = None) -> str:
    """The leaderboard page (module docstring's order). ``sources``: short label -> the run as given
    (folder, revision, experiment); ``links``: label -> its A/B page against the baseline
    (bench.reporting.compare_page)."""
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Leaderboard</title><style>"
            "body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:1600px;padding:0 1rem}"
            "table{border-collapse:collapse;font-size:.8rem}th,td{border:1px solid #ddd;padding:.2rem .4rem}"
            "table#ranked{font-size:.9rem}table#ranked td:nth-child(3),table#ranked td:nth-child(5){text-align:right}"
            ".figs{display:flex;flex-wrap:wrap;gap:1rem}figure{margin:.5rem 0}figcaption,p.note{font-size:.8rem;color:#444;max-width:750px}"
            "figure svg{width:750px;max-width:100%;height:auto}details{margin:1rem 0}summary{cursor:pointer;font-weight:600}</style></head><body>"
            f"<h1>Leaderboard: {len(board['runs'])} runs against {html.escape(board['baseline'])} (k = {board['k']})</h1>"
            f"{ranked_html(board, links)}{as_html(chr(10).join(_head(board)))}"
            f"<h2>Quality against cost, per modality</h2><div class=figs>{figures_html(board)}</div>"
            f"{as_html(chr(10).join([*group_lines(board), *mde_lines(board)]))}"
            f"<details id=runs-in-full><summary>The runs in full: every changed parameter and how each was run</summary>"
            f"{runs_html(board, sources, links)}</details></body></html>\n")
