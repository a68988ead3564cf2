"""The human report (reports/dev.md) and the metrics file (reports/metrics/dev.json)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from bench.evaluation.measures import by_name, measures
from bench.modalities import unreadable_gold_lines
from bench.modalities.derived import is_derived
from bench.modalities.ocr import accuracy_line
from bench.numbers import NO_VALUE, number
from bench.reporting.memories import memory_sections
from bench.reporting.verdict import bought, raised, rules_text

UNANSWERABLE_TARGET = 0.15
#: a bar's status; BOUGHT: met only by what the bar does not look at (bench.reporting.verdict)
MET, NOT_MET, NOT_MEASURABLE, BOUGHT = "met", "not met", "not measurable", "bought"


def bar_status(metric: str, cell: dict[str, Any] | None, k: int = 10) -> str | None:
    """"met", "not met" or "not measurable" against the spec's bar (bench.evaluation.measures); None without one."""
    measure = by_name(k).get(metric)
    if measure is None or measure.bar is None:
        return None
    if cell is None or cell.get("value") is None:
        return NOT_MEASURABLE
    return MET if measure.bar.met(cell["value"]) else NOT_MET


def verdict(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The verdict matrix: one row per modality plus overall, one cell per declared
    measure with a verdict heading: value, n, denominator, the bar's status (BOUGHT with
    what the cell says instead of "met", ``bought``: bench.reporting.verdict) and, for
    false recall, the rule that applied."""
    k = int(doc.get("run", {}).get("k", 10))
    rules = doc.get("run", {}).get("false_recall_rule", {})
    columns = [m for m in measures(k) if m.heading is not None]
    rows = []
    for group, block in [*doc["by_modality"].items(), ("overall", doc["overall"])]:
        cells = []
        for m in columns:
            cell = block.get(m.name)
            status = bar_status(m.name, cell, k)
            instead = bought(block, m.name, k, lambda name, other: bar_status(name, other, k)) if status == MET else None
            cells.append({
                "metric": m.name, "heading": m.heading,
                "value": None if cell is None else cell.get("value"),
                "n": None if cell is None else cell.get("n"),
                "denominator": None if cell is None else cell.get("denominator"),
                "reason": None if cell is None else cell.get("reason"),
                "status": BOUGHT if instead else status,
                "bought": instead,
                "rule": rules.get(group, {}).get("rule") if m.name == "false_recall" else None,
            })
        rows.append({"group": group, "cells": cells})
    return rows


def bar_legend(k: int = 10) -> str:
    return ", ".join(f"{m.name} {m.bar.direction.replace('>=', '≥').replace('<=', '≤')} {m.bar.value:.2f}"
                     for m in measures(k) if m.bar is not None)


def verdict_markdown(doc: dict[str, Any]) -> list[str]:
    rows = verdict(doc)
    if not rows:
        return []
    k = int(doc.get("run", {}).get("k", 10))
    head = [c["heading"] for c in rows[0]["cells"]]
    out = [
        "## Verdict",
        "",
        (f"Each cell: value (n/denominator), marked against the spec's bars ({bar_legend(k)}) as "
         "**met**, **NOT met** or *not measurable*; columns without a bar are reported. "
         "False recall names the rule that applied (docs/measuring.md). " + rules_text()),
        "",
        "| modality | " + " | ".join(head) + " |",
        "|---|" + "---:|" * len(head),
    ]
    for row in rows:
        texts = []
        for c in row["cells"]:
            text = f"{number(c['value'])} ({c['n']}/{c['denominator']})" if c["n"] is not None else "—"
            if c["rule"]:
                text += f" {c['rule']}"
            if c["status"] == MET:
                text += " **met**"
            elif c["status"] == BOUGHT:
                words, _, detail = str(c["bought"]).partition(": ")
                text += f" **{words}**: {detail}"
            elif c["status"] == NOT_MET:
                text += " **NOT met**"
            elif c["status"] == NOT_MEASURABLE:
                text += " *not measurable*"
            texts.append(text)
        out.append(f"| {row['group']} | " + " | ".join(texts) + " |")
    out.append("")
    return out + mde_markdown(doc.get("mde"))


def mde_markdown(block: dict[str, Any] | None) -> list[str]:
    """The minimum detectable effects beside the verdict (bench.evaluation.stats.power)."""
    if not block:
        return []
    names = list(block["overall"]) or next((list(r) for r in block["by_modality"].values()), [])
    out = [
        (f"**Can this set see a change?** The minimum detectable effect of a paired comparison (power {block['power']:.0%}, "
         f"α {block['alpha']:g}; bench.evaluation.stats.power) from this run's per-query values: the smallest any change can be seen "
         "at (one that moves entries one way only) – the largest, for two runs whose per-query values are unrelated; a "
         "typical pair of runs lies between (`bench leaderboard` measures it). Over clusters of entries asking the same "
         "question (n entries in C clusters; bench.evaluation.stats.clusters)."),
        "",
        "| modality | " + " | ".join(f"MDE {n}" for n in names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    marks: set[str] = set()
    for group, row in [*block["by_modality"].items(), ("overall", block["overall"])]:
        ranges = [mde_range(row.get(name), block["alpha"], block["power"]) for name in names]
        marks.update(c[-1] for c in ranges if c[-1] in MDE_NOTES)
        out.append(f"| {group} | " + " | ".join(f"{r}{_counted(row.get(name))}" for r, name in zip(ranges, names, strict=True)) + " |")
    out.append("")
    if marks:
        out += [" ".join(f"{m} {MDE_NOTES[m]}" for m in MDE_NOTES if m in marks), ""]
    return out


#: the marks of an MDE range (:func:`mde_range`) and what each says
MDE_FLOOR, MDE_BOUND, MDE_FEW = "†", "‡", "§"
MDE_NOTES = {
    MDE_FLOOR: "The normal approximation for two unrelated runs falls below the smallest change the sign-flip test can "
               "see on these entries: no change below the value shown can be seen.",
    MDE_BOUND: "This run's per-query values do not vary (all equal), so the spread of two unrelated runs cannot be read from "
               "them: the upper end is the bound for any measure in [0, 1] (standard deviation of the differences at most 0.5).",
    MDE_FEW: "Fewer entries than the sign-flip test needs to reject at all (6 at α 0.05): no change can be seen.",
}


def mde_range(cell: dict[str, Any] | None, alpha: float, power: float) -> str:
    """An MDE cell (bench.evaluation.stats.power: n, fewest, independent) as its range, smallest
    first, never reversed nor open: the upper end is at least ``fewest`` (no change below it can
    be seen; MDE_FLOOR) and, where the run's values do not vary, the bound for a [0, 1] measure
    (MDE_BOUND); a group too small for any significance is MDE_FEW."""
    if not cell:
        return NO_VALUE
    if cell.get("fewest") is None:
        return f"{NO_VALUE}{MDE_FEW}"
    lo = float(cell["fewest"])
    up, mark = mde_upper(cell, alpha, power)
    if up is None:
        return f"{lo:.3f}"
    return (f"{lo:.3f}" if f"{up:.3f}" == f"{lo:.3f}" else f"{lo:.3f}–{up:.3f}") + mark


def mde_upper(cell: dict[str, Any], alpha: float, power: float) -> tuple[float | None, str]:
    """The upper end of an MDE cell (:func:`mde_range`) and its mark ("" when it is ``independent`` as is)."""
    from bench.evaluation.stats.power import mde

    lo, up = cell.get("fewest"), cell.get("independent")
    if lo is None:
        return up, ""
    if up is None:
        return mde(0.5, int(cell.get("n") or 0), alpha, power), MDE_BOUND
    return (float(lo), MDE_FLOOR) if up < lo else (float(up), "")


def _counted(cell: dict[str, Any] | None) -> str:
    """What an MDE cell rests on: " (n in C)", n entries in C clusters ("" without a cell)."""
    return f" ({cell['n']} in {cell.get('clusters', cell['n'])})" if cell and cell.get("n") is not None else ""


def acceptance_markdown(doc: dict[str, Any], acceptance: int, commit: str | None) -> str:
    """reports/test.md: the acceptance's verdict on the test split (the rules of dev.md's)."""
    run = doc["run"]
    chunking = ", ".join(f"{m}={c.get('strategy')}" for m, c in sorted(run.get("chunking", {}).items()))
    return "\n".join([
        "# Acceptance report (test split)",
        "",
        f"Acceptance #{acceptance} on commit `{str(commit)[:12]}`: system `{run['system']}` (depth {run['depth']}), chunking: {chunking}. "
        f"{system_words(run)} The numbers are in `reports/metrics/test.json`; the audit row in `reports/acceptance.jsonl`.",
        "",
        isolation_heading(run),
        "",
        *verdict_markdown(doc),
        ("A failed query stays in every denominator and counts as the worst case. False recall reuses the dev run's rule "
         "and thresholds (never recalibrated on test)."),
        "",
    ])


def false_recall_section(run: dict[str, Any]) -> list[str]:
    """Which false-recall rule applied per modality, its threshold share and reasons."""
    rules = run.get("false_recall_rule") or {}
    if not rules:
        return []
    out = [
        "## False recall: the rule per modality",
        "",
        ("`abstention`: the system declared abstention (once, or on any response); an unanswerable entry is a false "
         "recall when the system did not abstain and returned a hit. `calibrated`: a system that never abstains; the "
         f"threshold is the top-1 score that {run.get('calibration_recall', '?')} of the answerable dev entries reach "
         "(`metrics.calibration_recall`), reused unchanged by the acceptance run. `not measurable`: the reason is given. "
         f"AUROC signal: `{run.get('auroc_signal', '—')}`. A failed query counts as the worst case."),
        "",
        "| modality | rule | unanswerable | answerable keeping their top-1 hit | reason |",
        "|---|---|---:|---:|---|",
    ]
    for m, r in rules.items():
        kept = f"{r['kept']}/{r['answerable']}" if "kept" in r else "—"
        out.append(f"| {m} | {r.get('rule')} | {r.get('unanswerable', '—')} | {kept} | {r.get('reason', '')} |")
    out.append("")
    return out


def metric_table(block: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| metric | value | n | denominator |", "|---|---:|---:|---:|"]
    for name, cell in block.items():
        value = number(cell["value"]) + (f" ({cell['reason']})" if cell.get("reason") else "")
        note = raised(block, name)  # a diagnostic raised by atom size (bench.reporting.verdict)
        value += f" **{note.partition(': ')[0]}**: {note.partition(': ')[2]}" if note else ""
        lines.append(f"| {name} | {value} | {cell['n']} | {cell['denominator']} |")
    return lines


def isolation_text(isolation: Any) -> str:
    """run.isolation (from system.json) as one line."""
    if isinstance(isolation, dict):
        return "; ".join(f"{key} {isolation_text(val)}" for key, val in isolation.items())
    if isinstance(isolation, (list, tuple)):
        return ", ".join(isolation_text(v) for v in isolation)
    return str(isolation)


#: what each recorded isolation means, for the heading of the verdict (docs/systems.md)
#: what the sandbox does not guard against, said with every isolated run (docs/systems.md, section 4)
CONTENT_LIMIT = ("its declared code was checked for the sets' ids, which guards against accidents and folder mistakes, not against "
                 "a system built to cheat (gold transformed on purpose); the locked test split and its acceptance record are the defence")
ISOLATION_WORDS = {
    "bwrap": "isolated (bubblewrap: the system saw only its declared code, the runtime and its atoms; no network, its own /proc); "
             + CONTENT_LIMIT,
    "landlock": "isolated (Landlock: the system could read only its declared code, the runtime and its atoms; no TCP, no other "
                "process's /proc); " + CONTENT_LIMIT,
    "process": "NOT ISOLATED (system.sandbox: off): the system could read every file this user can, the sets and the gold included",
    "none": "NOT ISOLATED: a builtin, python, langchain or llamaindex system runs in the harness's process, and an http system or an "
            "MCP server at a URL is your own server, whose code the harness neither sees nor confines; it could read every file its "
            "user can, the sets and the gold included",
}


def system_words(run: dict[str, Any]) -> str:
    """What the system does, in words: its own description (scoped or not, when it abstains), when it gave one."""
    if run.get("description"):
        return f"What it does: {run['description']}"
    return ("It gives no description of itself (a Python system may set `description`, docs/systems.md); "
            "the false-recall rule below says whether it abstained.")


def isolation_heading(run: dict[str, Any]) -> str:
    """The run's isolation in words a reader cannot miss (the line above the verdict)."""
    iso = run.get("isolation")
    words = ISOLATION_WORDS.get(iso) if isinstance(iso, str) else None
    if iso is None:
        return "**Isolation: not recorded** — nothing says whether the system could read the gold."
    return f"**Isolation: {isolation_text(iso)}** — {words or 'as recorded by the run'}."


def system_section(run: dict[str, Any]) -> list[str]:
    """How the system was run (adapter, concurrency, warm-up, latency) and its failures per modality."""
    lat = run.get("latency") or {}
    warm = (
        f"warm: {run.get('warmup_queries', 0)} warm-up queries were sent once, untimed, before the timed run"
        if run.get("warm") else "cold: no warm-up query before the timed run"
    )
    out = [
        "## System under test",
        "",
        f"Adapter `{run.get('adapter', 'builtin')}`, concurrency {run.get('concurrency', 1)} "
        f"(queries in flight at once), per-query timeout {'—' if run.get('timeout_s') is None else format(run['timeout_s'], 'g')} s; {warm}. "
        "Compile latency is measured by the harness around each call (index build excluded): "
        f"p50 {number(lat.get('p50_ms'))} ms, p95 {number(lat.get('p95_ms'))} ms, p99 {number(lat.get('p99_ms'))} ms, n={lat.get('n', '—')}.",
        "",
    ]
    measured = run.get("latency_measured_in") or {}
    if len(measured) > 1:  # bench.systems.partwise: an answer whose every input was byte-identical keeps the run that computed it
        out += ["Latency comes from the run that computed each answer (a built-in system's answer whose every input was byte-"
                f"identical to an earlier run's is reused with its latency): {', '.join(f'{n} queries measured in run {r}' for r, n in sorted(measured.items()))}.", ""]
    if run.get("isolation") is not None:
        out += [f"Isolation: {isolation_text(run['isolation'])}.", ""]
    failures = run.get("failures_by_modality") or {}
    if failures:
        out += [
            "Failed queries (timeout or crash) stay in every denominator and count as the worst case (0, or 1 for false recall and abstention rate).",
            "",
            "| modality | queries | failed | timeout | crash |",
            "|---|---:|---:|---:|---:|",
        ]
        for modality, row in failures.items():
            out.append(f"| {modality} | {row['queries']} | {row['failed']} | {row.get('timeout', 0)} | {row.get('crash', 0)} |")
        out.append("")
        said = [(m, e) for m, row in failures.items() for e in row.get("errors") or []]
        if said:  # each distinct error once, in the system's own words
            out += ["Why they failed (each distinct error once, with its count):", ""]
            out += [f"- {m}: {e['count']}x `{e['message'][:400]}`" for m, e in said]
            out.append("")
    return out


def entries_table(entries: list[dict]) -> list[str]:
    """Valid dev entries per modality, unanswerable ones split by who made them.

    Human-labelled: the data set's own unanswerable questions. Derived: a human question
    asked before its gold was observed (origin.item carries "|derived:<rule>", see
    bench/modalities/derived.py). The share is both kinds over all entries.
    """
    out = [
        "## Entries",
        "",
        (
            "Unanswerable entries are human-labelled (the data set's own) or derived (a human question asked "
            "before its gold was observed; `origin.item` ends in `|derived:<rule>`)."
        ),
        "",
        "| modality | valid dev entries | unanswerable, human-labelled | unanswerable, derived | share | spec target ≥ 15% |",
        "|---|---:|---:|---:|---:|---|",
    ]
    by_mod: dict[str, list[dict]] = {}
    for e in entries:
        by_mod.setdefault(e["modality"], []).append(e)
    for modality, rows in sorted(by_mod.items()):
        derived = sum(1 for e in rows if e["unanswerable"] and is_derived(e))
        human = sum(1 for e in rows if e["unanswerable"]) - derived
        share = (human + derived) / len(rows) if rows else 0.0
        met = "met" if share >= UNANSWERABLE_TARGET else "NOT met"
        out.append(f"| {modality} | {len(rows)} | {human} | {derived} | {share:.1%} ({human + derived}/{len(rows)}) | {met} |")
    out.append("")
    return out


def invalid_section(doc: dict[str, Any], invalid: list[dict], summary: dict[str, Any]) -> list[str]:
    """The report's invalid entries: dev ones by (split, modality, reason), other splits' counts."""
    out = ["## Invalid entries (not in any denominator; listed, never dropped silently)", ""]
    out.append(f"Dev entries invalid as samples here: **{doc['invalid_entries']}**.")
    out.append("")
    out += ["| split | modality | reason | count |", "|---|---|---|---:|"]
    counts: dict[tuple[str, str, str], int] = {}
    for row in invalid:
        cell = (row.get("split", "dev"), row["modality"], row["reason"].split(": ")[0])
        counts[cell] = counts.get(cell, 0) + 1
    for (split, modality, reason), n in sorted(counts.items()):
        out.append(f"| {split} | {modality} | {reason} | {n} |")
    for split, reasons in sorted(summary.get("invalid", {}).items()):
        if split != "dev":
            for reason, n in sorted(reasons.items()):
                out.append(f"| {split} | (all) | {reason} | {n} |")
    out += ["", "The full list is in `data/sets/invalid.jsonl`.", ""]
    return out


def markdown(
    doc: dict[str, Any],
    entries: list[dict],
    invalid: list[dict],
    regions: pd.DataFrame,
    imports: dict[str, dict],
    summary: dict[str, Any],
    atom_stats: dict[str, Any],
    textless: dict[str, Any] | None = None,
) -> str:
    run = doc["run"]
    out = [
        "# Dev evaluation report",
        "",
        f"System `{run['system']}` (depth {run['depth']}), chunking: "
        + ", ".join(f"{m}={c.get('strategy')}" for m, c in sorted(run["chunking"].items())) + ". " + system_words(run),
        "",
        isolation_heading(run),
        "",
        *verdict_markdown(doc),
        ("Every metric is shown with n (entries with a system result) and its denominator "
         "(annotated entries it is defined over: answerable ones for ranking metrics and abstention rate, "
         "unanswerable ones for false recall, all for AUROC, temporal/holder correctness and latency). "
         "A failed query stays in every denominator and counts as the worst case."),
        "",
        *system_section(run),
        *memory_sections(doc),
        *false_recall_section(run),
        "## Overall",
        "",
        *metric_table(doc["overall"]),
        "",
    ]
    for modality, block in doc["by_modality"].items():
        out += [f"## {modality}", "", *metric_table(block), ""]

    out += entries_table(entries)

    out += invalid_section(doc, invalid, summary)

    out += ["## Upstream rows excluded at import", "", "| data set | upstream rows | entries | excluded | reasons |", "|---|---:|---:|---:|---|"]
    for key, rec in sorted(imports.items()):
        reasons = "; ".join(f"{r}: {n}" for r, n in rec.get("excluded_by_reason", {}).items()) or "—"
        out.append(f"| {key} | {rec.get('notes', {}).get('upstream_rows', '?')} | {rec['entries']} | {rec['excluded']} | {reasons} |")
    out += ["", "Each excluded row is listed with its reason in `bench/sets/imports/<key>.json`.", ""]

    missed = regions[regions["n_atoms"] == 0]
    out += ["## Gold regions that no atom overlaps (kept as misses)", ""]
    out.append(f"{len(missed)} of {len(regions)} gold regions of dev entries.")
    if len(missed):
        out += ["", "| query_id | source_id | region | future atoms |", "|---|---|---|---:|"]
        gold = {e["query_id"]: e["gold"] for e in entries}  # each region as its entry gives it
        for r in missed.head(50).itertuples(index=False):
            region = json.dumps(gold[r.query_id][r.gold_idx]["region"], sort_keys=True)
            out.append(f"| {r.query_id} | {r.source_id} | `{region}` | {r.n_future_atoms} |")
        if len(missed) > 50:
            out.append(f"| … {len(missed) - 50} more in `data/resolved/regions.parquet` | | | |")
    out.append("")

    out += text_source_section(atom_stats, textless)
    out += ["## Atoms", "", "| modality | atoms | sources | empty text | median chars |", "|---|---:|---:|---:|---:|"]
    for modality, st in sorted(atom_stats.items()):
        out.append(f"| {modality} | {st['atoms']} | {st['sources']} | {st['empty_text']} | {st['median_chars']:.0f} |")
    out.append("")

    out += ["## Provenance", "", f"- manifest `bench/corpus/manifest.jsonl`: `{doc['sha256']['manifest']}`"]
    for path, sha in sorted(doc["sha256"]["sets"].items()):
        out.append(f"- set `{path}`: `{sha}`")
    out.append("")
    return "\n".join(out)


def text_source_section(atom_stats: dict[str, Any], textless: dict[str, Any] | None) -> list[str]:
    """Where atom text comes from (text layer or OCR), and the answerable entries whose gold
    holds no text (`textless`: bench.modalities.unreadable_gold over the dev entries, told
    by the modalities' `unreadable_gold_lines`)."""
    out = ["## Text sources (text layer or OCR)", "",
           "Screenshot and photo text is OCR; PDF pages whose text layer is (nearly) empty are rendered and OCR'd.", "",
           *([line, ""] if (line := accuracy_line()) else []),
           "| modality | atoms | empty text | share | OCR text | share |", "|---|---:|---:|---:|---:|---:|"]
    for modality, st in sorted(atom_stats.items()):
        if "ocr_text" not in st:
            continue
        n = st["atoms"]
        out.append(f"| {modality} | {n} | {st['empty_text']} | {st['empty_text'] / n if n else 0:.1%} | "
                   f"{st['ocr_text']} | {st['ocr_text'] / n if n else 0:.1%} |")
    out.append("")
    if textless is not None:
        out += unreadable_gold_lines(textless)
    return out
