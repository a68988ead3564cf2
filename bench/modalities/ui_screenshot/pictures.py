"""The drill-down picture of a screenshot query (Modality.pictures, reports/dev.html): the
screenshot scaled to SHOT_WIDTH px, the gold box green and the boxes of the top-k atoms on
that screenshot red, numbered by rank; plus a zoom at full resolution around the gold box."""

from __future__ import annotations

from PIL import Image

from bench.modalities.drawing import Files, as_dict, box_thumbnail, elsewhere, encode, img_tag, missing, same_source

SHOT_WIDTH = 480
ZOOM_MARGIN = 80  # px of the original screenshot around the gold box


def screenshot_pictures(q: dict, files: Files) -> str:
    out = []
    for g in q["gold"]:
        path = files.path_of(g["source_id"])
        if path is None:
            out.append(missing(g["source_id"]))
            continue
        gbox = as_dict(g["region"]).get("bbox")
        atoms = [(a["rank"], b) for a in same_source(q["top"], g["source_id"]) if (b := as_dict(a["extent"]).get("bbox"))]
        with Image.open(path) as opened:
            im = opened.convert("RGB")
            full = box_thumbnail(im, [gbox] if gbox else [], atoms, width=SHOT_WIDTH)
            parts = [img_tag(encode(full), f"screenshot {g['source_id']} with gold box and top-k boxes")]
            if gbox:
                x0, y0, x1, y1 = gbox
                crop = (max(0, x0 - ZOOM_MARGIN), max(0, y0 - ZOOM_MARGIN), min(im.width, x1 + ZOOM_MARGIN),
                        min(im.height, y1 + ZOOM_MARGIN))
                zoom = box_thumbnail(im, [gbox], atoms, width=SHOT_WIDTH, crop=crop)
                parts.append(img_tag(encode(zoom), "zoom around the gold box"))
        out.append("<div class=pics>" + "".join(parts) + "</div>")
    out.append(elsewhere(q["top"], {g["source_id"] for g in q["gold"]}))
    return "".join(out)
