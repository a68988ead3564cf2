"""Budget measures: what a reader finds in the cartridge it can afford.

recall@k lets bigger atoms buy recall (one whole-document atom overlaps every gold page
of its document); the extent measures show the cost beside it. These measures fix the
cost instead: each modality has a budget (params.yaml ``metrics.budget.<modality>``, in
the modality's own unit, ``Modality.extent_unit``: characters for text, seconds for
video, pixel area for screenshots, whole images; defaults are the ``Modality.budget``
hooks, docs/measuring.md), and a query's cartridge is what fits in it.

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

Memory hits (docs/systems.md, *Memory hits*)
--------------------------------------------
A memory the system wrote costs its own text, in characters, whatever it cites (its
cited extent is reported beside it, dev.json ``memories``). In an entry's modality whose
unit is characters (``Modality.extent_unit`` "chars": pdf, conversation, code) a memory
hit is packed from B like an atom of that modality, but never cut (a part of its text
would not carry its citations): whole when it fits, else it is the boundary and is left
out. A packed memory counts for a region through its gold rows, i.e. its supported
(credited) citations that overlap the region (bench.gold.memories), and covers
the boxes of those units (coverage@budget). In a modality of another unit (seconds,
pixel area, whole images) characters are no price: a memory hit is left out of the
cartridge (it counts for nothing there and costs nothing, so packing goes on past it);
recall@k still credits it by provenance, and the extent measures leave it out alike
(bench.evaluation.measures.extent).

Per query
---------
Content, never atoms, decides (issues 35 and 46): a region counts at budget by how much of
it the cartridge holds, with no threshold, so cutting the ranked atoms into smaller pieces
or merging neighbours, the content staying in the same order, leaves every budget measure
as it was, and handing over a fraction of every unit buys nothing at equal cost (*Held
credit*, below; tests/evaluation/measures/test_budget.py), and a memory covers at most what
its text costs (:func:`bench.evaluation.measures.extent.capped_memory_boxes`).

A region's *held part*: the union of the packed parts of the query's resolved gold atoms
for the region (bench.gold.resolve: they overlap it and were observed by ``as_of``; a
memory's capped credited boxes), intersected with the region.

``recall@budget``       mean over the entry's ``n_regions`` gold regions of the region's
                        *held credit* (:func:`held_shares`): the area of its held part /
                        min(its extent, B), capped at 1 -- a region larger than the budget
                        is wholly held when the whole budget is of it. A region of zero
                        extent (a point) has credit 1 when a packed part touches it, else 0.
                        0 when n_regions is 0.
``coverage@budget``     area of (union of the gold regions) ∩ (union of the packed parts of
                        the query's resolved gold atoms) / gold extent (0 when the gold
                        extent is 0), as coverage@k with the packed parts for the top k.
``half_recall@budget``  the half rule (recall@budget of issue 35), a diagnostic out of the
                        verdict, the leaderboard and the gate: share of the regions whose
                        held part is at least :data:`HALF` of min(extent, B) (a point: when
                        touched). Handing over the leading 55% of every unit buys it twice
                        the regions at equal cost (issue 46).
``touch_recall@budget`` the touch rule, a diagnostic likewise: share of regions that some
                        packed atom is resolved gold for, whatever share of it it holds
                        (what recall@budget was before issue 35: fragments buy it).
``cartridge@budget``    the extent the cartridge packs, in the modality's unit (a boundary
                        atom its packed part): what the reader pays (the leaderboard's cost).

Held credit: what is invariant
------------------------------
A region's credit is additive over its cells (characters, seconds, pixels): every cell of
region r the cartridge holds is worth 1 / min(|r|, B) of r, whichever unit carried it and
whatever share of that unit was handed over (until r is wholly held). So, exactly:

* cutting and merging: the same content in the same order packs the same cells, so every
  budget measure is unchanged (only ``touch_recall@budget`` can move);
* truncation: in a modality whose units are cut (``Modality.cut``), when each gold region
  is one ranked unit (and no other unit overlaps it) and no region is larger than B, handing over the leading fraction f of every unit at
  budget B earns exactly f times what the whole units earn at budget B / f: the reader
  gets f of each unit it pays for. (The half rule earned all of it for f >= 1/2.) Whether
  that is more or less than the whole units earn at budget B depends only on the ranking:
  it is no more when the ranking's credit per unit of cost does not grow with depth (the
  credit at budget x, V(x), has V(x) / x non-increasing), and more only when content past B
  is worth more per character than the content before it -- what reading deeper buys, not
  the fraction. Uniform truncation can therefore raise recall@budget on some rankings (a
  non-gold unit ranked before a gold one: handing half of each puts half the gold unit in
  the cartridge); it never raises it on the real runs (the half-units probe,
  tests/evaluation/test_content_probes.py).

Unanswerable and failed entries get NaN (a cell counts a failed query as 0); an entry
whose modality has no budget gets NaN and the cell says why (:func:`no_budget`). An
entry whose answer abstained hands the reader nothing: its cartridge is empty
(bench.evaluation.measures.false_recall, *Abstention*).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.measures.base import BlockRows, Family, Mean, Measure
from bench.evaluation.measures.extent import BOX, MemoryExtents, box_measure, own_unit_rows
from bench.evaluation.measures.ranking import RECALL_BAR
from bench.ingest.atom_codes import ATOM_CODE
from bench.modalities import modalities

__all__ = ["BUDGET_COLUMN", "FAMILY", "HALF", "MEASURES", "PACKED_COLUMN", "budget_columns", "budgets", "held_shares", "no_budget",
           "block_reading_order", "packed_atoms", "reading_order", "touches", "union_areas"]

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


#: the half rule (``half_recall@budget``, a diagnostic): a region counts once the cartridge covers this share of
#: min(its extent, the budget)
HALF = 0.5
#: the per-query amount of the cartridge (module docstring): what the reader pays, in the modality's unit
PACKED_COLUMN = "cartridge@budget"

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
    regions: pd.DataFrame,
    atom_ext: pd.DataFrame,
    *,
    budget: Mapping[str, float | None],
    failed: Iterable[str] | None = None,
    memories: MemoryExtents | None = None,
    stream: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per entry (sorted by query_id): query_id, budget, the budget measures and
    ``cartridge@budget``.

    ``entries``: query_id, modality, unanswerable, n_regions. ``run``: query_id,
    atom (code), rank (every returned rank). ``gold``: query_id, gold_idx, atom (code;
    resolved). ``regions``: query_id, gold_idx, source_id and the placement (part, x0,
    x1, y0, y1) of every gold region (bench.gold.table). ``atom_ext``:
    bench.evaluation.measures.extent.atom_extents, row i the atom of code i. ``budget``:
    modality -> amount in its unit (None: no budget); ``memories``: the run's memories, whose
    codes follow the served atoms' (module docstring, *Memory hits*); ``stream``: the reading order of
    these entries (:func:`block_reading_order`), when already built. Rows of other queries in
    `run` and `gold` are ignored. An abstaining answer's empty cartridge is the one rule of
    bench.evaluation.measures.base.run_family (the measures' ``abstained_nothing``, :data:`FAMILY`'s ``handed``)."""
    failed_ids = {str(q) for q in (failed or [])}
    rows = entries.assign(query_id=entries["query_id"].astype(str)).sort_values("query_id", kind="stable")
    qids = rows["query_id"].tolist()
    recall, coverage, half, touch = (m.column for m in MEASURES)
    out = pd.DataFrame(np.nan, index=pd.Index(qids, name="query_id"), columns=[BUDGET_COLUMN, *(m.column for m in MEASURES), PACKED_COLUMN])
    amounts = rows["modality"].astype(str).map(lambda m: budget.get(m)).astype(float).to_numpy()
    out[BUDGET_COLUMN] = amounts
    which = scored_entries(rows, amounts, failed_ids)
    if not len(which):
        return out.reset_index()
    out.loc[which["query_id"], [recall, coverage, half, touch, PACKED_COLUMN]] = 0.0
    packed = packed_atoms(run, atom_ext, which, memories, stream=stream)
    spent = packed.groupby("query_id")["packed_extent"].sum()
    out.loc[spent.index, PACKED_COLUMN] = spent.to_numpy(dtype=float)
    touched, hits = _gold_hits(packed, gold, regions)
    if memories is not None:  # a packed memory covers its credited units' boxes, capped at its cost
        hits = memories.with_boxes(hits)
    n_regions = which.set_index("query_id")["n_regions"]
    held = held_shares(hits, regions, which.set_index("query_id")["amount"])
    found = {touch: touched.assign(credit=1.0), recall: held.rename(columns={"share": "credit"}),
             half: held.assign(credit=held["half"].astype(float))}
    for column, credit in found.items():
        share = n_regions.to_frame().join(credit.groupby("query_id")["credit"].sum().rename("found"))
        share = (share["found"].fillna(0) / share["n_regions"]).where(share["n_regions"] > 0, 0.0)
        out.loc[share.index, column] = share.to_numpy(dtype=float)
    covered = _coverage(hits.drop_duplicates(["query_id", ATOM_CODE, "source_id", "part", *BOX]), regions)
    out.loc[list(covered), coverage] = list(covered.values())
    return out.reset_index()


def scored_entries(rows: pd.DataFrame, amounts: np.ndarray, failed: set[str]) -> pd.DataFrame:
    """The entries a budget measure scores (answerable, not failed, their modality with a budget):
    query_id, entry_modality, amount (the budget), n_regions. `rows`: the entries sorted by
    query_id, `amounts` their budgets in that order."""
    scored = ~rows["unanswerable"].to_numpy(dtype=bool) & ~rows["query_id"].isin(failed).to_numpy() & ~np.isnan(amounts)
    return pd.DataFrame({"query_id": rows["query_id"].to_numpy(dtype=object)[scored],
                         "entry_modality": rows["modality"].astype(str).to_numpy()[scored],
                         "amount": amounts[scored], "n_regions": rows["n_regions"].to_numpy(dtype=float)[scored]})


def block_reading_order(block: BlockRows) -> pd.DataFrame:
    """The reading order (:func:`reading_order`) of the entries of `block` a budget measure scores
    (:func:`scored_entries`): built once per block (``BlockRows.shared``) for the budget family and the
    reading family, which reads the queries of it it scores (bench.evaluation.measures.reading)."""
    rows = block.entries.assign(query_id=block.entries["query_id"].astype(str)).sort_values("query_id", kind="stable")
    amounts = rows["modality"].astype(str).map(lambda m: block.budget.get(m)).astype(float).to_numpy()
    which = scored_entries(rows, amounts, {str(q) for q in block.failed})
    return reading_order(block.run, block.atom_ext, which, block.memories)


def reading_order(run: pd.DataFrame, atom_ext: pd.DataFrame, which: pd.DataFrame, memories: MemoryExtents | None = None) -> pd.DataFrame:
    """What the reader of each query of `which` (query_id, entry_modality, amount) is handed, in
    (query, rank) order: its rows in its own unit (extent.own_unit_rows), each with its box,
    ``extent`` (paid every time it is retrieved), ``start`` and ``end`` (the extent of the rows before it, and
    with it),
    ``memory`` (a memory hit: never cut) and ``modality`` (the entry's)."""
    r = run.loc[run["query_id"].astype(str).isin(set(which["query_id"])), ["query_id", ATOM_CODE, "rank"]]
    r = r.assign(query_id=r["query_id"].astype(str))
    r = own_unit_rows(r, atom_ext, dict(zip(which["query_id"], which["entry_modality"], strict=True)), memories).reset_index(drop=True)
    ext = atom_ext[["source_id", "part", *BOX, "extent"]].take(r[ATOM_CODE].to_numpy(np.int64)).reset_index(drop=True)
    r = pd.concat([r, ext.astype({c: float for c in [*BOX, "extent"]})], axis=1).merge(which[["query_id", "entry_modality", "amount"]], on="query_id")
    memory = np.zeros(len(r), dtype=bool) if memories is None else r[ATOM_CODE].to_numpy(np.int64) >= memories.first
    r = r.assign(memory=memory, modality=r["entry_modality"]).sort_values(["query_id", "rank"], kind="stable").reset_index(drop=True)
    r["end"] = r.groupby("query_id", sort=False)["extent"].cumsum().to_numpy(dtype=float)
    r["start"] = r["end"].to_numpy(dtype=float) - r["extent"].to_numpy(dtype=float)
    return r


def packed_atoms(run: pd.DataFrame, atom_ext: pd.DataFrame, which: pd.DataFrame, memories: MemoryExtents | None = None,
                 stream: pd.DataFrame | None = None) -> pd.DataFrame:
    """The cartridges (module docstring, *Packing*): one row per packed atom of the queries
    of `which` (query_id, entry_modality, amount), with its packed box (cut for the
    boundary atom) and ``whole``, in (query, rank) order; a memory hit (code from
    ``memories.first``) is paid its text from its entry's budget where that counts
    characters, and never cut. ``stream``: their :func:`reading_order`, when already built."""
    r = reading_order(run, atom_ext, which, memories) if stream is None else stream.copy()
    before, spent = r["start"].to_numpy(dtype=float), r["end"].to_numpy(dtype=float)
    amount = r["amount"].to_numpy(dtype=float)
    whole = (before < amount) & (spent <= amount)
    boundary = (before < amount) & (spent > amount) & ~r["memory"].to_numpy(dtype=bool)  # a memory is never cut
    keep = whole.copy()
    mods = modalities()
    r["whole"] = whole
    extent = r["extent"].to_numpy(dtype=float)
    r["packed_extent"] = np.where(whole, extent, np.clip(np.minimum(extent, amount - before), 0.0, None))
    for name in sorted(set(r.loc[boundary, "modality"].astype(str))):
        at = np.flatnonzero(boundary & (r["modality"].astype(str) == name).to_numpy())
        mod = mods.get(name)
        cut = None if mod is None else mod.cut(r.loc[at, BOX].to_numpy(dtype=float), amount[at] - before[at])
        if cut is not None:  # the boundary atom's leading part; one that cannot be cut is left out
            r.loc[at, BOX] = np.asarray(cut, dtype=float).reshape(-1, 4)
            keep[at] = True
    return r.loc[keep].reset_index(drop=True)


def _gold_hits(packed: pd.DataFrame, gold: pd.DataFrame, regions: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the distinct (query_id, gold_idx) a packed atom touches -- the touch rule; the packed
    gold atoms with their packed boxes, one row per (query, gold_idx, atom))."""
    g = gold[["query_id", "gold_idx", ATOM_CODE]].astype({"query_id": str, ATOM_CODE: np.int64, "gold_idx": int})
    hits = packed.astype({ATOM_CODE: np.int64}).merge(g, on=["query_id", ATOM_CODE])
    cut = hits.loc[~hits["whole"].to_numpy(dtype=bool)]
    if len(cut):
        reg = regions[["query_id", "gold_idx", "source_id", "part", *BOX]].astype({"query_id": str, "gold_idx": int})
        reg = reg.rename(columns={c: f"r_{c}" for c in ["source_id", "part", *BOX]})
        cut = cut.merge(reg, on=["query_id", "gold_idx"], how="left")
        same = (cut["source_id"].astype(str) == cut["r_source_id"].astype(str)) & (cut["part"].astype(str) == cut["r_part"].astype(str))
        region = cut[[f"r_{c}" for c in BOX]].to_numpy(dtype=float)
        ok = same.to_numpy() & ~np.isnan(region).any(axis=1) & touches(cut[BOX].to_numpy(dtype=float), region)
        cut = cut.loc[ok]
    found = pd.concat([hits.loc[hits["whole"].to_numpy(dtype=bool), ["query_id", "gold_idx"]], cut[["query_id", "gold_idx"]]])
    return found.drop_duplicates(), hits


REGION_KEY = ["query_id", "gold_idx"]


def held_shares(hits: pd.DataFrame, regions: pd.DataFrame, amount: pd.Series, by: tuple[str, ...] = ()) -> pd.DataFrame:
    """Each region's held credit (module docstring, *Per query*): one row per (query_id, gold_idx,
    *by) with a packed gold part, with ``share`` (recall@budget's credit: the held part's area /
    min(the region's extent, the query's budget), capped at 1; a point: 1 when touched) and
    ``half`` (the half rule). `hits` are the packed gold rows (query_id, gold_idx, the columns
    `by`, source_id, part and the packed box; a memory's rows its capped boxes), `amount` the
    budget per query_id."""
    keys = [*REGION_KEY, *by]
    reg = regions[[*REGION_KEY, "source_id", "part", *BOX]].astype({"query_id": str, "gold_idx": int, "source_id": str, "part": str})
    h = hits[[*keys, "source_id", "part", *BOX]].astype({"query_id": str, "gold_idx": int, "source_id": str, "part": str})
    both = h.merge(reg, on=[*REGION_KEY, "source_id", "part"], suffixes=("", "_r"))
    both = both.dropna(subset=[*BOX, *(f"{c}_r" for c in BOX)]).reset_index(drop=True)
    if not len(both):
        return h[keys].iloc[:0].assign(share=pd.Series(dtype=float), half=pd.Series(dtype=bool))
    part, region = both[BOX].to_numpy(dtype=float), both[[f"{c}_r" for c in BOX]].to_numpy(dtype=float)
    ix = np.column_stack([np.maximum(part[:, 0], region[:, 0]), np.minimum(part[:, 1], region[:, 1]),
                          np.maximum(part[:, 2], region[:, 2]), np.minimum(part[:, 3], region[:, 3])])
    area = (region[:, 1] - region[:, 0]) * (region[:, 3] - region[:, 2])
    whole = both[keys].assign(area=area, touched=touches(part, region))
    whole = whole.groupby(keys, as_index=False, sort=False).agg(area=("area", "first"), touched=("touched", "any"))
    whole = whole.merge(union_areas(both[keys], ix), on=keys, how="left").fillna({"covered": 0.0})
    worth = np.minimum(whole["area"].to_numpy(dtype=float), whole["query_id"].map(amount).to_numpy(dtype=float))
    point, touched = whole["area"].to_numpy(dtype=float) <= 0, whole["touched"].to_numpy(dtype=bool)
    covered = whole["covered"].to_numpy(dtype=float)
    ratio = np.divide(covered, worth, out=np.zeros_like(covered), where=worth > 0)
    whole["share"] = np.where(point, touched.astype(float), np.clip(ratio, 0.0, 1.0))
    whole["half"] = np.where(point, touched, (covered > 0) & (covered >= HALF * worth - 1e-9))
    return whole[[*keys, "share", "half"]]


def union_areas(keys: pd.DataFrame, boxes: np.ndarray) -> pd.DataFrame:
    """Area of the union of the boxes of each group of `keys` (its columns, row for row with
    `boxes`, already clipped to the region; empty ones count nothing): the keys and ``covered``.
    1-D groups (every box on y = [0, 1)) by a sweep over sorted intervals, the rest by exact
    coordinate compression (extent.box_measure)."""
    by = list(keys.columns)
    ok = (boxes[:, 1] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 2])
    frame = keys.loc[ok].reset_index(drop=True).assign(x0=boxes[ok, 0], x1=boxes[ok, 1], y0=boxes[ok, 2], y1=boxes[ok, 3])
    if not len(frame):
        return keys.iloc[:0].assign(covered=pd.Series(dtype=float))
    line = (frame["y0"] == 0.0) & (frame["y1"] == 1.0)
    flat = frame.assign(line=line).groupby(by)["line"].transform("all").to_numpy(dtype=bool)
    parts = []
    one = frame.loc[flat].sort_values([*by, "x0"], kind="stable")
    if len(one):
        reach = one.groupby(by, sort=False)["x1"].cummax()
        before = reach.groupby([one[c] for c in by], sort=False).shift(1)
        start = np.maximum(one["x0"].to_numpy(dtype=float), before.fillna(-np.inf).to_numpy(dtype=float))
        gain = np.clip(one["x1"].to_numpy(dtype=float) - start, 0.0, None)
        parts.append(one.assign(covered=gain).groupby(by, as_index=False, sort=False)["covered"].sum())
    rest = frame.loc[~flat]
    alone = rest.groupby(by, sort=False)["x0"].transform("size").to_numpy() == 1  # one box: its area
    if alone.any():
        one_box = rest.loc[alone]
        parts.append(one_box[by].assign(covered=(one_box["x1"] - one_box["x0"]) * (one_box["y1"] - one_box["y0"])))
    for key, grp in rest.loc[~alone].groupby(by, sort=False):
        b = grp[BOX].to_numpy(dtype=float)
        cells, mg, mc = box_measure([("r", np.array([b[:, 0].min(), b[:, 1].max(), b[:, 2].min(), b[:, 3].max()]))],
                                    [("r", box) for box in b])
        parts.append(pd.DataFrame([[*key, float(cells[mc.any(axis=0)].sum())]], columns=[*by, "covered"]))
    return pd.concat(parts, ignore_index=True)


def touches(part: np.ndarray, region: np.ndarray) -> np.ndarray:
    """Row by row: a cut atom's packed part (x0, x1, y0, y1) still overlaps the region: on
    each axis a positive overlap, or, where the region has zero length, its coordinate
    inside the part."""
    ok = np.ones(len(part), dtype=bool)
    for lo, hi in ((0, 1), (2, 3)):
        positive = region[:, hi] > region[:, lo]
        overlap = np.minimum(part[:, hi], region[:, hi]) - np.maximum(part[:, lo], region[:, lo]) > 0
        inside = (part[:, lo] <= region[:, lo]) & (region[:, lo] < part[:, hi])
        ok &= np.where(positive, overlap, inside)
    return ok


def _coverage(cand: pd.DataFrame, regions: pd.DataFrame) -> dict[str, float]:
    """coverage@budget of each query with a packed gold atom (the others: 0)."""
    if not len(cand):
        return {}
    reg = regions.loc[regions["query_id"].astype(str).isin(set(cand["query_id"]))].dropna(subset=BOX)
    gold_by_q: dict[str, list[tuple[Any, np.ndarray]]] = {}
    for q, s_, p_, b in zip(reg["query_id"].astype(str), reg["source_id"].astype(str), reg["part"].astype(str),
                            reg[BOX].to_numpy(dtype=float), strict=True):
        gold_by_q.setdefault(q, []).append(((s_, p_), b))
    c = cand.sort_values("query_id", kind="stable")
    qs = c["query_id"].astype(str).to_numpy()
    spaces = list(zip(c["source_id"].astype(str).tolist(), c["part"].astype(str).tolist(), strict=True))
    boxes = c[BOX].to_numpy(dtype=float)
    starts = np.flatnonzero(np.r_[True, qs[1:] != qs[:-1]])
    out = {}
    for a, b in zip(starts, [*starts[1:], len(qs)], strict=True):  # one query's packed gold atoms: rows a..b
        q = str(qs[a])
        gold = gold_by_q.get(q, [])
        if not gold:
            out[q] = 0.0
            continue
        cells, mg, mc = box_measure(gold, list(zip(spaces[a:b], boxes[a:b], strict=True)))
        total = float(cells[mg].sum())
        out[q] = float(cells[mg & mc.any(axis=0)].sum()) / total if total > 0 else 0.0
    return out


def _compute(block: BlockRows) -> pd.DataFrame:
    return budget_columns(block.entries, block.run, block.gold, block.regions, block.atom_ext, budget=block.budget, failed=block.failed,
                          memories=block.memories, stream=block.shared("reading_order", lambda: block_reading_order(block)))


_REGIONS = "share of the entry's gold regions (0-1)"
FAMILY = Family(
    name="budget", phase="block", compute=_compute, after="recall", handed=(PACKED_COLUMN,),
    columns=lambda k: (BUDGET_COLUMN, *(m.column for m in MEASURES), PACKED_COLUMN),
    measures=(
        Measure(name="recall@budget", scope="answerable", reducer=Mean(worst=0.0), higher_is_better=True, bar=RECALL_BAR,
                heading="recall@budget", compared=True, unmeasurable=no_budget, abstained_nothing=True, in_objective=True,
                unit="held share of the entry's gold regions (0-1)",
                description="Mean over the entry's gold regions of the share of each region the cartridge a reader can afford "
                            "holds: the ranked atoms packed into the modality's budget B (the boundary atom cut in reading "
                            "order) cover that much of the region, over min(its extent, B) and capped at 1 (a point: 1 when "
                            "touched). No threshold: every unit of gold is worth the same whichever atom carries it, so cutting or "
                            "merging atoms changes nothing and a fraction of an atom earns only the gold it holds."),
        Measure(name="coverage@budget", scope="answerable", reducer=Mean(worst=0.0), higher_is_better=True, compared=True,
                unmeasurable=no_budget, abstained_nothing=True, unit="share of the gold extent (0-1)",
                description="Gold extent covered by the packed parts of the cartridge's gold atoms / gold extent "
                            "(coverage@k with the cartridge for the top k)."),
        Measure(name="half_recall@budget", scope="answerable", reducer=Mean(worst=0.0), higher_is_better=True,
                unmeasurable=no_budget, abstained_nothing=True, unit=_REGIONS,
                description="The half rule, a diagnostic: share of the entry's gold regions of which the cartridge holds at "
                            "least half (of min(extent, B)). Handing over the leading half of every atom buys it twice the "
                            "regions at equal cost."),
        Measure(name="touch_recall@budget", scope="answerable", reducer=Mean(worst=0.0), higher_is_better=True,
                unmeasurable=no_budget, abstained_nothing=True, unit=_REGIONS,
                description="The touch rule, a diagnostic: share of the entry's gold regions some packed atom merely overlaps, "
                            "whatever share of the region it holds (fragments buy it)."),
    ),
)
MEASURES: tuple[Measure, ...] = FAMILY.measures
