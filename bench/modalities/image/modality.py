"""Images: the region is ``{}``, the whole image (spec section 3).

Region rules: the region must be exactly ``{}`` (any key is refused by the shape
check); against the corpus the image must have a segment, i.e. it was fetched and
parsed. Overlap: every atom of the gold image overlaps the region (the caller
passes the atoms of one source only).

Segments: one row per image, seq 0, with width/height read from the image file and
text = the system's own extraction, RapidOCR lines in OCR order joined by newlines
(photos mostly give no text: an empty string is the honest result). ``n_boxes``
counts OCR boxes and ``ocr_boxes`` keeps their [x0, y0, x1, y1] as JSON. Captions are
never corpus text: they are the gold queries.

Chunker ``whole``: one atom per image, key ``whole``, extent ``{}``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd

from bench.modalities.base import Modality, Option, extent_json, short, source_size, unit_frame
from bench.modalities.boxes import interval_extents, placed_frame

ATOM_IMAGE_COLUMNS = [
    "atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at", "extent",
    "width", "height",
]
SEGMENT_IMAGE_COLUMNS = [
    "source_id", "dataset", "modality", "seq", "text", "holder", "observed_at",
    "width", "height", "n_boxes", "ocr_boxes",
]


class ImageModality(Modality):
    name: ClassVar[str] = "image"
    region_forms = (frozenset(),)
    strategies = ("whole",)
    text_source = "ocr"

    def check_region_in_corpus(self, region: dict, segments: pd.DataFrame) -> str | None:
        if segments.empty:
            return "image has no segment in the corpus"
        return None

    def chunk(self, segments: pd.DataFrame, strategy: str, options: dict[str, Any]) -> pd.DataFrame:
        if strategy not in self.strategies:
            raise ValueError(f"unknown image chunking strategy {strategy!r}; choose one of {self.strategies}")
        rows: list[dict] = []
        for source_id, seg in segments.groupby("source_id", sort=True):
            seg = seg.sort_values("seq", kind="stable")
            meta = seg.iloc[0]
            rows.append(
                {
                    "atom_id": f"{source_id}#whole",
                    "source_id": source_id,
                    "dataset": meta["dataset"],
                    "modality": self.name,
                    "text": "\n".join(t for t in seg["text"].tolist() if t),
                    "holder": meta["holder"],
                    "observed_at": meta["observed_at"],
                    "extent": extent_json({}),
                    "width": int(meta["width"]),
                    "height": int(meta["height"]),
                }
            )
        return pd.DataFrame(rows, columns=ATOM_IMAGE_COLUMNS)

    def overlap(self, region: dict, atoms: pd.DataFrame, segments: pd.DataFrame) -> np.ndarray:
        return np.ones(len(atoms), dtype=bool)

    def overlap_pairs(self, regions: pd.DataFrame, atoms: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Vectorised `overlap`: every atom of the region's source."""
        from bench.modalities.overlap import candidate_pairs, pairs_frame

        zr, za = np.zeros(len(regions)), np.zeros(len(atoms))
        r, a = candidate_pairs(regions["source_id"], zr, zr, atoms["source_id"], za, za)
        return pairs_frame(r, a)

    # The unit is the whole image: every atom and the region have extent 1.
    def atom_from_extent(self, extent: dict, segments: pd.DataFrame | None) -> dict[str, Any]:
        """{} (the whole image)."""
        if extent:
            raise ValueError(f"an image atom's extent must be {{}}, got {short(extent)}")
        w, h = source_size(segments)
        return {"width": w, "height": h, "extent": {}}

    def replay_units(self, segments: pd.DataFrame) -> pd.DataFrame:
        """One event per photo: the OCR text (mostly empty), extent {}."""
        seg = segments.sort_values("seq", kind="stable")
        return unit_frame([{}], ["\n".join(t for t in seg["text"] if t)], [seg["observed_at"].iloc[0]])

    def cited_units(self, extent: dict, segments: pd.DataFrame) -> pd.DataFrame:
        """The whole photo: one unit."""
        self.atom_from_extent(extent, segments)
        return self.replay_units(segments)

    def pictures(self, query: dict[str, Any], files: Any, segments: dict[str, pd.DataFrame]) -> str:
        """The gold photo framed, and the photos returned instead (pictures.py)."""
        from bench.modalities.image.pictures import photo_pictures

        return photo_pictures(query, files, self.name)

    extent_unit: ClassVar[str] = "image"
    # The reader's budget: ten median gold regions of the dev set (a whole photo on COCO):
    # ten photos. An image is never cut (`cut` is None).
    budget: ClassVar[Option | None] = Option(10, high=1_000_000, low=0, low_open=True, whole=False)

    def place_regions(self, regions: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Vectorised `region_extent`: the whole image."""
        return placed_frame("", np.zeros(len(regions)), 1.0, 0.0, 1.0)

    def atom_extents(self, atoms: pd.DataFrame) -> pd.DataFrame:
        return interval_extents(np.zeros(len(atoms)), np.ones(len(atoms)))

    def region_extent(self, region: dict, segments: pd.DataFrame) -> tuple[str, float, float, float, float] | None:
        return ("", 0.0, 1.0, 0.0, 1.0)
