"""The system's own text extraction from images: RapidOCR with fixed parameters.

Used by the ui_screenshot and image modalities. OCR text is corpus text the system
extracts for retrieval; it is never gold (spec section 5).

Offline: the rapidocr wheel (3.x) ships its default ONNX models (PP-OCRv6 det/rec
small, ch_ppocr_mobile cls) inside the package, so no download happens at run time
(checked by running it in a network namespace without network: ``unshare -rn``).

Determinism: fixed parameters (OCR_PARAMS), onnxruntime limited to one thread per
process (parallel float reductions can differ between runs), the 180-degree text
direction classifier is off (screenshots and photos are upright; it also cost a
third of the time), and box coordinates are rounded to 0.01 px.

Speed (2 CPU cores): about 1.5 s per 1024x768 screenshot in one process, so OCR of
many images runs in a process pool of os.cpu_count() single-threaded workers
(measured: 208 ScreenAgent screenshots in 250 s, 79 COCO photos in 24 s). Pool and
serial runs give identical boxes. Results depend on the rapidocr version (its
bundled models): pin it.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

#: every parameter that differs from rapidocr's config.yaml defaults
OCR_PARAMS: dict[str, Any] = {
    "Global.log_level": "error",
    "Global.use_cls": False,
    "Global.text_score": 0.5,
    "EngineConfig.onnxruntime.intra_op_num_threads": 1,
    "EngineConfig.onnxruntime.inter_op_num_threads": 1,
}


@dataclass(frozen=True)
class OcrBox:
    """One detected text line: axis-aligned box (clipped to the image) and its text."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    score: float


@dataclass(frozen=True)
class OcrResult:
    width: int
    height: int
    boxes: tuple[OcrBox, ...]


@functools.cache
def _engine() -> Any:
    from rapidocr import RapidOCR

    return RapidOCR(params=dict(OCR_PARAMS))


def image_size(path: str | Path) -> tuple[int, int]:
    """(width, height) of an image file, read from the real file (header only)."""
    from PIL import Image

    with Image.open(path) as img:
        return int(img.width), int(img.height)


def to_boxes(quads: Any, texts: Any, scores: Any, width: int, height: int) -> tuple[OcrBox, ...]:
    """Turn rapidocr's 4-point quads into clipped axis-aligned boxes of positive area."""
    if quads is None or texts is None:
        return ()
    out: list[OcrBox] = []
    for quad, text, score in zip(quads, texts, scores):
        xs = [float(p[0]) for p in quad]
        ys = [float(p[1]) for p in quad]
        x0, x1 = max(0.0, min(xs)), min(float(width), max(xs))
        y0, y1 = max(0.0, min(ys)), min(float(height), max(ys))
        if x1 <= x0 or y1 <= y0:
            continue
        out.append(OcrBox(round(x0, 2), round(y0, 2), round(x1, 2), round(y1, 2), str(text), round(float(score), 5)))
    return tuple(out)


def ocr_image(path: str | Path) -> OcrResult:
    """OCR one image file; the size comes from the file itself."""
    width, height = image_size(path)
    result = _engine()(str(path))
    return OcrResult(width, height, to_boxes(result.boxes, result.txts, result.scores, width, height))


def ocr_many(paths: list[str | Path], workers: int | None = None) -> list[OcrResult]:
    """OCR several images, in input order; a process pool when there is more than one."""
    workers = workers or os.cpu_count() or 1
    if len(paths) <= 1 or workers <= 1:
        return [ocr_image(p) for p in paths]
    # fork, not spawn: spawn re-runs the caller's __main__, which breaks scripts without
    # a main guard; each worker drops an engine inherited from the parent and builds its own.
    ctx = get_context("fork")
    with ProcessPoolExecutor(max_workers=min(workers, len(paths)), mp_context=ctx, initializer=_engine.cache_clear) as pool:
        return list(pool.map(ocr_image, [str(p) for p in paths], chunksize=4))
