"""OCR accuracy against PDF text layers, the scoring (ground truth no OCR produced).

`python -m benchmarks.ocr_accuracy` (its command) renders a fixed, seeded sample of PDF pages
that have a text layer exactly as text-less pages are rendered for OCR
(bench.modalities.ocr.render_page at the pdf modality's RENDER_SCALE), OCRs them
with the extraction's engine and settings (OCR_PARAMS) and compares the result
with the page's text layer. Writes reports/ocr_accuracy.json, which the report's
*Text sources* section cites (docs/performance.md explains the figures).

Sample: every MMLongBench-Doc PDF of the mirror; of each document, PAGES_PER_DOC
pages drawn with a seeded generator (seed and document name) from its pages whose
layer has at least MIN_LAYER_CHARS non-space characters.

Normalisation (`normalise`): Unicode NFKC (ligatures, full-width forms), typographic
quotes and dashes to ASCII, control characters and soft hyphens removed, every run
of whitespace one space; case is kept.

Reading order: a page's layer and the OCR put multi-column text, captions and side
boxes in different orders, and that is not a recognition error. Both sides are put
in the same geometric order first (`reading_lines`): pieces (the layer's text runs
from pdfium, the OCR's line boxes) are grouped into lines by vertical overlap, lines
run top to bottom, pieces in a line left to right. Then
- CER: character-level Levenshtein distance between the two ordered texts with all
  whitespace left out / the layer's non-space characters (pooled over pages: sum of
  distances / sum of lengths). Whitespace is left out because a layer's spaces are
  not in the PDF: pdfium guesses them from glyph gaps (``mont h s`` for a kerned
  ``months``), and the layer's words are cut the same way (`layer_pieces`);
- WER: order-insensitive bag of words, max(|ref|, |hyp|) - |ref ∩ hyp| (multiset)
  per page / the layer's words: the least word edits between the two bags, so no
  residual order difference counts as an error. An order-sensitive word Levenshtein
  is kept beside it (`wer_ordered`).
Intervals: percentile bootstrap over pages (pages resampled, the pooled ratio
recomputed; BOOTSTRAP resamples, seeded).
"""

from __future__ import annotations

import json
import random
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import MIRROR, ROOT

DOCUMENTS = MIRROR / "mmlongbench-doc" / "data" / "documents"
SAMPLES = MIRROR / "mmlongbench-doc" / "data" / "samples.json"
OUT = ROOT / "reports" / "ocr_accuracy.json"
SEED = 26
PAGES_PER_DOC = 4
MIN_LAYER_CHARS = 200
BOOTSTRAP = 2000

_TRANSLATE = str.maketrans({"‘": "'", "’": "'", "‚": "'", "‛": "'", "“": '"', "”": '"', "„": '"',
                            "‐": "-", "‑": "-", "‒": "-", "–": "-", "—": "-", "−": "-", "\xad": None})
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff\x02]")


def normalise(text: str) -> str:
    """The text compared (module doc): NFKC, ASCII quotes and dashes, one space per whitespace run."""
    text = unicodedata.normalize("NFKC", text).translate(_TRANSLATE)
    return " ".join(_CONTROL.sub("", text).split())


@dataclass(frozen=True)
class Piece:
    """A piece of text on a page, top-down coordinates in PDF points."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str


def reading_lines(pieces: Iterable[Piece]) -> str:
    """The pieces in geometric reading order: lines by vertical overlap, top to bottom, left to right."""
    lines: list[list[Piece]] = []
    for p in sorted((p for p in pieces if p.text.strip()), key=lambda p: ((p.y0 + p.y1) / 2, p.x0)):
        centre = (p.y0 + p.y1) / 2
        if lines:
            first = lines[-1][0]
            if first.y0 <= centre <= first.y1:
                lines[-1].append(p)
                continue
        lines.append([p])
    return "\n".join(" ".join(q.text for q in sorted(line, key=lambda q: q.x0)) for line in lines)


def cer_counts(ref: str, hyp: str) -> tuple[int, int]:
    """(character edit distance, reference length) of two normalised texts, whitespace left out
    (a layer's spaces are pdfium's guesses from glyph gaps, not ground truth; module doc)."""
    from rapidfuzz.distance import Levenshtein

    r, h = "".join(ref.split()), "".join(hyp.split())
    return int(Levenshtein.distance(r, h)), len(r)


def bag_of_words_errors(ref: str, hyp: str) -> tuple[int, int]:
    """(order-insensitive word errors, reference words): max(|R|, |H|) - |R ∩ H| over word multisets."""
    r, h = Counter(ref.split()), Counter(hyp.split())
    matched = sum((r & h).values())
    return max(sum(r.values()), sum(h.values())) - matched, sum(r.values())


def ordered_word_errors(ref: str, hyp: str) -> tuple[int, int]:
    """(word Levenshtein distance, reference words) of two normalised texts in their given order."""
    from rapidfuzz.distance import Levenshtein

    r = ref.split()
    return int(Levenshtein.distance(r, hyp.split())), len(r)


def layer_pieces(pdf: str, index: int) -> list[Piece]:
    """The text layer of page `index` as words (top-down points): its characters in layer
    order, cut at whitespace and wherever the next glyph does not follow on the same line."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    doc = pdfium.PdfDocument(pdf)
    try:
        page = doc[index]
        height = page.get_height()
        tp = page.get_textpage()
        words: list[Piece] = []
        cur: list[tuple[float, float, float, float, str]] = []

        def flush() -> None:
            if cur:
                words.append(Piece(min(c[0] for c in cur), min(c[1] for c in cur), max(c[2] for c in cur),
                                   max(c[3] for c in cur), "".join(c[4] for c in cur)))
                cur.clear()

        for i in range(tp.count_chars()):
            ch = chr(raw.FPDFText_GetUnicode(tp.raw, i))
            if ch.isspace() or not ch.isprintable():
                flush()
                continue
            left, bottom, right, top = tp.get_charbox(i, loose=True)  # font-height boxes: one band per line
            box = (left, height - top, right, height - bottom, ch)
            if cur:
                last = cur[-1]
                size = max(last[3] - last[1], box[3] - box[1], 1.0)
                same_line = abs((last[1] + last[3]) / 2 - (box[1] + box[3]) / 2) < size / 2
                if not same_line or box[0] - last[2] > size * 0.5 or box[0] < last[0] - size:
                    flush()
            cur.append(box)
        flush()
        tp.close()
        page.close()
    finally:
        doc.close()
    return words


def ocr_pieces(boxes: Sequence[Any], scale: float) -> list[Piece]:
    """OCR line boxes (pixels at `scale`) as pieces in PDF points."""
    return [Piece(b.x0 / scale, b.y0 / scale, b.x1 / scale, b.y1 / scale, b.text) for b in boxes]


def layer_chars(pdf: str) -> list[int]:
    """Non-space characters of each page's text layer."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(pdf)
    try:
        out = []
        for page in doc:
            tp = page.get_textpage()
            out.append(len("".join(tp.get_text_range().split())))
            tp.close()
            page.close()
    finally:
        doc.close()
    return out


def doc_kinds() -> dict[str, str]:
    """MMLongBench-Doc's document type of each PDF (samples.json)."""
    if not SAMPLES.is_file():
        return {}
    return {s["doc_id"]: s["doc_type"] for s in json.loads(SAMPLES.read_text(encoding="utf-8"))}


def sample_pages(documents: Path = DOCUMENTS, per_doc: int = PAGES_PER_DOC, seed: int = SEED,
                 min_chars: int = MIN_LAYER_CHARS) -> list[tuple[str, int]]:
    """(pdf path, 0-based page) of the fixed sample (module doc), in document-name order."""
    out: list[tuple[str, int]] = []
    for pdf in sorted(documents.glob("*.pdf")):
        eligible = [i for i, n in enumerate(layer_chars(str(pdf))) if n >= min_chars]
        rng = random.Random(f"{seed}:{pdf.name}")
        out += [(str(pdf), i) for i in sorted(rng.sample(eligible, min(per_doc, len(eligible))))]
    return out


def page_scores(pdf: str, index: int, boxes: Sequence[Any], scale: float) -> dict[str, Any]:
    """Edit counts of one page: OCR boxes against its text layer (module doc)."""
    ref = normalise(reading_lines(layer_pieces(pdf, index)))
    hyp = normalise(reading_lines(ocr_pieces(boxes, scale)))
    ce, cn = cer_counts(ref, hyp)
    we, wn = bag_of_words_errors(ref, hyp)
    oe, _ = ordered_word_errors(ref, hyp)
    return {"document": Path(pdf).name, "page": index + 1, "char_errors": ce, "chars": cn, "word_errors": we,
            "words": wn, "ordered_word_errors": oe}


def pooled(pages: Sequence[dict[str, Any]], errors: str, total: str, resamples: int = BOOTSTRAP,
           seed: int = SEED) -> dict[str, Any]:
    """Pooled error rate sum(errors) / sum(total) with a 95 % percentile bootstrap interval over pages."""
    e = np.array([p[errors] for p in pages], dtype=float)
    n = np.array([p[total] for p in pages], dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(pages), size=(resamples, len(pages)))
    boot = e[idx].sum(axis=1) / n[idx].sum(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return {"value": float(e.sum() / n.sum()), "ci95": [float(lo), float(hi)], "errors": int(e.sum()),
            "denominator": int(n.sum())}


def summarise(pages: Sequence[dict[str, Any]], kinds: dict[str, str] | None = None) -> dict[str, Any]:
    """CER, WER (bag of words) and ordered WER over `pages`, with n, documents and intervals."""
    kinds = kinds or {}
    docs = sorted({p["document"] for p in pages})
    return {"pages": len(pages), "documents": len(docs),
            "kinds": dict(sorted(Counter(kinds.get(d, "unknown") for d in docs).items())),
            "cer": pooled(pages, "char_errors", "chars"), "wer": pooled(pages, "word_errors", "words"),
            "wer_ordered": pooled(pages, "ordered_word_errors", "words")}


def paired_difference(new: Sequence[dict[str, Any]], old: Sequence[dict[str, Any]], errors: str, total: str,
                      resamples: int = BOOTSTRAP, seed: int = SEED) -> dict[str, Any]:
    """Pooled rate of `new` minus that of `old` on the same pages, with a 95 % percentile
    bootstrap interval (pages resampled, the same pages for both)."""
    e1 = np.array([p[errors] for p in new], dtype=float)
    e0 = np.array([p[errors] for p in old], dtype=float)
    n = np.array([p[total] for p in new], dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(new), size=(resamples, len(new)))
    boot = (e1[idx].sum(axis=1) - e0[idx].sum(axis=1)) / n[idx].sum(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return {"value": float((e1.sum() - e0.sum()) / n.sum()), "ci95": [float(lo), float(hi)], "denominator": int(n.sum())}
