"""reports/dev.html: one self-contained page (no network, no script) with the metric
table (value, 95% interval, n, denominator), the pictures (inline SVG) and a
per-query drill-down with the misses first.

Pure functions: :func:`drilldown` builds the drill-down rows from frames,
:func:`render` turns everything into HTML text.
"""

from __future__ import annotations

import html
import json
from typing import Any

import pandas as pd

from bench.ingest.atom_codes import ATOM_CODE
from bench.numbers import NO_VALUE, number
from bench.reporting.memories import memory_html

SNIPPET = 120
#: the per-query column saying an answer abstained (bench.evaluation.measures.false_recall: it hands the reader nothing)
ABSTAINED = "abstained"
#: the prefix of a measure's column kept for the ranking whatever the answer said (``ranked_recall@k``)
RANKED = "ranked_"
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem auto;max-width:1200px;padding:0 1rem;color:#1d1d1f}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd}h3{font-size:1.05rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}th,td{border:1px solid #ddd;padding:.2rem .45rem;vertical-align:top}
th{background:#f3f3f5;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.figs{display:flex;flex-wrap:wrap;gap:1rem}.fig{border:1px solid #eee;padding:.3rem}.fig svg{width:560px;height:auto}
details{border:1px solid #e3e3e3;border-radius:4px;margin:.3rem 0;padding:.25rem .5rem}summary{cursor:pointer}
.miss{background:#fff1f0}.hit{background:#effaf1}.tag{display:inline-block;border-radius:3px;padding:0 .3rem;font-size:.75rem;margin-left:.3rem}
.tag.miss{color:#a8071a;border:1px solid #ffa39e}.tag.hit{color:#135200;border:1px solid #b7eb8f}.tag.fr{color:#874d00;border:1px solid #ffd591;background:#fff7e6}
.tag.abst{color:#874d00;border:1px solid #ffd591;background:#fff7e6}p.abstained{background:#fff7e6;border:1px solid #ffd591;padding:.3rem .5rem;font-size:.85rem}
code{font-size:.8rem}.muted{color:#666;font-size:.85rem}
.pics{display:flex;flex-wrap:wrap;gap:.5rem;align-items:flex-start;margin:.4rem 0}.pic{margin:0}.pic figcaption{font-size:.75rem;color:#444}
img.thumb{border:1px solid #ccc;display:block}svg.timeline{display:block;margin:.3rem 0}
table.code pre{margin:0;font-size:.75rem;white-space:pre}table.code td{padding:0 .4rem}tr.hitline td{background:#ffe8e6}
table.verdict td{text-align:right;font-variant-numeric:tabular-nums}table.verdict td.group{text-align:left;font-weight:600}
td.met{background:#d9f7be;color:#135200}td.bought{background:#fff1b8;color:#614700}td.notmet{background:#ffccc7;color:#820014}td.nm{background:#f0f0f0;color:#595959;font-style:italic}
td small{display:block;font-size:.72rem;opacity:.85}
p.isolation{padding:.5rem .75rem;border-radius:4px;font-size:.95rem}p.isolation.isolated{background:#effaf1;border:1px solid #b7eb8f}
p.isolation.not-isolated{background:#fff1f0;border:2px solid #cf1322;color:#820014}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


# --------------------------------------------------------------------------- drill-down data


def drilldown(
    entries: list[dict],
    per_query: pd.DataFrame,
    run: pd.DataFrame,
    gold: pd.DataFrame,
    regions: pd.DataFrame,
    atoms: pd.DataFrame,
    *,
    k: int = 10,
    per_modality: int = 100,
) -> dict[str, Any]:
    """Per modality, up to `per_modality` queries, misses first.

    Order: answerable queries by recall@k then coverage@k ascending (misses first),
    then unanswerable queries with a false recall, then the other unanswerable ones;
    ties by query_id. ``run`` and ``gold`` name atoms by atom_id, and by their code (``atom``)
    when they hold it: then row i of ``atoms`` is code i, so the versions of a memory that
    share an id (a memory rewritten over time) are told apart; ``regions``: query_id,
    gold_idx, source_id, extent, n_atoms (bench.gold.table), each region's own
    object shown as the entry gives it. ``atoms``: atom_id, text, extent (JSON) and
    ``amount`` (extent in the modality's unit). Returns {"modalities": {m: {"total", "shown", "queries"}}}.
    """
    ent = {e["query_id"]: e for e in entries}
    pq = per_query.assign(query_id=per_query["query_id"].astype(str))
    key = ATOM_CODE if ATOM_CODE in run.columns and ATOM_CODE in gold.columns else "atom_id"  # codes when given (docstring)
    rc, cc = f"recall@{k}", f"coverage@{k}"
    chosen: dict[str, tuple[int, pd.DataFrame]] = {}
    for modality, grp in pq.groupby("modality", sort=True):
        ans = grp.loc[~grp["unanswerable"].astype(bool)].sort_values([rc, cc, "query_id"], na_position="first")
        un = grp.loc[grp["unanswerable"].astype(bool)].sort_values(["false_recall", "query_id"], ascending=[False, True])
        chosen[str(modality)] = (len(grp), pd.concat([ans, un]).head(per_modality))
    # only the shown queries' run, gold and region rows are grouped
    shown = set().union(*(set(c["query_id"]) for _, c in chosen.values()))
    top = run.loc[(run["rank"].astype(int) <= k).to_numpy() & run["query_id"].astype(str).isin(shown).to_numpy()]
    top = top.astype({"query_id": str, "atom_id": str}).sort_values(["query_id", "rank"], kind="stable")
    top_by_q = _spans(top["query_id"].tolist(), {c: top[c].tolist() for c in (key, "rank", "atom_id", "score")})
    gold = gold.loc[gold["query_id"].astype(str).isin(shown).to_numpy()]
    gold_sets = gold.astype({"query_id": str, "atom_id": str}).groupby("query_id")[key].agg(set).to_dict()
    reg = regions[["query_id", "gold_idx", "source_id", "extent", "n_atoms"]].astype({"query_id": str})
    reg = reg.loc[reg["query_id"].isin(shown).to_numpy()].sort_values(["query_id", "gold_idx"], kind="stable")
    reg_by_q = _spans(reg["query_id"].tolist(), {c: reg[c].tolist() for c in ("gold_idx", "source_id", "extent", "n_atoms")})
    # each atom's fields as plain lists, looked up by its row (a pandas .loc per shown atom cost seconds)
    info = atoms.reset_index(drop=True)
    row_of: Any = range(len(info)) if key == ATOM_CODE else {a: i for i, a in enumerate(info["atom_id"].astype(str).tolist())}
    has_source = "source_id" in info.columns
    fields = {c: info[c].tolist() if c in info.columns else [None] * len(info) for c in ("source_id", "extent", "amount", "text")}
    out: dict[str, Any] = {}
    for modality, (total, order) in chosen.items():
        queries = []
        for r in order.to_dict("records"):
            qid = r["query_id"]
            e = ent.get(qid, {})
            gset = gold_sets.get(qid, set())
            rows = []
            t = top_by_q.get(qid)
            if t is not None:
                for name, rank, atom_id, score in zip(t[key], t["rank"], t["atom_id"], t["score"], strict=True):
                    i = (name if 0 <= name < len(info) else None) if key == ATOM_CODE else row_of.get(name)
                    rows.append({
                        "rank": int(rank), "atom_id": atom_id, "score": float(score),
                        "source_id": None if i is None or not has_source else str(fields["source_id"][i]),
                        "extent": None if i is None else str(fields["extent"][i]),
                        "amount": None if i is None else float(fields["amount"][i]),
                        "gold": name in gset,
                        "text": "" if i is None else str(fields["text"][i])[:SNIPPET],
                    })
            g = reg_by_q.get(qid)
            queries.append({
                "query_id": qid, "question": e.get("question", ""), "unanswerable": bool(r["unanswerable"]),
                "failed": bool(r.get("failed", False)),
                "metrics": {c: r.get(c) for c in (rc, cc, f"precision@{k}", f"iou@{k}", "mrr", "false_recall") if c in r},
                # an answer that abstained hands over nothing (its ranking measures count 0): the ranking's own values beside them
                "abstained": bool(r.get(ABSTAINED) == 1),
                "ranking": {c: r[RANKED + c] for c in (rc, cc, "mrr") if RANKED + c in r and pd.notna(r[RANKED + c])},
                "gold": [] if g is None else [
                    {"source_id": source_id, "region": json.dumps(e["gold"][gold_idx]["region"], sort_keys=True),
                     "extent": None if pd.isna(extent) else float(extent), "n_atoms": int(n_atoms)}
                    for gold_idx, source_id, extent, n_atoms in zip(g["gold_idx"], g["source_id"], g["extent"], g["n_atoms"], strict=True)],
                "top": rows,
            })
        out[modality] = {"total": int(total), "shown": len(queries), "queries": queries}
    return {"k": k, "modalities": out}


def _spans(queries: list[str], columns: dict[str, list[Any]]) -> dict[str, dict[str, list[Any]]]:
    """Rows sorted by query id -> query id -> its rows' values, column by column."""
    out: dict[str, dict[str, list[Any]]] = {}
    start = 0
    for i in range(1, len(queries) + 1):
        if i == len(queries) or queries[i] != queries[start]:
            out[queries[start]] = {c: v[start:i] for c, v in columns.items()}
            start = i
    return out


# --------------------------------------------------------------------------- HTML


def verdict_html(doc: dict[str, Any]) -> str:
    """The verdict matrix (bench.reporting.report.verdict): colour carries the verdict against the spec's bars."""
    from bench.reporting.report import BOUGHT, MET, NOT_MEASURABLE, NOT_MET, bar_legend, verdict
    from bench.reporting.verdict import rules_text

    rows = verdict(doc)
    if not rows:
        return ""
    css = {MET: "met", NOT_MET: "notmet", NOT_MEASURABLE: "nm", BOUGHT: "bought"}
    out = ["<table class=verdict><tr><th>modality</th>" + "".join(f"<th>{_e(c['heading'])}</th>" for c in rows[0]["cells"]) + "</tr>"]
    for row in rows:
        tds = [f"<td class=group>{_e(row['group'])}</td>"]
        for c in row["cells"]:
            cls = css.get(c["status"], "")
            title = c["status"] or "reported (no bar)"
            if c["reason"]:
                title += f": {c['reason']}"
            sub = f"{c['n']}/{c['denominator']}" if c["n"] is not None else ""
            if c["rule"]:
                sub += f" · {c['rule']}"
            if c["bought"]:
                sub += f" · {c['bought']}"
                title = str(c["bought"])
            elif c["status"]:
                sub += f" · {c['status']}"
            tds.append(f"<td class='{cls}' title='{_e(title)}'>{number(c['value'])}<small>{_e(sub)}</small></td>")
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</table>")
    k = doc.get("run", {}).get("k", 10)
    out.append(f"<p class=muted>Green: meets the spec's bar; red: does not; yellow: met only by what the bar does not look at; "
               f"grey: not measurable (hover for the reason). Bars: {_e(bar_legend(k))}; the other columns are reported. "
               f"Each cell: value, n/denominator. {_e(rules_text().replace('*', ''))}</p>")
    out.append(mde_html(doc.get("mde")))
    return "\n".join(out)


def mde_html(block: dict[str, Any] | None) -> str:
    """The minimum detectable effects beside the verdict (bench.evaluation.stats.power)."""
    if not block:
        return ""
    names = list(block["overall"])
    out = [f"<p>Minimum detectable effect of a paired comparison (power {block['power']:.0%}, α {block['alpha']:g}) from this "
           "run's per-query values: the smallest any change can be seen at (one that moves entries one way only) – the "
           "largest, for two runs whose per-query values are unrelated.</p>",
           "<table><tr><th>modality</th><th>n</th>" + "".join(f"<th>MDE {_e(n)}</th>" for n in names) + "</tr>"]
    from bench.reporting.report import MDE_NOTES, mde_range

    marks: set[str] = set()
    for group, row in [*block["by_modality"].items(), ("overall", block["overall"])]:
        n = next((c["n"] for c in row.values()), 0)
        texts = [mde_range(row.get(x), block["alpha"], block["power"]) for x in names]
        marks.update(t[-1] for t in texts if t[-1] in MDE_NOTES)
        out.append(f"<tr><td>{_e(group)}</td><td class=num>{n}</td>{''.join(f'<td class=num>{_e(t)}</td>' for t in texts)}</tr>")
    out.append("</table>")
    out += [f"<p class=muted>{_e(m)} {_e(MDE_NOTES[m])}</p>" for m in MDE_NOTES if m in marks]
    return "\n".join(out)


def isolation_banner_html(run: dict[str, Any]) -> str:
    """dev.md's isolation heading as the banner at the top of the page (red when not isolated or not recorded)."""
    from bench.reporting.report import isolation_heading

    heading = isolation_heading(run)
    bold, _, rest = heading.removeprefix("**").partition("**")
    isolated = run.get("isolation") in ("bwrap", "landlock")
    return (f"<p class='isolation {'isolated' if isolated else 'not-isolated'}' role='status'><strong>{_e(bold)}</strong>"
            f"{_e(rest)}</p>")


def run_html(run: dict[str, Any]) -> str:
    """How the run was made: system, false-recall rules per modality, isolation (when recorded)."""
    from bench.reporting.report import isolation_text

    parts = []
    rules = run.get("false_recall_rule") or {}
    if rules:
        parts.append(f"<p>False recall rule per modality (calibration share {_e(run.get('calibration_recall', '—'))}, "
                     f"AUROC signal <code>{_e(run.get('auroc_signal', '—'))}</code>; a failed query counts as the worst case):</p>")
        parts.append("<table><tr><th>modality</th><th>rule</th><th>unanswerable</th><th>answerable keeping their top-1 hit</th><th>reason</th></tr>")
        for m, r in rules.items():
            kept = f"{r['kept']}/{r['answerable']}" if "kept" in r else "—"
            parts.append(f"<tr><td>{_e(m)}</td><td>{_e(r.get('rule'))}</td><td class=num>{_e(r.get('unanswerable', '—'))}</td>"
                         f"<td class=num>{_e(kept)}</td><td>{_e(r.get('reason', ''))}</td></tr>")
        parts.append("</table>")
    if run.get("isolation") is not None:
        parts.append(f"<p>Isolation: {_e(isolation_text(run['isolation']))}.</p>")
    return "\n".join(parts)


def metric_table_html(block: dict[str, dict[str, Any]]) -> str:
    from bench.reporting.verdict import raised

    rows = ["<table><tr><th>metric</th><th>value</th><th>95% interval</th><th>n</th><th>denominator</th></tr>"]
    for name, cell in block.items():
        if not isinstance(cell, dict) or "value" not in cell:
            continue
        lo, hi = (cell.get("ci95") or [None, None])
        ci = "—" if lo is None else f"[{number(lo)}, {number(hi)}]"
        value = number(cell["value"]) + (f" <span class=muted>({_e(cell['reason'])})</span>" if cell.get("reason") else "")
        note = raised(block, name)  # a diagnostic raised by atom size (bench.reporting.verdict)
        value += f" <span class='bought'>{_e(note)}</span>" if note else ""
        rows.append(f"<tr><td>{_e(name)}</td><td class=num>{value}</td><td class=num>{ci}</td>"
                    f"<td class=num>{cell['n']}</td><td class=num>{cell['denominator']}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _query_html(q: dict[str, Any], k: int, open_: bool = False, picture: str = "") -> str:
    m = q["metrics"]
    rc = m.get(f"recall@{k}")
    ranking = q.get("ranking") or {}
    abstained = bool(q.get("abstained"))
    if q["unanswerable"]:
        tag = "<span class='tag fr'>false recall</span>" if m.get("false_recall") == 1 else "<span class='tag hit'>unanswerable, quiet</span>"
    elif q["failed"]:
        tag = "<span class='tag miss'>failed</span>"
    else:
        tag = "<span class='tag hit'>all found</span>" if rc == 1 else "<span class='tag miss'>miss</span>"
    if abstained:
        tag += "<span class='tag abst'>abstained: hands over nothing</span>"

    def value(c: str, v: Any) -> str:  # the answer's value, and the ranking's where an abstention zeroed it
        own = ranking.get(c)
        return f"{_e(c)} {number(v, 3)}" + (f" (ranking {number(own, 3)})" if abstained and own is not None and own != v else "")

    summary = (f"<summary><code>{_e(q['query_id'])}</code>{tag} — {_e(q['question'])} "
               f"<span class=muted>({', '.join(value(c, v) for c, v in m.items() if number(v) != NO_VALUE)})</span></summary>")
    parts = [summary]
    if abstained and q["unanswerable"]:
        parts.append("<p class=abstained><b>Abstained: hands over nothing</b> (no false recall). The hits below are what the system "
                     "ranked before it abstained.</p>")
    elif abstained:
        found = ", ".join(f"{c} {number(v, 3)}" for c, v in ranking.items())
        parts.append("<p class=abstained><b>Abstained: hands over nothing.</b> The hits below are what the system ranked; its answer "
                     "gives the reader none of them, so recall, MRR, nDCG and the budget measures count 0 for it"
                     + (f" (the ranking's own: {_e(found)})" if found else "") + ".</p>")
    if picture:
        parts.append(picture)
    if q["gold"]:
        parts.append("<table><tr><th>gold source</th><th>region</th><th>extent</th><th>atoms overlapping</th></tr>")
        for g in q["gold"]:
            parts.append(f"<tr><td><code>{_e(g['source_id'])}</code></td><td><code>{_e(g['region'])}</code></td>"
                         f"<td class=num>{number(g['extent'], 1)}</td><td class=num>{g['n_atoms']}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p class=muted>No gold (unanswerable).</p>")
    if q["top"]:
        parts.append("<table><tr><th>rank</th><th>atom</th><th>score</th><th>extent</th><th>amount</th><th>overlaps gold</th><th>text</th></tr>")
        for a in q["top"]:
            cls = "hit" if a["gold"] else ""
            parts.append(f"<tr class='{cls}'><td class=num>{a['rank']}</td><td><code>{_e(a['atom_id'])}</code></td>"
                         f"<td class=num>{number(a['score'], 3)}</td><td><code>{_e(a['extent'])}</code></td>"
                         f"<td class=num>{number(a['amount'], 1)}</td><td>{'yes' if a['gold'] else 'no'}</td><td>{_e(a['text'])}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p class=muted>The system returned nothing.</p>")
    return ("<details open>" if open_ else "<details>") + "\n".join(parts) + "</details>"


def render(doc: dict[str, Any], figures: dict[str, str], drill: dict[str, Any], *, title: str = "Dev evaluation",
           pictures: dict[str, Any] | None = None) -> str:
    """The whole page; ``figures`` maps a caption to inline SVG text; ``pictures`` is
    :func:`bench.reporting.thumbnails.pictures` (query_id -> HTML fragment, and the cap per modality)."""
    from bench.reporting.report import system_words

    pics = (pictures or {}).get("queries", {})
    run = doc.get("run", {})
    k = drill.get("k", run.get("k", 10))
    boot = run.get("bootstrap", {})
    chunk = ", ".join(f"{m}={c.get('strategy')}" for m, c in sorted(run.get("chunking", {}).items()))
    out = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        isolation_banner_html(run),
        f"<p>System <code>{_e(run.get('system', '?'))}</code> (depth {_e(run.get('depth', '?'))}), chunking: {_e(chunk)}. "
        f"{_e(system_words(run))} "
        f"Every metric has n (entries with a system result), its denominator (annotated entries it is defined over) and "
        f"a 95% percentile bootstrap interval over queries ({_e(boot.get('resamples', '?'))} resamples, seed {_e(boot.get('seed', '?'))}).</p>",
        "<h2>Verdict</h2>",
        verdict_html(doc),
        "<h2>Run</h2>",
        run_html(run),
        "<h2>Metrics</h2>",
        "<h3>overall</h3>",
        metric_table_html(doc.get("overall", {})),
    ]
    for m, block in doc.get("by_modality", {}).items():
        out += [f"<h3>{_e(m)}</h3>", metric_table_html(block)]
    stats = doc.get("atom_stats", {})
    if stats:
        out += ["<h2>Atoms</h2>", "<table><tr><th>modality</th><th>unit</th><th>atoms</th><th>median extent</th><th>p95 extent</th>"
                "<th>gold regions</th><th>no atom overlaps</th><th>share</th></tr>"]
        for m, s in stats.items():
            out.append(f"<tr><td>{_e(m)}</td><td>{_e(s['unit'])}</td><td class=num>{s['atoms']}</td><td class=num>{number(s['median_extent'], 1)}</td>"
                       f"<td class=num>{number(s['p95_extent'], 1)}</td><td class=num>{s['gold_regions']}</td><td class=num>{s['unreached_regions']}</td>"
                       f"<td class=num>{number(s['unreached_share'], 4)}</td></tr>")
        out.append("</table>")
    out.append(memory_html(doc))  # a replayed run, memory hits: what dev.md says of them
    ties = doc.get("ties", {})
    if ties:
        out += ["<p>Tied score positions in the top k (their order is set by the tie rule: score descending, then atom_id ascending): "
                + "; ".join(f"{_e(m)} {t['tied_positions']} positions in {t['queries_with_ties']} of {t['queries']} queries" for m, t in ties.items())
                + ".</p>"]
    out.append("<h2>Pictures</h2><div class=figs>")
    for caption, svg in figures.items():
        out.append(f"<figure class=fig>{svg}<figcaption class=muted>{_e(caption)}</figcaption></figure>")
    out.append("</div>")
    out.append("<h2>Per-query drill-down (misses first)</h2>")
    out.append("<p class=muted>Each query shows its question, gold regions (with extent in the modality's unit and how many atoms "
               "overlap them) and the top-k atoms with their extents; green rows overlap gold.</p>")
    if pictures is not None:
        out.append(f"<p class=muted>Pictures (inline, drawn from the corpus files) for the first {pictures['per_modality']} answerable "
                   "queries per modality: screenshots and photos with the gold box in green and the top-k atoms' boxes in red, "
                   "numbered by rank; each gold PDF page with the ranks its atoms came back at; a video timeline with the gold "
                   "span (green) and the top-k spans (red); the gold code symbol's lines with the ranks covering each line.</p>")
    for m, block in drill.get("modalities", {}).items():
        n_pics = sum(q["query_id"] in pics for q in block["queries"])
        with_pics = f", {n_pics} with pictures" if pictures is not None else ""
        out.append(f"<h3>{_e(m)} — {block['shown']} of {block['total']} queries shown{with_pics}</h3>")
        out += [_query_html(q, k, open_=i < 2, picture=pics.get(q["query_id"], ""))
                for i, q in enumerate(block["queries"])]  # first two misses shown open
    out.append("</body></html>")
    return "\n".join(out) + "\n"

