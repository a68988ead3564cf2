"""The human report (reports/dev.md) and the metrics file (reports/metrics/dev.json)."""

from __future__ import annotations

from typing import Any

import pandas as pd

UNANSWERABLE_TARGET = 0.15


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


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 1000 else f"{value:.1f}"
    return str(value)


def metric_table(block: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| metric | value | n | denominator |", "|---|---:|---:|---:|"]
    for name, cell in block.items():
        lines.append(f"| {name} | {_fmt(cell['value'])} | {cell['n']} | {cell['denominator']} |")
    return lines


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
        f"p50 {_fmt(lat.get('p50_ms'))} ms, p95 {_fmt(lat.get('p95_ms'))} ms, p99 {_fmt(lat.get('p99_ms'))} ms, n={lat.get('n', '—')}.",
        "",
    ]
    failures = run.get("failures_by_modality") or {}
    if failures:
        out += [
            "Failed queries (timeout or crash) stay in every denominator and count 0.",
            "",
            "| modality | queries | failed | timeout | crash |",
            "|---|---:|---:|---:|---:|",
        ]
        for modality, row in failures.items():
            out.append(f"| {modality} | {row['queries']} | {row['failed']} | {row.get('timeout', 0)} | {row.get('crash', 0)} |")
        out.append("")
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
        + ", ".join(f"{m}={c.get('strategy')}" for m, c in sorted(run["chunking"].items())),
        "",
        "Every metric is shown with n (entries with a system result) and its denominator "
        "(annotated entries it is defined over: answerable ones for ranking metrics, "
        "unanswerable ones for false recall, all for temporal/holder correctness and latency).",
        "",
        *system_section(run),
        "## Overall",
        "",
        *metric_table(doc["overall"]),
        "",
    ]
    for modality, block in doc["by_modality"].items():
        out += [f"## {modality}", "", *metric_table(block), ""]

    out += ["## Entries", "", "| modality | valid dev entries | unanswerable | share | spec target ≥ 15% |", "|---|---:|---:|---:|---|"]
    by_mod: dict[str, list[dict]] = {}
    for e in entries:
        by_mod.setdefault(e["modality"], []).append(e)
    for modality, rows in sorted(by_mod.items()):
        n_un = sum(1 for e in rows if e["unanswerable"])
        share = n_un / len(rows) if rows else 0.0
        out.append(f"| {modality} | {len(rows)} | {n_un} | {share:.1%} | {'met' if share >= UNANSWERABLE_TARGET else 'NOT met'} |")
    out.append("")

    out += ["## Invalid entries (not in any denominator; listed, never dropped silently)", ""]
    out.append(f"Dev entries invalid as samples here: **{doc['invalid_entries']}**.")
    out.append("")
    out += ["| split | modality | reason | count |", "|---|---|---|---:|"]
    counts: dict[tuple[str, str, str], int] = {}
    for row in invalid:
        key = (row.get("split", "dev"), row["modality"], row["reason"].split(": ")[0])
        counts[key] = counts.get(key, 0) + 1
    for (split, modality, reason), n in sorted(counts.items()):
        out.append(f"| {split} | {modality} | {reason} | {n} |")
    for split, reasons in sorted(summary.get("invalid", {}).items()):
        if split != "dev":
            for reason, n in sorted(reasons.items()):
                out.append(f"| {split} | (all) | {reason} | {n} |")
    out += ["", "The full list is in `data/sets/invalid.jsonl`.", ""]

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
        for r in missed.head(50).itertuples(index=False):
            out.append(f"| {r.query_id} | {r.source_id} | `{r.region}` | {r.n_future_atoms} |")
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
    """Where atom text comes from (text layer or OCR), and answerable pdf entries left without text.

    `textless` is bench.modalities.pdf.textless.textless_gold over the dev entries.
    """
    out = ["## Text sources (text layer or OCR)", "",
           "Screenshot and photo text is OCR; PDF pages whose text layer is (nearly) empty are rendered and OCR'd.", "",
           "| modality | atoms | empty text | share | OCR text | share |", "|---|---:|---:|---:|---:|---:|"]
    for modality, st in sorted(atom_stats.items()):
        if "ocr_text" not in st:
            continue
        n = st["atoms"]
        out.append(f"| {modality} | {n} | {st['empty_text']} | {st['empty_text'] / n if n else 0:.1%} | "
                   f"{st['ocr_text']} | {st['ocr_text'] / n if n else 0:.1%} |")
    out.append("")
    if textless is not None:
        rows = textless["entries"]
        out.append(f"Answerable pdf dev entries whose every gold page has empty text: **{len(rows)}** of "
                   f"{textless['answerable']} (text source `ocr`: OCR ran on the page and found no text).")
        if rows:
            out += ["", "| query_id | gold pages | text source |", "|---|---|---|"]
            for r in rows:
                out.append(f"| {r['query_id']} | {', '.join(map(str, r['pages']))} | {', '.join(r['text_source'])} |")
        out.append("")
    return out
