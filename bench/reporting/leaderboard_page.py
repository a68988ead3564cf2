"""The leaderboard as people read it: Markdown (ready to paste into a pull-request
comment) and a self-contained HTML page with one quality-against-cost picture per
modality (recall@budget against cartridge@k) and overall (recall@budget against latency
p50), the Pareto frontier drawn. Input: bench.comparison.leaderboard.leaderboard's result."""

from __future__ import annotations

import html
from typing import Any

from bench.numbers import number, p_value

__all__ = ["markdown", "page", "page_name", "parse_labels", "quality_cost_svg", "runs_html", "short_labels"]

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
    quality = board.get("quality", "recall@budget")
    out = [f"- {FRONTIER}: on the Pareto frontier of quality against cost ({quality} higher; {name} and latency p50 lower; "
           f"overall, each modality's cost is an axis of its own), differences within noise being ties: {quality} when the "
           f"{1 - board['alpha']:.0%} paired bootstrap interval of the two runs' difference holds 0 or fewer clusters differ than "
           f"the sign-flip test needs at alpha {board['alpha']:g}, latency p50 within {board.get('latency_floor_ms', 5):g} ms. "
           "≈: the runs a run ties with on every axis; below: the runs that dominate it."]
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


def markdown(board: dict[str, Any]) -> str:
    """The leaderboard in Markdown (module docstring)."""
    metrics, cart = _metrics(board), _cart(board)
    n_diffs = max((len(g["diffs"]) for g in board["groups"]), default=0)
    budget = board.get("budget") or {}
    budgets = ", ".join(f"{m} {'—' if c.get('amount') is None else format(c['amount'], ',g')} {c.get('unit', '')}"
                        for m, c in sorted(budget.items())) or "not recorded"
    left = ", ".join(f"{label}: {n}" for label, n in board["queries"]["left_out"].items() if n) or "none"
    out = [
        f"# Leaderboard: {len(board['runs'])} runs against {board['baseline']} (k = {board['k']})",
        "",
        f"- On the {board['queries']['common']} queries every run holds (left out: {left}); budgets: {budgets}.",
        f"- Rank by {board['rank_by']} with its 95% bootstrap interval ({board['resamples']} resamples of "
        f"{(board.get('clusters') or {}).get('over', 'queries')}, seed "
        f"{board['seed']}; each resample ranks every run, rank 1 the best): runs whose intervals overlap are tied.",
        *_frontier_lines(board),
        f"- Differences: run − baseline with a 95% paired bootstrap interval; p = two-sided paired randomization test "
        f"({board['permutations']} sign flips), p_holm Holm-corrected over each table's {n_diffs} differences (runs × "
        f"metrics); {MARK_BETTER}/{MARK_WORSE} significantly better/worse (p_holm < {board['alpha']}).",
        "",
        f"- Baseline: {next((r['describe'] for r in board['runs'] if r['label'] == board['baseline']), board['baseline'])}.",
        "",
        "## Runs",
        "",
        "| run | changed params |",
        "|---|---|",
    ]
    for r in board["runs"]:
        name = f"{r['label']} (baseline)" if r["label"] == board["baseline"] else r["label"]
        out.append(f"| {name} | {_changed(r['changed'])} |")
    out.append("")
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
    out += mde_lines(board)
    return "\n".join(out)


def mde_lines(board: dict[str, Any]) -> list[str]:
    """The minimum detectable effects per modality (bench.evaluation.stats.power)."""
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
    for group, cells in board["mde"].items():
        parts = []
        for name in names:
            c = cells.get(name, {})
            flat = c.get("entries") or {}
            parts.append(f"{c.get('n', 0)} ({c.get('clusters', c.get('n', 0))}) "
                         + " / ".join(number(c.get(key), 3) for key in ("fewest", "typical", "independent"))
                         + (f" [{number(flat.get('fewest'), 3)} / {number(flat.get('independent'), 3)}]" if flat else ""))
        out.append(f"| {group} | " + " | ".join(parts) + " |")
    out.append("")
    return out


#: the pictures' size in inches at 100 dpi (750 x 520 px; the page draws them at their own width)
PICTURE = (7.5, 5.2)
#: a cost axis turns logarithmic only when its values span more than this factor
LOG_SPAN = 50.0
MARKERS = "osD^vP*Xh<>p"


def _plain(ax: Any, axis: str) -> None:
    """Tick labels as plain numbers (no 2×10⁻¹, no offset), thousands separated."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}" if abs(v) >= 100 else f"{v:.4g}"))
    target.set_minor_formatter(NullFormatter())


def quality_cost_svg(points: list[dict[str, Any]], x_label: str, title: str, y_label: str = "recall@budget") -> str:
    """The frontier's quality (`y_label`: the objective) against a cost, one marker per run named in the legend (no label is
    printed over the points, so none collide). Filled: on the table's Pareto frontier (◆,
    against every cost); the grey line joins the runs no other beats on this picture's two axes.
    The cost axis is linear with plain-number ticks unless the costs span more than
    :data:`LOG_SPAN` times (then logarithmic, still with plain-number ticks)."""
    from bench.reporting.plots import figure, svg

    fig, ax = figure(*PICTURE)
    from bench.comparison.leaderboard import pareto

    shown = [p for p in points if p["x"] is not None and p["y"] is not None]
    on = pareto([(p["y"], p["x"]) for p in shown], [True, False]) if shown else []
    front = sorted((p for p, o in zip(shown, on, strict=True) if o), key=lambda p: p["x"])
    if len(front) > 1:
        ax.plot([p["x"] for p in front], [p["y"] for p in front], color="#888", linewidth=1, zorder=1,
                label="frontier of this picture")
    for i, p in enumerate(shown):
        colour = f"C{i % 10}"
        ax.scatter([p["x"]], [p["y"]], s=60, zorder=2, marker=MARKERS[i % len(MARKERS)],
                   color=colour if p["frontier"] else "white", edgecolors=colour, linewidths=1.5, label=p["label"])
    xs = [p["x"] for p in shown]
    if xs and min(xs) > 0 and max(xs) / min(xs) > LOG_SPAN:
        ax.set_xscale("log")
    _plain(ax, "x")
    _plain(ax, "y")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title, fontsize=10)
    if shown:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=min(3, len(shown) + (len(front) > 1)), fontsize=8, frameon=False)
    return svg(fig)


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
    """Escaped text with `code` spans."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


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
    """Which run each short label names (folder, revision or experiment as given), and its A/B page."""
    if not sources and not links:
        return ""
    head = "<tr><th>label</th><th>run</th><th>how it was run</th>" + ("<th>every query against the baseline</th>" if links else "") + "</tr>"
    rows = []
    for r in board["runs"]:
        label = r["label"]
        link = (links or {}).get(label)
        cell = f"<td><a href='{html.escape(link, quote=True)}'>{html.escape(label)} vs {html.escape(board['baseline'])}</a></td>" if link else (
            "<td>(the baseline)</td>" if links else "")
        rows.append(f"<tr><td><b>{html.escape(label)}</b></td><td><code>{html.escape((sources or {}).get(label, label))}</code></td>"
                    f"<td>{html.escape(r.get('describe', ''))}</td>{cell}</tr>")
    return f"<h2>Runs</h2><table>{head}{''.join(rows)}</table>"


def page(board: dict[str, Any], *, sources: dict[str, str] | None = None, links: dict[str, str] | None = None) -> str:
    """The leaderboard page: one quality-against-cost picture per modality and overall, then
    the Markdown's tables. ``sources``: short label -> the run as given (folder, revision,
    experiment); ``links``: label -> its A/B page against the baseline (bench.reporting.compare_page)."""
    md_html = as_html(markdown(board))
    cart = _cart(board)
    figures = []
    for g in board["groups"]:
        overall = g["group"] == "overall"
        quality = board.get("quality", "recall@budget")
        points = [{"label": r["run"], "x": r["latency_p50_ms"] if overall else r[cart], "y": r["values"].get(quality),
                   "frontier": bool(r.get("frontier"))} for r in g["rows"]]
        unit = ((board.get("budget") or {}).get(g["group"]) or {}).get("unit", "")
        x_label = "latency p50 (ms)" if overall else f"{cart} ({unit})" if unit else cart
        figures.append(f"<figure>{quality_cost_svg(points, x_label, g['group'], quality)}<figcaption>{html.escape(g['group'])}: "
                       f"{html.escape(quality)} against {html.escape(x_label)}; filled: on the "
                       f"Pareto frontier of the table ({FRONTIER}, against every cost); grey line: the runs no other beats on "
                       "both of this picture's axes</figcaption></figure>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Leaderboard</title><style>"
            "body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:1600px;padding:0 1rem}"
            "table{border-collapse:collapse;font-size:.8rem}th,td{border:1px solid #ddd;padding:.2rem .4rem}"
            ".figs{display:flex;flex-wrap:wrap;gap:1rem}figure{margin:.5rem 0}figcaption{font-size:.8rem;color:#444;max-width:750px}"
            "figure svg{width:750px;max-width:100%;height:auto}</style></head><body>"
            f"<h1>Leaderboard against {html.escape(board['baseline'])}</h1>{runs_html(board, sources, links)}"
            f"<h2>Quality against cost</h2><div class=figs>{''.join(figures)}</div>"
            f"{md_html}</body></html>\n")
