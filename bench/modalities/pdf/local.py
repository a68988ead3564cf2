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
EXAMPLE_GOLD = [
    ("What does the handbook say about travel refunds? (put handbook.pdf in files/)", "within 30 days", "handbook.pdf", {"page": 1}),
    ("Which page lists the office dress code?", None, None, {}),
]


def source_of(path: str) -> str:
    return path


def parse(sources: dict[str, list[tuple[str, Path]]]) -> pd.DataFrame:
    jobs = []
    for source_id, files in sorted(sources.items()):
        for inner, local in files:
            with open(local, "rb") as fh:
                if fh.read(5) != b"%PDF-":
                    raise LocalDataError(f"{inner}: not a PDF file (no %PDF- header)")
            jobs.append((str(local), source_id))
    try:
        rows = [row for doc in extract_many(jobs) for row in doc]
    except Exception as exc:  # pdfium's error names no file: name it
        raise LocalDataError(f"{', '.join(s.split(':', 1)[1] for _, s in jobs)}: pdfium could not read it ({exc})") from None
    df = pd.DataFrame(rows, columns=["source_id", "page", "block", "text"])
    df["seq"] = df.groupby("source_id").cumcount()
    return df
