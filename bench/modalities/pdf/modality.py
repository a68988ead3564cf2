"""PDF: regions are pages (1-based) or blocks (0-based paragraphs) of a page.

Segments are (page, block) pairs of text from the PDF's text layer. A block is a
paragraph of pypdfium2's page text, split at blank lines; a page with no blank line
is one block 0, and a page with no text layer is one empty block 0, so every page
exists as a segment even when it holds only pictures.

Pages without a usable text layer (scans, slides, charts): a page whose text layer
has fewer than MIN_LAYER_CHARS (16) non-space characters is rendered by pdfium at
RENDER_SCALE (2.0, i.e. 144 dpi; at 1.0 the OCR engine misses most small print) and
OCR'd with the same engine and settings as screenshots (bench/modalities/ocr.py,
through its cache, on every core). The OCR lines (reading order, one per line)
become the page's single block 0 and the segment's ``text_source`` is ``ocr``,
unless OCR found fewer non-space characters than the layer had, in which case the
layer text stays (``layer``). A page OCR found nothing on keeps its empty block 0
with ``text_source`` ``ocr``. Every other segment has ``text_source`` ``layer``.
Gold (whole pages) never changes. An atom's ``text_source`` is ``ocr`` when any
of its text comes from an OCR segment, else ``layer``.

Overlap: an atom overlaps a page (or block) when their character spans in the
document's joined text intersect with positive length. A page with no text has an
empty span; it is overlapped by every atom whose page range covers it (the page
atom of that page, a window that runs across it, the whole-document atom).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from bench.modalities.base import Modality, Option, extent_json, extent_range, is_int, unit_frame
from bench.modalities.boxes import interval_extents, leading_interval, placed_spans
from bench.modalities.overlap import SameFrame
from bench.modalities.textspan import (
    intersects,
    joined_text,
    key_spans,
    layout,
    layout_codes,
    source_codes,
    token_spans,
    windows,
)

#: a page whose text layer has fewer non-space characters than this is OCR'd
MIN_LAYER_CHARS = 16


class PdfModality(Modality):
    name: ClassVar[str] = "pdf"
    region_forms = (frozenset({"page"}), frozenset({"page", "block"}))
    strategies = ("page", "window", "whole")
    chunk_options = {"window_tokens": Option(200, high=1_000_000, low=1), "overlap_tokens": Option(50, high=1_000_000)}
    windows = (("window_tokens", "overlap_tokens"),)
    extraction_options = {"ocr_min_chars": Option(MIN_LAYER_CHARS, high=1_000_000)}  # 0: no page OCR

    def check_region_values(self, region: dict) -> str | None:
        if not is_int(region["page"]):
            return f"page must be an integer, got {region['page']!r}"
        if region["page"] < 1:
            return f"page must be >= 1 (pages are 1-based), got {region['page']}"
        if "block" in region:
            if not is_int(region["block"]):
                return f"block must be an integer, got {region['block']!r}"
            if region["block"] < 0:
                return f"block must be >= 0, got {region['block']}"
        return None

    def check_region_in_corpus(self, region: dict, segments: pd.DataFrame) -> str | None:
        n_pages = int(segments["page"].max()) if len(segments) else 0
        page = region["page"]
        if page > n_pages:
            return f"page {page} beyond the document's {n_pages} pages"
        if "block" in region:
            n_blocks = int((segments["page"] == page).sum())
            if region["block"] >= n_blocks:
                return f"block {region['block']} not on page {page} ({n_blocks} blocks)"
        return None

    # -- chunking ---------------------------------------------------------------

    def chunk(self, segments: pd.DataFrame, strategy: str, options: dict[str, Any]) -> pd.DataFrame:
        rows: list[dict] = []
        for source_id, seg in segments.groupby("source_id", sort=True):
            seg = layout(seg)
            meta = seg.iloc[0]
            common = {
                "source_id": source_id,
                "dataset": meta["dataset"],
                "modality": self.name,
                "holder": meta["holder"],
                "observed_at": meta["observed_at"],
            }
            for atom in _chunk_one(seg, strategy, options):
                extent = {"page_start": atom["page_start"], "page_end": atom["page_end"]}
                rows.append(
                    {
                        "atom_id": f"{source_id}#{atom['key']}",
                        **common,
                        "text": atom["text"],
                        "extent": extent_json(extent),
                        "page_start": atom["page_start"],
                        "page_end": atom["page_end"],
                        "char_start": atom["char_start"],
                        "char_end": atom["char_end"],
                        "text_source": atom["text_source"],
                    }
                )
        return pd.DataFrame(rows, columns=[*ATOM_PDF_COLUMNS, "text_source"])

    def overlap(self, region: dict, atoms: pd.DataFrame, segments: pd.DataFrame) -> np.ndarray:
        seg = layout(segments)
        page = region["page"]
        sel = seg[seg["page"] == page]
        if "block" in region:
            sel = sel[sel["block"] == region["block"]]
        if sel.empty:
            return np.zeros(len(atoms), dtype=bool)
        g_lo, g_hi = int(sel["char_start"].min()), int(sel["char_end"].max())
        lo = atoms["char_start"].to_numpy()
        hi = atoms["char_end"].to_numpy()
        if g_hi > g_lo:
            return intersects(lo, hi, g_lo, g_hi)
        covers = (atoms["page_start"].to_numpy() <= page) & (atoms["page_end"].to_numpy() >= page)
        return covers

    def overlap_pairs(self, regions: pd.DataFrame, atoms: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Vectorised `overlap` for many regions at once: (region_row, atom_row) pairs.

        Each region's character span comes from one vectorised layout of all its
        sources' segments; regions with text join atoms on character spans, regions
        on pages without text join them on page ranges, as `overlap` does.
        """
        from bench.modalities.overlap import candidate_pairs, group_codes, pairs_frame

        if not len(regions) or not len(atoms) or not len(segments):
            return pairs_frame([], [])
        page = np.asarray([x["page"] for x in regions["region"]], dtype=np.int64)
        block = np.asarray([x.get("block", -1) for x in regions["region"]], dtype=np.int64)
        found, g_lo, g_hi = _page_spans(regions["source_id"], page, block, segments)
        a_src, r_src = group_codes(atoms["source_id"], regions["source_id"])
        lo, hi = atoms["char_start"].to_numpy(dtype=np.int64), atoms["char_end"].to_numpy(dtype=np.int64)
        p0, p1 = atoms["page_start"].to_numpy(dtype=np.int64), atoms["page_end"].to_numpy(dtype=np.int64)
        out_r: list[np.ndarray] = []
        out_a: list[np.ndarray] = []
        text = np.flatnonzero(found & (g_hi > g_lo))
        r, a = candidate_pairs(r_src[text], g_lo[text], g_hi[text], a_src, lo, hi)
        keep = intersects(lo[a], hi[a], g_lo[text][r], g_hi[text][r])
        out_r.append(text[r[keep]])
        out_a.append(a[keep])
        empty = np.flatnonzero(found & (g_hi <= g_lo))
        r, a = candidate_pairs(r_src[empty], page[empty], page[empty], a_src, p0, p1)
        keep = (p0[a] <= page[empty][r]) & (p1[a] >= page[empty][r])
        out_r.append(empty[r[keep]])
        out_a.append(a[keep])
        return pairs_frame(np.concatenate(out_r), np.concatenate(out_a))

    region_columns: ClassVar[dict[str, str]] = {"page": "Int64", "block": "Int64"}

    def place_regions(self, regions: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Vectorised `region_extent`: each page's (or block's) character span, as `overlap_pairs` finds it."""
        page = regions["page"].to_numpy(dtype=np.int64)
        block = regions["block"].fillna(-1).to_numpy(dtype=np.int64)
        found, lo, hi = _page_spans(regions["source_id"], page, block, segments)
        return placed_spans(found, lo, hi + 1)

    def extent_segments(self, segments: pd.DataFrame) -> pd.DataFrame:
        return layout(segments)  # character spans of the pages

    def atom_from_extent(self, extent: dict, segments: pd.DataFrame | None) -> dict[str, Any]:
        """{"page_start": p, "page_end": q} or {"page": p}; the character span is that of the pages."""
        a, b = extent_range(extent, "page", "page_start", "page_end", 1)
        lo = hi = -1
        if segments is not None and len(segments):
            pages = segments[(segments["page"] >= a) & (segments["page"] <= b)]
            if len(pages):
                lo, hi = int(pages["char_start"].min()), int(pages["char_end"].max())
        return {"page_start": a, "page_end": b, "char_start": lo, "char_end": hi, "extent": {"page_start": a, "page_end": b}}

    def replay_units(self, segments: pd.DataFrame) -> pd.DataFrame:
        """One event per page: its blocks' text joined by newlines, observed with its latest block."""
        return _pages(segments, None, None)

    def cited_units(self, extent: dict, segments: pd.DataFrame) -> pd.DataFrame:
        """Each page of the cited range, within the document's pages."""
        a, b = extent_range(extent, "page", "page_start", "page_end", 1)
        n_pages = int(segments["page"].max()) if len(segments) else 0
        if b > n_pages:
            raise ValueError(f"page {b} beyond the document's {n_pages} pages")
        return _pages(segments, a, b)

    def unreadable_gold(self, entries: list[dict], segments: pd.DataFrame) -> dict[str, Any] | None:
        """Answerable pdf entries whose gold pages all have empty text (textless.py)."""
        from bench.modalities.pdf.textless import textless_gold

        return textless_gold(entries, segments)

    def unreadable_gold_lines(self, found: dict[str, Any]) -> list[str]:
        """The report's count and table of the entries `unreadable_gold` found (textless.py)."""
        from bench.modalities.pdf.textless import textless_lines

        return textless_lines(found)

    def pictures(self, query: dict[str, Any], files: Any, segments: dict[str, pd.DataFrame]) -> str:
        """Each gold page rendered, with the ranks of the atoms on it (pictures.py)."""
        from bench.modalities.pdf.pictures import page_pictures

        return page_pictures(query, files)

    # Extents are characters of the joined text, each segment owning the newline after
    # it: segment i spans [char_start, char_end + 1), so the pages tile the document
    # and a page without a text layer still has extent 1 (it can be covered and paid).
    extent_unit: ClassVar[str] = "chars"
    # The reader's budget: ten median gold regions of the dev set (a page: 1,622 characters on
    # MMLongBench-Doc), rounded: 16,000 characters, about 4,000 tokens (~4 characters a token).
    budget: ClassVar[Option | None] = Option(16_000, high=1_000_000_000, low=0, low_open=True, whole=False)

    def cut(self, boxes: np.ndarray, amounts: np.ndarray) -> np.ndarray | None:
        """The leading characters in document order (a whole-document atom: its first pages)."""
        return leading_interval(boxes, amounts)

    def atom_extents(self, atoms: pd.DataFrame) -> pd.DataFrame:
        return interval_extents(atoms["char_start"].to_numpy(), atoms["char_end"].to_numpy() + 1)

    def region_extent(self, region: dict, segments: pd.DataFrame) -> tuple[str, float, float, float, float] | None:
        seg = layout(segments)
        sel = seg[seg["page"] == region["page"]]
        if "block" in region:
            sel = sel[sel["block"] == region["block"]]
        if sel.empty:
            return None
        return ("", float(sel["char_start"].min()), float(sel["char_end"].max() + 1), 0.0, 1.0)


def _page_spans(sources: Any, page: np.ndarray, block: np.ndarray, segments: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(found, char_start, char_end) of each region's page (block < 0) or block among the
    segments of its source: min start and max end of their segments (textspan.key_spans)."""
    r_sources = pa.array(sources, from_pandas=True)
    unique = pc.unique(r_sources)
    known = _LAID.get(segments)  # the join's layout, when the placement asks of the same segments (sources laid out alike)
    if known is not None and known[0].issuperset(unique.to_pylist()):
        laid = known[1]
    else:
        wanted = pc.is_in(pa.array(segments["source_id"], from_pandas=True), value_set=unique)
        rows = np.flatnonzero(wanted.to_numpy(zero_copy_only=False))  # take: a boolean .loc is far slower
        laid = layout_codes(segments[["source_id", "seq", "text", "page", "block"]].take(rows), ("page", "block"))
        _LAID.put(segments, (frozenset(unique.to_pylist()), laid))
    code = source_codes(laid, r_sources)
    found, lo, hi = key_spans(laid, ("page",), code, (page,), np.flatnonzero(block < 0))
    f2, lo2, hi2 = key_spans(laid, ("page", "block"), code, (page, block), np.flatnonzero(block >= 0))
    return found | f2, np.where(f2, lo2, lo), np.where(f2, hi2, hi)


#: the sources laid out and their layout (textspan.layout_codes), for the segments frame they were laid out from
_LAID: SameFrame[tuple[frozenset[str], Any]] = SameFrame()


def layout_many(segments: pd.DataFrame) -> pd.DataFrame:
    """`textspan.layout` of many sources at once (char offsets restart per source).

    Returns source_id, page, block, char_start, char_end, one row per segment in
    (source, seq) order; one stable sort and one running sum over all sources.
    """
    laid = layout_codes(segments, ("page", "block"))
    return pd.DataFrame({
        "source_id": laid.sources.take(pa.array(laid.code)).to_numpy(zero_copy_only=False),
        "page": laid.columns["page"],
        "block": laid.columns["block"],
        "char_start": laid.start,
        "char_end": laid.end,
    })


ATOM_PDF_COLUMNS = [
    "atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at", "extent",
    "page_start", "page_end", "char_start", "char_end",
]
#: pdfium render scale of a page to OCR (1.0 = 72 dpi)
RENDER_SCALE = 2.0


def _ocr_spans(seg: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Character spans of the segments whose (non-empty) text comes from OCR."""
    if "text_source" not in seg.columns:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    sel = seg[(seg["text_source"] == "ocr") & (seg["char_end"] > seg["char_start"])]
    return sel["char_start"].to_numpy(dtype=np.int64), sel["char_end"].to_numpy(dtype=np.int64)


def _chunk_one(seg: pd.DataFrame, strategy: str, options: dict[str, Any]) -> list[dict]:
    o_lo, o_hi = _ocr_spans(seg)
    atoms = _chunk_text(seg, strategy, options)
    for atom in atoms:
        has_ocr = bool(((o_lo < atom["char_end"]) & (o_hi > atom["char_start"])).any()) if len(o_lo) else False
        atom["text_source"] = "ocr" if has_ocr else "layer"
    if strategy == "page" and "text_source" in seg.columns:
        # a page OCR found nothing on holds no OCR text, but its text is OCR's (empty) reading
        ocr_pages = set(seg.loc[seg["text_source"] == "ocr", "page"].tolist())
        for atom in atoms:
            if atom["page_start"] in ocr_pages:
                atom["text_source"] = "ocr"
    return atoms


def _chunk_text(seg: pd.DataFrame, strategy: str, options: dict[str, Any]) -> list[dict]:
    text = joined_text(seg)
    if strategy == "page":
        out = []
        for page, grp in seg.groupby("page", sort=True):
            lo, hi = int(grp["char_start"].min()), int(grp["char_end"].max())
            out.append({"key": f"p{page}", "page_start": int(page), "page_end": int(page),
                        "char_start": lo, "char_end": hi, "text": text[lo:hi]})
        return out
    if strategy == "whole":
        return [{"key": "doc", "page_start": int(seg["page"].min()), "page_end": int(seg["page"].max()),
                 "char_start": 0, "char_end": len(text), "text": text}]
    if strategy == "window":
        size = int(options["window_tokens"])
        overlap = int(options["overlap_tokens"])
        t_lo, t_hi = token_spans(text)
        seg_starts = seg["char_start"].to_numpy()
        pages = seg["page"].to_numpy()
        out = []
        for i, (a, b) in enumerate(windows(len(t_lo), size, overlap)):
            lo, hi = int(t_lo[a]), int(t_hi[b - 1])
            p0 = int(pages[np.searchsorted(seg_starts, lo, side="right") - 1])
            p1 = int(pages[np.searchsorted(seg_starts, hi - 1, side="right") - 1])
            out.append({"key": f"w{i}", "page_start": p0, "page_end": p1,
                        "char_start": lo, "char_end": hi, "text": text[lo:hi]})
        return out
    raise ValueError(f"unknown pdf chunking strategy {strategy!r}; choose one of {PdfModality.strategies}")


def extract_pdf(path: str, source_id: str) -> list[dict]:
    """Text of every page of one PDF as (page, block, text) rows, via pypdfium2."""
    import pypdfium2 as pdfium

    rows: list[dict] = []
    pdf = pdfium.PdfDocument(path)
    try:
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            raw = textpage.get_text_range()
            textpage.close()
            page.close()
            text = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
            blocks = [b.strip() for b in _split_blocks(text)]
            blocks = [b for b in blocks if b] or [""]
            for b, block_text in enumerate(blocks):
                rows.append({"source_id": source_id, "page": index + 1, "block": b, "text": block_text})
    finally:
        pdf.close()
    return rows


def _split_blocks(text: str) -> list[str]:
    import re

    return re.split(r"\n[ \t]*\n", text)


def _nonspace(text: str) -> int:
    return len(text) - sum(ch.isspace() for ch in text)


def needs_ocr(page_rows: list[dict], min_chars: int = MIN_LAYER_CHARS) -> bool:
    """True when the page's text layer (all its blocks) has fewer than `min_chars` non-space characters."""
    return sum(_nonspace(r["text"]) for r in page_rows) < min_chars


def add_ocr_text(docs: list[list[dict]], paths: list[str], workers: int | None = None,
                 min_chars: int = MIN_LAYER_CHARS, scale: float = RENDER_SCALE) -> list[list[dict]]:
    """Rows of `extract_pdf` per document, with pages below `min_chars` OCR'd (module doc).

    `paths[i]` is the PDF of `docs[i]`. Every row gains `text_source` (layer | ocr).
    OCR runs through `bench.modalities.ocr.ocr_many` (its cache, its process pool).
    """
    from bench.modalities.ocr import PageImage, ocr_many

    pages: list[tuple[int, int, list[dict]]] = []  # (doc index, page, rows of that page)
    for d, rows in enumerate(docs):
        by_page: dict[int, list[dict]] = {}
        for row in rows:
            by_page.setdefault(row["page"], []).append(row)
        pages += [(d, page, grp) for page, grp in by_page.items()]
    todo = [(d, page, grp) for d, page, grp in pages if needs_ocr(grp, min_chars)]
    results = ocr_many([PageImage(paths[d], page - 1, scale) for d, page, _ in todo], workers=workers,
                       label="ocr text-less pdf pages", unit="pages")
    replaced: dict[tuple[int, int], list[dict]] = {}
    for (d, page, grp), res in zip(todo, results, strict=True):
        ocr_text = "\n".join(line for line in (b.text.replace("\x00", "").strip() for b in res.boxes) if line)
        if _nonspace(ocr_text) >= sum(_nonspace(r["text"]) for r in grp):
            replaced[(d, page)] = [{**grp[0], "block": 0, "text": ocr_text, "text_source": "ocr"}]
    out: list[list[dict]] = []
    for d, rows in enumerate(docs):
        doc_rows: list[dict] = []
        seen: set[int] = set()
        for row in rows:
            new = replaced.get((d, row["page"]))
            if new is None:
                doc_rows.append({**row, "text_source": "layer"})
            elif row["page"] not in seen:
                doc_rows += new
            seen.add(row["page"])
        out.append(doc_rows)
    return out


def _pages(segments: pd.DataFrame, first: int | None, last: int | None) -> pd.DataFrame:
    """Pages first..last (all when None) of one document as units."""
    seg = segments.sort_values("seq", kind="stable")
    if first is not None and last is not None:
        seg = seg[(seg["page"] >= first) & (seg["page"] <= last)]
    pages = seg.groupby("page", sort=True).agg(text=("text", lambda t: "\n".join(x for x in t if x)), observed_at=("observed_at", "max"))
    return unit_frame([{"page": int(p)} for p in pages.index], pages["text"], pages["observed_at"])
