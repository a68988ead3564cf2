"""`bench compare A B --html FILE`: every query's A/B on one self-contained, offline page.

The page holds, as compact JSON, one row per query of both runs (modality, flags, the
per-query values of the verdict's measures for A and B, and the outcome -- win, loss or
tie of B against A -- on the equal-cost measure ``recall@budget`` and on ``recall@k``,
counted as dev.json and ``bench compare`` count them: a failed query its worst case);
a script (compare_page.js, inlined) lists, sorts, filters and searches them and draws
the selected query's detail on demand, so 10,000 queries cost one JSON parse, not
10,000 rendered panels.

A query's detail comes from each run's ``data/`` outputs (bench.reporting.cartridges: a
project folder's own, or a revision's or experiment's from the DVC cache by its commit's
dvc.lock, refused when they are not the run of its per-query table): the question,
``as_of``, the gold regions (the resolve step's, drawn as reports/dev.html draws them --
page thumbnails, turns, time spans, boxes -- for the first :data:`PICTURED` queries per
modality that the runs disagree on) and each run's cartridge: every hit of the top k with
its rank, score, extent, the gold regions it overlaps, its place in the budget's cartridge
(packed, cut, beyond; the line where packing stops), and for a memory its cited sources and
how many citations are supported. An answer that abstained says so above its hits, and the
per-query values show the ranking's own beside the answer's where the table keeps one
(``ranked_recall@k``). Without a run's outputs its side says why; the question and gold then
come from the sets in bench/sets/ when the other run has none either. The summary shows
holder and temporal correctness as `bench gate A` tests them (bench.reporting.compare_report).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.measures import measures
from bench.evaluation.measures.base import Measure, counted, in_denominator
from bench.numbers import number
from bench.reporting.cartridges import RunDetail, RunFiles, load_detail, source_of

__all__ = ["PICTURED", "outcomes", "page", "page_data", "set_entries", "summary_html"]

#: queries per modality whose gold is drawn as pictures (those A and B disagree on first);
#: the others show their gold regions as a table (pictures are inline images: the page's weight)
PICTURED = 20
#: the equal-cost measure the outcome is read on first (bench.evaluation.measures.budget)
EQUAL_COST = "recall@budget"
#: the per-query column saying an answer abstained (bench.evaluation.measures.false_recall: it hands the reader nothing)
ABSTAINED = "abstained"
#: the prefix of a measure's column kept for the ranking whatever the answer said (``ranked_recall@k``)
RANKED = "ranked_"
HERE = Path(__file__).parent


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def verdict_measures(k: int) -> list[Measure]:
    """The verdict's columns (a catalogue measure with a heading), in report order."""
    return [m for m in measures(k) if m.heading is not None]


def outcome_measures(k: int) -> list[Measure]:
    """The two measures a query's win, loss or tie is read on: recall@budget and recall@k."""
    by = {m.name: m for m in measures(k)}
    return [by[EQUAL_COST], by[f"recall@{k}"]]


def outcomes(a: pd.DataFrame, b: pd.DataFrame, m: Measure) -> np.ndarray:
    """Per row of the paired tables `a` and `b` (same query order): "win" (B better on `m`),
    "loss", "tie", or "" outside `m`'s denominator; a failed query counts its worst case and
    an undefined value 0 (bench.evaluation.measures.base.counted)."""
    unans = a["unanswerable"].astype(bool).to_numpy()
    inside = in_denominator(m.scope, unans)
    out = np.full(len(a), "", dtype=object)
    if m.column not in a.columns or m.column not in b.columns:
        return out
    xa = counted(m, a[m.column].to_numpy(float), unans, a["failed"].astype(bool).to_numpy())[0]
    xb = counted(m, b[m.column].to_numpy(float), unans, b["failed"].astype(bool).to_numpy())[0]
    d = xb - xa if m.higher_is_better else xa - xb
    out[inside] = np.where(d > 0, "win", np.where(d < 0, "loss", "tie"))
    return out


def _flag(frame: pd.DataFrame, column: str) -> list[bool]:
    """A 0/1 column as booleans (a missing column or value: False)."""
    if column not in frame.columns:
        return [False] * len(frame)
    return (pd.to_numeric(frame[column], errors="coerce").fillna(0).to_numpy(float) > 0).tolist()


def _values(frame: pd.DataFrame, column: str) -> list[float | None]:
    if column not in frame.columns:
        return [None] * len(frame)
    v = pd.to_numeric(frame[column], errors="coerce").to_numpy(float)
    return [None if np.isnan(x) else round(float(x), 4) for x in v]


def page_data(a: pd.DataFrame, b: pd.DataFrame, k: int) -> dict[str, Any]:
    """The queries both runs hold, as columns (the page's JSON): ids, modality (an index
    into ``modalities``), unanswerable, failed in A / B, each verdict measure's per-query
    value in A and B, and the outcome on each of :func:`outcome_measures`."""
    a = a.assign(query_id=a["query_id"].astype(str)).set_index("query_id")
    b = b.assign(query_id=b["query_id"].astype(str)).set_index("query_id")
    ids = a.index.intersection(b.index).sort_values()
    pa, pb = a.loc[ids], b.loc[ids]
    mods = sorted(pa["modality"].astype(str).unique())
    index = {m: i for i, m in enumerate(mods)}
    shown: list[Measure] = []
    for m in verdict_measures(k):  # one per per-query column (latency p50 and p95 read the same one)
        if (m.column in pa.columns or m.column in pb.columns) and m.column not in {x.column for x in shown}:
            shown.append(m)
    columns = [m.column for m in shown]
    # the ranking's own value beside the answer's, where the table keeps one (ranked_recall@k: an abstaining answer counts 0)
    ranking = {c: RANKED + c for c in columns if RANKED + c in pa.columns or RANKED + c in pb.columns}
    return {
        "k": k, "modalities": mods, "ids": [str(x) for x in ids],
        "modality": [index[str(m)] for m in pa["modality"]],
        "unanswerable": pa["unanswerable"].astype(bool).astype(int).tolist(),
        "failed": [[int(x), int(y)] for x, y in zip(pa["failed"].astype(bool), pb["failed"].astype(bool), strict=True)],
        "abstained": [[int(x), int(y)] for x, y in zip(_flag(pa, ABSTAINED), _flag(pb, ABSTAINED), strict=True)],
        "measures": [{"name": m.name, "heading": m.heading, "column": m.column, "higher": m.higher_is_better} for m in shown],
        "values": {c: [_values(pa, c), _values(pb, c)] for c in columns},
        "ranking": {c: [_values(pa, r), _values(pb, r)] for c, r in ranking.items()},
        "outcome": {m.name: outcomes(pa.reset_index(), pb.reset_index(), m).tolist() for m in outcome_measures(k)},
        "only": [int(len(a.index.difference(b.index))), int(len(b.index.difference(a.index)))],
    }


# --------------------------------------------------------------------------- the runs' details


def set_entries(paths: list[Path], ids: set[str]) -> dict[str, dict[str, Any]]:
    """Entries of `ids` from set files (the project's committed bench/sets/*.jsonl): the
    question, as_of and gold when no run folder holds its validated entries."""
    from bench.io import iter_jsonl

    out: dict[str, dict[str, Any]] = {}
    for path in paths:
        for _, e in iter_jsonl(path):
            if str(e.get("query_id")) in ids:
                out[str(e["query_id"])] = e
    return out


def _side(detail: RunDetail | None, q: str, atoms: dict[tuple, int], table: list[dict[str, Any]]) -> list[list[Any]] | None:
    """One run's hits of query `q` as [rank, score, atom index into the shared table, gold regions]
    and, where the entry has a budget, the hit's place in the cartridge (bench.reporting.cartridges, PACK_*)."""
    if detail is None:
        return None
    out = []
    for h in detail.hits.get(q, []):
        a = detail.atoms[h["atom"]]
        key = (a["id"], a["text"], a["extent"])
        if key not in atoms:
            atoms[key] = len(table)
            table.append(a)
        out.append([h["rank"], h["score"], atoms[key], h["gold"], *([h["pack"]] if "pack" in h else [])])
    return out


def details(data: dict[str, Any], a: RunDetail | None, b: RunDetail | None, entries: dict[str, dict[str, Any]],
            pictures: dict[str, list[str]]) -> dict[str, Any]:
    """Per query the detail the page draws on demand: question, as_of, gold regions, pictures
    (A's and B's, when drawn), and each run's hits; atoms shared in one table."""
    regions = (a or b).regions if (a or b) is not None else None  # type: ignore[union-attr]
    reg_by_q: dict[str, dict[int, tuple[float | None, int]]] = {}
    if regions is not None:  # query -> gold_idx -> (extent, atoms overlapping), in one pass
        for q, i, extent, n in zip(regions["query_id"].astype(str), regions["gold_idx"].astype(int),
                                   regions["extent"].astype(float), regions["n_atoms"].astype(int), strict=True):
            reg_by_q.setdefault(q, {})[int(i)] = (None if np.isnan(extent) else float(extent), int(n))
    table: list[dict[str, Any]] = []
    seen: dict[tuple, int] = {}
    out: dict[str, Any] = {}
    for q in data["ids"]:
        e = entries.get(q, {})
        gold = e.get("gold") or []
        extents = reg_by_q.get(q, {})
        item: dict[str, Any] = {
            "question": e.get("question", ""), "as_of": e.get("as_of"),
            "gold": [[x.get("source_id"), json.dumps(x.get("region"), sort_keys=True), *extents.get(i, (None, None))]
                     for i, x in enumerate(gold)],
            "a": _side(a, q, seen, table), "b": _side(b, q, seen, table),
        }
        cuts = [None if d is None else d.cuts.get(q) for d in (a, b)]
        if any(cuts):  # [spent, last rank packed, packing went past rank k] per run; the amount and unit per modality below
            item["cut"] = [None if c is None else [c["spent"], c["last"], int(c["beyond"])] for c in cuts]
        if q in pictures:
            item["pictures"] = pictures[q]
        out[q] = item
    budgets = [{} if d is None else {m: [c["amount"], c["unit"]] for m, c in _budgets(d).items()} for d in (a, b)]
    return {"queries": out, "atoms": table, "budget": budgets}


def _budgets(detail: RunDetail) -> dict[str, dict[str, Any]]:
    """modality -> the budget's amount and unit, as the run's cuts recorded them."""
    out: dict[str, dict[str, Any]] = {}
    for q, c in detail.cuts.items():
        entry = detail.entries.get(q)
        if entry is not None and "amount" in c:
            out.setdefault(str(entry.get("modality")), {"amount": c["amount"], "unit": c.get("unit", "")})
    return out


def draw_pictures(data: dict[str, Any], a: RunDetail | None, b: RunDetail | None, entries: dict[str, dict[str, Any]],
                  per_modality: int = PICTURED) -> dict[str, list[str]]:
    """query_id -> [A's picture, B's picture] of its gold (bench.reporting.thumbnails: the
    dev report's drawing, each marking the ranks its run returned the gold at) for up to
    `per_modality` answerable queries per modality: losses first, then wins, then the rest."""
    from bench.corpus_sources import datasets
    from bench.gold.table import read_regions
    from bench.ingest.corpus import Manifest
    from bench.reporting.thumbnails import CorpusFiles

    base = a or b
    if base is None:
        return {}
    lay = base.files
    if not lay.manifest.is_file():
        return {}
    datasets()
    files = CorpusFiles.from_manifest(Manifest.load(lay.manifest), lay.store)
    segments = read_regions(lay.resolved).segments_by_source()
    order = {"loss": 0, "win": 1, "tie": 2, "": 3}
    first = data["outcome"][EQUAL_COST]
    chosen: dict[int, list[tuple[int, str]]] = {}
    for i, q in enumerate(data["ids"]):
        if not data["unanswerable"][i]:
            chosen.setdefault(data["modality"][i], []).append((order[first[i]], q))
    out: dict[str, list[str]] = {}
    for mi, qs in chosen.items():
        modality = data["modalities"][mi]
        for _, q in sorted(qs)[:per_modality]:
            out[q] = [_picture(modality, q, d, entries, files, segments) for d in (a, b)]
    files.close()
    return out


def _picture(modality: str, q: str, detail: RunDetail | None, entries: dict[str, dict[str, Any]], files: Any,
             segments: dict[str, pd.DataFrame]) -> str:
    from bench.reporting.thumbnails import query_pictures

    if detail is None:
        return ""
    gold = [{"source_id": x.get("source_id"), "region": json.dumps(x.get("region"), sort_keys=True)}
            for x in (entries.get(q, {}).get("gold") or [])]
    top = [{"rank": h["rank"], "atom_id": detail.atoms[h["atom"]]["id"], "source_id": source_of(detail.atoms[h["atom"]]),
            "extent": detail.atoms[h["atom"]]["extent"], "gold": bool(h["gold"])} for h in detail.hits.get(q, [])]
    return query_pictures(modality, {"query_id": q, "gold": gold, "top": top}, files, segments)


# --------------------------------------------------------------------------- summary and page


def _cell(doc: dict[str, Any], group: str, name: str) -> str:
    block = (doc.get("overall") if group == "overall" else (doc.get("by_modality") or {}).get(group)) or {}
    c = block.get(name)
    if not isinstance(c, dict) or "value" not in c:
        return "—"
    return f"{number(c['value'])}<small>{c.get('n', '?')}/{c.get('denominator', '?')}</small>"


def summary_html(result: dict[str, Any], doc_a: dict[str, Any], doc_b: dict[str, Any], k: int,
                 gated: dict[str, Any] | None = None) -> str:
    """Per group, the verdict's columns: A, B and B − A with its 95% interval, n (paired
    queries in the denominator), win/tie/loss and the Holm-corrected verdict where `bench
    compare` tests the measure, or where `bench gate A` tests it (``gated``:
    bench.reporting.compare_report.gated_rows: holder and temporal correctness, with the gate's
    Holm family and verdict); A's and B's dev.json cells (value, n/denominator) elsewhere."""
    rows = {(r["modality"], r["metric"]): r for r in result["rows"]}
    by_gate = (gated or {}).get("rows", {})
    groups = list(dict.fromkeys(r["modality"] for r in result["rows"]))
    cols = verdict_measures(k)
    out = ["<table class=summary><tr><th>group</th><th></th>" + "".join(f"<th>{_e(m.heading)}</th>" for m in cols) + "</tr>"]
    for g in groups:
        lines: dict[str, list[str]] = {"A": [], "B": [], "B − A": []}
        for m in cols:
            r, gate_row = rows.get((g, m.name)), by_gate.get(f"{g} {m.name}")
            if r is None and gate_row is None:
                why = (gated or {}).get("refused") or "bench compare does not test this measure: no paired difference"
                lines["A"].append(f"<td>{_cell(doc_a, g, m.name)}</td>")
                lines["B"].append(f"<td>{_cell(doc_b, g, m.name)}</td>")
                lines["B − A"].append(f"<td class=muted title='{_e(why)}'>not tested</td>")
                continue
            r = r if r is not None else gate_row
            lo, hi = r["ci95"]
            good = r["significant"] and (r["diff"] > 0) == r["higher_is_better"]
            cls = "" if not r["significant"] else "better" if good else "worse"
            lines["A"].append(f"<td>{number(r['a'])}<small>n {r['n']}</small></td>")
            lines["B"].append(f"<td>{number(r['b'])}<small>n {r['n']}</small></td>")
            ci = "" if lo is None else f" [{lo:+.4f}, {hi:+.4f}]"
            verdict = ("n.s." if not r["significant"] else "B better" if good else "B worse")
            if r is gate_row:
                verdict = (f"as bench gate A tests it: {'fails the gate' if verdict == 'B worse' else verdict}, "
                           f"p_holm {number(r['p_holm'])} over its {gated['family'] if gated else '?'} gated rows")
            lines["B − A"].append(f"<td class='{cls}'>{r['diff']:+.4f}<small>{ci}</small><small>W/T/L {r['wins']}/{r['ties']}/"
                                  f"{r['losses']} · {_e(verdict)}</small></td>")
        for i, (name, tds) in enumerate(lines.items()):
            head = f"<td rowspan=3 class=group>{_e(g)}</td>" if i == 0 else ""
            out.append(f"<tr>{head}<th>{_e(name)}</th>{''.join(tds)}</tr>")
    out.append("</table>")
    return "\n".join(out)


def _script_json(obj: Any) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).replace("</", "<\\/").replace("<!--", "<\\!--")


def page(result: dict[str, Any], data: dict[str, Any], detail: dict[str, Any], *, describe: tuple[str, str],
         doc_a: dict[str, Any], doc_b: dict[str, Any], notes: list[str] | None = None, gated: dict[str, Any] | None = None) -> str:
    """The whole page (module docstring): ``result`` is bench.comparison.compare.compare's,
    ``data`` :func:`page_data`'s, ``detail`` :func:`details`'s; ``describe`` the runs' one-line
    descriptions (system, chunking, isolation)."""
    k = result["k"]
    q = result["queries"]
    css = (HERE / "compare_page.css").read_text(encoding="utf-8")
    js = (HERE / "compare_page.js").read_text(encoding="utf-8")
    from bench.reporting.html_report import CSS

    head = (f"<p>A: {_e(describe[0])}<br>B: {_e(describe[1])}</p>"
            f"<p class=muted>{q['both']} paired queries (only in A: {q['only_a']}, only in B: {q['only_b']}); k = {k}; "
            f"B − A with a 95% paired bootstrap interval ({result['resamples']} resamples, seed {result['seed']}); verdicts "
            f"Holm-corrected over all {len(result['rows'])} compared rows at α {result['alpha']} (n.s.: not significant; "
            "green: B significantly better, red: worse); W/T/L: queries B wins, ties, loses. A win: B better on that "
            f"query (failed queries count their worst case, as in dev.json).</p>")
    extra = "".join(f"<p class=muted>{_e(n)}</p>" for n in notes or [])
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><meta name='viewport' content='width=device-width'>"
        f"<title>B vs A: every query</title><style>{CSS}{css}</style></head><body>"
        f"<h1>B vs A: every query</h1>{head}{extra}<details open><summary>Summary: the verdict's columns</summary>"
        f"{summary_html(result, doc_a, doc_b, k, gated)}</details>"
        "<div id=app></div>"
        f"<script type='application/json' id=data>{_script_json(data)}</script>"
        f"<script type='application/json' id=detail>{_script_json(detail)}</script>"
        f"<script>{js}</script></body></html>\n"
    )


def run_detail(files: RunFiles | str | None, run: Any, k: int) -> RunDetail | None:
    """The cartridges of `run` (bench.comparison.compare.LoadedRun) from its data/ outputs `files`
    (None when there are none: `files` is then why, or None)."""
    return load_detail(files, k, run.per_query, (run.metrics.get("run") or {}).get("budget")) if isinstance(files, RunFiles) else None


def build(result: dict[str, Any], a: Any, b: Any, *, files: Sequence[RunFiles | str | None], set_files: list[Path],
          pictured: int = PICTURED, detail_a: RunDetail | None = None) -> str:
    """The page of `bench compare A B --html` from the comparison `result` and the two runs
    (bench.comparison.compare.LoadedRun); `files`: where each run's data/ outputs are
    (bench.reporting.cartridges.locate; a string or None: why there are none); `set_files`: the
    project's sets, read for questions when neither run holds its validated entries; `detail_a`:
    A's cartridges when the caller read them already (:func:`run_detail`: the leaderboard reads its
    baseline's once for every page; read only here)."""
    from bench.reporting.compare_report import gated_rows

    k = result["k"]
    data = page_data(a.per_query, b.per_query, k)
    da = detail_a if detail_a is not None else run_detail(files[0], a, k)
    db = run_detail(files[1], b, k)
    entries = {**(db.entries if db else {}), **(da.entries if da else {})}
    notes = []
    if not entries:
        entries = set_entries(set_files, set(data["ids"]))
        notes.append("Questions and gold from the sets in bench/sets/ (neither run's data/ outputs could be read).")
    for label, d, f in (("A", da, files[0]), ("B", db, files[1])):
        if d is None:
            why = f if isinstance(f, str) else "it is not a project folder holding its data/ outputs"
            notes.append(f"{label}'s cartridges are not shown: {why}.")
    pics = draw_pictures(data, da, db, entries, pictured)
    if pics:
        notes.append(f"Gold drawn as pictures for up to {pictured} answerable queries per modality (losses on {EQUAL_COST} "
                     f"first, then wins); {len(pics)} queries pictured, the others list their gold regions.")
    return page(result, data, details(data, da, db, entries, pics), describe=(a.describe(), b.describe()),
                doc_a=a.metrics, doc_b=b.metrics, notes=notes, gated=gated_rows(result, a, b))
