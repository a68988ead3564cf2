"""Extent measures (chunk-fair): coverage, precision and IoU of the top k in each
modality's own unit, the oracle ceiling; atom extents and their statistics. No I/O.

Why: recall@k counts a gold region as found when *some* top-k atom overlaps it, so
bigger atoms look better (one whole-document atom overlaps every gold page). These
metrics measure *how much* of the gold the top-k atoms cover and *how much* the
reader has to pay for it, in each modality's own unit (``Modality.extent_unit``:
characters for pdf, conversation and code; seconds for video; pixel area for
screenshots; the whole image for images).

Geometry
--------
Each atom and each gold region is a half-open box ``[x0, x1) x [y0, y1)`` in a
*space* = (source_id, part) (``Modality.atom_extents`` / ``region_extent``; 1-D
modalities use y = [0, 1)). Areas of unions and intersections are computed exactly
by coordinate compression, so overlapping atoms and overlapping gold regions are
never double counted as *covered*.

Per answerable query (k = cut-off, top-k = run rows with rank <= k)
-------------------------------------------------------------------
``gold_extent``        area of the union of the query's gold regions.
``covered@k``          area of (union of gold regions) ∩ (union of the top-k atoms
                       that are in the query's resolved gold atom set). Atoms observed
                       after ``as_of`` are not in that set, so future memory covers
                       nothing (as in recall@k).
``retrieved_extent@k`` sum of the extents of all top-k atoms, each paid for every time
                       it is retrieved (overlapping windows are paid twice).
``coverage@k``         covered / gold_extent (0 when gold_extent is 0).
``precision@k``        covered / retrieved_extent (0 when nothing was retrieved).
``iou@k``              covered / (gold_extent + retrieved_extent - covered).
``oracle_coverage@k``  the best coverage any k atoms of this chunking could reach
                       (greedy by marginal gain; exact when the candidate atoms do
                       not overlap each other inside the gold, e.g. page, turn,
                       symbol, cue and grid chunking).
``oracle_iou@k``       the best IoU of at most k atoms (Dinkelbach's method on the
                       per-atom covered and paid extents; exact when the candidate
                       atoms do not overlap each other; otherwise a reachable value).
``cartridge_p50@k``, ``cartridge_p95@k``  what the top k cost: the median and p95 of
                       ``retrieved_extent@k`` over the answered answerable entries of a
                       modality (denominator: its answerable entries); no pooled
                       ``overall`` value, since each modality has its own unit.
Candidates for the oracle are the query's resolved gold atoms (any other atom only
adds paid extent). The oracle is the chunker's ceiling: the gap between it and the
run's value is what the retriever lost, the gap between it and 1 what the chunker
lost. Unanswerable and failed queries get NaN; a cell counts a failed query as 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.measures.base import Mean, Measure
from bench.evaluation.measures.latency import Percentile
from bench.evaluation.placement import BOX
from bench.modalities import modalities

__all__ = ["COSTS", "MEASURES", "RATIOS", "amount_columns", "atom_extents", "atom_statistics", "box_measure", "extent_columns"]

ATOM_EXTENT_COLUMNS = ["atom_id", "modality", "source_id", "part", *BOX, "extent"]

#: the share measures, computed per query by :func:`extent_columns`
RATIOS = (
    Measure("coverage", "coverage", "answerable", "extent", Mean(worst=0.0), True, cutoff=True, compared=True),
    Measure("precision", "precision", "answerable", "extent", Mean(worst=0.0), True, cutoff=True, compared=True),
    Measure("iou", "iou", "answerable", "extent", Mean(worst=0.0), True, cutoff=True, compared=True),
    Measure("oracle_coverage", "oracle_coverage", "answerable", "extent", Mean(worst=0.0), True, cutoff=True),
    Measure("oracle_iou", "oracle_iou", "answerable", "extent", Mean(worst=0.0), True, cutoff=True),
)


def one_unit(group: pd.DataFrame) -> str | None:
    """Why an extent percentile of `group` has no value: its entries are of several
    modalities, whose extents are in different units (None: one modality)."""
    names = sorted(set(group["modality"].astype(str)))
    return None if len(names) <= 1 else f"extents are in each modality's own unit ({', '.join(names)}): no pooled value"


#: the cost of the top k (issue 22's cartridge@k): median and p95 of the extent the top k
#: atoms retrieve per answered answerable entry (``retrieved_extent@k``), per modality
COSTS = (
    Measure("cartridge_p50", "retrieved_extent", "answerable", "extent", Percentile(50), False, cutoff=True, unmeasurable=one_unit),
    Measure("cartridge_p95", "retrieved_extent", "answerable", "extent", Percentile(95), False, cutoff=True, unmeasurable=one_unit),
)

MEASURES = (*RATIOS, *COSTS)


def amount_columns(k: int) -> list[str]:
    """The extent amounts beside the measures, in the per-query table: gold, covered and retrieved extent."""
    return ["gold_extent", f"covered@{k}", f"retrieved_extent@{k}"]


# --------------------------------------------------------------------------- extents


def atom_extents(atoms: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Extent box and amount of every atom (modality -> atoms frame, as data/atoms holds)."""
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
    region_ext: pd.DataFrame,
    atom_ext: pd.DataFrame,
    *,
    k: int = 10,
    failed: Iterable[str] | None = None,
) -> pd.DataFrame:
    """One row per entry (sorted by query_id) with the chunk-fair metrics (module docstring).

    ``entries``: query_id, unanswerable. ``run``: query_id, atom_id, rank.
    ``gold``: query_id, gold_idx, atom_id (resolved). ``region_ext``: output of
    :func:`region_extents`. ``atom_ext``: output of :func:`atom_extents`.
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
    top = run.loc[run["rank"].astype(int) <= k, ["query_id", "atom_id", "rank"]].astype({"query_id": str, "atom_id": str})
    top = top.loc[top["query_id"].isin(qids)].sort_values(["query_id", "rank"], kind="stable")
    top_by_q = top.groupby("query_id", sort=False)["atom_id"].agg(list).to_dict()
    gold_s = gold.assign(query_id=gold["query_id"].astype(str), atom_id=gold["atom_id"].astype(str))
    gold_s = gold_s.loc[gold_s["query_id"].isin(qids)]
    gold_by_q = gold_s.groupby("query_id", sort=False)["atom_id"].agg(lambda s: sorted(set(s))).to_dict()
    # only the atoms these queries name: a lookup over every atom would cost O(atoms) per block
    named_atoms = atom_ext.loc[atom_ext["atom_id"].astype(str).isin(set(top["atom_id"]) | set(gold_s["atom_id"]))].set_index("atom_id")
    # an atom's rows: one box each (a memory has one per credited unit, bench.evaluation.memory_gold; its paid extent on one of them)
    atom_position: dict[str, list[int]] = {}
    for i, a in enumerate(named_atoms.index):
        atom_position.setdefault(a, []).append(i)
    atom_space = list(zip(named_atoms["source_id"].tolist(), named_atoms["part"].tolist(), strict=True))
    atom_boxes = named_atoms[BOX].to_numpy(float)
    atom_area = named_atoms["extent"].to_numpy(float)
    reg = region_ext.loc[region_ext["query_id"].astype(str).isin(qids)].dropna(subset=BOX)
    reg_by_q: dict[str, list[tuple[Any, np.ndarray]]] = {}
    for q, s, p, b in zip(reg["query_id"].astype(str), reg["source_id"].astype(str), reg["part"].astype(str),
                          reg[BOX].to_numpy(float), strict=True):
        reg_by_q.setdefault(q, []).append(((s, p), b))

    answerable = ~entry_rows["unanswerable"].astype(bool).to_numpy()
    rows: dict[str, list[float]] = {}
    for qid, ok in zip(qids, answerable, strict=True):
        if ok and qid not in failed_ids:
            rows[qid] = _query_extents(qid, reg_by_q, gold_by_q, top_by_q, atom_position, atom_space, atom_boxes, atom_area, k)
    if rows:
        out.loc[list(rows)] = np.array(list(rows.values()), dtype=float)
    return out.reset_index()


def _query_extents(qid: str, reg_by_q: dict, gold_by_q: dict, top_by_q: dict, atom_position: dict, atom_space: list,
                atom_boxes: np.ndarray, atom_area: np.ndarray, k: int) -> list[float]:
    gold_boxes = reg_by_q.get(qid, [])
    cand_ids = [a for a in gold_by_q.get(qid, []) if a in atom_position]
    rows = [i for a in cand_ids for i in atom_position[a]]
    cells, mg, mc_rows = box_measure(gold_boxes, [(atom_space[i], atom_boxes[i]) for i in rows])
    mc = np.zeros((len(cand_ids), len(cells)), dtype=bool)  # each candidate's rows merged
    np.logical_or.at(mc, np.repeat(np.arange(len(cand_ids)), [len(atom_position[a]) for a in cand_ids]), mc_rows)
    g_ext = float(cells[mg].sum())
    retrieved = [a for a in top_by_q.get(qid, []) if a in atom_position]
    paid_top = float(sum(atom_area[i] for a in retrieved for i in atom_position[a]))
    cand_index = {a: i for i, a in enumerate(cand_ids)}
    hit = [cand_index[a] for a in retrieved if a in cand_index]
    covered = float(cells[mg & mc[hit].any(axis=0)].sum()) if hit else 0.0
    union = g_ext + paid_top - covered
    paid_cand = np.array([sum(atom_area[i] for i in atom_position[a]) for a in cand_ids], dtype=float)
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
