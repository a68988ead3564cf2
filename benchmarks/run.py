"""Run the benchmark suite: `python -m benchmarks.run [--size small|full] [--only CASE ...]`.

Every figure is our time next to a reference measured in the same run on the same
data, and their ratio; absolute times and the machine (cores, memory, load) are kept
beside it. Writes reports/perf.json and reports/perf.md (see docs/performance.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from benchmarks.common import MIRROR, ROOT, machine

SIZES: dict[str, dict[str, Any]] = {
    "small": {"metrics": [1000], "metrics_repeats": 1,
              "resolve": (1000, 10_000, [1, 2, 4], 1, 2, 2),
              "fetch": ["locomo"], "fetch_repeats": 1, "pdf_limit": 2, "pdf_repeats": 1,
              "dvc": ["locomo"], "dvc_repeats": 1, "ocr": (0, 2, 1), "ocr_settings": (2, 3, 1), "uncertainty": (2000, 1),
              "scale": (20, 2, 2, 0, 50, [2]), "blocks": ([2000, 10_000], 100_000), "loop": None, "loop_repeats": 1, "sweep": None},
    "full": {"metrics": [10_000, 100_000], "metrics_repeats": 3,
             "resolve": (100_000, 1_000_000, [1, 2, 4], 3, 10, 3),
             "fetch": None, "fetch_repeats": 3, "pdf_limit": None, "pdf_repeats": 2,
             "dvc": ["mmlongbench", "locomo", "screenagent"], "dvc_repeats": 3, "ocr": (24, 24, 2),
             "ocr_settings": (24, 12, 2),
             "uncertainty": (100_000, 2),
             "scale": (20, 16, 16, 8, 1000, [1, 2]), "blocks": ([10_000, 100_000, 300_000], 2_000_000), "loop": "all",
             "loop_repeats": 3, "sweep": ["mmlongbench", "locomo"]},
}
CASES = ("metrics", "resolve", "fetch", "pdf", "dvc", "ocr", "uncertainty", "scale", "blocks", "loop", "sweep")


def _fmt(x: float | None, unit: str = "s") -> str:
    if x is None:
        return "–"
    if unit == "GiB":
        return f"{x:.3f} GiB"
    if unit == "s":
        return f"{x * 1000:.2f} ms" if x < 0.1 else f"{x:.3f} s"
    return f"{x:.2f}"


def markdown(doc: dict) -> str:
    m = doc["machine"]
    lines = [
        "# Performance",
        "",
        f"Size `{doc['size']}`, run {doc['started']} in {doc['wall_s']:.0f} s on {m['cores']} cores "
        f"({m['usable_cores']} usable), {m['memory_gib']} GiB, Python {m['python']}, load average at start "
        f"{m['load_average_at_start']}. Ratios are ours / reference, both measured in this run, in this "
        "process, on the same data; the statistic (best of N) is given per figure. Command: "
        f"`python -m benchmarks.run --size {doc['size']}`.",
        "",
        "Wall time per case: " + ", ".join(f"{c} {t:.0f} s" for c, t in doc.get("case_wall_s", {}).items()) + ".",
        "",
        "| case | figure | ours | reference | ratio | goal | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for case, figs in doc["cases"].items():
        if isinstance(figs, dict) and "skipped" in figs:
            lines.append(f"| {case} | skipped: {figs['skipped']} | | | | | |")
            continue
        for f in figs:
            met = {True: "yes", False: "**no**", None: "–"}[f["met"]]
            unit = f.get("unit", "s")
            lines.append(f"| {case} | {f['name']} | {_fmt(f['ours_s'], unit)} | {_fmt(f['reference_s'], unit)} | "
                         f"{_fmt(f['ratio'], '')} | {f['goal']} | {met} |")
    lines += ["", "References:", ""]
    for figs in doc["cases"].values():
        if isinstance(figs, list):
            lines += [f"* {f['name']}: {f['reference']} ({f.get('statistic', 'one run')})" for f in figs]
    return "\n".join(lines + _dvc_lines(doc["cases"].get("dvc")) + _loop_lines(doc["cases"].get("loop")) + _metrics_lines(doc["cases"].get("metrics"))
                     + _ocr_lines(doc["cases"].get("ocr"))) + "\n"


def _dvc_lines(dvc: Any) -> list[str]:
    lines: list[str] = []
    for f in dvc if isinstance(dvc, list) else []:
        if "stages" in f:
            lines += ["", "Per stage (each stage command run once more, in order; peak RSS of the command):", "",
                      "| stage | wall | peak RSS |", "|---|---|---|"]
            lines += [f"| {s['stage']} | {s['wall_s']:.2f} s | {s['peak_rss_mib']:.0f} MiB |" for s in f["stages"]]
        if "p95_ms" in f:
            lines += ["", f"BM25 compile latency over {f['atoms']} real atoms, {f['queries']} dev queries: "
                      f"p50 {f['p50_ms']:.2f} ms, p95 {f['p95_ms']:.2f} ms (bare bm25s scoring: p50 "
                      f"{f['bare_p50_ms']:.2f} ms, p95 {f['bare_p95_ms']:.2f} ms)."]
    return lines


def _loop_lines(loop: Any) -> list[str]:
    """Seconds per stage of each repro of the chunking loop (case 11)."""
    lines: list[str] = []
    for f in loop if isinstance(loop, list) else []:
        if f.get("stage_s"):
            per = ", ".join(f"{name} {sec:.1f} s" for name, sec in f["stage_s"].items())
            lines.append(f"* {f['name']}: {f['ours_s']:.1f} s; stages {per}; differs from a cold run: {f['differs_from_cold'] or 'nothing'}")
    return ["", "The chunking loop, per stage (from its \"Running stage\" line to the next):", "", *lines] if lines else []


def _metrics_lines(metrics: Any) -> list[str]:
    if not isinstance(metrics, list):
        return []
    return ["", "Agreement with pytrec_eval (max |difference| per query where both define the metric):", "",
            *[f"* {f['name']}: {json.dumps(f['agreement_with_pytrec_eval'])}" for f in metrics if "vs pytrec_eval" in f["name"]]]


def _ocr_lines(ocr: Any) -> list[str]:
    """The OCR settings' accuracy beside their speed (benchmarks.case_ocr)."""
    rows = [f for f in ocr if "accuracy" in f] if isinstance(ocr, list) else []
    if not rows:
        return []
    lines = ["", "OCR accuracy beside speed (same pages, same run; CER/WER against the pages' text layers, "
             "benchmarks/ocr_accuracy.py):", "", "| setting | pages | pages/s | CER | WER (bag of words) |", "|---|---|---|---|---|"]
    for f in rows:
        for name, a in f["accuracy"].items():
            lines.append(f"| {name} | {a['pages']} | {a['pages_per_s']:.3f} | {a['cer']:.4f} | {a['wer']:.4f} |")
    return lines


def run(size: str, only: tuple[str, ...], out_dir: Path) -> dict:
    cfg = SIZES[size]
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    t0 = time.perf_counter()
    doc: dict[str, Any] = {"size": size, "started": started, "machine": machine(), "cases": {}, "case_wall_s": {}}
    have_mirror = MIRROR.is_dir()
    for case in (c for c in CASES if not only or c in only):
        click.echo(f"benchmarks: {case} ...", err=True)
        t_case = time.perf_counter()
        _run_one(case, cfg, size, have_mirror, doc)
        doc["case_wall_s"][case] = round(time.perf_counter() - t_case, 1)
        click.echo(f"benchmarks: {case}: {doc['case_wall_s'][case]} s", err=True)
    doc["wall_s"] = time.perf_counter() - t0
    out_dir.mkdir(parents=True, exist_ok=True)
    from bench.io import write_json, write_text

    write_json(out_dir / "perf.json", doc)
    write_text(out_dir / "perf.md", markdown(doc))
    return doc


def _case_metrics(cfg: dict[str, Any], size: str) -> Any:
    from benchmarks import case_metrics

    return case_metrics.run_case(cfg["metrics"], cfg["metrics_repeats"])


def _case_resolve(cfg: dict[str, Any], size: str) -> Any:
    from benchmarks import case_resolve

    return case_resolve.run_case(*cfg["resolve"])


def _case_fetch(cfg: dict[str, Any], size: str) -> Any:
    from bench.corpus_sources import datasets
    from benchmarks import case_fetch

    return case_fetch.run_case(cfg["fetch"] or sorted(datasets()), cfg["fetch_repeats"])


def _case_pdf(cfg: dict[str, Any], size: str) -> Any:
    if not (MIRROR / "mmlongbench-doc").is_dir():
        return {"skipped": "no MMLongBench-Doc mirror"}
    from benchmarks import case_pdf

    return case_pdf.run_case(cfg["pdf_limit"], cfg["pdf_repeats"])


def _case_ocr(cfg: dict[str, Any], size: str) -> Any:
    # (screenshots, photos, repeats): ocr_many with a cold cache vs bare rapidocr / cores;
    # (pages, screenshots, photos): the chosen OCR setting against the old one, with accuracy
    from benchmarks import case_ocr

    figures = [case_ocr.run_case(*cfg["ocr"]), case_ocr.run_settings_case(*cfg["ocr_settings"])]
    listed = [f for figs in figures if isinstance(figs, list) for f in figs]
    return listed or figures[0]  # every part skipped: the first one's reason


def _case_uncertainty(cfg: dict[str, Any], size: str) -> Any:
    # (queries, repeats): bootstrap intervals and sign-flip tests vs scipy and the metrics engine
    from benchmarks import case_uncertainty

    return case_uncertainty.run_case(*cfg["uncertainty"])


def _case_scale(cfg: dict[str, Any], size: str) -> Any:
    # (scale, PDFs, screenshots, text-less pages, no-op tasks, Dask worker counts): bench.executor
    from benchmarks import case_scale

    return case_scale.run_case(*cfg["scale"])


def _case_blocks(cfg: dict[str, Any], size: str) -> Any:
    # (queries per size, run rows per block): peak RSS of the evaluation in core and out of core
    from benchmarks import case_blocks

    return case_blocks.run_case(*cfg["blocks"])


def _case_dvc(cfg: dict[str, Any], size: str) -> Any:
    if cfg["dvc"] is None:
        return {"skipped": f"size {size} (a cold dvc repro takes about a minute)"}
    from benchmarks import case_dvc

    return case_dvc.run_case(cfg["dvc"], cfg["dvc_repeats"])


def _case_loop(cfg: dict[str, Any], size: str) -> Any:
    if cfg["loop"] is None:
        return {"skipped": f"size {size} (its cold repro of the default data sets takes minutes)"}
    from benchmarks import case_loop

    return case_loop.run_case(cfg["loop"], cfg["loop_repeats"])


def _case_sweep(cfg: dict[str, Any], size: str) -> Any:
    if cfg["sweep"] is None:
        return {"skipped": f"size {size} (eighteen queued experiments take minutes)"}
    from benchmarks import case_sweep

    return case_sweep.run_case(cfg["sweep"])


RUNNERS: dict[str, Callable[[dict[str, Any], str], Any]] = {
    "metrics": _case_metrics, "resolve": _case_resolve, "fetch": _case_fetch, "pdf": _case_pdf, "dvc": _case_dvc,
    "ocr": _case_ocr, "uncertainty": _case_uncertainty, "scale": _case_scale, "blocks": _case_blocks, "loop": _case_loop,
    "sweep": _case_sweep,
}
#: cases that read the data mirror beside the checkout
NEEDS_MIRROR = {"fetch", "dvc", "loop", "sweep"}


def _run_one(case: str, cfg: dict[str, Any], size: str, have_mirror: bool, doc: dict[str, Any]) -> None:
    """Run one case of the suite into doc["cases"][case] (a list of figures, or {"skipped": why})."""
    if case in NEEDS_MIRROR and not have_mirror and not (case in ("dvc", "loop", "sweep") and cfg[case] is None):
        doc["cases"][case] = {"skipped": "no data mirror beside the checkout (../shared/mirror)"}
        return
    doc["cases"][case] = RUNNERS[case](cfg, size)


@click.command()
@click.option("--size", type=click.Choice(sorted(SIZES)), default="full", show_default=True)
@click.option("--only", multiple=True, type=click.Choice(CASES), help="run only these cases (repeatable)")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=ROOT / "reports", show_default="reports/")
def main(size: str, only: tuple[str, ...], out_dir: Path) -> None:
    """Benchmark the hot paths against reference tools; write perf.json and perf.md."""
    doc = run(size, only, out_dir)
    click.echo(markdown(doc))


if __name__ == "__main__":
    main()
