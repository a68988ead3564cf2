"""Case: the OCR part of extraction (bench.modalities.ocr.ocr_many, cold cache) vs bare rapidocr.

Ours: `ocr_many` over real mirrored images with a fresh, empty cache folder, as a
cold extraction runs it: hash every image, look it up, OCR the misses in a process
pool over all cores (each worker builds its own engine), write every result
atomically. Reference: the bare engine (built once, outside the timing) called on
the same images one after another in this process; its time is divided by the
cores our pool uses, i.e. a perfect parallel speed-up. ratio = ours / (bare / cores),
goal <= 1.2. A second figure times the warm cache (every image a hit) against the
same reference.

`run_settings_case`: the chosen OCR setting (OCR_PARAMS, RENDER_SCALE) against the
setting used before it (benchmarks.ocr_candidates.TODAY), in the same run, on the
same pages of the accuracy sample (PDF pages with a text layer, rendered as text-less
pages are) plus screenshots and photos, in this process, best of N per item with the
two settings interleaved (benchmarks.ocr_candidates.best_of_interleaved); its figure holds
both settings' CER and WER against the pages' text layers beside their speed, so a
speed-up cannot silently cost accuracy. Goal: ratio (time) <= 0.5 with CER within
0.01 (absolute) of the old setting's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from benchmarks.common import PHOTOS, SCREENS, best_of, figure


def images(n_screens: int, n_photos: int) -> list[Path]:
    """The first n screenshots and photos of the mirror (sorted paths: the same set every run)."""
    screens = sorted(SCREENS.glob("*/images/*.jpg"))[:n_screens] if SCREENS.is_dir() else []
    photos = sorted(PHOTOS.glob("*.jpg"))[:n_photos] if PHOTOS.is_dir() else []
    return screens + photos


def _bare(engine, paths: list[Path]) -> int:
    boxes = 0
    for path in paths:
        result = engine(str(path))
        boxes += len(result.txts or ())
    return boxes


def run_case(n_screens: int, n_photos: int, repeats: int) -> list[dict] | dict:
    from bench import progress
    from bench.modalities import ocr

    paths = images(n_screens, n_photos)
    if not paths:
        return {"skipped": "no ScreenAgent or COCO images in the mirror"}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    used = max(1, min(cores, len(paths)))
    engine = ocr.engine()
    _bare(engine, paths[:1])  # warm the reference engine
    progress.configure(enabled=False)
    scratch = Path(tempfile.mkdtemp(prefix="bench-ocr-"))
    try:
        folders = iter(range(10_000))

        def cold() -> int:
            cache = ocr.OcrCache(scratch / f"cold{next(folders)}")
            return sum(len(r.boxes) for r in ocr.ocr_many(paths, workers=used, cache=cache))

        t_ours, all_ours, boxes = best_of(cold, repeats)
        warm_folder = scratch / "cold0"

        def warm() -> int:
            return sum(len(r.boxes) for r in ocr.ocr_many(paths, workers=used, cache=ocr.OcrCache(warm_folder)))

        t_warm, all_warm, warm_boxes = best_of(warm, repeats)
        t_bare, all_bare, bare_boxes = best_of(lambda: _bare(engine, paths), repeats)
    finally:
        progress.configure(enabled=True)
        shutil.rmtree(scratch, ignore_errors=True)
    per_core = t_bare / used
    name = f"OCR of {len(paths)} images ({min(n_screens, len(paths))} screenshots, rest photos)"
    reference = (f"bare rapidocr {ocr.engine_fingerprint()['rapidocr']} engine, one process, same images, "
                 f"time / {used} cores (perfect speed-up)")
    return [
        figure(f"{name}, cold cache, {used} workers", t_ours, per_core, reference, "ratio <= 1.2", goal_ratio=1.2,
               images=len(paths), cores_used=used, boxes=boxes, reference_boxes=bare_boxes, bare_serial_s=t_bare,
               all_ours_s=all_ours, all_reference_s=all_bare, repeats=repeats, statistic="best of repeats"),
        figure(f"{name}, warm cache (all hits)", t_warm, per_core, reference, "informational",
               images=len(paths), boxes=warm_boxes, all_ours_s=all_warm, repeats=repeats, statistic="best of repeats"),
    ]


def run_settings_case(n_pages: int, n_images: int, repeats: int) -> list[dict] | dict:
    """The chosen setting against the old one on the same PDF pages (with accuracy) and images."""
    from benchmarks.ocr_candidates import TODAY, best_of_interleaved, current
    from benchmarks.ocr_scoring import sample_pages, summarise

    sample = sample_pages()
    if not sample:
        return {"skipped": "no MMLongBench-Doc PDFs with a text layer in the mirror"}
    pages = sample[:: max(1, len(sample) // max(1, n_pages))][:n_pages]
    imgs = [(str(p), -1) for p in images(n_images - n_images // 3, n_images // 3)]
    new = current()
    page_runs = best_of_interleaved([TODAY, new], pages, repeats)
    image_runs = best_of_interleaved([TODAY, new], imgs, repeats, score=False) if imgs else [{"best_s": 0.0}] * 2
    times = [p["best_s"] + i["best_s"] for p, i in zip(page_runs, image_runs)]
    accuracy = {}
    for s, run in zip((TODAY, new), page_runs):
        summary = summarise(run["pages"])
        accuracy[s.name] = {"pages": summary["pages"], "documents": summary["documents"],
                            "pages_per_s": run["pages_per_s_2_cores"],
                            "cer": summary["cer"]["value"], "cer_ci95": summary["cer"]["ci95"],
                            "wer": summary["wer"]["value"], "wer_ci95": summary["wer"]["ci95"]}
    old_cer, new_cer = (accuracy[s.name]["cer"] for s in (TODAY, new))
    fig = figure(f"OCR of {len(pages)} PDF pages + {len(imgs)} images, chosen setting vs the old one (s per core)",
                 times[1], times[0], f"{TODAY.name}, same items, same process, interleaved",
                 "ratio <= 0.5 and CER within 0.01 of the old", goal_ratio=0.5, pages=len(pages), images=len(imgs),
                 accuracy=accuracy, cer_change=new_cer - old_cer, repeats=repeats,
                 settings={s.name: {"params": s.params, "render_scale": s.scale} for s in (TODAY, new)},
                 statistic=f"best of {repeats} per item, summed")
    if fig["met"] is not None:
        fig["met"] = bool(fig["met"] and abs(new_cer - old_cer) <= 0.01)
    return [fig]
