"""`python -m benchmarks.ocr_accuracy`: measure the extraction's OCR setting against PDF text layers
on the seeded sample (benchmarks.ocr_scoring documents the sample, normalisation, reading order and
error rates) and write reports/ocr_accuracy.json, which the report's *Text sources* section cites."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.ocr_candidates import TODAY, current, measure_cpu, setting_doc
from benchmarks.ocr_scoring import (
    MIN_LAYER_CHARS,
    OUT,
    PAGES_PER_DOC,
    SEED,
    doc_kinds,
    page_scores,
    paired_difference,
    sample_pages,
    summarise,
)


def measure(setting: Any, pages: Sequence[tuple[str, int]], rows: Sequence[Sequence[Any]], q: int) -> dict[str, Any]:
    """Setting number `q` of `rows` (benchmarks.ocr_candidates.measure_cpu over `pages`): its
    description, summary (CER/WER, n, intervals), CPU s per page and per-page counts."""
    from bench.modalities.ocr import OcrBox

    scored = [page_scores(pdf, i, [OcrBox(*b) for b in rows[n][q][2]], setting.scale) for n, (pdf, i) in enumerate(pages)]
    return {**setting_doc(setting), **summarise(scored, doc_kinds()), "cpu_s_per_page": sum(r[q][0] for r in rows) / len(pages),
            "timing": "CPU s per page, render + OCR (benchmarks.ocr_candidates.measure_cpu)", "per_page": scored}


def main(argv: Sequence[str] | None = None) -> None:
    """Measure the extraction's setting (OCR_PARAMS, RENDER_SCALE) on the whole sample and write
    reports/ocr_accuracy.json, with the setting before it (benchmarks.ocr_candidates.TODAY) on
    every K-th page of the sample beside it (``--old-every K``, default 1: every page) and the
    paired change on those pages. ``--processes N`` (default 2)."""
    import os
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) % 2 or set(args[::2]) - {"--processes", "--old-every"} or not all(v.isdigit() for v in args[1::2]):
        raise SystemExit("usage: python -m benchmarks.ocr_accuracy [--processes N] [--old-every K]")
    opts = {k: int(v) for k, v in zip(args[::2], args[1::2])}
    processes, old_every = opts.get("--processes", 2), opts.get("--old-every", 1)
    pages = sample_pages()
    started, load = time.strftime("%Y-%m-%dT%H:%M:%S%z"), [round(x, 2) for x in os.getloadavg()]
    new = current()
    paired = pages[::old_every]
    rows_paired = measure_cpu([new, TODAY], paired, processes)
    rest = [p for n, p in enumerate(pages) if n % old_every]
    rows_rest = measure_cpu([new], rest, processes) if rest else []
    by_page = dict(zip(paired, rows_paired)) | dict(zip(rest, rows_rest))
    doc = measure(new, pages, [by_page[p][:1] for p in pages], 0)
    pair_new, old = measure(new, paired, rows_paired, 0), measure(TODAY, paired, rows_paired, 1)
    compared = {**{k: old[k] for k in ("setting", "params", "render_scale", "pages", "documents", "cer", "wer",
                                       "wer_ordered", "cpu_s_per_page")},
                "new_on_these_pages": {k: pair_new[k] for k in ("cer", "wer", "cpu_s_per_page")},
                "every": old_every,
                "cer_change": paired_difference(pair_new["per_page"], old["per_page"], "char_errors", "chars"),
                "wer_change": paired_difference(pair_new["per_page"], old["per_page"], "word_errors", "words"),
                "per_page": old["per_page"]}
    doc = {"started": started, "command": "python -m benchmarks.ocr_accuracy " + " ".join(args), **doc,
           "sample": {"seed": SEED, "pages_per_document": PAGES_PER_DOC, "min_layer_chars": MIN_LAYER_CHARS,
                      "source": "MMLongBench-Doc PDFs of the mirror"},
           "normalisation": "NFKC, ASCII quotes/dashes, whitespace runs to one space, case kept",
           "reading_order": "both sides in geometric order (lines by vertical overlap, top-down, left-right)",
           "compared_with": compared, "load_average": {"start": load, "end": [round(x, 2) for x in os.getloadavg()]}}
    from bench.io import write_json

    write_json(OUT, doc)
    print(json.dumps({k: v for k, v in doc.items() if k not in ("per_page", "compared_with")}, indent=1))
    print(json.dumps({k: v for k, v in compared.items() if k != "per_page"}, indent=1))


if __name__ == "__main__":
    main()
