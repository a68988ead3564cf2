"""Local pdf data sets: every PDF under files/ is one source; regions are pages.

Text comes from the same pypdfium2 extraction as MMLongBench-Doc (one row per page
block). A file that pdfium cannot open is refused, naming it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.modalities.local import LocalDataError
from bench.modalities.pdf.mmlongbench import extract_many

FORMATS = "PDF documents (.pdf)"
SUFFIXES: tuple[str, ...] | None = (".pdf",)
EXAMPLE_FILES: dict[str, str] = {}
EXAMPLE_GOLD: list[tuple[str, str | None, str | None, dict]] = [
    ("What does the handbook say about travel refunds? (put handbook.pdf in files/)", "within 30 days", "handbook.pdf", {"page": 1}),
    ("Which page lists the office dress code?", None, None, {}),
]


def source_of(path: str) -> str:
    return path


def check_pdf(inner: str, local: Path) -> None:
    """Open the file with pdfium first: one that cannot be read is refused, naming it."""
    import pypdfium2 as pdfium

    with open(local, "rb") as fh:
        if fh.read(5) != b"%PDF-":
            raise LocalDataError(f"{inner}: not a PDF file (no %PDF- header)")
    try:
        pdfium.PdfDocument(str(local)).close()
    except pdfium.PdfiumError as exc:
        raise LocalDataError(f"{inner}: pdfium cannot read it ({exc})") from None


def parse(sources: dict[str, list[tuple[str, Path]]]) -> pd.DataFrame:
    jobs = []
    for source_id, files in sorted(sources.items()):
        for inner, local in files:
            check_pdf(inner, local)
            jobs.append((str(local), source_id))
    rows = [row for doc in extract_many(jobs) for row in doc]
    df = pd.DataFrame(rows, columns=["source_id", "page", "block", "text"])
    df["seq"] = df.groupby("source_id").cumcount()
    return df
