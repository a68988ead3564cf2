"""Case 4: PDF extract + chunk (pages/s) vs bare pypdfium2 text extraction of the same PDFs.

OCR of text-less pages is timed by the ocr case: here it is served from the suite's
OCR cache (benchmarks.common.suite_ocr_cache: seeded from the checkout's
data/ocr-cache when present), warmed once before timing (what every extraction after
the first one does); the warm-up's hits and misses are kept in the figure.
"""

from __future__ import annotations

from pathlib import Path

from bench.corpus_sources import datasets
from bench.modalities import modalities
from benchmarks.common import MIRROR, best_of, figure, suite_ocr_cache

CHUNKING = {"strategy": "page", "window_tokens": 200, "overlap_tokens": 50}


def _bare(paths: list[Path]) -> int:
    import pypdfium2 as pdfium

    pages = 0
    for path in paths:
        pdf = pdfium.PdfDocument(str(path))
        for i in range(len(pdf)):
            page = pdf[i]
            tp = page.get_textpage()
            tp.get_text_range()
            tp.close()
            page.close()
            pages += 1
        pdf.close()
    return pages


def _ours(files: dict[str, Path]) -> int:
    ds = datasets()["mmlongbench"]
    seg = ds.extract(files)
    mod = modalities()["pdf"]
    mod.chunk(seg, str(CHUNKING["strategy"]), CHUNKING)
    return int(seg.groupby("source_id")["page"].nunique().sum())


def run_case(limit: int | None, repeats: int) -> list[dict]:
    folder = MIRROR / "mmlongbench-doc" / "data" / "documents"
    paths = sorted(folder.glob("*.pdf"))[: limit or None]
    files = {f"data/documents/{p.name}": p for p in paths}
    from bench.modalities import ocr

    _bare(paths[:1])  # import and warm
    cache = ocr.use_cache(suite_ocr_cache())
    try:
        _ours(files)  # OCR of the text-less pages not in the suite's cache yet, into it
        warm_up = cache.stats() if cache is not None else None
        t_ours, all_ours, pages = best_of(lambda: _ours(files), repeats)
    finally:
        ocr.use_cache(None)
    t_ref, all_ref, ref_pages = best_of(lambda: _bare(paths), repeats)
    return [figure(f"pdf extract+chunk {len(paths)} PDFs ({pages} pages)", t_ours, t_ref,
                   "bare pypdfium2: open, get_textpage().get_text_range() per page, one process",
                   "ratio <= 1.5", goal_ratio=1.5, pdfs=len(paths), pages=pages, reference_pages=ref_pages,
                   ours_pages_per_s=pages / t_ours, reference_pages_per_s=ref_pages / t_ref,
                   ocr_cache_warm_up=warm_up, all_ours_s=all_ours, all_reference_s=all_ref, repeats=repeats,
                   statistic="best of repeats")]
