"""Budget measures: what a reader finds in the cartridge it can afford.

recall@k lets bigger atoms buy recall (one whole-document atom overlaps every gold page
of its document); the extent measures show the cost beside it. These measures fix the
cost instead: each modality has a budget (params.yaml ``metrics.budget.<modality>``, in
the modality's own unit, ``Modality.extent_unit``: characters for text, seconds for
video, pixel area for screenshots, whole images; defaults are the ``Modality.budget``
hooks, README *Metrics*), and a query's cartridge is what fits in it.

Packing (per answerable entry of modality m, budget B = budget[m])
-----------------------------------------------------------------
The ranked atoms of modality m are taken in rank order, over the whole returned list
(not only the top k), each paid its extent (``Modality.atom_extents``: an atom is paid
every time it is retrieved, so overlapping windows are paid twice):

* an atom that fits in what is left of B is packed whole;
* the atom that crosses B (the boundary atom) is packed with its leading part only,
  worth what is left, cut in the modality's reading order (``Modality.cut``:
  characters in document order for pdf, conversation and code, seconds for video); an
  atom that cannot be cut (``Modality.cut`` is None: a screenshot box, an image) counts
  only if it fits, so a boundary atom of such a modality is left out;
* the budget is then spent and packing stops (the cartridge is a prefix of the
  ranking, as the top k is); a budget of 0 packs nothing.

Atoms of another modality are paid from their own modality's budget, never from B: the
cartridge holds each modality's allowance in its own unit, and such atoms are never in
the entry's gold (the same holds for recall@k, whose top k they do take).

Per query
---------
``recall@budget``   share of the entry's ``n_regions`` gold regions that a packed atom
                    counts for, by recall@k's rule: the atom is in that region's
                    resolved gold atom set (bench.evaluation.resolve: it overlaps the
                    region and was observed by ``as_of``); an atom packed with its
                    leading part only must moreover still overlap the region's extent
                    with that part (positive length or area; a region of zero length
                    lying inside it). 0 when n_regions is 0.
``coverage@budget`` area of (union of the gold regions) ∩ (union of the packed parts of
                    the query's resolved gold atoms) / gold extent (0 when the gold
                    extent is 0), as coverage@k with the packed parts for the top k.

Unanswerable and failed entries get NaN (a cell counts a failed query as 0); an entry
whose modality has no budget gets NaN and the cell says why (:func:`no_budget`).
An unlimited budget gives recall@depth; cutting an atom into pieces that take its place
in the ranking changes coverage@budget only when it is the boundary atom, and by no more
than the gold it holds (tests/evaluation/measures/test_budget.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.measures.base import Mean, Measure
from bench.evaluation.measures.extent import box_measure
from bench.evaluation.measures.ranking import MEASURES as RANKING
from bench.evaluation.placement import BOX
from bench.modalities import modalities

__all__ = ["BUDGET_COLUMN", "MEASURES", "budget_columns", "budgets", "no_budget"]

#: the per-query column holding the entry's budget (NaN: its modality has none)
BUDGET_COLUMN = "budget"


def no_budget(group: pd.DataFrame) -> str | None:
    """Why a group's budget cell has no value: a modality of its answerable entries has no
    budget (None: every one has)."""
    if BUDGET_COLUMN not in group.columns:
        return None
    answerable = ~group["unanswerable"].to_numpy(dtype=bool)
    lacking = sorted(set(group.loc[answerable & group[BUDGET_COLUMN].isna().to_numpy(), "modality"].astype(str)))
    if not lacking:
        return None
    return f"no budget: set metrics.budget.<modality> in params.yaml ({', '.join(lacking)} declares no default)"


_RECALL = RANKING[0]  # recall@k: its bar is the budget's bar (the spec's recall bar, judged at equal cost)

MEASURES = (
    Measure("recall@budget", "recall@budget", "answerable", "budget", Mean(worst=0.0), True, bar=_RECALL.bar,
            heading="recall@budget", compared=True, unmeasurable=no_budget),
    Measure("coverage@budget", "coverage@budget", "answerable", "budget", Mean(worst=0.0), True, compared=True,
            unmeasurable=no_budget),
)


def budgets(given: Mapping[str, Any] | None = None) -> dict[str, float | None]:
    """Every modality's budget: params ``metrics.budget`` as given, the others from the
    modality's ``budget`` hook (None: the modality declares no default)."""
    given = dict(given or {})
    out: dict[str, float | None] = {}
    for name, mod in modalities().items():
        if name in given and given[name] is not None:
            out[name] = float(given[name])
        else:
            out[name] = None if mod.budget is None else float(mod.budget.default)
    return out


def budget_columns(
    entries: pd.DataFrame,
    run: pd.DataFrame,
    gold: pd.DataFrame,
    region_ext: pd.DataFrame,
    atom_ext: pd.DataFrame,
    *,
    budget: Mapping[str, float | None],
    failed: Iterable[str] | None = None,
) -> pd.DataFrame:
    """One row per entry (sorted by query_id): query_id, budget, recall@budget, coverage@budget.

    ``entries``: query_id, modality, unanswerable, n_regions. ``run``: query_id,
    atom_id, rank (every returned rank). ``gold``: query_id, gold_idx, atom_id
    (resolved). ``region_ext``: bench.evaluation.placement.region_extents. ``atom_ext``:
    bench.evaluation.measures.extent.atom_extents. ``budget``: modality -> amount in its
    unit (None: no budget). Rows of other queries in `run` and `gold` are ignored."""
    failed_ids = {str(q) for q in (failed or [])}
    rows = entries.assign(query_id=entries["query_id"].astype(str)).sort_values("query_id", kind="stable")
    qids = rows["query_id"].tolist()
    out = pd.DataFrame(np.nan, index=pd.Index(qids, name="query_id"), columns=[BUDGET_COLUMN, *(m.column for m in MEASURES)])
    amounts = rows["modality"].astype(str).map(lambda m: budget.get(m)).astype(float).to_numpy()
    out[BUDGET_COLUMN] = amounts

    wanted = set(qids)
    ranked = run.loc[run["query_id"].astype(str).isin(wanted), ["query_id", "atom_id", "rank"]]
    ranked = ranked.astype({"query_id": str, "atom_id": str}).sort_values(["query_id", "rank"], kind="stable")
    ranked_by_q = ranked.groupby("query_id", sort=False)["atom_id"].agg(list).to_dict()
    g = gold.loc[gold["query_id"].astype(str).isin(wanted), ["query_id", "gold_idx", "atom_id"]]
    g = g.astype({"query_id": str, "atom_id": str})
    gold_by_q: dict[str, dict[str, set[int]]] = {}
    for q, idx, a in zip(g["query_id"], g["gold_idx"].astype(int), g["atom_id"], strict=True):
        gold_by_q.setdefault(q, {}).setdefault(a, set()).add(int(idx))
    named = set(ranked["atom_id"])
    atoms = atom_ext.loc[atom_ext["atom_id"].astype(str).isin(named)]
    atom_info = {a: (str(m), (str(s), str(p)), b, float(e)) for a, m, s, p, b, e in zip(
        atoms["atom_id"].astype(str), atoms["modality"], atoms["source_id"], atoms["part"], atoms[BOX].to_numpy(float),
        atoms["extent"], strict=True)}
    reg = region_ext.loc[region_ext["query_id"].astype(str).isin(wanted)]
    regions_by_q: dict[str, dict[int, tuple[tuple[str, str], np.ndarray]]] = {}
    for q, idx, s, p, b in zip(reg["query_id"].astype(str), reg["gold_idx"].astype(int), reg["source_id"].astype(str),
                               reg["part"].astype(str), reg[BOX].to_numpy(float), strict=True):
        regions_by_q.setdefault(q, {})[int(idx)] = ((s, p), b)

    mods = modalities()
    answerable = ~rows["unanswerable"].to_numpy(dtype=bool)
    n_regions = rows["n_regions"].to_numpy(dtype=float)
    values: dict[str, tuple[float, float]] = {}
    for i, (qid, modality) in enumerate(zip(qids, rows["modality"].astype(str), strict=True)):
        if not answerable[i] or qid in failed_ids or np.isnan(amounts[i]):
            continue
        packed = pack([a for a in ranked_by_q.get(qid, []) if a in atom_info and atom_info[a][0] == modality],
                      atom_info, float(amounts[i]), mods[modality] if modality in mods else None)
        values[qid] = _scores(packed, gold_by_q.get(qid, {}), regions_by_q.get(qid, {}), atom_info, n_regions[i])
    if values:
        cols = [m.column for m in MEASURES]
        out.loc[list(values), cols] = np.array(list(values.values()), dtype=float)
    return out.reset_index()


def pack(ranked: list[str], atom_info: dict[str, tuple], amount: float, modality: Any) -> list[tuple[str, np.ndarray, bool]]:
    """The cartridge: (atom_id, packed box, whole) of each packed atom, in rank order
    (module docstring, *Packing*). ``atom_info``: atom_id -> (modality, space, box, extent)."""
    packed: list[tuple[str, np.ndarray, bool]] = []
    left = float(amount)
    for a in ranked:
        if left <= 0:
            break
        _, _, box, extent = atom_info[a]
        if extent <= left:
            packed.append((a, box, True))
            left -= extent
            continue
        cut = None if modality is None else modality.cut(box.reshape(1, 4), np.array([left]))
        if cut is not None:  # the boundary atom: its leading part, or nothing when it cannot be cut
            packed.append((a, np.asarray(cut, dtype=float).reshape(4), False))
        break  # the budget is spent
    return packed


def _touches(part: np.ndarray, region: np.ndarray) -> bool:
    """A cut atom's packed part still overlaps the region: on each axis a positive
    overlap, or, where the region has zero length, the region's coordinate inside the part."""
    for lo, hi in ((0, 1), (2, 3)):
        if region[hi] > region[lo]:
            if min(part[hi], region[hi]) - max(part[lo], region[lo]) <= 0:
                return False
        elif not part[lo] <= region[lo] < part[hi]:
            return False
    return True


def _scores(packed: list[tuple[str, np.ndarray, bool]], gold_atoms: dict[str, set[int]],
            regions: dict[int, tuple[tuple[str, str], np.ndarray]], atom_info: dict[str, tuple], n_regions: float) -> tuple[float, float]:
    """(recall@budget, coverage@budget) of one query's cartridge."""
    found: set[int] = set()
    cand: list[tuple[Any, np.ndarray]] = []
    for a, box, whole in packed:
        idx = gold_atoms.get(a)
        if not idx:
            continue
        space = atom_info[a][1]
        cand.append((space, box))
        for g in idx:
            if whole:
                found.add(g)
            elif g in regions and regions[g][0] == space and not np.isnan(regions[g][1]).any() and _touches(box, regions[g][1]):
                found.add(g)
    recall = len(found) / n_regions if n_regions > 0 else 0.0
    gold_boxes = [(s, b) for s, b in regions.values() if not np.isnan(b).any()]
    if not gold_boxes:
        return recall, 0.0
    cells, mg, mc = box_measure(gold_boxes, cand)
    gold_extent = float(cells[mg].sum())
    covered = float(cells[mg & mc.any(axis=0)].sum()) if len(cand) else 0.0
    return recall, covered / gold_extent if gold_extent > 0 else 0.0
