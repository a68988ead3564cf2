"""Synthetic, realistically shaped gold regions, atoms and segments for all six modalities.

Shapes follow the real data sets: PDFs of 20-100 pages with 1-3 text blocks a page
(about 1 page in 10 without a text layer) chunked per page; conversation sessions of
15-35 turns chunked per turn; code trees whose files of 40-400 lines are cut into
runs of 5-40 lines (symbol-like atoms), gold a line or a symbol; videos of 100-300
cues of 1-6 s, gold windows of 5-60 s; screenshots of 1024x768 with 20-80 OCR line
boxes, gold boxes; images with one atom each, gold the whole image. Every atom frame
has its modality's column layout (the ATOM_*_COLUMNS lists). About 1 gold region in
20 points past the data (a missing page, a line beyond the file, an unknown symbol)
and about 1 entry in 10 is asked before some of its atoms were observed, so misses
and future atoms are exercised too.

`mixed=True` adds long and overlapping atoms as other chunkings make them (whole
documents, turn windows, zero-length cues, time windows, big boxes): the equality
test uses it to check the vectorised join against the per-region reference.

Segments: the pdf blocks, the conversation turns, the code files, one row per video
(about 1 in 50 without any: its regions cannot be placed), per screenshot and per
image, as placement reads them. Everything is numpy-vectorised (1M atoms build in a
few seconds); the atom text is empty (gold resolution never reads it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.modalities.code.modality import ATOM_CODE_COLUMNS, SEGMENT_CODE_COLUMNS
from bench.modalities.conversation.modality import ATOM_CONVERSATION_COLUMNS
from bench.modalities.image.modality import ATOM_IMAGE_COLUMNS
from bench.modalities.pdf.modality import ATOM_PDF_COLUMNS, layout_many
from bench.modalities.ui_screenshot.modality import ATOM_UI_COLUMNS
from bench.modalities.video.modality import ATOM_VIDEO_COLUMNS

MODALITIES = ("code", "conversation", "image", "pdf", "ui_screenshot", "video")
OBSERVED = pd.Timestamp("2023-06-01T00:00:00+00:00")
AS_OF = "2024-01-01T00:00:00+00:00"
EARLY_AS_OF = "2023-03-01T00:00:00+00:00"  # before OBSERVED: every atom is future memory


@dataclass
class Case:
    entries: list[dict]
    atoms: dict[str, pd.DataFrame]
    segments: pd.DataFrame

    @property
    def n_regions(self) -> int:
        return sum(len(e["gold"]) for e in self.entries)

    @property
    def n_atoms(self) -> int:
        return sum(len(a) for a in self.atoms.values())


def _common(src: np.ndarray, keys: np.ndarray, modality: str, rng: np.random.Generator) -> dict:
    n = len(src)
    ids = pd.Series(src, dtype=object).astype(str) + "#" + pd.Series(keys, dtype=object).astype(str)
    # a few atoms observed later than the rest (as a growing memory would have)
    late = rng.random(n) < 0.05
    observed = pd.Series(np.where(late, OBSERVED + pd.Timedelta(days=400), OBSERVED)).dt.tz_convert("UTC")
    return {
        "atom_id": ids.to_numpy(dtype=object),
        "source_id": src,
        "dataset": np.full(n, f"synth-{modality}", dtype=object),
        "modality": np.full(n, modality, dtype=object),
        "text": np.full(n, "", dtype=object),
        "holder": np.full(n, "owner", dtype=object),
        "observed_at": observed,
        "extent": np.full(n, "{}", dtype=object),
    }


def _frame(common: dict, extra: dict, columns: list[str]) -> pd.DataFrame:
    df = pd.DataFrame({**common, **extra})
    return df[columns]


def _sizes(rng: np.random.Generator, total: int, lo: int, hi: int) -> np.ndarray:
    """Random per-source sizes in [lo, hi] adding up to about `total` (at least one source)."""
    n = max(1, int(round(total / ((lo + hi) / 2))))
    return rng.integers(lo, hi + 1, size=n)


def _segments(src: np.ndarray, modality: str, **columns: np.ndarray) -> pd.DataFrame:
    """Segments of `src` (one row each, in source order) with the common columns."""
    seg = pd.DataFrame({"source_id": np.asarray(src, dtype=object), **columns})
    seg["seq"] = seg.groupby("source_id", sort=False).cumcount()
    if "text" not in seg:
        seg["text"] = ""
    seg["dataset"], seg["modality"], seg["holder"], seg["observed_at"] = f"synth-{modality}", modality, "owner", OBSERVED
    return seg


def _names(prefix: str, n: int) -> np.ndarray:
    return np.asarray([f"{prefix}:{i}" for i in range(n)], dtype=object)


# -- one generator per modality: (atoms, segments, regions [(source_id, region)]) --


def _pdf(rng, n_atoms, n_regions, mixed):
    pages = _sizes(rng, n_atoms, 20, 100)
    docs = _names("synth-pdf", len(pages))
    doc_of_page = np.repeat(np.arange(len(pages)), pages)
    page_no = np.concatenate([np.arange(1, p + 1) for p in pages]) if len(pages) else np.zeros(0, int)
    blocks = rng.integers(1, 4, size=len(page_no))
    blank = rng.random(len(page_no)) < 0.1
    blocks[blank] = 1
    seg_page = np.repeat(np.arange(len(page_no)), blocks)
    seg_block = np.concatenate([np.arange(b) for b in blocks]) if len(blocks) else np.zeros(0, int)
    lengths = np.where(blank[seg_page], 0, rng.integers(40, 1200, size=len(seg_page)))
    seg = pd.DataFrame({
        "source_id": docs[doc_of_page[seg_page]],
        "page": page_no[seg_page],
        "block": seg_block,
        "text": pd.Series(["x" * int(n) for n in lengths], dtype=object),
    })
    seg["seq"] = seg.groupby("source_id").cumcount()
    seg["dataset"], seg["modality"], seg["holder"], seg["observed_at"] = "synth-pdf", "pdf", "owner", OBSERVED
    laid = layout_many(seg)
    per_page = laid.groupby(["source_id", "page"], sort=False).agg(lo=("char_start", "min"), hi=("char_end", "max")).reset_index()
    src = per_page["source_id"].to_numpy(dtype=object)
    p = per_page["page"].to_numpy()
    lo, hi = per_page["lo"].to_numpy(), per_page["hi"].to_numpy()
    keys = np.asarray([f"p{x}" for x in p], dtype=object)
    p0 = p1 = p
    if mixed:
        ends = laid.groupby("source_id", sort=False)["char_end"].max()
        n_pages = pd.Series(pages, index=docs)
        w_src = rng.choice(docs, size=len(docs) * 3)
        w_lo = (rng.random(len(w_src)) * ends.reindex(w_src).to_numpy()).astype(np.int64)
        w_hi = w_lo + rng.integers(0, 3000, size=len(w_src))
        starts = laid.set_index("source_id")
        w_p0, w_p1 = [], []
        for s, a, b in zip(w_src, w_lo, w_hi, strict=True):
            rows = starts.loc[[s]]
            cs = rows["char_start"].to_numpy()
            pg = rows["page"].to_numpy()
            w_p0.append(int(pg[max(np.searchsorted(cs, a, side="right") - 1, 0)]))
            w_p1.append(int(pg[max(np.searchsorted(cs, max(b - 1, a), side="right") - 1, 0)]))
        src = np.concatenate([src, w_src, docs])
        lo = np.concatenate([lo, w_lo, np.zeros(len(docs), np.int64)])
        hi = np.concatenate([hi, w_hi, ends.reindex(docs).to_numpy()])
        p0 = np.concatenate([p, w_p0, np.ones(len(docs), np.int64)])
        p1 = np.concatenate([p, w_p1, n_pages.reindex(docs).to_numpy()])
        keys = np.concatenate([keys, [f"w{i}" for i in range(len(w_src))], ["doc"] * len(docs)]).astype(object)
    atoms = _frame(_common(src, keys, "pdf", rng),
                   {"page_start": p0, "page_end": p1, "char_start": lo, "char_end": hi}, ATOM_PDF_COLUMNS)
    r_doc = rng.integers(0, len(docs), size=n_regions)
    r_page = (rng.random(n_regions) * pages[r_doc]).astype(int) + 1
    r_page[rng.random(n_regions) < 0.05] += 200  # beyond the document: a miss
    with_block = rng.random(n_regions) < 0.15
    regions = [
        (docs[d], {"page": int(pg), "block": int(rng.integers(0, 3))} if b else {"page": int(pg)})
        for d, pg, b in zip(r_doc, r_page, with_block, strict=True)
    ]
    return atoms, seg, regions


def _conversation(rng, n_atoms, n_regions, mixed):
    turns = _sizes(rng, n_atoms, 15, 35)
    sessions = _names("synth-conv", len(turns))
    src = np.repeat(sessions, turns)
    t = np.concatenate([np.arange(1, n + 1) for n in turns])
    t0 = t1 = t
    keys = np.asarray([f"t{x}" for x in t], dtype=object)
    if mixed:
        w_src, w0, w1, w_keys = [], [], [], []
        for s, n in zip(sessions, turns, strict=True):
            for i, a in enumerate(range(1, n + 1, 3)):
                w_src.append(s)
                w0.append(a)
                w1.append(min(a + 4, n))
                w_keys.append(f"w{i}")
            w_src.append(s)
            w0.append(1)
            w1.append(n)
            w_keys.append("session")
        src = np.concatenate([src, np.asarray(w_src, dtype=object)])
        t0, t1 = np.concatenate([t, w0]), np.concatenate([t, w1])
        keys = np.concatenate([keys, np.asarray(w_keys, dtype=object)])
    atoms = _frame(_common(src, keys, "conversation", rng),
                   {"turn_start": t0, "turn_end": t1, "char_start": t0 * 80, "char_end": t1 * 80 + 60},
                   ATOM_CONVERSATION_COLUMNS)
    seg = _segments(np.repeat(sessions, turns), "conversation", turn=t,
                    text=np.asarray(["y" * int(n) for n in rng.integers(5, 200, size=len(t))], dtype=object))
    r_s = rng.integers(0, len(sessions), size=n_regions)
    r_t = (rng.random(n_regions) * (turns[r_s] + 2)).astype(int) + 1  # a few past the last turn
    return atoms, seg, [(sessions[s], {"turn": int(x)}) for s, x in zip(r_s, r_t, strict=True)]


def _code(rng, n_atoms, n_regions, mixed):
    runs_per_file = _sizes(rng, n_atoms, 4, 16)
    n_files = len(runs_per_file)
    repo_of_file = np.sort(rng.integers(0, max(1, n_files // 40), size=n_files))
    repos = _names("synth-code", int(repo_of_file.max()) + 1)
    paths = np.asarray([f"pkg/mod_{i}.py" for i in range(n_files)], dtype=object)
    a_src, a_path, a0, a1, a_keys = [], [], [], [], []
    seg_rows = []
    file_lines = np.zeros(n_files, dtype=np.int64)
    symbols_of_file: list[list[dict]] = []
    for f in range(n_files):
        lengths = rng.integers(5, 41, size=runs_per_file[f])
        ends = np.cumsum(lengths)
        starts = ends - lengths + 1
        file_lines[f] = ends[-1]
        syms = [
            {"qualname": f"f{i}", "name": f"f{i}", "kind": "function", "line_start": int(a), "line_end": int(b),
             "def_line": int(a), "parent": -1, "parser": "ast"}
            for i, (a, b) in enumerate(zip(starts, ends, strict=True))
        ]
        symbols_of_file.append(syms)
        a_src.append(np.full(len(starts), repos[repo_of_file[f]], dtype=object))
        a_path.append(np.full(len(starts), paths[f], dtype=object))
        a0.append(starts)
        a1.append(ends)
        a_keys.append(np.asarray([f"{paths[f]}#s:f{i}" for i in range(len(starts))], dtype=object))
        if mixed:
            a_src.append(np.asarray([repos[repo_of_file[f]]] * 2, dtype=object))
            a_path.append(np.asarray([paths[f]] * 2, dtype=object))
            a0.append(np.asarray([1, max(1, ends[-1] // 2)]))
            a1.append(np.asarray([ends[-1], ends[-1]]))
            a_keys.append(np.asarray([f"{paths[f]}#file", f"{paths[f]}#w1"], dtype=object))
        seg_rows.append((repos[repo_of_file[f]], paths[f], int(ends[-1]), json.dumps(syms, separators=(",", ":"))))
    l0, l1 = np.concatenate(a0), np.concatenate(a1)
    atoms = _frame(_common(np.concatenate(a_src), np.concatenate(a_keys), "code", rng),
                   {"path": np.concatenate(a_path), "line_start": l0, "line_end": l1,
                    "char_start": (l0 - 1) * 2, "char_end": l1 * 2 - 1}, ATOM_CODE_COLUMNS)
    seg = pd.DataFrame(seg_rows, columns=["source_id", "path", "n_lines", "symbols"])
    seg["text"] = ["x\n" * n for n in seg["n_lines"]]
    seg["seq"] = seg.groupby("source_id").cumcount()
    seg["dataset"], seg["modality"], seg["holder"], seg["observed_at"], seg["parser"] = "synth-code", "code", "owner", OBSERVED, "ast"
    seg = seg[SEGMENT_CODE_COLUMNS]
    regions = []
    r_file = rng.integers(0, n_files, size=n_regions)
    kind = rng.random(n_regions)
    for f, k in zip(r_file, kind, strict=True):
        sid, path = repos[repo_of_file[f]], paths[f]
        if k < 0.6:
            line = int(rng.integers(1, file_lines[f] + 1)) + (50_000 if k < 0.02 else 0)
            regions.append((sid, {"path": path, "line": line}))
        else:
            syms = symbols_of_file[f]
            name = "missing_symbol" if k > 0.98 else syms[int(rng.integers(0, len(syms)))]["qualname"]
            regions.append((sid, {"path": path, "symbol": name}))
    return atoms, seg, regions


def _video(rng, n_atoms, n_regions, mixed):
    cues = _sizes(rng, n_atoms, 100, 300)
    videos = _names("synth-video", len(cues))
    src = np.repeat(videos, cues)
    dur = rng.uniform(1.0, 6.0, size=len(src))
    gap = rng.uniform(-0.5, 0.5, size=len(src))
    step = dur + gap
    first = np.concatenate(([0], np.cumsum(cues)[:-1]))
    csum = np.cumsum(step)
    t0 = np.round(csum - step - np.repeat(csum[first] - step[first], cues), 3)
    t0 = np.maximum(t0, 0.0)
    t1 = np.round(t0 + dur, 3)
    if mixed:
        point = rng.random(len(t0)) < 0.05
        t1 = np.where(point, t0, t1)
    keys = np.asarray([f"c{i}" for i in range(len(src))], dtype=object)
    if mixed:
        end = pd.Series(t1).groupby(src).max()
        w_src, w0, w1 = [], [], []
        for v in videos:
            a = 0.0
            while a < end[v]:
                w_src.append(v)
                w0.append(a)
                w1.append(min(a + 30.0, end[v]))
                a += 20.0
        src = np.concatenate([src, np.asarray(w_src, dtype=object)])
        t0, t1 = np.concatenate([t0, w0]), np.concatenate([t1, w1])
        keys = np.concatenate([keys, np.asarray([f"w{i}" for i in range(len(w_src))], dtype=object)])
    atoms = _frame(_common(src, keys, "video", rng), {"t_start": t0.astype(float), "t_end": t1.astype(float)},
                   ATOM_VIDEO_COLUMNS)
    r_v = rng.integers(0, len(videos), size=n_regions)
    length = cues[r_v] * 3.5
    r0 = np.round(rng.random(n_regions) * length, 1)
    r1 = r0 + np.round(rng.uniform(5, 60, size=n_regions), 1)
    seg = _segments(videos[rng.random(len(videos)) < 0.98], "video")  # a few videos without cues: not placed
    return atoms, seg, [(videos[v], {"t_start": float(a), "t_end": float(b)}) for v, a, b in zip(r_v, r0, r1, strict=True)]


def _ui(rng, n_atoms, n_regions, mixed):
    lines = _sizes(rng, n_atoms, 20, 80)
    shots = _names("synth-ui", len(lines))
    src = np.repeat(shots, lines)
    n = len(src)
    x0 = rng.uniform(0, 900, n).round(1)
    y0 = rng.uniform(0, 740, n).round(1)
    x1 = np.minimum(x0 + rng.uniform(20, 400, n), 1024).round(1)
    y1 = np.minimum(y0 + rng.uniform(10, 28, n), 768).round(1)
    keys = np.asarray([f"l{i}" for i in range(n)], dtype=object)
    if mixed:
        big = rng.random(n) < 0.05
        x0, y0 = np.where(big, 0.0, x0), np.where(big, 0.0, y0)
        x1, y1 = np.where(big, 1024.0, x1), np.where(big, 768.0, y1)
    atoms = _frame(_common(src, keys, "ui_screenshot", rng),
                   {"x0": x0, "y0": y0, "x1": x1, "y1": y1, "width": np.full(n, 1024), "height": np.full(n, 768),
                    "boxes": np.full(n, "[]", dtype=object)}, ATOM_UI_COLUMNS)
    r_s = rng.integers(0, len(shots), size=n_regions)
    gx0, gy0 = rng.uniform(0, 900, n_regions).round(), rng.uniform(0, 700, n_regions).round()
    gx1, gy1 = gx0 + rng.uniform(10, 120, n_regions).round() + 1, gy0 + rng.uniform(10, 60, n_regions).round() + 1
    seg = _segments(shots, "ui_screenshot", width=np.full(len(shots), 1024), height=np.full(len(shots), 768))
    return atoms, seg, [
        (shots[s], {"bbox": [float(a), float(b), float(c), float(d)]})
        for s, a, b, c, d in zip(r_s, gx0, gy0, gx1, gy1, strict=True)
    ]


def _image(rng, n_atoms, n_regions, mixed):
    images = _names("synth-image", max(1, n_atoms))
    atoms = _frame(_common(images, np.full(len(images), "whole", dtype=object), "image", rng),
                   {"width": np.full(len(images), 640), "height": np.full(len(images), 480)}, ATOM_IMAGE_COLUMNS)
    r_i = rng.integers(0, int(len(images) * 1.02) + 1, size=n_regions)  # a few images without atoms
    seg = _segments(images, "image", width=np.full(len(images), 640), height=np.full(len(images), 480))
    return atoms, seg, [(f"synth-image:{i}", {}) for i in r_i]


GENERATORS = {"code": _code, "conversation": _conversation, "image": _image, "pdf": _pdf,
              "ui_screenshot": _ui, "video": _video}


def make_case(n_regions: int, n_atoms: int, seed: int = 0, mixed: bool = False) -> Case:
    """About `n_regions` gold regions and `n_atoms` atoms, split evenly over the six modalities."""
    rng = np.random.default_rng(seed)
    atoms: dict[str, pd.DataFrame] = {}
    segments: list[pd.DataFrame] = []
    entries: list[dict] = []
    for m in MODALITIES:
        a, seg, regions = GENERATORS[m](rng, n_atoms // len(MODALITIES), n_regions // len(MODALITIES), mixed)
        atoms[m] = a.reset_index(drop=True)
        if seg is not None:
            segments.append(seg)
        i = 0
        q = 0
        while i < len(regions):
            k = int(rng.integers(1, 4))
            gold = [{"source_id": s, "region": r} for s, r in regions[i:i + k]]
            entries.append({
                "query_id": f"synth-{m}:{q}",
                "modality": m,
                "as_of": EARLY_AS_OF if rng.random() < 0.1 else AS_OF,
                "gold": gold,
            })
            i += k
            q += 1
    seg = pd.concat(segments, ignore_index=True) if segments else pd.DataFrame()
    seg["observed_at"] = pd.to_datetime(seg["observed_at"], utc=True)
    return Case(entries=entries, atoms=atoms, segments=seg)
