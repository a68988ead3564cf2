"""Local code data sets: each top folder under files/ is one source, a repository.

``files/<repo>/<path>`` is the file ``<path>`` of source ``<key>:<repo>``; regions are
``{"path": <path>, "symbol": ...}`` or ``{"path": <path>, "line": n}`` as for the
registered code data sets. Files are decoded as in `bench/modalities/code/tree.py`
(UTF-8, a Python coding cookie; binaries and files over its size bound are skipped)
and parsed into symbols by the code modality. A file directly under files/ (not in
a repository folder) is refused.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.modalities.code.modality import tree_segments
from bench.modalities.code.tree import MAX_FILE_BYTES, decode_text
from bench.modalities.local import LocalDataError

FORMATS = "a folder per repository (files/<repo>/...)"
SUFFIXES: tuple[str, ...] | None = None
EXAMPLE_FILES: dict[str, str] = {
    "billing/invoices.py": (
        '"""Invoices."""\n\n\n'
        "def due_date(issued, days=30):\n"
        '    """An invoice is due `days` after it was issued."""\n'
        "    return issued + days\n\n\n"
        "def late_fee(amount):\n"
        "    return round(amount * 0.02, 2)\n"
    ),
}
EXAMPLE_GOLD: list[tuple[str, str | None, str | None, dict]] = [
    ("How many days after issue is an invoice due by default?", "30", "billing/invoices.py", {"path": "invoices.py", "symbol": "due_date"}),
    ("Where are refunds computed?", None, None, {}),
]


def source_of(path: str) -> str:
    if "/" not in path:
        raise LocalDataError(f"{path}: a code data set holds one folder per repository (files/<repo>/{path})")
    return path.split("/", 1)[0]


def parse(sources: dict[str, list[tuple[str, Path]]]) -> pd.DataFrame:
    frames = []
    for source_id, files in sorted(sources.items()):
        texts: dict[str, str] = {}
        for inner, local in files:
            if Path(local).stat().st_size > MAX_FILE_BYTES:
                continue
            text = decode_text(inner, Path(local).read_bytes())
            if text is not None:
                texts[inner] = text
        frames.append(tree_segments("", source_id, texts, "", pd.NaT).drop(columns=["dataset", "modality", "holder", "observed_at"]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
