"""UI screenshots: regions are pixel boxes ``{"bbox": [x0, y0, x1, y1]}``.

Region rules: four finite numbers (bools refused), 0 <= x0 < x1 and 0 <= y0 < y1;
against the corpus, x1 <= width and y1 <= height of the real screenshot (width and
height are read from the image file at extract time and stored on every segment).
Boxes are half-open pixel areas, so a box may end exactly on the image edge.

Overlap: an atom overlaps a region when their boxes intersect with positive area;
boxes that only touch along an edge or at a corner do not overlap.
``overlap_fraction`` gives, per atom, intersection area / gold area (0..1), so a
later metric can weight partial hits.

Segments: one row per OCR text box (see ocr.py) with its clipped axis-aligned box,
text and score, plus the image width/height on every row and ``has_text`` True. A
screenshot in which OCR finds no text still gets one row: empty text, the whole
image as box, score NaN, ``has_text`` False, so region validation knows its size.

Chunkers (atom extent ``{"bbox": [...]}``, numeric columns x0, y0, x1, y1, side
column ``boxes`` = JSON list of the member OCR boxes):
- ``ocr``: OCR boxes grouped into lines. A box joins an existing line when its
  vertical centre is within ``line_v_tol`` (default 0.5) x the smaller of the two
  heights from the line's centre, and the horizontal gap between them is at most
  ``line_h_gap`` (default 1.5) x the larger height; among candidate lines the closest
  (vertical distance, then gap, then earlier line) wins. Boxes are visited in
  (centre y, x0) order, the atom box is the union of its members, atoms are ordered by
  (y0, x0) and keyed ``l<n>``; the text joins member texts left to right with a
  space. A screenshot without text yields no ``ocr`` atom (nothing to retrieve).
- ``grid``: ``grid_rows`` x ``grid_cols`` fixed tiles (defaults 6 x 8: 128 px square
  tiles on 1024x768) with integer edges round(i * size / n), keyed ``r<row>c<col>``.
  A tile holds the OCR boxes whose centre lies in it (half-open, the last row/column
  closed), texts in OCR order joined by newlines; tiles without text are still atoms.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from bench.modalities.base import Modality, Option, extent_json, is_number, short, source_size, unit_frame
from bench.modalities.boxes import placed_frame

ATOM_UI_COLUMNS = [
    "atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at", "extent",
    "x0", "y0", "x1", "y1", "width", "height", "boxes",
]
SEGMENT_UI_COLUMNS = [
    "source_id", "dataset", "modality", "seq", "text", "holder", "observed_at",
    "x0", "y0", "x1", "y1", "score", "width", "height", "has_text",
]
DEFAULTS: dict[str, float] = {"line_v_tol": 0.5, "line_h_gap": 1.5, "grid_rows": 6, "grid_cols": 8}


class UiScreenshotModality(Modality):
    name: ClassVar[str] = "ui_screenshot"
    region_forms = (frozenset({"bbox"}),)
    strategies = ("ocr", "grid")
    # at most 100 x 100 tiles (19 px squares of a 1920-px screenshot)
    chunk_options = {"grid_rows": Option(DEFAULTS["grid_rows"], high=100, low=1), "grid_cols": Option(DEFAULTS["grid_cols"], high=100, low=1),
                     "line_v_tol": Option(DEFAULTS["line_v_tol"], high=100, low_open=True, whole=False),
                     "line_h_gap": Option(DEFAULTS["line_h_gap"], high=100, whole=False)}
    text_source = "ocr"

    def check_region_values(self, region: dict) -> str | None:
        bbox = region["bbox"]
        if not isinstance(bbox, (list, tuple)) or len(bbox) != 4:
            return f"bbox must be a list of 4 numbers [x0, y0, x1, y1], got {bbox!r}"
        if not all(is_number(v) for v in bbox):
            return f"bbox values must be finite numbers, got {bbox!r}"
        x0, y0, x1, y1 = bbox
        if x0 < 0 or y0 < 0:
            return f"bbox must start at x0 >= 0 and y0 >= 0, got {bbox!r}"
        if not (x0 < x1 and y0 < y1):
            return f"bbox needs x0 < x1 and y0 < y1, got {bbox!r}"
        return None

    def check_region_in_corpus(self, region: dict, segments: pd.DataFrame) -> str | None:
        if segments.empty:
            return "screenshot has no segments in the corpus"
        width, height = int(segments["width"].iloc[0]), int(segments["height"].iloc[0])
        x0, y0, x1, y1 = region["bbox"]
        if x1 > width or y1 > height:
            return f"bbox {list(region['bbox'])} outside the {width}x{height} screenshot"
        return None

    # -- chunking ---------------------------------------------------------------

    def chunk(self, segments: pd.DataFrame, strategy: str, options: dict[str, Any]) -> pd.DataFrame:
        if strategy not in self.strategies:
            raise ValueError(f"unknown ui_screenshot chunking strategy {strategy!r}; choose one of {self.strategies}")
        opts = {**DEFAULTS, **(options or {})}
        rows: list[dict] = []
        for source_id, seg in segments.groupby("source_id", sort=True):
            seg = seg.sort_values("seq", kind="stable")
            meta = seg.iloc[0]
            width, height = int(meta["width"]), int(meta["height"])
            common = {
                "source_id": source_id,
                "dataset": meta["dataset"],
                "modality": self.name,
                "holder": meta["holder"],
                "observed_at": meta["observed_at"],
                "width": width,
                "height": height,
            }
            boxes = text_boxes(seg)
            if strategy == "ocr":
                atoms = ocr_lines(boxes, float(opts["line_v_tol"]), float(opts["line_h_gap"]))
            else:
                atoms = grid_tiles(boxes, width, height, int(opts["grid_rows"]), int(opts["grid_cols"]))
            for atom in atoms:
                bbox = [atom["x0"], atom["y0"], atom["x1"], atom["y1"]]
                rows.append(
                    {
                        "atom_id": f"{source_id}#{atom['key']}",
                        **common,
                        "text": atom["text"],
                        "extent": extent_json({"bbox": bbox}),
                        "x0": atom["x0"], "y0": atom["y0"], "x1": atom["x1"], "y1": atom["y1"],
                        "boxes": json.dumps(atom["boxes"], separators=(",", ":")),
                    }
                )
        df = pd.DataFrame(rows, columns=ATOM_UI_COLUMNS)
        for col in ("x0", "y0", "x1", "y1"):
            df[col] = df[col].astype(float)
        return df

    # -- overlap ----------------------------------------------------------------

    def overlap(self, region: dict, atoms: pd.DataFrame, segments: pd.DataFrame) -> np.ndarray:
        return intersection_area(region["bbox"], atoms) > 0

    def overlap_pairs(self, regions: pd.DataFrame, atoms: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Vectorised `overlap` for many regions at once: (region_row, atom_row) pairs."""
        from bench.modalities.overlap import candidate_pairs, pairs_frame

        g = np.asarray([x["bbox"] for x in regions["region"]], dtype=float).reshape(-1, 4)
        ax0, ay0 = atoms["x0"].to_numpy(float), atoms["y0"].to_numpy(float)
        ax1, ay1 = atoms["x1"].to_numpy(float), atoms["y1"].to_numpy(float)
        r, a = candidate_pairs(regions["source_id"], g[:, 0], g[:, 2], atoms["source_id"], ax0, ax1)
        w = np.minimum(ax1[a], g[r, 2]) - np.maximum(ax0[a], g[r, 0])
        h = np.minimum(ay1[a], g[r, 3]) - np.maximum(ay0[a], g[r, 1])
        keep = np.clip(w, 0, None) * np.clip(h, 0, None) > 0
        return pairs_frame(r[keep], a[keep])

    def overlap_fraction(self, region: dict, atoms: pd.DataFrame, segments: pd.DataFrame) -> np.ndarray:
        """Per atom: area of its intersection with the gold box / area of the gold box."""
        x0, y0, x1, y1 = (float(v) for v in region["bbox"])
        return intersection_area(region["bbox"], atoms) / ((x1 - x0) * (y1 - y0))

    # Extents are pixel areas of the screenshot.
    def atom_from_extent(self, extent: dict, segments: pd.DataFrame | None) -> dict[str, Any]:
        """{"bbox": [x0, y0, x1, y1]} (pixels, half-open)."""
        bbox = extent.get("bbox")
        if set(extent) != {"bbox"} or not isinstance(bbox, list) or len(bbox) != 4 or not all(is_number(v) for v in bbox):
            raise ValueError(f"extent must be {{\"bbox\": [x0, y0, x1, y1]}} with finite numbers, got {short(extent)}")
        x0, y0, x1, y1 = (float(v) for v in bbox)
        if not (x0 < x1 and y0 < y1):
            raise ValueError(f"bbox needs x0 < x1 and y0 < y1, got {bbox}")
        w, h = source_size(segments)
        return {"x0": x0, "y0": y0, "x1": x1, "y1": y1, "width": w, "height": h, "boxes": "[]", "extent": {"bbox": bbox}}

    def replay_units(self, segments: pd.DataFrame) -> pd.DataFrame:
        """One event per screenshot: its OCR texts in OCR order, extent the whole image."""
        seg = segments.sort_values("seq", kind="stable")
        w, h = source_size(seg)
        text = "\n".join(t for t, ok in zip(seg["text"], seg["has_text"].astype(bool)) if ok and t)
        return unit_frame([{"bbox": [0, 0, w, h]}], [text], [seg["observed_at"].iloc[0]])

    def cited_units(self, extent: dict, segments: pd.DataFrame) -> pd.DataFrame:
        """Each OCR box the cited box overlaps, clipped to it; a cited box over no text is one
        unit without text (the box itself). The box must lie within the screenshot."""
        cols = self.atom_from_extent(extent, segments)
        box = {"bbox": [cols[k] for k in ("x0", "y0", "x1", "y1")]}
        problem = self.check_region_values(box) or self.check_region_in_corpus(box, segments)
        if problem:
            raise ValueError(problem)
        seen = segments["observed_at"].iloc[0]
        boxes = segments[segments["has_text"].astype(bool)].sort_values("seq", kind="stable")
        inside = boxes[intersection_area(extent["bbox"], boxes) > 0] if len(boxes) else boxes
        if not len(inside):
            return unit_frame([box], [""], [seen])
        clip = [{"bbox": [max(float(r.x0), cols["x0"]), max(float(r.y0), cols["y0"]), min(float(r.x1), cols["x1"]),
                          min(float(r.y1), cols["y1"])]} for r in inside.itertuples(index=False)]
        return unit_frame(clip, inside["text"], [seen] * len(clip))

    def pictures(self, query: dict[str, Any], files: Any, segments: dict[str, pd.DataFrame]) -> str:
        """The screenshot with the gold box and the top-k boxes, and a zoom (pictures.py)."""
        from bench.modalities.ui_screenshot.pictures import screenshot_pictures

        return screenshot_pictures(query, files)

    extent_unit: ClassVar[str] = "px^2"
    #: the region's bbox [x0, y0, x1, y1] as four columns
    region_columns: ClassVar[dict[str, str]] = {f"bbox_{c}": "Float64" for c in ("x0", "y0", "x1", "y1")}

    def region_table(self, regions: list[dict]) -> dict[str, Any]:
        boxes = np.asarray([r["bbox"] for r in regions], dtype=float).reshape(-1, 4)
        return {name: pd.array(boxes[:, i], dtype="Float64") for i, name in enumerate(self.region_columns)}

    def place_regions(self, regions: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Vectorised `region_extent`: the bbox itself."""
        x0, y0, x1, y1 = (regions[f"bbox_{c}"].to_numpy(dtype=float) for c in ("x0", "y0", "x1", "y1"))
        return placed_frame("", x0, x1, y0, y1)

    # The reader's budget: ten median gold regions of the dev set (an element's box: 6,048 px²
    # on ScreenAgent), rounded: 60,000 px², a 245 x 245 crop (under a quarter of a 512 x 512
    # tile, the unit vision models price an image in). Boxes are never cut (`cut` is None).
    budget: ClassVar[Option | None] = Option(60_000, high=10**12, low=0, low_open=True, whole=False)

    def atom_extents(self, atoms: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({
            "part": np.full(len(atoms), "", dtype=object),
            "x0": atoms["x0"].to_numpy(float), "x1": atoms["x1"].to_numpy(float),
            "y0": atoms["y0"].to_numpy(float), "y1": atoms["y1"].to_numpy(float),
        })

    def region_extent(self, region: dict, segments: pd.DataFrame) -> tuple[str, float, float, float, float] | None:
        x0, y0, x1, y1 = (float(v) for v in region["bbox"])
        return ("", x0, x1, y0, y1)


def intersection_area(bbox: list[float], atoms: pd.DataFrame) -> np.ndarray:
    """Intersection area of each atom box with `bbox` (0 where they do not intersect)."""
    g_x0, g_y0, g_x1, g_y1 = (float(v) for v in bbox)
    w = np.minimum(atoms["x1"].to_numpy(float), g_x1) - np.maximum(atoms["x0"].to_numpy(float), g_x0)
    h = np.minimum(atoms["y1"].to_numpy(float), g_y1) - np.maximum(atoms["y0"].to_numpy(float), g_y0)
    return np.clip(w, 0, None) * np.clip(h, 0, None)


def text_boxes(seg: pd.DataFrame) -> list[dict]:
    """The OCR boxes of one screenshot in OCR (seq) order; placeholder rows dropped."""
    keep = seg[seg["has_text"].astype(bool)]
    return [
        {"x0": float(r.x0), "y0": float(r.y0), "x1": float(r.x1), "y1": float(r.y1), "text": str(r.text)}
        for r in keep.itertuples(index=False)
    ]


def ocr_lines(boxes: list[dict], v_tol: float, h_gap: float) -> list[dict]:
    """Group OCR boxes into line atoms (rule in the module docstring)."""
    order = sorted(range(len(boxes)), key=lambda i: ((boxes[i]["y0"] + boxes[i]["y1"]) / 2, boxes[i]["x0"], i))
    lines: list[dict] = []
    for i in order:
        b = boxes[i]
        cy, h = (b["y0"] + b["y1"]) / 2, b["y1"] - b["y0"]
        best: tuple[float, float, int] | None = None
        for n, line in enumerate(lines):
            l_cy, l_h = (line["y0"] + line["y1"]) / 2, line["y1"] - line["y0"]
            dy = abs(cy - l_cy)
            gap = max(0.0, b["x0"] - line["x1"], line["x0"] - b["x1"])
            if dy <= v_tol * min(h, l_h) and gap <= h_gap * max(h, l_h):
                if best is None or (dy, gap, n) < best:
                    best = (dy, gap, n)
        if best is None:
            lines.append({"x0": b["x0"], "y0": b["y0"], "x1": b["x1"], "y1": b["y1"], "members": [i]})
            continue
        line = lines[best[2]]
        line["members"].append(i)
        line["x0"], line["y0"] = min(line["x0"], b["x0"]), min(line["y0"], b["y0"])
        line["x1"], line["y1"] = max(line["x1"], b["x1"]), max(line["y1"], b["y1"])
    lines.sort(key=lambda ln: (ln["y0"], ln["x0"]))
    out = []
    for n, line in enumerate(lines):
        members = sorted(line["members"], key=lambda i: (boxes[i]["x0"], i))
        out.append(
            {
                "key": f"l{n}",
                "x0": line["x0"], "y0": line["y0"], "x1": line["x1"], "y1": line["y1"],
                "text": " ".join(boxes[i]["text"] for i in members),
                "boxes": [[boxes[i][k] for k in ("x0", "y0", "x1", "y1")] for i in members],
            }
        )
    return out


def grid_tiles(boxes: list[dict], width: int, height: int, rows: int, cols: int) -> list[dict]:
    """Fixed tiles; each carries the OCR boxes whose centre lies inside it."""
    if rows < 1 or cols < 1 or rows > height or cols > width:
        raise ValueError(f"grid {rows}x{cols} does not fit a {width}x{height} screenshot")
    xs = [round(i * width / cols) for i in range(cols + 1)]
    ys = [round(j * height / rows) for j in range(rows + 1)]
    members: dict[tuple[int, int], list[int]] = {}
    for i, b in enumerate(boxes):
        cx, cy = (b["x0"] + b["x1"]) / 2, (b["y0"] + b["y1"]) / 2
        c = min(max(int(np.searchsorted(xs, cx, side="right")) - 1, 0), cols - 1)
        r = min(max(int(np.searchsorted(ys, cy, side="right")) - 1, 0), rows - 1)
        members.setdefault((r, c), []).append(i)
    out = []
    for r in range(rows):
        for c in range(cols):
            idx = members.get((r, c), [])
            out.append(
                {
                    "key": f"r{r}c{c}",
                    "x0": float(xs[c]), "y0": float(ys[r]), "x1": float(xs[c + 1]), "y1": float(ys[r + 1]),
                    "text": "\n".join(boxes[i]["text"] for i in idx),
                    "boxes": [[boxes[i][k] for k in ("x0", "y0", "x1", "y1")] for i in idx],
                }
            )
    return out


def segment_rows(source_id: str, width: int, height: int, boxes: Any) -> list[dict]:
    """Segments of one screenshot from its OCR boxes (placeholder row when none)."""
    if not boxes:
        return [{"source_id": source_id, "seq": 0, "text": "", "x0": 0.0, "y0": 0.0, "x1": float(width),
                 "y1": float(height), "score": float("nan"), "width": width, "height": height, "has_text": False}]
    return [
        {"source_id": source_id, "seq": n, "text": b.text, "x0": b.x0, "y0": b.y0, "x1": b.x1, "y1": b.y1,
         "score": b.score, "width": width, "height": height, "has_text": True}
        for n, b in enumerate(boxes)
    ]
