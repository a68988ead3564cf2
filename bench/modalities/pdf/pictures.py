"""The drill-down picture of a pdf query (Modality.pictures, reports/dev.html): each gold
page rendered with pypdfium2 and the ranks at which atoms overlapping that page came back
(at most PDF_PAGES pages per query)."""

from __future__ import annotations

from typing import Any

from PIL import Image, ImageDraw

from bench.modalities.drawing import GREEN, RED, Files, as_dict, elsewhere, encode, escape, img_tag, missing, same_source

PDF_WIDTH = 200
PDF_PAGES = 4


def page_thumbnail(pdf: Any, page: int, width: int = PDF_WIDTH) -> Image.Image:
    """Page `page` (1-based) of an open pypdfium2 document rendered `width` px wide."""
    p = pdf[page - 1]
    try:
        scale = width / p.get_width()
        bitmap = p.render(scale=scale)
        img = bitmap.to_pil()
    finally:
        p.close()
    return img


def page_pictures(q: dict, files: Files) -> str:
    import pypdfium2 as pdfium

    figs, notes = [], []
    pages = [(g["source_id"], as_dict(g["region"]).get("page")) for g in q["gold"]]
    for source_id, page in pages[:PDF_PAGES]:
        path = files.path_of(source_id)
        if path is None or not isinstance(page, int):
            notes.append(missing(source_id))
            continue
        ranks = []
        for a in same_source(q["top"], source_id):
            ext = as_dict(a["extent"])
            if ext.get("page_start", 0) <= page <= ext.get("page_end", -1):
                ranks.append(a["rank"])
        img = page_thumbnail(files.opened(path, pdfium.PdfDocument), page)
        ImageDraw.Draw(img).rectangle([0, 0, img.width - 1, img.height - 1], outline=GREEN if ranks else RED, width=3)
        cap = f"p. {page}: " + (f"returned at rank {', '.join(map(str, ranks))}" if ranks else "not in the top k")
        figs.append(f"<figure class=pic>{img_tag(encode(img), f'page {page} of {source_id}')}<figcaption>{escape(cap)}</figcaption></figure>")
    if len(pages) > PDF_PAGES:
        notes.append(f"<p class=muted>{len(pages) - PDF_PAGES} more gold pages not pictured.</p>")
    return "<div class=pics>" + "".join(figs) + "</div>" + "".join(notes) + elsewhere(q["top"], {s for s, _ in pages})
