"""The drill-down picture of a photo query (Modality.pictures, reports/dev.html): the gold
photo framed in green (a red frame and its rank if it came back in the top k) and the first
OTHER_IMAGES photos that came back instead, each with its rank."""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

from bench.modalities.drawing import GREEN, RED, Files, box_thumbnail, elsewhere, encode, img_tag, label, missing, same_source

IMAGE_WIDTH = 320
OTHER_IMAGES = 3
OTHER_WIDTH = 120


def _framed(path: Path, width: int, color: tuple[int, int, int] | None, text: str | None) -> Image.Image:
    with Image.open(path) as im:
        img = im.convert("RGB")
    img = box_thumbnail(img, [], [], width=width)
    draw = ImageDraw.Draw(img)
    if color:
        draw.rectangle([0, 0, img.width - 1, img.height - 1], outline=color, width=4)
    if text:
        label(draw, 4, 20, text, RED, 12)
    return img


def photo_pictures(q: dict, files: Files, modality: str) -> str:
    """Pictures of one query of `modality` (returned photos of that modality are shown too)."""
    out = []
    gold_sources = {g["source_id"] for g in q["gold"]}
    for g in q["gold"]:
        path = files.path_of(g["source_id"])
        if path is None:
            out.append(missing(g["source_id"]))
            continue
        ranks = [a["rank"] for a in same_source(q["top"], g["source_id"])]
        img = _framed(path, IMAGE_WIDTH, GREEN, f"rank {ranks[0]}" if ranks else None)
        if ranks:  # came back: a red frame inside the green one
            ImageDraw.Draw(img).rectangle([6, 6, img.width - 7, img.height - 7], outline=RED, width=2)
        cap = f"gold: returned at rank {ranks[0]}" if ranks else "gold: not in the top k"
        out.append(f"<figure class=pic>{img_tag(encode(img), 'gold image ' + g['source_id'])}<figcaption>{cap}</figcaption></figure>")
    shown = 0
    for a in q["top"]:
        if shown >= OTHER_IMAGES or a.get("source_id") in gold_sources or files.modality_of(str(a.get("source_id"))) != modality:
            continue
        path = files.path_of(str(a.get("source_id")))
        if path is None:
            continue
        img = _framed(path, OTHER_WIDTH, RED, str(a["rank"]))
        out.append(f"<figure class=pic>{img_tag(encode(img), 'returned image', str(a.get('source_id')))}"
                   f"<figcaption>rank {a['rank']}</figcaption></figure>")
        shown += 1
    return "<div class=pics>" + "".join(out) + "</div>" + elsewhere(q["top"], gold_sources)
