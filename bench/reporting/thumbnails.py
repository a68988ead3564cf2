"""Pictures for the drill-down of reports/dev.html: a person judges a miss by seeing it.

Per query of the drill-down (see :func:`bench.reporting.html_report.drilldown`), one HTML fragment:

* ui_screenshot: the screenshot scaled to ``SHOT_WIDTH`` px, the gold box drawn in green
  and the boxes of the top-k atoms on that screenshot in red, numbered by rank; plus a
  zoom at full resolution around the gold box (both drawn with Pillow, inline JPEG);
* image: the gold photo framed in green (red frame and rank if it came back in the
  top k) and the first ``OTHER_IMAGES`` photos that came back instead, each with its rank;
* pdf: each gold page rendered with pypdfium2 and the ranks at which atoms overlapping
  that page came back (at most ``PDF_PAGES`` pages per query);
* video: an inline SVG timeline of the video's length (end of its last cue) with the
  gold span in green and the top-k atoms of that video in red, numbered by rank;
* code: the gold symbol's lines with line numbers and, per line, the ranks of the
  returned atoms whose line range covers it (at most ``CODE_LINES`` lines shown);
* conversation: nothing (the drill-down's text already is the turn).

Files come from the corpus store (``data/corpus/<dataset key>/...``, located with the
data set's ``file_of`` and :func:`bench.ingest.fetch.local_path`, present in the manifest);
video lengths and code text come from the parsed segments. A file that is not in the
store gives a one-line note instead of a picture. Nothing is fetched; every picture
is inline (``data:`` URI or SVG), so the page stays self-contained.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from PIL import Image, ImageDraw, ImageFont

from bench.corpus_sources import datasets
from bench.ingest.corpus import Manifest
from bench.ingest.fetch import local_path

__all__ = ["PICTURES_PER_MODALITY", "CorpusFiles", "box_thumbnail", "code_lines_html", "pdf_page_thumbnail", "pictures",
           "query_pictures", "timeline_svg"]

#: queries per modality that get pictures (the first ones of the drill-down: misses first)
PICTURES_PER_MODALITY = 40
SHOT_WIDTH = 480
ZOOM_MARGIN = 80  # px of the original screenshot around the gold box
ZOOM_MAX = 240
IMAGE_WIDTH = 320
OTHER_IMAGES = 3
OTHER_WIDTH = 120
PDF_WIDTH = 200
PDF_PAGES = 4
CODE_LINES = 60
JPEG_QUALITY = 75
GREEN = (0, 170, 0)
RED = (220, 0, 0)


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _json(value: Any) -> dict:
    if isinstance(value, dict):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return {}
    try:
        out = json.loads(str(value))
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


@dataclass(frozen=True)
class CorpusFiles:
    """The local corpus store and the files the manifest lists as present."""

    store: Path
    present: frozenset[tuple[str, str]]
    _docs: dict[Path, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_manifest(cls, manifest: Manifest, store: Path) -> CorpusFiles:
        return cls(Path(store), frozenset((r["key"], r["path"]) for r in manifest.rows if r["status"] == "present"))

    @staticmethod
    def modality_of(source_id: str) -> str | None:
        ds = datasets().get(source_id.split(":", 1)[0])
        return None if ds is None else ds.modality

    def path_of(self, source_id: str) -> Path | None:
        """Local file of a source, or None when it is not in the store."""
        key = source_id.split(":", 1)[0]
        ds = datasets().get(key)
        if ds is None:
            return None
        try:
            rel = ds.file_of(source_id)
        except NotImplementedError:
            return None
        if rel is None or (key, rel) not in self.present:
            return None
        path = local_path(self.store, key, rel)
        return path if path.is_file() else None


# --------------------------------------------------------------------------- raster pictures


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType
        return ImageFont.load_default()


def _encode(img: Image.Image) -> str:
    buf = io.BytesIO()
    img.convert("RGB").save(buf, format="JPEG", quality=JPEG_QUALITY, optimize=True, subsampling=0)  # 4:4:4 keeps thin lines red/green
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _img(uri: str, alt: str, title: str = "") -> str:
    return f"<img class=thumb src=\"{uri}\" alt=\"{_e(alt)}\"" + (f" title=\"{_e(title)}\"" if title else "") + ">"


def _label(draw: ImageDraw.ImageDraw, x: float, y: float, text: str, color: tuple[int, int, int], size: int = 12) -> None:
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
                  width: int = SHOT_WIDTH, crop: tuple[float, float, float, float] | None = None) -> Image.Image:
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
        _label(draw, x0, y0, str(rank), RED, 11)
    for b in gold:
        _box(draw, b, scale, GREEN, 3, ox, oy)
    return out


def pdf_page_thumbnail(pdf: Any, page: int, width: int = PDF_WIDTH) -> Image.Image:
    """Page `page` (1-based) of an open pypdfium2 document rendered `width` px wide."""
    p = pdf[page - 1]
    try:
        scale = width / p.get_width()
        bitmap = p.render(scale=scale)
        img = bitmap.to_pil()
    finally:
        p.close()
    return img


# --------------------------------------------------------------------------- vector / text pictures


def timeline_svg(duration: float, gold: list[tuple[float, float]], atoms: list[tuple[int, float, float]],
                 width: int = 640) -> str:
    """A strip of the video's length: gold spans green, atom spans red (one lane each, rank at the left)."""
    duration = max([duration, *(t1 for _, t1 in gold), *(t1 for _, _, t1 in atoms), 1e-9])
    pad, lane, top = 28, 11, 18
    inner = width - 2 * pad
    height = top + 14 + lane * max(1, len(atoms)) + 18

    def x(t: float) -> float:
        return pad + inner * max(0.0, min(t, duration)) / duration

    parts = [(f"<svg class='timeline' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
              f"viewBox='0 0 {width} {height}' role='img' aria-label='timeline'>"),
             f"<rect x='{pad}' y='{top}' width='{inner}' height='10' fill='#eee' stroke='#999'/>"]
    for t0, t1 in gold:
        parts.append(f"<rect class='gold' x='{x(t0):.1f}' y='{top - 4}' width='{max(2.0, x(t1) - x(t0)):.1f}' "
                     f"height='{height - top - 14}' fill='rgb{GREEN}' fill-opacity='0.25' stroke='rgb{GREEN}'/>")
    for i, (rank, t0, t1) in enumerate(sorted(atoms)):
        y = top + 14 + i * lane
        parts.append(f"<rect class='atom' x='{x(t0):.1f}' y='{y}' width='{max(2.0, x(t1) - x(t0)):.1f}' height='{lane - 3}' "
                     f"fill='rgb{RED}'><title>rank {rank}: {t0:.2f}–{t1:.2f} s</title></rect>"
                     f"<text x='{pad - 4}' y='{y + lane - 4}' font-size='9' text-anchor='end' fill='rgb{RED}'>{rank}</text>")
    parts.append(f"<text x='{pad}' y='12' font-size='10'>0 s</text>"
                 f"<text x='{width - pad}' y='12' font-size='10' text-anchor='end'>{duration:.1f} s</text>"
                 f"<text x='{pad}' y='{height - 4}' font-size='10' fill='#555'>green: gold span; red: top-k atoms of this video by rank</text>")
    parts.append("</svg>")
    return "".join(parts)


def code_lines_html(lines: list[str], first: int, last: int, atoms: list[tuple[int, int, int]], max_lines: int = CODE_LINES) -> str:
    """Lines first..last (1-based, inclusive) with, per line, the ranks of the atoms covering it."""
    end = min(last, first + max_lines - 1)
    rows = ["<table class=code><tr><th>line</th><th>returned at rank</th><th>gold symbol</th></tr>"]
    for n in range(first, end + 1):
        ranks = [r for r, a, b in sorted(atoms) if a <= n <= b]
        cls = " class=hitline" if ranks else ""
        text = lines[n - 1] if 0 < n <= len(lines) else ""
        rows.append(f"<tr{cls}><td class=num>{n}</td><td class=num>{', '.join(map(str, ranks))}</td>"
                    f"<td><pre>{_e(text)}</pre></td></tr>")
    rows.append("</table>")
    if end < last:
        rows.append(f"<p class=muted>… {last - end} more lines of the symbol not shown.</p>")
    return "".join(rows)


# --------------------------------------------------------------------------- per query


def _same_source(top: list[dict], source_id: str) -> list[dict]:
    return [a for a in top if a.get("source_id") == source_id]


def _elsewhere(top: list[dict], sources: set[str]) -> str:
    ranks = [str(a["rank"]) for a in top if a.get("source_id") not in sources]
    return f"<p class=muted>Top-k ranks from other sources: {', '.join(ranks)}.</p>" if ranks else ""


def _missing(source_id: str) -> str:
    return f"<p class=muted>No picture: <code>{_e(source_id)}</code> is not in the corpus store.</p>"


def _screenshot(q: dict, files: CorpusFiles) -> str:
    out = []
    for g in q["gold"]:
        path = files.path_of(g["source_id"])
        if path is None:
            out.append(_missing(g["source_id"]))
            continue
        gbox = _json(g["region"]).get("bbox")
        atoms = [(a["rank"], b) for a in _same_source(q["top"], g["source_id"]) if (b := _json(a["extent"]).get("bbox"))]
        with Image.open(path) as opened:
            im = opened.convert("RGB")
            full = box_thumbnail(im, [gbox] if gbox else [], atoms)
            parts = [_img(_encode(full), f"screenshot {g['source_id']} with gold box and top-k boxes")]
            if gbox:
                x0, y0, x1, y1 = gbox
                crop = (max(0, x0 - ZOOM_MARGIN), max(0, y0 - ZOOM_MARGIN), min(im.width, x1 + ZOOM_MARGIN),
                        min(im.height, y1 + ZOOM_MARGIN))
                zoom = box_thumbnail(im, [gbox], atoms, crop=crop)
                parts.append(_img(_encode(zoom), "zoom around the gold box"))
        out.append("<div class=pics>" + "".join(parts) + "</div>")
    out.append(_elsewhere(q["top"], {g["source_id"] for g in q["gold"]}))
    return "".join(out)


def _framed(path: Path, width: int, color: tuple[int, int, int] | None, label: str | None) -> Image.Image:
    with Image.open(path) as im:
        img = im.convert("RGB")
    img = box_thumbnail(img, [], [], width=width)
    draw = ImageDraw.Draw(img)
    if color:
        draw.rectangle([0, 0, img.width - 1, img.height - 1], outline=color, width=4)
    if label:
        _label(draw, 4, 20, label, RED, 12)
    return img


def _image(q: dict, files: CorpusFiles) -> str:
    out = []
    gold_sources = {g["source_id"] for g in q["gold"]}
    for g in q["gold"]:
        path = files.path_of(g["source_id"])
        if path is None:
            out.append(_missing(g["source_id"]))
            continue
        ranks = [a["rank"] for a in _same_source(q["top"], g["source_id"])]
        img = _framed(path, IMAGE_WIDTH, GREEN, f"rank {ranks[0]}" if ranks else None)
        if ranks:  # came back: a red frame inside the green one
            ImageDraw.Draw(img).rectangle([6, 6, img.width - 7, img.height - 7], outline=RED, width=2)
        cap = f"gold: returned at rank {ranks[0]}" if ranks else "gold: not in the top k"
        out.append(f"<figure class=pic>{_img(_encode(img), 'gold image ' + g['source_id'])}<figcaption>{cap}</figcaption></figure>")
    shown = 0
    for a in q["top"]:
        if shown >= OTHER_IMAGES or a.get("source_id") in gold_sources or files.modality_of(str(a.get("source_id"))) != "image":
            continue
        path = files.path_of(str(a.get("source_id")))
        if path is None:
            continue
        img = _framed(path, OTHER_WIDTH, RED, str(a["rank"]))
        out.append(f"<figure class=pic>{_img(_encode(img), 'returned image', str(a.get('source_id')))}"
                   f"<figcaption>rank {a['rank']}</figcaption></figure>")
        shown += 1
    return "<div class=pics>" + "".join(out) + "</div>" + _elsewhere(q["top"], gold_sources)


def _pdf(q: dict, files: CorpusFiles) -> str:
    import pypdfium2 as pdfium

    figs, notes = [], []
    pages = [(g["source_id"], _json(g["region"]).get("page")) for g in q["gold"]]
    for source_id, page in pages[:PDF_PAGES]:
        path = files.path_of(source_id)
        if path is None or not isinstance(page, int):
            notes.append(_missing(source_id))
            continue
        ranks = []
        for a in _same_source(q["top"], source_id):
            ext = _json(a["extent"])
            if ext.get("page_start", 0) <= page <= ext.get("page_end", -1):
                ranks.append(a["rank"])
        doc = files._docs.get(path)
        if doc is None:
            doc = files._docs[path] = pdfium.PdfDocument(str(path))
        img = pdf_page_thumbnail(doc, page)
        ImageDraw.Draw(img).rectangle([0, 0, img.width - 1, img.height - 1], outline=GREEN if ranks else RED, width=3)
        cap = f"p. {page}: " + (f"returned at rank {', '.join(map(str, ranks))}" if ranks else "not in the top k")
        figs.append(f"<figure class=pic>{_img(_encode(img), f'page {page} of {source_id}')}<figcaption>{_e(cap)}</figcaption></figure>")
    if len(pages) > PDF_PAGES:
        notes.append(f"<p class=muted>{len(pages) - PDF_PAGES} more gold pages not pictured.</p>")
    return "<div class=pics>" + "".join(figs) + "</div>" + "".join(notes) + _elsewhere(q["top"], {s for s, _ in pages})


def _video(q: dict, segments: dict[str, pd.DataFrame]) -> str:
    out = []
    for source_id in dict.fromkeys(g["source_id"] for g in q["gold"]):
        seg = segments.get(source_id)
        duration = float(seg["t_end"].max()) if seg is not None and "t_end" in seg and len(seg) else 0.0
        gold = [(float(r["t_start"]), float(r["t_end"])) for g in q["gold"] if g["source_id"] == source_id
                if (r := _json(g["region"])) and "t_start" in r]
        atoms = [(a["rank"], float(e["t_start"]), float(e["t_end"])) for a in _same_source(q["top"], source_id)
                 if (e := _json(a["extent"])) and "t_start" in e]
        out.append(f"<p class=muted><code>{_e(source_id)}</code></p>" + timeline_svg(duration, gold, atoms))
    return "".join(out) + _elsewhere(q["top"], {g["source_id"] for g in q["gold"]})


def _code(q: dict, segments: dict[str, pd.DataFrame]) -> str:
    from bench.modalities.code.modality import region_span
    from bench.modalities.code.symbols import split_lines

    out = []
    for g in q["gold"]:
        seg = segments.get(g["source_id"])
        region = _json(g["region"])
        if seg is None or not region:
            out.append(_missing(g["source_id"]))
            continue
        span, problem = region_span(region, seg)
        if span is None:
            out.append(f"<p class=muted>No lines: {_e(problem)}</p>")
            continue
        path, first, last = span
        text = str(seg.loc[seg["path"] == path, "text"].iloc[0])
        atoms = []
        outside = []
        other_files = []
        for a in _same_source(q["top"], g["source_id"]):
            e = _json(a["extent"])
            if e.get("path") != path or "line_start" not in e:
                other_files.append(str(a["rank"]))
                continue
            a0, a1 = int(e["line_start"]), int(e["line_end"])
            atoms.append((a["rank"], a0, a1))
            if a1 < first or a0 > last:
                outside.append(f"rank {a['rank']}: lines {a0}–{a1}")
        out.append(f"<p class=muted><code>{_e(path)}</code> lines {first}–{last} (gold)"
                   + (f"; same file, outside the symbol: {_e('; '.join(outside))}" if outside else "")
                   + (f"; ranks in other files: {', '.join(other_files)}" if other_files else "") + "</p>")
        out.append(code_lines_html(split_lines(text), first, last, atoms))
    return "".join(out) + _elsewhere(q["top"], {g["source_id"] for g in q["gold"]})


def query_pictures(modality: str, q: dict, files: CorpusFiles, segments: dict[str, pd.DataFrame]) -> str:
    """The HTML fragment of pictures for one drill-down query ('' when its modality has none).

    A file that cannot be decoded (not an image, a broken PDF) gives a one-line note: a
    picture never stops the evaluation."""
    if not q.get("gold"):
        return ""
    try:
        return _query_pictures(modality, q, files, segments)
    except (OSError, ValueError, RuntimeError) as exc:  # PIL.UnidentifiedImageError is an OSError, PdfiumError a RuntimeError
        return f"<p class=muted>No picture: {_e(type(exc).__name__)}: {_e(str(exc)[:200])}</p>"


def _query_pictures(modality: str, q: dict, files: CorpusFiles, segments: dict[str, pd.DataFrame]) -> str:
    if modality == "ui_screenshot":
        return _screenshot(q, files)
    if modality == "image":
        return _image(q, files)
    if modality == "pdf":
        return _pdf(q, files)
    if modality == "video":
        return _video(q, segments)
    if modality == "code":
        return _code(q, segments)
    return ""


def pictures(drill: dict[str, Any], files: CorpusFiles, segments: dict[str, pd.DataFrame], *,
             per_modality: int = PICTURES_PER_MODALITY) -> dict[str, Any]:
    """{"per_modality": cap, "queries": {query_id: fragment}} for the first `per_modality`
    answerable queries of every modality's drill-down."""
    out: dict[str, str] = {}
    for modality, block in drill.get("modalities", {}).items():
        answerable = [q for q in block["queries"] if q.get("gold")]
        for q in answerable[:per_modality]:
            fragment = query_pictures(modality, q, files, segments)
            if fragment:
                out[q["query_id"]] = fragment
    for doc in files._docs.values():
        doc.close()
    files._docs.clear()
    return {"per_modality": per_modality, "queries": out}
