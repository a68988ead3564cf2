"""Local image data sets: every PNG or JPEG under files/ is one source (region {}).

Atom text is the harness's own OCR (RapidOCR via `ocr_many`), as for COCO: never gold.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from bench.modalities.local import LocalDataError
from bench.modalities.ocr import ocr_many

FORMATS = "images (.png, .jpg, .jpeg)"
SUFFIXES: tuple[str, ...] | None = (".png", ".jpg", ".jpeg")
EXAMPLE_FILES: dict[str, str] = {}
EXAMPLE_GOLD: list[tuple[str, str | None, str | None, dict]] = [
    ("Which photo shows the whiteboard of the kick-off? (put whiteboard.jpg in files/)", "the whiteboard photo", "whiteboard.jpg", {}),
    ("Which photo shows the holiday party?", None, None, {}),
]


def source_of(path: str) -> str:
    return path


def check_images(sources: dict[str, list[tuple[str, Path]]]) -> list[tuple[str, Path]]:
    """(source_id, file) of every image, each opened first: an undecodable one is refused."""
    from PIL import Image, UnidentifiedImageError

    out = []
    for source_id, files in sorted(sources.items()):
        for inner, local in files:
            try:
                with Image.open(local) as im:
                    im.verify()
            except (UnidentifiedImageError, OSError, SyntaxError) as exc:
                raise LocalDataError(f"{inner}: not a readable PNG or JPEG image ({exc.__class__.__name__})") from None
            out.append((source_id, local))
    return out


def parse(sources: dict[str, list[tuple[str, Path]]]) -> pd.DataFrame:
    images = check_images(sources)
    results = ocr_many([local for _, local in images])
    rows = [
        {
            "source_id": source_id, "seq": 0, "text": "\n".join(b.text for b in res.boxes),
            "width": res.width, "height": res.height, "n_boxes": len(res.boxes),
            "ocr_boxes": json.dumps([[b.x0, b.y0, b.x1, b.y1] for b in res.boxes], separators=(",", ":")),
        }
        for (source_id, _), res in zip(images, results, strict=True)
    ]
    return pd.DataFrame(rows, columns=["source_id", "seq", "text", "width", "height", "n_boxes", "ocr_boxes"])
