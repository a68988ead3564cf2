"""Ranking measures that read content: nDCG and MRR with each gold region placed by how much
content the reader meets before it, not by atom ranks (issue 46).

``ndcg@k`` and ``mrr`` (bench.evaluation.measures.ranking) place a region at the rank of the
first atom overlapping it, so bigger atoms move it up: chunking a conversation by session
instead of by turn took nDCG@10 from 0.216 to 0.519 with no better retrieval. These measures
read the ranked list as the budget measures pack it (bench.evaluation.measures.budget,
*Packing*) and measure positions in the modality's own unit (``Modality.extent_unit``:
characters, seconds, pixel area, whole images), as U-measure and time-biased gain do.

Slots
-----
A *slot* is a tenth of the modality's budget B (``metrics.budget``): u = B / :data:`SLOTS`.
The default budgets are ten median dev gold regions (docs/measuring.md, *The budget*), so a
slot is one median gold region -- a gold-sized atom is one slot, as it is one rank -- and
k = 10 slots are the budget. Slot j ends once j * u of content has been read.

Per answerable entry
--------------------
``C(j)``   the held credit of the cartridge of j slots: the ranked list packed into j * u
           exactly as recall@budget packs it into B (in rank order over the whole returned
           list, each row paid its extent every time it is retrieved, the boundary atom cut
           in reading order, an atom that cannot be cut counted once it fits whole, memory hits
           as there), summed over the entry's regions, each region's credit its held part /
           min(its extent, B), capped at 1 (budget.held_shares; a point: 1 when touched). So
           C(SLOTS) / n_regions is recall@budget.
``I(j)``   the ideal: the most credit j * u of content can hold -- the gold regions themselves
           back to back, the cheapest (min(extent, B)) first, the last one cut where the
           modality's atoms are cut (``Modality.cut``), else each read once it fits whole; a
           point costs nothing, a region that could not be placed one slot.
``E(j)``   min(C(j), I(j)): the credit of the i-th region found cannot come sooner than the
           ideal's (one atom holding two overlapping regions does not gain twice in one slot).

``content_ndcg@k``  sum over slots j = 1..k of (E(j) - E(j-1)) / log2(j + 1), over the same
                    sum of I: the credit the reader gains in each slot, discounted by the slot.
``content_mrr``     sum over slots j >= 1 (the whole returned list) of (F(j) - F(j-1)) / j with
                    F = min(1, E), over the same sum of min(1, I): the reciprocal slot at which
                    the reader has been handed one region's worth of gold, in shares (half a
                    region in slot 1 and the other half in slot 3 give 0.5 / 1 + 0.5 / 3).
Both are 0 when the entry has no region; unanswerable and failed entries get NaN (a cell
counts a failed query 0); an entry whose modality has no budget NaN, and the cell says why
(budget.no_budget). An answer that abstained hands the reader nothing: both count 0.

What holds (tests/evaluation/measures/test_reading.py)
------------------------------------------------------
* Cutting and merging: the same content in the same order packs the same cartridges at
  every amount, so both measures are unchanged (session and turn chunking retrieving the
  same turns first score the same).
* Fragments and fractions buy nothing extra: a region's credit is additive over its cells,
  each worth 1 / min(extent, B) of it whichever atom carries it (budget, *Held credit*).
* When every atom is one slot (extent u) and every gold region is one atom (whole images,
  at the default image budget of 10), ``content_ndcg@k`` and ``content_mrr`` are the region
  ``ndcg@k`` and ``mrr``: trec_eval's ndcg_cut and recip_rank.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from bench.evaluation.measures.base import BlockRows, Family, Mean, Measure
from bench.evaluation.measures.budget import REGION_KEY, block_reading_order, held_shares, no_budget, reading_order, scored_entries
from bench.evaluation.measures.extent import BOX, MemoryExtents
from bench.ingest.atom_codes import ATOM_CODE
from bench.modalities import modalities

__all__ = ["FAMILY", "MEASURES", "SLOTS", "reading_columns"]

#: slots per budget: a slot is B / SLOTS of the modality's unit (a median dev gold region at the default budgets)
SLOTS = 10
_EPS = 1e-9


def reading_columns(
    entries: pd.DataFrame,
    run: pd.DataFrame,
    gold: pd.DataFrame,
    regions: pd.DataFrame,
    atom_ext: pd.DataFrame,
    *,
    budget: Mapping[str, float | None],
    k: int = 10,
    failed: Iterable[str] | None = None,
    memories: MemoryExtents | None = None,
    stream: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per entry (sorted by query_id): query_id, content_mrr, content_ndcg@k (module
    docstring). The frames are budget.budget_columns', ``stream`` too (the reading order of the
    entries a budget measure scores, when already built: the queries of it scored here are read)."""
    failed_ids = {str(q) for q in (failed or [])}
    rows = entries.assign(query_id=entries["query_id"].astype(str)).sort_values("query_id", kind="stable")
    qids = rows["query_id"].tolist()
    mrr, ndcg = (m.at(k).column for m in MEASURES)
    out = pd.DataFrame(np.nan, index=pd.Index(qids, name="query_id"), columns=[mrr, ndcg])
    amounts = rows["modality"].astype(str).map(lambda m: budget.get(m)).astype(float).to_numpy()
    which = scored_entries(rows, amounts, failed_ids)
    if not len(which):
        return out.reset_index()
    out.loc[which["query_id"], [mrr, ndcg]] = 0.0
    which = which.loc[(which["n_regions"] > 0) & (which["amount"] > 0)]
    if not len(which):
        return out.reset_index()
    cuts = cutting()
    events = credit_events(run, gold, regions, atom_ext, which, memories, stream=stream)
    ideal = _ideal(regions, which, cuts)
    out.loc[which["query_id"], ndcg] = _ndcg(events, ideal, which, int(k))
    out.loc[which["query_id"], mrr] = _mrr(events, ideal, which)
    return out.reset_index()


def cutting() -> set[str]:
    """The modalities whose atoms can be cut (``Modality.cut`` gives a leading part)."""
    return {name for name, mod in modalities().items() if mod.cut(np.zeros((0, 4)), np.zeros(0)) is not None}


def _slot_end(amount: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Where slot j ends: j tenths of the budget (exactly the budget at j = SLOTS)."""
    return np.asarray(amount, dtype=float) * np.asarray(j, dtype=float) / SLOTS


def _first_slot(amount: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The first slot j >= 1 that ends at or after `at` (an over-estimate by float error is
    corrected: every slot a row changes in is evaluated, one more changes nothing)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        j = np.ceil(np.asarray(at, dtype=float) * SLOTS / amount - _EPS)
    j = np.where(np.isfinite(j), j, 1.0)
    j = np.maximum(j, 1.0)
    j = np.where(_slot_end(amount, j) < at, j + 1, j)
    return np.maximum(np.where(_slot_end(amount, j - 1) >= at, j - 1, j), 1.0).astype(np.int64)


def _windows(rows: pd.DataFrame, cuts: set[str]) -> tuple[np.ndarray, np.ndarray]:
    """The slots in which a gold row (a stream row joined to a region it is gold for) can change
    the region's credit: from the slot where the reader reaches the region inside the row to the
    slot where it has passed it -- a row of a modality that cuts, on the line (y = [0, 1): read
    along x from x0), inside [start + (region x0 - x0), start + (region x1 - x0)]; any other
    row of a modality that cuts, anywhere in [start, end]; a row that is never cut (a memory, a
    modality without ``cut``) only in the slot where it is whole. One slot either side more."""
    amount = rows["amount"].to_numpy(dtype=float)
    start, end = rows["start"].to_numpy(dtype=float), rows["end"].to_numpy(dtype=float)
    box, reg = rows[BOX].to_numpy(dtype=float), rows[[f"{c}_r" for c in BOX]].to_numpy(dtype=float)
    line = (box[:, 2] == 0.0) & (box[:, 3] == 1.0)
    cut = rows["modality"].astype(str).isin(cuts).to_numpy() & ~rows["memory"].to_numpy(dtype=bool)
    lo = np.where(line, start + np.clip(reg[:, 0] - box[:, 0], 0.0, None), start)
    hi = np.where(line, start + np.clip(reg[:, 1] - box[:, 0], 0.0, end - start), end)
    lo, hi = np.where(cut, lo, end), np.where(cut, np.minimum(np.maximum(hi, lo), end), end)
    first, last = _first_slot(amount, lo), _first_slot(amount, hi)
    return np.maximum(first - 1, 1), last + 1


def credit_events(run: pd.DataFrame, gold: pd.DataFrame, regions: pd.DataFrame, atom_ext: pd.DataFrame, which: pd.DataFrame,
                  memories: MemoryExtents | None = None, stream: pd.DataFrame | None = None) -> pd.DataFrame:
    """C(j) where it can change: query_id, slot, credit (the held credit of the cartridge of that
    many slots, summed over the query's regions), in (query, slot) order; C is constant from
    one slot listed to the next, 0 before the first. `which`: query_id, entry_modality, amount;
    ``stream``: a reading order (budget.reading_order) of these queries and maybe others, when already built."""
    if stream is None:
        stream = reading_order(run, atom_ext, which, memories)
    else:  # whole queries kept: each one's order and running extent as reading_order gives it for them alone
        stream = stream.loc[stream["query_id"].isin(set(which["query_id"])).to_numpy()].reset_index(drop=True)
    g = gold[[*REGION_KEY, ATOM_CODE]].astype({"query_id": str, "gold_idx": int, ATOM_CODE: np.int64}).drop_duplicates()
    rows = stream.astype({ATOM_CODE: np.int64}).merge(g, on=["query_id", ATOM_CODE])
    if memories is not None:  # a memory covers its credited units' boxes, capped at its cost; never cut
        rows = memories.with_boxes(rows)
    reg = regions[[*REGION_KEY, "source_id", "part", *BOX]].astype({"query_id": str, "gold_idx": int, "source_id": str, "part": str})
    reg = reg.rename(columns={c: f"{c}_r" for c in BOX})
    rows = rows.astype({"source_id": str, "part": str}).merge(reg, on=[*REGION_KEY, "source_id", "part"])
    rows = rows.dropna(subset=[*BOX, *(f"{c}_r" for c in BOX)]).reset_index(drop=True)
    empty = pd.DataFrame({"query_id": pd.Series(dtype=str), "slot": pd.Series(dtype=np.int64), "credit": pd.Series(dtype=float)})
    if not len(rows):
        return empty
    mods, cuts = modalities(), cutting()
    first, last = _windows(rows, cuts)
    # the slots of each region: the union of its rows' windows
    n = last - first + 1
    at = np.repeat(np.arange(len(rows)), n)
    slots = pd.DataFrame({"query_id": rows["query_id"].to_numpy(dtype=object)[at], "gold_idx": rows["gold_idx"].to_numpy()[at],
                          "slot": np.repeat(first, n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)}).drop_duplicates()
    # every row of the region read by each of those slots: whole, or (a row that cuts) its leading part
    x = slots.merge(rows, on=REGION_KEY)
    t = _slot_end(x["amount"].to_numpy(dtype=float), x["slot"].to_numpy())
    start, end = x["start"].to_numpy(dtype=float), x["end"].to_numpy(dtype=float)
    whole = end <= t
    partial = (start < t) & ~whole & ~x["memory"].to_numpy(dtype=bool)
    keep = whole.copy()
    for name in sorted(set(x.loc[partial, "modality"].astype(str)) & cuts):
        idx = np.flatnonzero(partial & (x["modality"].astype(str) == name).to_numpy())
        x.loc[idx, BOX] = np.asarray(mods[name].cut(x.loc[idx, BOX].to_numpy(dtype=float), t[idx] - start[idx]), dtype=float).reshape(-1, 4)
        keep[idx] = True
    held = held_shares(x.loc[keep], regions, which.set_index("query_id")["amount"], by=("slot",))
    credit = slots.merge(held[[*REGION_KEY, "slot", "share"]], on=[*REGION_KEY, "slot"], how="left").fillna({"share": 0.0})
    credit = credit.sort_values([*REGION_KEY, "slot"], kind="stable")
    credit["gain"] = credit.groupby(REGION_KEY, sort=False)["share"].diff().fillna(credit["share"])
    c = credit.groupby(["query_id", "slot"], as_index=False, sort=True)["gain"].sum()
    c["credit"] = c.groupby("query_id", sort=False)["gain"].cumsum()
    return c[["query_id", "slot", "credit"]].astype({"query_id": str, "slot": np.int64}).reset_index(drop=True)


def _ideal(regions: pd.DataFrame, which: pd.DataFrame, cuts: set[str]) -> pd.DataFrame:
    """Each region of the queries of `which` as the ideal reads them: query_id, amount, before
    (the ideal content ahead of it), cost (min(extent, B); a point 0; one slot when not placed),
    cheapest first, and ``cut`` (the entry's modality cuts: read part by part, else whole)."""
    reg = regions.loc[regions["query_id"].astype(str).isin(set(which["query_id"])), ["query_id", *BOX]]
    reg = reg.assign(query_id=reg["query_id"].astype(str)).merge(which[["query_id", "amount", "entry_modality"]], on="query_id")
    box = reg[BOX].to_numpy(dtype=float)
    area = np.clip(box[:, 1] - box[:, 0], 0.0, None) * np.clip(box[:, 3] - box[:, 2], 0.0, None)
    amount = reg["amount"].to_numpy(dtype=float)
    cost = np.where(np.isnan(area), amount / SLOTS, np.minimum(area, amount))
    out = pd.DataFrame({"query_id": reg["query_id"], "amount": amount, "cost": cost,
                        "cut": reg["entry_modality"].astype(str).isin(cuts).to_numpy()}).sort_values(["query_id", "cost"], kind="stable")
    out["before"] = out.groupby("query_id", sort=False)["cost"].cumsum() - out["cost"]
    return out.reset_index(drop=True)


def _ideal_at(ideal: pd.DataFrame, at: pd.DataFrame) -> np.ndarray:
    """I(slot) of each row of `at` (query_id, slot), row for row."""
    both = at.reset_index(drop=True).reset_index().merge(ideal, on="query_id")
    t = _slot_end(both["amount"].to_numpy(dtype=float), both["slot"].to_numpy())
    cost, before = both["cost"].to_numpy(dtype=float), both["before"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        part = np.where(cost > 0, np.clip((t - before) / np.where(cost > 0, cost, 1.0), 0.0, 1.0), (t >= before).astype(float))
    part = np.where(both["cut"].to_numpy(dtype=bool), part, (before + cost <= t).astype(float))  # an uncut region: whole or not
    part = np.where(np.isinf(t), 1.0, part)  # an unlimited budget: everything is read in the first slot
    return np.bincount(both["index"].to_numpy(), weights=part, minlength=len(at))


def _credit_at(events: pd.DataFrame, at: pd.DataFrame) -> np.ndarray:
    """C(slot) of each row of `at` (query_id, slot), row for row: the last event at or before it."""
    grid = at.reset_index(drop=True).reset_index().astype({"slot": np.int64}).sort_values("slot", kind="stable")
    found = pd.merge_asof(grid, events.sort_values("slot", kind="stable"), on="slot", by="query_id", direction="backward")
    return found.sort_values("index")["credit"].fillna(0.0).to_numpy(dtype=float)


def _ndcg(events: pd.DataFrame, ideal: pd.DataFrame, which: pd.DataFrame, k: int) -> np.ndarray:
    """content_ndcg@k of each query of `which`, in its order."""
    q = which["query_id"].to_numpy(dtype=object)
    grid = pd.DataFrame({"query_id": np.repeat(q, k), "slot": np.tile(np.arange(1, k + 1), len(q))})
    best = _ideal_at(ideal, grid).reshape(len(q), k)
    got = np.minimum(_credit_at(events, grid).reshape(len(q), k), best)
    discount = 1.0 / np.log2(np.arange(2, k + 2, dtype=float))
    dcg, idcg = _gained(got) @ discount, _gained(best) @ discount
    return np.divide(dcg, idcg, out=np.zeros_like(dcg), where=idcg > 0)


def _gained(cumulative: np.ndarray) -> np.ndarray:
    """Per row, what each slot adds to a cumulative credit (slots along axis 1)."""
    return np.diff(cumulative, axis=1, prepend=0.0)


def _mrr(events: pd.DataFrame, ideal: pd.DataFrame, which: pd.DataFrame) -> np.ndarray:
    """content_mrr of each query of `which`, in its order: F = min(1, C, I) and its ideal
    min(1, I), evaluated at every slot until the ideal holds a region's worth (I >= 1) and at
    every event after (where F can change only with C)."""
    q = which["query_id"].to_numpy(dtype=object)
    reach = ideal.assign(end=ideal["before"] + ideal["cost"])
    reach = reach.loc[reach.groupby("query_id", sort=False)["cost"].cumcount() == 0]  # the cheapest region: I reaches 1 at its end
    top = _first_slot(reach["amount"].to_numpy(dtype=float), reach["end"].to_numpy(dtype=float))
    early = pd.DataFrame({"query_id": np.repeat(reach["query_id"].to_numpy(dtype=object), top),
                          "slot": np.concatenate([np.arange(1, t + 1) for t in top]) if len(top) else np.zeros(0, dtype=np.int64)})
    at = pd.concat([early, events[["query_id", "slot"]]], ignore_index=True).drop_duplicates().sort_values(["query_id", "slot"], kind="stable")
    best = np.minimum(_ideal_at(ideal, at), 1.0)
    got = np.minimum(np.minimum(_credit_at(events, at), best), 1.0)
    frame = at.assign(best=best, got=got).reset_index(drop=True)
    per = frame.groupby("query_id", sort=False)
    slot = frame["slot"].to_numpy(dtype=float)
    frame["rr"] = (frame["got"] - per["got"].shift(1).fillna(0.0)) / slot
    frame["ideal"] = (frame["best"] - per["best"].shift(1).fillna(0.0)) / slot
    sums = frame.groupby("query_id")[["rr", "ideal"]].sum().reindex(q).fillna(0.0)
    rr, ideal_rr = sums["rr"].to_numpy(dtype=float), sums["ideal"].to_numpy(dtype=float)
    return np.divide(rr, ideal_rr, out=np.zeros_like(rr), where=ideal_rr > 0)


def _compute(block: BlockRows) -> pd.DataFrame:
    return reading_columns(block.entries, block.run, block.gold, block.regions, block.atom_ext, budget=block.budget, k=block.k,
                           failed=block.failed, memories=block.memories,
                           stream=block.shared("reading_order", lambda: block_reading_order(block)))


FAMILY = Family(
    name="reading", phase="block", compute=_compute, after="touch_recall@budget",
    columns=lambda k: tuple(m.at(k).column for m in MEASURES),
    measures=(
        Measure(name="content_mrr", scope="answerable", reducer=Mean(worst=0.0), higher_is_better=True, heading="MRR", compared=True,
                unmeasurable=no_budget, abstained_nothing=True, unit="1 / slot, over the ideal's (0-1)",
                description="The reciprocal slot (a tenth of the modality's budget of content read) by which the reader has been "
                            "handed one gold region's worth of held credit, in shares, over the whole returned list and over "
                            "the ideal's; positions are content read, not atom ranks, so cutting or merging atoms changes nothing."),
        Measure(name="content_ndcg", scope="answerable", reducer=Mean(worst=0.0), higher_is_better=True, cutoff=True, heading="nDCG",
                compared=True, unmeasurable=no_budget, abstained_nothing=True, unit="normalised DCG over slots (0-1)",
                description="nDCG over the first k slots of content (a slot a tenth of the modality's budget): the held credit "
                            "of the gold regions (recall@budget's) the reader gains in each slot, discounted by 1 / log2(slot + 1), "
                            "over the ideal's (the regions themselves, cheapest first). Positions are content read, not atom "
                            "ranks: cutting or merging atoms changes nothing; one slot per atom and one atom per region give ndcg@k."),
    ),
)
MEASURES: tuple[Measure, ...] = FAMILY.measures
