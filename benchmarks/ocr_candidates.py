"""OCR settings measured side by side: speed on the cores and accuracy against text layers.

`python -m benchmarks.ocr_candidates [--every K] [--only NAME ...]` runs each candidate
setting over the same pages of the accuracy sample (benchmarks.ocr_accuracy; every
K-th page), each in a fresh pool of forked worker processes that build their own
engine (as extraction does), and prints pages/s, CER and WER and their ratios to
today's setting measured in the same run. Writes reports/ocr_candidates.json.

A setting is the engine parameters (OCR_PARAMS form), the render scale, and how the
cores are used: processes x threads per process (2 x 1 today).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

import click

from benchmarks.common import ROOT


@dataclass(frozen=True)
class Setting:
    name: str
    params: dict[str, Any]
    scale: float = 2.0
    processes: int = 2
    threads: int = 1
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


#: the setting extraction used before this measurement (onnxruntime, scale 2, 2 x 1)
BASE_PARAMS: dict[str, Any] = {
    "Global.log_level": "error",
    "Global.use_cls": False,
    "Global.text_score": 0.5,
    "EngineConfig.onnxruntime.intra_op_num_threads": 1,
    "EngineConfig.onnxruntime.inter_op_num_threads": 1,
}
OPENVINO = {"Det.engine_type": "openvino", "Rec.engine_type": "openvino", "Cls.engine_type": "openvino",
            "EngineConfig.openvino.inference_num_threads": 1}
TODAY = Setting("today: onnxruntime, scale 2.0, 2 processes x 1 thread", BASE_PARAMS)


def current() -> Setting:
    """The setting extraction uses now: OCR_PARAMS and the pdf modality's RENDER_SCALE."""
    from bench.modalities.ocr import OCR_PARAMS
    from bench.modalities.pdf.modality import RENDER_SCALE

    return Setting("chosen (OCR_PARAMS, RENDER_SCALE), 2 processes x 1 thread", dict(OCR_PARAMS), RENDER_SCALE)


def _ort_threads(params: dict[str, Any], n: int) -> dict[str, Any]:
    return {**params, "EngineConfig.onnxruntime.intra_op_num_threads": n}


def candidates() -> list[Setting]:
    """Today's setting first, then one change at a time, then combinations."""
    ov = {**BASE_PARAMS, **OPENVINO}
    return [
        TODAY,
        Setting("openvino engine", ov),
        Setting("det limit_side_len 640 (736 today)", {**BASE_PARAMS, "Det.limit_side_len": 640}),
        Setting("det limit_side_len 512", {**BASE_PARAMS, "Det.limit_side_len": 512}),
        Setting("direction classifier on", {**BASE_PARAMS, "Global.use_cls": True}),
        Setting("rec batch 16 (6 today)", {**BASE_PARAMS, "Rec.rec_batch_num": 16}),
        Setting("render scale 1.5", BASE_PARAMS, scale=1.5),
        Setting("1 process x 2 threads", _ort_threads(BASE_PARAMS, 2), processes=1, threads=2),
        Setting("openvino, det limit_side_len 640", {**ov, "Det.limit_side_len": 640}),
        Setting("openvino, render scale 1.5", ov, scale=1.5),
    ]


_worker: dict[str, Any] = {}


def _init(params: dict[str, Any]) -> None:
    from bench.modalities.ocr import make_engine

    _worker["engine"] = make_engine(params)


def _ready(_: int) -> None:
    time.sleep(0.3)  # every worker has built its engine once one of these ran on it


def _ocr(job: tuple[str, int, float]) -> tuple[float, list[tuple[float, float, float, float, str, float]]]:
    """CPU s and boxes of one job: (pdf, page index, scale), or (image file, -1, 0) as extraction reads it."""
    from bench.modalities.ocr import PageImage, image_size, render_page, to_boxes

    path, index, scale = job
    cpu = time.process_time()
    if index < 0:
        width, height = image_size(path)
        r = _worker["engine"](path)
    else:
        pixels = render_page(PageImage(path, index, scale))
        height, width = int(pixels.shape[0]), int(pixels.shape[1])
        r = _worker["engine"](pixels)
    boxes = to_boxes(r.boxes, r.txts, r.scores, width, height)
    return time.process_time() - cpu, [(b.x0, b.y0, b.x1, b.y1, b.text, b.score) for b in boxes]


def ocr_pages(setting: Setting, pages: Sequence[tuple[str, int]]) -> tuple[float, list[float], list[Any]]:
    """(wall s, CPU s per page, boxes per page) of rendering and OCR of `pages` with `setting`
    in a fresh pool of its processes (engines built and the pool started outside the timing).
    A page index of -1 is an image file, OCR'd as it is."""
    jobs = [(pdf, i, setting.scale if i >= 0 else 0.0) for pdf, i in pages]
    with get_context("fork").Pool(setting.processes, initializer=_init, initargs=(setting.params,)) as pool:
        pool.map(_ready, range(setting.processes), chunksize=1)
        start = time.perf_counter()
        out = pool.map(_ocr, jobs, chunksize=1)
        wall = time.perf_counter() - start
    return wall, [cpu for cpu, _ in out], [boxes for _, boxes in out]


def run_setting(setting: Setting, pages: Sequence[tuple[str, int]], rounds: int = 1) -> dict[str, Any]:
    """OCR `pages` with `setting` (in `rounds` interleaved chunks) and score every page against its layer."""
    return run_settings([setting], pages, rounds)[0]


def run_settings(settings: Sequence[Setting], pages: Sequence[tuple[str, int]], rounds: int = 1,
                 score: bool = True) -> list[dict[str, Any]]:
    """Each setting over the same `pages`, interleaved: the pages are cut into `rounds` chunks
    and every round runs each setting on one chunk, so a change of the machine's load
    during the run falls on every setting alike. Pages/s is pages / summed wall time;
    CPU s per page is the worker processes' CPU time (all their threads)."""
    from bench.modalities.ocr import OcrBox
    from benchmarks.ocr_accuracy import page_scores

    chunks = [c for c in (list(range(r, len(pages), rounds)) for r in range(rounds)) if c]
    walls = [0.0] * len(settings)
    cpus: list[dict[int, float]] = [{} for _ in settings]
    boxes: list[dict[int, Any]] = [{} for _ in settings]
    for r, chunk in enumerate(chunks):
        for k, s in enumerate(settings):
            wall, cpu, out = ocr_pages(s, [pages[i] for i in chunk])
            print(f"ocr settings: round {r + 1}/{len(chunks)}: {s.name}: {len(chunk)} items in {wall:.1f} s, "
                  f"{sum(cpu):.1f} CPU s", file=sys.stderr, flush=True)
            walls[k] += wall
            cpus[k].update(zip(chunk, cpu))
            boxes[k].update(zip(chunk, out))
    results = []
    for k, s in enumerate(settings):
        scored = [page_scores(pdf, i, [OcrBox(*b) for b in boxes[k][n]], s.scale)
                  for n, (pdf, i) in enumerate(pages)] if score else []
        cpu_total = sum(cpus[k].values())
        results.append({"setting_doc": setting_doc(s), "wall_s": walls[k], "pages_per_s": len(pages) / walls[k],
                        "cpu_s_per_page": cpu_total / len(pages), "pages": scored,
                        "boxes": [boxes[k][n] for n in range(len(pages))]})
    return results


def setting_doc(setting: Setting) -> dict[str, Any]:
    from importlib.metadata import version

    return {"setting": setting.name, "engine": f"rapidocr {version('rapidocr')}", "params": setting.params,
            "render_scale": setting.scale, "processes": setting.processes, "threads_per_process": setting.threads}


def best_of_interleaved(settings: Sequence[Setting], pages: Sequence[tuple[str, int]], repeats: int,
                        score: bool = True) -> list[dict[str, Any]]:
    """Per setting: the best-of-`repeats` time of rendering and OCR of each page, all in this
    process with one engine per setting (built outside the timing), settings interleaved page
    by page and repeat by repeat. On a machine shared with other work the best of repeats is
    the least disturbed run, and interleaving spreads load changes over every setting alike.
    Pages/s on 2 cores is estimated as processes x 1 / (s per page) for one-thread settings
    (extraction runs one single-thread engine per core) and 1 / (s per page) for one process
    with 2 threads."""
    from bench.modalities.ocr import PageImage, image_size, make_engine, render_page, to_boxes
    from benchmarks.ocr_accuracy import page_scores

    engines = [make_engine(s.params) for s in settings]
    best = [[float("inf")] * len(pages) for _ in settings]
    boxes: list[list[Any]] = [[None] * len(pages) for _ in settings]
    for r in range(repeats):
        for n, (pdf, i) in enumerate(pages):
            for k, (s, engine) in enumerate(zip(settings, engines)):
                start = time.perf_counter()
                if i < 0:  # an image file, OCR'd as extraction reads it
                    width, height = image_size(pdf)
                    out = engine(pdf)
                else:
                    pixels = render_page(PageImage(pdf, i, s.scale))
                    height, width = int(pixels.shape[0]), int(pixels.shape[1])
                    out = engine(pixels)
                best[k][n] = min(best[k][n], time.perf_counter() - start)
                boxes[k][n] = to_boxes(out.boxes, out.txts, out.scores, width, height)
                print(f"ocr settings: repeat {r + 1}, item {n + 1}: {s.name}: {best[k][n]:.2f} s", file=sys.stderr, flush=True)
        print(f"ocr settings: repeat {r + 1}/{repeats} done", file=sys.stderr, flush=True)
    results = []
    for k, s in enumerate(settings):
        per_page = sum(best[k]) / len(pages)
        scored = [page_scores(pdf, i, list(boxes[k][n]), s.scale) for n, (pdf, i) in enumerate(pages)] if score else []
        results.append({"setting_doc": setting_doc(s), "best_s_per_page": per_page, "best_s": sum(best[k]),
                        "pages_per_s_2_cores": (s.processes if s.threads == 1 else 1) / per_page, "pages": scored})
    return results


@click.command()
@click.option("--every", default=4, show_default=True, help="take every K-th page of the accuracy sample")
@click.option("--rounds", default=4, show_default=True, help="interleaved chunks (module doc of run_settings)")
@click.option("--only", multiple=True, help="run only settings whose name starts with this (today always runs)")
@click.option("--best-of", "best", default=0, help="instead of pools: best of N per page in this process, interleaved")
def main(every: int, rounds: int, only: tuple[str, ...], best: int) -> None:
    """Measure the candidate settings on the same pages; print and write reports/ocr_candidates.json."""
    from benchmarks.ocr_accuracy import doc_kinds, sample_pages, summarise

    pages = sample_pages()[::every]
    kinds = doc_kinds()
    load = [round(x, 2) for x in os.getloadavg()]
    from bench.io import write_json

    chosen = [s for s in candidates() if s is TODAY or not only or any(s.name.startswith(o) for o in only)]
    if best:
        _main_best(chosen, pages, best, kinds, load)
        return
    runs = run_settings(chosen, pages, rounds)
    write_json(ROOT / "reports" / "ocr_candidates_boxes.json",  # for rescoring without OCR (not committed)
               {"pages": pages, "runs": [{"setting": m["setting_doc"], "boxes": m["boxes"]} for m in runs]})
    rows = []
    for s, m in zip(chosen, runs):
        summary = summarise(m["pages"], kinds)
        rows.append({**m["setting_doc"], "pages_per_s": m["pages_per_s"], "wall_s": m["wall_s"],
                     "cpu_s_per_page": m["cpu_s_per_page"],
                     **{k: summary[k] for k in ("pages", "documents", "cer", "wer", "wer_ordered")}})
        base, row = rows[0], rows[-1]
        click.echo(f"{s.name}: {row['pages_per_s']:.3f} pages/s ({row['pages_per_s'] / base['pages_per_s']:.2f}x today), "
                   f"{row['cpu_s_per_page']:.2f} CPU s/page ({base['cpu_s_per_page'] / row['cpu_s_per_page']:.2f}x), "
                   f"CER {row['cer']['value']:.4f}, WER {row['wer']['value']:.4f}", err=True)
    load_end = [round(x, 2) for x in os.getloadavg()]
    write_json(ROOT / "reports" / "ocr_candidates.json", {"every": every, "rounds": rounds, "load_average_at_start": load,
                                                          "load_average_at_end": load_end, "rows": rows})
    print(json.dumps([{k: r[k] for k in ("setting", "pages_per_s", "pages")} for r in rows], indent=1))


def _main_best(chosen: Sequence[Setting], pages: Sequence[tuple[str, int]], best: int, kinds: dict[str, str],
               load: list[float]) -> None:
    from bench.io import write_json
    from benchmarks.ocr_accuracy import summarise

    rows = []
    for s, m in zip(chosen, best_of_interleaved(chosen, pages, best)):
        summary = summarise(m["pages"], kinds)
        rows.append({**m["setting_doc"], "best_s_per_page": m["best_s_per_page"], "pages_per_s_2_cores": m["pages_per_s_2_cores"],
                     **{k: summary[k] for k in ("pages", "documents", "cer", "wer", "wer_ordered")}, "per_page": m["pages"]})
        base, row = rows[0], rows[-1]
        click.echo(f"{s.name}: {row['pages_per_s_2_cores']:.3f} pages/s on 2 cores "
                   f"({row['pages_per_s_2_cores'] / base['pages_per_s_2_cores']:.2f}x today), "
                   f"CER {row['cer']['value']:.4f} ({row['cer']['value'] - base['cer']['value']:+.4f}), "
                   f"WER {row['wer']['value']:.4f}", err=True)
    write_json(ROOT / "reports" / "ocr_candidates.json",
               {"method": "best of N per page, one process, settings interleaved (best_of_interleaved)", "best_of": best,
                "load_average_at_start": load, "load_average_at_end": [round(x, 2) for x in os.getloadavg()], "rows": rows})


if __name__ == "__main__":
    main()
