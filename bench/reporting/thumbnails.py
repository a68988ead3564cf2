"""Pictures for the drill-down of reports/dev.html: a person judges a miss by seeing it.

Per query of the drill-down (see :func:`bench.reporting.html_report.drilldown`), one HTML
fragment drawn by its modality's `pictures` hook (bench/modalities/<name>/pictures.py,
with the drawing of bench/modalities/drawing.py); a modality without one (its drill-down
text already is the unit) gives none.

Files come from the corpus store (``data/corpus/<dataset key>/...``, located with the
data set's ``file_of`` and :func:`bench.ingest.fetch.local_path`, present in the manifest);
video lengths and code text come from the parsed segments. A file that is not in the
store gives a one-line note instead of a picture. Nothing is fetched; every picture
is inline (``data:`` URI or SVG), so the page stays self-contained.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bench.corpus_sources import datasets
from bench.ingest.corpus import Manifest
from bench.ingest.fetch import local_path
from bench.memo import Memo
from bench.modalities import modalities
from bench.modalities.drawing import escape

__all__ = ["PICTURES_PER_MODALITY", "CorpusFiles", "pictures", "query_pictures"]

#: queries per modality that get pictures (the first ones of the drill-down: misses first)
PICTURES_PER_MODALITY = 40


@dataclass(frozen=True)
class CorpusFiles:
    """The local corpus store and the files the manifest lists as present."""

    store: Path
    present: frozenset[tuple[str, str]]
    _opened: dict[Path, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_manifest(cls, manifest: Manifest, store: Path) -> CorpusFiles:
        return cls(Path(store), frozenset((r["key"], r["path"]) for r in manifest.rows if r["status"] == "present"))

    @staticmethod
    def modality_of(source_id: str) -> str | None:
        ds = datasets().get(source_id.split(":", 1)[0])
        return None if ds is None else ds.modality

    def path_of(self, source_id: str) -> Path | None:
        """Local file of a source, or None when it is not in the store."""
        key = source_id.split(":", 1)[0]
        ds = datasets().get(key)
        if ds is None:
            return None
        try:
            rel = ds.file_of(source_id)
        except NotImplementedError:
            return None
        if rel is None or (key, rel) not in self.present:
            return None
        path = local_path(self.store, key, rel)
        return path if path.is_file() else None

    def opened(self, path: Path, opener: Callable[[str], Any]) -> Any:
        """`opener(path)` once per path (a document several pictures read); `close` closes them."""
        if path not in self._opened:
            self._opened[path] = opener(str(path))
        return self._opened[path]

    def close(self) -> None:
        for doc in self._opened.values():
            doc.close()
        self._opened.clear()


def query_pictures(modality: str, q: dict, files: CorpusFiles, segments: dict[str, pd.DataFrame]) -> str:
    """The HTML fragment of pictures for one drill-down query ('' when its modality has none).

    A file that cannot be decoded (not an image, a broken PDF) gives a one-line note: a
    picture never stops the evaluation."""
    mod = modalities().get(modality)
    if not q.get("gold") or mod is None:
        return ""
    try:
        return mod.pictures(q, files, segments)
    except (OSError, ValueError, RuntimeError) as exc:  # PIL.UnidentifiedImageError is an OSError, PdfiumError a RuntimeError
        return f"<p class=muted>No picture: {escape(type(exc).__name__)}: {escape(str(exc)[:200])}</p>"


def pictures(drill: dict[str, Any], files: CorpusFiles, segments: dict[str, pd.DataFrame], *,
             per_modality: int = PICTURES_PER_MODALITY, memo: Memo | None = None, content: str | None = None) -> dict[str, Any]:
    """{"per_modality": cap, "queries": {query_id: fragment}} for the first `per_modality`
    answerable queries of every modality's drill-down.

    ``memo`` with ``content`` (bench.memo): a fragment is reused when its query's
    drill-down entry (gold regions, top atoms, their extents) is that of a stored one and
    ``content`` is the same: the caller's digest of everything else a picture reads (the
    manifest, whose sha256 names every corpus file's content, and the gold sources'
    segments). Without ``content`` every fragment is drawn."""
    out: dict[str, str] = {}
    store = memo if memo is not None and content is not None else Memo(None)
    for modality, block in drill.get("modalities", {}).items():
        answerable = [q for q in block["queries"] if q.get("gold")]
        for q in answerable[:per_modality]:
            key = store.key("pictures", content, modality, json.dumps(q, sort_keys=True, default=str))

            def draw(m: str = modality, q: dict = q) -> str:
                return query_pictures(m, q, files, segments)

            fragment = store.text("pictures", key, draw)
            if fragment:
                out[q["query_id"]] = fragment
    files.close()
    return {"per_modality": per_modality, "queries": out}
