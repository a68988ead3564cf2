"""Drawing for the drill-down pictures of reports/dev.html, shared by the modalities'
`pictures` hooks (bench/modalities/<name>/pictures.py): inline JPEG encoding, boxes and
rank labels drawn with Pillow, and the notes every picture fragment ends with."""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from PIL import Image, ImageDraw, ImageFont

JPEG_QUALITY = 75
GREEN = (0, 170, 0)
RED = (220, 0, 0)
#: the side (px) a zoomed crop is scaled to
ZOOM_MAX = 240


class Files(Protocol):
    """The corpus files a picture reads (bench.reporting.thumbnails.CorpusFiles)."""

    def path_of(self, source_id: str) -> Path | None: ...

    def modality_of(self, source_id: str) -> str | None: ...

    def opened(self, path: Path, opener: Callable[[str], Any]) -> Any: ...


def escape(x: Any) -> str:
    return html.escape(str(x), quote=True)


def as_dict(value: Any) -> dict:
    """A region or extent as a dict: a dict as it is, JSON text parsed, anything else {}."""
    if isinstance(value, dict):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return {}
    try:
        out = json.loads(str(value))
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType
        return ImageFont.load_default()


def encode(img: Image.Image) -> str:
    """The picture as an inline JPEG `data:` URI."""
    buf = io.BytesIO()
    img.convert("RGB").save(buf, format="JPEG", quality=JPEG_QUALITY, optimize=True, subsampling=0)  # 4:4:4 keeps thin lines red/green
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def img_tag(uri: str, alt: str, title: str = "") -> str:
    return f"<img class=thumb src=\"{uri}\" alt=\"{escape(alt)}\"" + (f" title=\"{escape(title)}\"" if title else "") + ">"


def label(draw: ImageDraw.ImageDraw, x: float, y: float, text: str, color: tuple[int, int, int], size: int = 12) -> None:
    font = _font(size)
    x0, y0, x1, y1 = draw.textbbox((0, 0), text, font=font)
    w, h = x1 - x0 + 4, y1 - y0 + 3
    x, y = max(0.0, x), max(0.0, y - h)
    draw.rectangle([x, y, x + w, y + h], fill=color)
    draw.text((x + 2 - x0, y + 1 - y0), text, fill=(255, 255, 255), font=font)


def _box(draw: ImageDraw.ImageDraw, b: Iterable[float], scale: float, color: tuple[int, int, int], width: int,
         ox: float = 0.0, oy: float = 0.0) -> tuple[float, float, float, float]:
    x0, y0, x1, y1 = ((float(v) - o) * scale for v, o in zip(b, (ox, oy, ox, oy), strict=True))
    # tiny boxes stay visible: at least 2 * width + 2 px on each side
    grow = max(0.0, (2 * width + 2 - (x1 - x0)) / 2), max(0.0, (2 * width + 2 - (y1 - y0)) / 2)
    x0, x1, y0, y1 = x0 - grow[0], x1 + grow[0], y0 - grow[1], y1 + grow[1]
    draw.rectangle([x0, y0, x1, y1], outline=color, width=width)
    return x0, y0, x1, y1


def box_thumbnail(image: Path | Image.Image, gold: list[list[float]], atoms: list[tuple[int, list[float]]], *,
                  width: int, crop: tuple[float, float, float, float] | None = None) -> Image.Image:
    """The picture (or its `crop` in original pixels) scaled to `width`, gold boxes green,
    atom boxes red with their rank; atoms are drawn first so gold stays on top."""
    if isinstance(image, Image.Image):
        src = image.convert("RGB")
    else:
        with Image.open(image) as opened:
            src = opened.convert("RGB")
    ox, oy = (crop[0], crop[1]) if crop else (0.0, 0.0)
    if crop:
        src = src.crop((round(crop[0]), round(crop[1]), round(crop[2]), round(crop[3])))
    scale = min(1.0, width / src.width) if not crop else min(ZOOM_MAX / max(src.width, src.height), 3.0)
    out = src.resize((max(1, round(src.width * scale)), max(1, round(src.height * scale))), Image.Resampling.LANCZOS)
    draw = ImageDraw.Draw(out)
    for rank, b in sorted(atoms, key=lambda a: -a[0]):  # rank 1 drawn last among atoms
        x0, y0, _, _ = _box(draw, b, scale, RED, 2, ox, oy)
        label(draw, x0, y0, str(rank), RED, 11)
    for b in gold:
        _box(draw, b, scale, GREEN, 3, ox, oy)
    return out


def same_source(top: list[dict], source_id: str) -> list[dict]:
    """The returned atoms (drill-down `top`) of one source."""
    return [a for a in top if a.get("source_id") == source_id]


def elsewhere(top: list[dict], sources: set[str]) -> str:
    """The note naming the ranks that came from other sources ('' when none did)."""
    ranks = [str(a["rank"]) for a in top if a.get("source_id") not in sources]
    return f"<p class=muted>Top-k ranks from other sources: {', '.join(ranks)}.</p>" if ranks else ""


def missing(source_id: str) -> str:
    return f"<p class=muted>No picture: <code>{escape(source_id)}</code> is not in the corpus store.</p>"
