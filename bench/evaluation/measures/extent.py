"""Extent measures (chunk-fair): coverage, precision and IoU of the top k in each
modality's own unit, the oracle ceiling; atom extents and their statistics. No I/O.

Why: recall@k counts a gold region as found when *some* top-k atom overlaps it, so bigger
atoms look better (one whole-document atom overlaps every gold page). These metrics measure
*how much* of the gold the top-k atoms cover and *how much* the reader pays for it, in each
modality's own unit (``Modality.extent_unit``: characters for pdf, conversation and code;
seconds for video; pixel area for screenshots; the whole image for images).

Geometry
--------
Each atom and each gold region is a half-open box ``[x0, x1) x [y0, y1)`` in a *space* =
(source_id, part) (``Modality.atom_extents`` / ``region_extent``; 1-D modalities use y =
[0, 1)). Areas of unions and intersections are computed exactly by coordinate compression,
so overlapping atoms and overlapping gold regions are never double counted as *covered*.

Per answerable query (k = cut-off, top-k = run rows with rank <= k)
-------------------------------------------------------------------
``gold_extent``        area of the union of the query's gold regions.
``covered@k``          area of (union of gold regions) ∩ (union of the top-k atoms
                       that are in the query's resolved gold atom set). Atoms observed
                       after ``as_of`` are not in that set, so future memory covers
                       nothing (as in recall@k).
``retrieved_extent@k`` sum of the extents of the top-k atoms of the entry's modality,
                       each paid for every time it is retrieved (overlapping windows are
                       paid twice). Atoms of another modality are in another unit: they
                       are left out here (as budget packing pays them from their own
                       modality's budget), never added across units.
The measures (coverage@k, precision@k, iou@k, the oracle's, the cartridge percentiles) are
defined in their declarations (:data:`FAMILY`, docs/metrics.md) from these amounts.
Candidates for the oracle are the query's resolved gold atoms (any other atom only adds paid
extent), in atom-id order (the ranking's tie rule), so where overlapping candidates tie, the
oracle's pick does not depend on the atoms' codes. The oracle is the chunker's ceiling: the
gap between it and the run's value is what the retriever lost, the gap between it and 1 what
the chunker lost. Unanswerable and failed queries get NaN; a cell counts a failed query as 0.

Memory hits (docs/systems.md, *Memory hits*)
--------------------------------------------
A memory's code follows the served atoms' (:class:`MemoryExtents`). It is paid its own text
(characters) and covers the boxes of its credited units, so it is in a query's candidates and
top k like an atom whose box is several boxes. Its text is a price only where the query's
modality counts in characters (``Modality.extent_unit`` "chars"); in a modality of another
unit (seconds, pixel area, whole images) a memory has no price in the unit, and these
measures leave it out of the query's top k and candidates (it neither covers nor costs
there), while recall@k and the other ranking measures still credit it by provenance.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from bench.evaluation.measures.base import Family, Mean, Measure
from bench.evaluation.measures.latency import Percentile
from bench.ingest.atom_codes import ATOM_CODE as ATOM
from bench.modalities import modalities

__all__ = ["COSTS", "FAMILY", "MEASURES", "RATIOS", "TEXT_UNIT", "MemoryExtents", "amount_columns", "atom_extents", "atom_statistics",
           "box_measure", "capped_memory_boxes", "extent_columns", "own_unit_rows"]

#: a box's columns, in atom extents and in resolved regions (bench.gold.table)
BOX = ["x0", "x1", "y0", "y1"]
#: row i is the atom of code i (bench.ingest.atom_codes)
ATOM_EXTENT_COLUMNS = ["atom_id", "modality", "source_id", "part", *BOX, "extent"]

#: the unit a memory's own text is priced in (the text modalities' ``Modality.extent_unit``)
TEXT_UNIT = "chars"


@dataclass(frozen=True)
class MemoryExtents:
    """A run's memories as the extent and budget measures read them (module docstring).

    Memory codes are ``first`` (the number of served atoms) and up; a memory's row of the
    atom extents has no box and its text's length as its extent. ``boxes``: atom (code),
    source_id, part, x0, x1, y0, y1 of its credited units in gold sources
    (bench.gold.memories)."""

    first: int
    boxes: pd.DataFrame

    @staticmethod
    def priced() -> set[str]:
        """The modalities in whose unit a memory's text is a price (characters)."""
        return {name for name, mod in modalities().items() if mod.extent_unit == TEXT_UNIT}

    def priced_rows(self, rows: pd.DataFrame, modality_of: dict[str, str]) -> pd.DataFrame:
        """`rows` (query_id, atom) without the memory rows of queries whose modality (`modality_of`)
        has another unit: there a memory neither costs nor covers."""
        mine = rows[ATOM].to_numpy(np.int64) >= self.first
        if not mine.any():
            return rows
        priced = rows["query_id"].astype(str).map(modality_of).isin(self.priced()).to_numpy()
        return rows.loc[~mine | priced]

    def box_rows(self, named: np.ndarray, start: int) -> tuple[pd.DataFrame, dict[int, list[int]]]:
        """The boxes of the memories among the codes `named`, and each code's box rows:
        an atom's own row (its position in `named`), a memory's rows of those boxes, from `start`."""
        rows: dict[int, list[int]] = {int(a): [i] for i, a in enumerate(named) if a < self.first}
        boxes = self.boxes.loc[self.boxes[ATOM].isin(named[named >= self.first])].reset_index(drop=True)
        for code in named[named >= self.first].tolist():
            rows[int(code)] = []
        for i, code in enumerate(boxes[ATOM].astype(np.int64).tolist()):
            rows[code].append(start + i)
        return boxes, rows

    def with_boxes(self, frame: pd.DataFrame) -> pd.DataFrame:
        """`frame` (query_id, atom, source_id, part and a box) with each memory row replaced by
        one row per box of the memory (none: it covers nothing)."""
        mine = frame[ATOM].to_numpy(np.int64) >= self.first
        if not mine.any():
            return frame
        boxes = self.boxes[[ATOM, "source_id", "part", *BOX]].astype({ATOM: np.int64, "source_id": str, "part": str})
        expanded = frame.loc[mine].drop(columns=["source_id", "part", *BOX]).astype({ATOM: np.int64}).merge(boxes, on=ATOM)
        return pd.concat([frame.loc[~mine], expanded[list(frame.columns)]], ignore_index=True)


def capped_memory_boxes(boxes: pd.DataFrame, cost: pd.Series) -> pd.DataFrame:
    """The one price of a memory (docs/systems.md, *Memory hits*): a memory covers at most
    what its text costs. `boxes` (atom, source_id, part and a box) are the credited units of
    each memory code, `cost` its text's length by code; each memory keeps the leading parts
    of its boxes in reading order (source, part, position) until their area reaches its cost: a
    box past it is cut to the rest (along x, every row of it: the text modalities' boxes are
    intervals on y = [0, 1)), the boxes after it are dropped. So a 21-character memory covers 21
    characters of the 173-character turn it cites: precision@k <= 1 (tests/.../test_extent.py)."""
    if not len(boxes):
        return boxes
    out = boxes.astype({ATOM: np.int64}).sort_values([ATOM, "source_id", "part", "x0", "y0"], kind="stable").reset_index(drop=True)
    b = out[BOX].to_numpy(dtype=float)
    height = np.clip(b[:, 3] - b[:, 2], 0.0, None)
    area = np.clip(b[:, 1] - b[:, 0], 0.0, None) * height
    spent = pd.Series(area).groupby(out[ATOM].to_numpy()).cumsum().to_numpy(dtype=float)
    budget = out[ATOM].map(cost).to_numpy(dtype=float)
    left = np.clip(budget - (spent - area), 0.0, None)  # what the memory can still cover when this box begins
    keep = left > 0
    cut = keep & (area > left)
    b[cut, 1] = b[cut, 0] + left[cut] / np.where(height[cut] > 0, height[cut], 1.0)
    out[BOX] = b
    return out.loc[keep].reset_index(drop=True)


def one_unit(group: pd.DataFrame) -> str | None:
    """Why an extent percentile of `group` has no value: its entries are of several
    modalities, whose extents are in different units (None: one modality)."""
    names = sorted(set(group["modality"].astype(str)))
    return None if len(names) <= 1 else f"extents are in each modality's own unit ({', '.join(names)}): no pooled value"


def amount_columns(k: int) -> list[str]:
    """The extent amounts beside the measures, in the per-query table: gold, covered and retrieved extent."""
    return ["gold_extent", f"covered@{k}", f"retrieved_extent@{k}"]


# --------------------------------------------------------------------------- extents


def atom_extents(atoms: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Extent box and amount of every atom (modality -> atoms frame, as data/served holds),
    row i the atom of code i (modalities in name order, rows in frame order)."""
    frames = []
    mods = modalities()
    for modality, frame in sorted(atoms.items()):
        if not len(frame):
            continue
        ext = mods[modality].atom_extents(frame).reset_index(drop=True)
        ext.insert(0, "source_id", frame["source_id"].astype(str).to_numpy())
        ext.insert(0, "modality", modality)
        ext.insert(0, "atom_id", frame["atom_id"].astype(str).to_numpy())
        ext["part"] = ext["part"].astype(str)
        ext["extent"] = _area(ext[BOX].to_numpy(float))
        frames.append(ext[ATOM_EXTENT_COLUMNS])
    if not frames:
        return pd.DataFrame(columns=ATOM_EXTENT_COLUMNS)
    out = pd.concat(frames, ignore_index=True)
    if out["atom_id"].duplicated().any():
        raise ValueError("atom ids must be unique across modalities")
    return out


def _area(boxes: np.ndarray) -> np.ndarray:
    return np.clip(boxes[:, 1] - boxes[:, 0], 0, None) * np.clip(boxes[:, 3] - boxes[:, 2], 0, None)


# --------------------------------------------------------------------------- geometry


def _cover_masks(boxes: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """(n_boxes, n_cells) boolean: which grid cells each box covers."""
    inx = (xs[None, :-1] >= boxes[:, 0:1]) & (xs[None, 1:] <= boxes[:, 1:2])
    iny = (ys[None, :-1] >= boxes[:, 2:3]) & (ys[None, 1:] <= boxes[:, 3:4])
    return (inx[:, :, None] & iny[:, None, :]).reshape(len(boxes), -1)


def _grid(gold: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cell areas, gold cell mask, candidate cell masks for boxes of one space."""
    both = np.vstack([gold, cand]) if len(cand) else gold
    xs = np.unique(np.concatenate([both[:, 0], both[:, 1]]))
    ys = np.unique(np.concatenate([both[:, 2], both[:, 3]]))
    cells = np.outer(np.diff(xs), np.diff(ys)).ravel()
    mg: np.ndarray = np.asarray(_cover_masks(gold, xs, ys).any(axis=0))
    mc = _cover_masks(cand, xs, ys) if len(cand) else np.zeros((0, len(cells)), dtype=bool)
    return cells, mg, mc


def box_measure(gold: list[tuple[Any, np.ndarray]], cand: list[tuple[Any, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cells over all gold spaces: (cell areas, gold mask, candidate masks).

    ``gold`` and ``cand`` are lists of (space, box [x0, x1, y0, y1]). Candidate boxes
    in spaces without gold cover nothing. Area of gold = cells[mask].sum();
    covered by a candidate set S = cells[mask & masks[S].any(0)].sum().
    """
    spaces = sorted({s for s, _ in gold}, key=str)
    areas, gmasks, cmasks = [], [], []
    for s in spaces:
        g = np.array([b for t, b in gold if t == s], dtype=float)
        idx = [i for i, (t, _) in enumerate(cand) if t == s]
        c = np.array([cand[i][1] for i in idx], dtype=float).reshape(-1, 4)
        cells, mg, mc = _grid(g, c)
        full = np.zeros((len(cand), len(cells)), dtype=bool)
        full[idx] = mc
        areas.append(cells)
        gmasks.append(mg)
        cmasks.append(full)
    if not spaces:
        return np.zeros(0), np.zeros(0, dtype=bool), np.zeros((len(cand), 0), dtype=bool)
    return np.concatenate(areas), np.concatenate(gmasks), np.concatenate(cmasks, axis=1)


def _oracle_coverage(cells: np.ndarray, mg: np.ndarray, mc: np.ndarray, k: int) -> float:
    """Greedy max coverage with at most k candidates (exact when they are disjoint on gold)."""
    useful = mc & mg
    cur = np.zeros_like(mg)
    total = 0.0
    for _ in range(min(k, len(mc))):
        gains = (useful & ~cur) @ cells
        best = int(np.argmax(gains)) if len(gains) else -1
        if best < 0 or gains[best] <= 0:
            break
        cur |= useful[best]
        total += float(gains[best])
    return total


def _oracle_iou(cells: np.ndarray, mg: np.ndarray, mc: np.ndarray, paid: np.ndarray, gold_extent: float, k: int) -> float:
    """Best IoU of at most k candidates by Dinkelbach's method (exact for disjoint candidates)."""
    if gold_extent <= 0 or not len(mc):
        return 0.0
    c = (mc & mg) @ cells
    lam, chosen = 0.0, np.zeros(0, dtype=int)
    for _ in range(100):
        v = c - lam * (paid - c)
        order = np.argsort(-v, kind="stable")[:k]
        pick = order[v[order] > 0]
        if not len(pick):
            break
        covered = float(cells[mg & mc[pick].any(axis=0)].sum())
        new = covered / (gold_extent + float(paid[pick].sum()) - covered)
        if new <= lam + 1e-15:
            break
        lam, chosen = new, pick
    return lam if len(chosen) else 0.0


# --------------------------------------------------------------------------- per query


def extent_columns(
    entries: pd.DataFrame,
    run: pd.DataFrame,
    gold: pd.DataFrame,
    regions: pd.DataFrame,
    atom_ext: pd.DataFrame,
    *,
    k: int = 10,
    failed: Iterable[str] | None = None,
    memories: MemoryExtents | None = None,
) -> pd.DataFrame:
    """One row per entry (sorted by query_id) with the chunk-fair metrics (module docstring).

    ``entries``: query_id, unanswerable. ``run``: query_id, atom (code), rank.
    ``gold``: query_id, gold_idx, atom (code; resolved). ``regions``: query_id,
    source_id and the placement (part, x0, x1, y0, y1) of every gold region
    (bench.gold.table). ``atom_ext``: :func:`atom_extents`, row i the atom of code i
    (a run's memories after the served atoms: ``memories``, and ``entries`` then needs modality).
    """
    k = int(k)
    if k < 1:
        raise ValueError("k must be >= 1")
    failed_ids = {str(q) for q in (failed or [])}
    entry_rows = entries.assign(query_id=entries["query_id"].astype(str)).sort_values("query_id", kind="stable")
    qids = entry_rows["query_id"].tolist()
    cols = [*amount_columns(k), *(m.at(k).column for m in RATIOS)]
    out = pd.DataFrame(np.nan, index=pd.Index(qids, name="query_id"), columns=cols)

    # top-k atoms in rank order per query, whatever order the rows come in (a block of a run read out of core)
    top = run.loc[run["rank"].to_numpy() <= k, ["query_id", ATOM, "rank"]]
    top = top.assign(query_id=top["query_id"].astype(str))
    top = top.loc[top["query_id"].isin(qids)].sort_values(["query_id", "rank"], kind="stable")
    gold_q = gold.assign(query_id=gold["query_id"].astype(str))
    gold_q = gold_q.loc[gold_q["query_id"].isin(qids)]
    if "modality" in entry_rows:  # the top k in the entry's own unit: other modalities' atoms left out (module docstring)
        modality_of = dict(zip(qids, entry_rows["modality"].astype(str), strict=True))
        top = own_unit_rows(top, atom_ext, modality_of, memories)
        if memories is not None:
            gold_q = memories.priced_rows(gold_q, modality_of)
    top_by_q = top.groupby("query_id", sort=False)[ATOM].agg(list).to_dict()
    # only the atoms these queries name: the whole table's arrays would cost O(atoms) per block
    named = np.unique(np.concatenate([top[ATOM].to_numpy(np.int64), gold_q[ATOM].to_numpy(np.int64)]))
    atoms = atom_ext.take(named)
    atom_position = {int(a): i for i, a in enumerate(named)}
    # a query's candidates in atom-id order (the ranking's tie rule), whatever the atoms' codes: the
    # oracle's choice among equally good overlapping atoms must not depend on the served table's order
    by_id = pc.sort_indices(pa.array(atoms["atom_id"].astype(str), type=pa.large_string())).to_numpy()  # UTF-8 order: code points
    id_rank = dict(zip(named[by_id].tolist(), range(len(named)), strict=True))
    gold_by_q = gold_q.groupby("query_id", sort=False)[ATOM].agg(lambda s: sorted(set(s), key=id_rank.__getitem__)).to_dict()
    atom_space = list(zip(atoms["source_id"].tolist(), atoms["part"].tolist(), strict=True))
    atom_boxes = atoms[BOX].to_numpy(float)
    atom_area = atoms["extent"].to_numpy(float)
    box_rows = None  # each code's box rows: its own (None), or a memory's boxes
    if memories is not None and len(named) and named[-1] >= memories.first:
        extra, box_rows = memories.box_rows(named, len(named))
        atom_space += list(zip(extra["source_id"].astype(str).tolist(), extra["part"].astype(str).tolist(), strict=True))
        atom_boxes = np.vstack([atom_boxes, extra[BOX].to_numpy(float).reshape(-1, 4)])
    reg = regions.loc[regions["query_id"].astype(str).isin(qids)].dropna(subset=BOX)
    reg_by_q: dict[str, list[tuple[Any, np.ndarray]]] = {}
    for q, s, p, b in zip(reg["query_id"].astype(str), reg["source_id"].astype(str), reg["part"].astype(str),
                          reg[BOX].to_numpy(float), strict=True):
        reg_by_q.setdefault(q, []).append(((s, p), b))

    answerable = ~entry_rows["unanswerable"].astype(bool).to_numpy()
    rows: dict[str, list[float]] = {}
    for qid, ok in zip(qids, answerable, strict=True):
        if ok and qid not in failed_ids:
            rows[qid] = _query_extents(qid, reg_by_q, gold_by_q, top_by_q, atom_position, atom_space, atom_boxes, atom_area, k, box_rows)
    if rows:
        out.loc[list(rows)] = np.array(list(rows.values()), dtype=float)
    return out.reset_index()


def own_unit_rows(rows: pd.DataFrame, atom_ext: pd.DataFrame, modality_of: dict[str, str], memories: MemoryExtents | None) -> pd.DataFrame:
    """The rows (query_id, atom) a query pays in its own unit: served atoms of the query's
    modality (`modality_of`), and memory hits where that modality counts characters
    (:meth:`MemoryExtents.priced_rows`). The one rule of what a top k or a cartridge holds
    (here and bench.evaluation.measures.budget)."""
    codes = rows[ATOM].to_numpy(np.int64)
    own = atom_ext["modality"].take(codes).astype(str).to_numpy() == rows["query_id"].map(modality_of).astype(str).to_numpy()
    if memories is None:
        return rows.loc[own]
    return memories.priced_rows(rows.loc[own | (codes >= memories.first)], modality_of)


def _query_extents(qid: str, reg_by_q: dict, gold_by_q: dict, top_by_q: dict, atom_position: dict, atom_space: list,
                   atom_boxes: np.ndarray, atom_area: np.ndarray, k: int, box_rows: dict[int, list[int]] | None = None) -> list[float]:
    gold_boxes = reg_by_q.get(qid, [])
    cand_atoms = gold_by_q.get(qid, [])
    if box_rows is None:  # one box per atom
        cells, mg, mc = box_measure(gold_boxes, [(atom_space[atom_position[a]], atom_boxes[atom_position[a]]) for a in cand_atoms])
    else:  # a memory's boxes, each candidate's rows merged
        rows = [box_rows[a] for a in cand_atoms]
        cells, mg, mc_rows = box_measure(gold_boxes, [(atom_space[i], atom_boxes[i]) for r in rows for i in r])
        mc = np.zeros((len(cand_atoms), len(cells)), dtype=bool)
        np.logical_or.at(mc, np.repeat(np.arange(len(cand_atoms)), [len(r) for r in rows]), mc_rows)
    g_ext = float(cells[mg].sum())
    retrieved = top_by_q.get(qid, [])
    paid_top = float(sum(atom_area[atom_position[a]] for a in retrieved))
    cand_index = {a: i for i, a in enumerate(cand_atoms)}
    hit = [cand_index[a] for a in retrieved if a in cand_index]
    covered = float(cells[mg & mc[hit].any(axis=0)].sum()) if hit else 0.0
    union = g_ext + paid_top - covered
    paid_cand = np.array([atom_area[atom_position[a]] for a in cand_atoms], dtype=float)
    return [
        g_ext,
        covered,
        paid_top,
        covered / g_ext if g_ext > 0 else 0.0,
        covered / paid_top if paid_top > 0 else 0.0,
        covered / union if union > 0 else 0.0,
        _oracle_coverage(cells, mg, mc, k) / g_ext if g_ext > 0 else 0.0,
        _oracle_iou(cells, mg, mc, paid_cand, g_ext, k),
    ]


# --------------------------------------------------------------------------- atom statistics


def atom_statistics(atom_ext: pd.DataFrame, regions: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per modality: atom count, median and p95 extent (in the unit), and the share of
    gold regions that no atom overlaps (``regions``: modality, n_atoms)."""
    mods = modalities()
    out: dict[str, dict[str, Any]] = {}
    names = sorted(set(atom_ext["modality"].astype(str)) | set(regions["modality"].astype(str)))
    for m in names:
        ext = atom_ext.loc[atom_ext["modality"] == m, "extent"].to_numpy(float)
        reg = regions.loc[regions["modality"] == m]
        unreached = int((reg["n_atoms"] == 0).sum())
        out[m] = {
            "unit": mods[m].extent_unit if m in mods else "units",
            "atoms": int(len(ext)),
            "median_extent": float(np.median(ext)) if len(ext) else None,
            "p95_extent": float(np.percentile(ext, 95)) if len(ext) else None,
            "gold_regions": int(len(reg)),
            "unreached_regions": unreached,
            "unreached_share": unreached / len(reg) if len(reg) else None,
        }
    return out


_COVERED = "share of the gold extent (0-1)"
#: a share measure of the top k (a mean over the answerable entries); a cost percentile of the top k, per modality
_share = partial(Measure, scope="answerable", reducer=Mean(worst=0.0), higher_is_better=True, cutoff=True)
_cost = partial(Measure, column="retrieved_extent", scope="answerable", higher_is_better=False, cutoff=True, unmeasurable=one_unit,
                unit="the modality's unit")
FAMILY = Family(
    name="extent", phase="block",
    compute=lambda b: extent_columns(b.entries, b.run, b.gold, b.regions, b.atom_ext, k=b.k, failed=b.failed, memories=b.memories), columns=lambda k: (*amount_columns(k), *(m.at(k).column for m in RATIOS)),
    measures=(
        _share(name="coverage", compared=True, unit=_COVERED,
               description="Gold extent covered by the top-k atoms that are resolved gold / gold extent, in the modality's "
                           "own unit (characters, seconds, pixel area, images); overlaps never counted twice."),
        _share(name="precision", compared=True, unit="share of the retrieved extent (0-1)",
               description="Gold extent covered / extent of the top-k atoms of the entry's modality, each paid every time "
                           "it is retrieved; 0 when nothing was retrieved."),
        _share(name="iou", compared=True, unit="share (0-1)", description="covered / (gold extent + retrieved extent - covered)."),
        _share(name="oracle_coverage", unit=_COVERED,
               description="The best coverage any k atoms of this chunking could reach (greedy; exact for atoms that do not "
                           "overlap inside the gold): the chunker's ceiling."),
        _share(name="oracle_iou", unit="share (0-1)",
               description="The best IoU of at most k atoms of this chunking (Dinkelbach's method; exact for atoms that do "
                           "not overlap)."),
        _cost(name="cartridge_p50", reducer=Percentile(50),
              description="Per modality, not per query: the median extent the top-k atoms of the entry's modality retrieve, "
                          "over the answered answerable entries: what the top k cost. No overall value (units differ)."),
        _cost(name="cartridge_p95", reducer=Percentile(95),
              description="Per modality: the 95th percentile of what the top k cost (as cartridge_p50@k)."),
    ),
)
MEASURES: tuple[Measure, ...] = FAMILY.measures
#: the share measures, computed per query by :func:`extent_columns`
RATIOS: tuple[Measure, ...] = MEASURES[:5]
#: the cost of the top k (issue 22's cartridge@k): median and p95 of the extent the top k
#: atoms retrieve per answered answerable entry (``retrieved_extent@k``), per modality
COSTS: tuple[Measure, ...] = MEASURES[5:]
