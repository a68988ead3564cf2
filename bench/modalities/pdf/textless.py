"""Answerable PDF entries whose every gold page has empty text (nothing to retrieve by text).

With OCR of text-less pages (modality.add_ocr_text) such an entry remains only when
OCR found no text on any of its gold pages (blank pages, pictures without words);
the report lists them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd


def page_texts(segments: pd.DataFrame) -> pd.DataFrame:
    """One row per (source_id, page): whether the page has text (a character that is not
    whitespace, in str.isspace's sense) and its text_source (``ocr`` when OCR ran on any of its segments)."""
    seg = segments[segments["modality"] == "pdf"] if "modality" in segments.columns else segments
    if seg.empty:
        return pd.DataFrame(columns=["source_id", "page", "has_text", "text_source"])
    # per segment, in C: a non-empty text that is not all whitespace (what `\s+` removed before counting)
    has_text = [isinstance(t, str) and not (t == "" or t.isspace()) for t in seg["text"].tolist()]
    source = seg["text_source"] if "text_source" in seg.columns else pd.Series("layer", index=seg.index)
    frame = pd.DataFrame({"source_id": seg["source_id"], "page": seg["page"].astype(int), "has_text": has_text,
                          "ocr": (source == "ocr").to_numpy(bool)})
    out = frame.groupby(["source_id", "page"], sort=True).agg(has_text=("has_text", "any"), ocr=("ocr", "any")).reset_index()
    out["text_source"] = out["ocr"].map({True: "ocr", False: "layer"})
    return out.drop(columns="ocr")


def textless_gold(entries: list[dict], segments: pd.DataFrame) -> dict[str, Any]:
    """Answerable pdf entries whose gold pages all have empty text.

    Returns {"answerable": n answerable pdf entries, "entries": [{query_id, source_id,
    pages, text_source}]} where text_source lists each gold page's source (``ocr``
    means OCR ran on it and found nothing).
    """
    table = page_texts(segments)
    pages = {(str(s), int(p)): (bool(h), str(t)) for s, p, h, t in
             zip(table["source_id"].tolist(), table["page"].tolist(), table["has_text"].tolist(), table["text_source"].tolist())}
    rows: list[dict] = []
    answerable = 0
    for e in entries:
        if e.get("modality") != "pdf" or e.get("unanswerable") or not e.get("gold"):
            continue
        answerable += 1
        keys = [(g["source_id"], int(g["region"]["page"])) for g in e["gold"]]
        known = [k for k in keys if k in pages]
        if not known or any(pages[k][0] for k in known):
            continue
        rows.append({"query_id": e["query_id"], "source_id": keys[0][0], "pages": [p for _, p in known],
                     "text_source": [pages[k][1] for k in known]})
    return {"answerable": answerable, "entries": rows}


def textless_lines(found: dict[str, Any]) -> list[str]:
    """Markdown lines of reports/dev.md for `textless_gold`'s result: the count, and a
    table of the entries when there are any."""
    rows = found["entries"]
    out = [f"Answerable pdf dev entries whose every gold page has empty text: **{len(rows)}** of "
           f"{found['answerable']} (text source `ocr`: OCR ran on the page and found no text)."]
    if rows:
        out += ["", "| query_id | gold pages | text source |", "|---|---|---|"]
        for r in rows:
            out.append(f"| {r['query_id']} | {', '.join(map(str, r['pages']))} | {', '.join(r['text_source'])} |")
    out.append("")
    return out
