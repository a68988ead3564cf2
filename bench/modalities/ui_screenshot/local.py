"""Local screenshot data sets: every PNG or JPEG under files/ is one source; regions are boxes.

Segments are the harness's own OCR boxes (RapidOCR via `ocr_many`), as for ScreenAgent.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.modalities.image.local import check_images
from bench.modalities.ocr import ocr_many
from bench.modalities.ui_screenshot.modality import segment_rows

FORMATS = "screenshots (.png, .jpg, .jpeg)"
SUFFIXES: tuple[str, ...] | None = (".png", ".jpg", ".jpeg")
EXAMPLE_FILES: dict[str, str] = {}
EXAMPLE_GOLD: list[tuple[str, str | None, str | None, dict]] = [
    ("Where do I click to export the report? (put settings.png in files/)", "the Export button",
     "settings.png", {"bbox": [10, 10, 120, 40]}),
    ("Where is the button that deletes every account?", None, None, {}),
]


def source_of(path: str) -> str:
    return path


def parse(sources: dict[str, list[tuple[str, Path]]]) -> pd.DataFrame:
    shots = check_images(sources)
    results = ocr_many([local for _, local in shots])
    rows = [row for (source_id, _), res in zip(shots, results, strict=True)
            for row in segment_rows(source_id, res.width, res.height, res.boxes)]
    return pd.DataFrame(rows, columns=["source_id", "seq", "text", "x0", "y0", "x1", "y1", "score", "width", "height", "has_text"])
