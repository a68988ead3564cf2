"""Gold by provenance: which memory hits find which gold regions (the resolve step's hook).

The retrieve stage wrote the run's memories, every unit their citations cover and the
memory hits (bench.systems.credit.provenance; data/memories). Here:

1. **Support** (bench.systems.credit.support): each memory's units, a unit cited twice
   counted once, are judged on their own text; the *credited* units are the supported
   ones, unless fewer than half of the memory's units are supported (then none).
2. **Gold**: a memory hit of query q is a gold hit for q's region g when a credited unit
   of the memory overlaps g by the modality's own rule (``Modality.overlap_pairs``, the
   rule atoms resolve by; the unit turned into atom columns by ``Modality.atom_from_extent``)
   and was observed at or before q's ``as_of``. Rows (query_id, gold_idx, atom = the
   memory's code) join the served atoms' gold. Only memories the run returned for q can be
   gold for q: a memory's relevance is judged where the system named it.
3. **Holder and time** of a memory, as the leak measures read them: the holder of its
   cited sources (:data:`SEVERAL_HOLDERS` when they are several: a leak for every query),
   and the latest ``observed_at`` of all its cited units, supported or not (a citation of
   what was not yet observed -- under replay: not yet sent -- is a temporal violation).
4. **Extent**: a memory's cost is its own text (characters); the boxes of its credited
   units in gold sources are what it covers (bench.evaluation.measures.extent).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bench.gold.table import GOLD_COLUMNS, MEMORY_ROW_COLUMNS
from bench.ingest.atom_codes import ATOM_CODE, CODE_DTYPE, HIT_COLUMNS, MEMORY_TABLE_COLUMNS, UNIT_TABLE_COLUMNS
from bench.modalities import modalities
from bench.modalities.boxes import PLACED
from bench.systems.credit.support import credited, support_mask

__all__ = ["SEVERAL_HOLDERS", "MemoryGold", "Resolution", "judge_units", "memory_rows", "read_memories", "resolve_memories",
           "with_memories", "write_memories"]

#: the holder of a memory citing several holders' sources: equal to no query's holder
SEVERAL_HOLDERS = "(several holders)"
BOX = PLACED[1:]  # x0, x1, y0, y1


def judge_units(memories: pd.DataFrame, units: pd.DataFrame) -> pd.DataFrame:
    """`units` (data/memories/units.parquet) with a unit cited twice by one memory kept once
    and columns ``judged``, ``supported``, ``credited`` (module docstring, step 1)."""
    if not len(units):
        return units.assign(judged=pd.Series(dtype=bool), supported=pd.Series(dtype=bool), credited=pd.Series(dtype=bool))
    kept = units.drop_duplicates([ATOM_CODE, "source_id", "extent"], keep="first").reset_index(drop=True)
    text_of = dict(zip(memories[ATOM_CODE].tolist(), memories["text"].astype(str).tolist(), strict=True))
    texts = kept["text"].astype(str).tolist()
    judged = np.zeros(len(kept), dtype=bool)
    supported = np.zeros(len(kept), dtype=bool)
    granted = np.zeros(len(kept), dtype=bool)
    for code, rows in kept.groupby(ATOM_CODE, sort=False).indices.items():
        ok, was_judged, share = support_mask(text_of[code], [texts[i] for i in rows])
        supported[rows], judged[rows], granted[rows] = ok, was_judged, credited(ok, was_judged, share)
    return kept.assign(judged=judged, supported=supported, credited=granted)


def memory_rows(memories: pd.DataFrame, judged: pd.DataFrame) -> pd.DataFrame:
    """One row per memory: holder, observed_at, text length and its citations' counts."""
    g = judged.groupby(ATOM_CODE, sort=False)
    cites = judged.groupby([ATOM_CODE, "citation"], sort=False)["supported"].any().groupby(ATOM_CODE)
    holders = g["holder"].agg(lambda h: h.iloc[0] if h.nunique() == 1 else SEVERAL_HOLDERS)
    out = pd.DataFrame({
        ATOM_CODE: memories[ATOM_CODE].astype(np.int64).to_numpy(),
        "memory_id": memories["memory_id"].astype(str).to_numpy(),
        "text": memories["text"].astype(str).to_numpy(),
        "provenance": memories["provenance"].astype(str).to_numpy(),
        "text_chars": memories["text"].astype(str).str.len().to_numpy(dtype=np.int64),
        "citations": [len(json.loads(p)) for p in memories["provenance"]],
    }).set_index(ATOM_CODE, drop=False)
    out["holder"] = holders.reindex(out.index).fillna(SEVERAL_HOLDERS)
    out["observed_at"] = pd.to_datetime(g["observed_at"].max().reindex(out.index), utc=True)
    out["citations_supported"] = cites.sum().reindex(out.index).fillna(0).astype(np.int64)
    for name, col in (("units", None), ("units_judged", "judged"), ("units_supported", "supported"), ("units_credited", "credited")):
        counts = g.size() if col is None else g[col].sum()
        out[name] = counts.reindex(out.index).fillna(0).astype(np.int64)
    out["modalities"] = g["modality"].agg(lambda m: ",".join(sorted(set(m)))).reindex(out.index).fillna("")
    return out[MEMORY_ROW_COLUMNS].reset_index(drop=True)


@dataclass(frozen=True)
class MemoryGold:
    gold: pd.DataFrame  # query_id, gold_idx, atom (memory codes)
    boxes: pd.DataFrame  # atom, source_id, part, x0, x1, y0, y1: the credited units in gold sources, placed


def _unit_atoms(units: pd.DataFrame, segments: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Distinct units as atoms of their modality, the columns its overlap rule reads
    (``Modality.atom_from_extent`` on ``Modality.extent_segments`` of the unit's source, as
    system atoms are read); ``atom_id`` is the unit's row."""
    mods = modalities()
    by_source = {str(s): g for s, g in segments.groupby(segments["source_id"].astype(str), sort=False)} if len(segments) else {}
    laid: dict[str, pd.DataFrame] = {}
    rows: dict[str, list[dict]] = {}
    for i, (sid, modality, extent, seen) in enumerate(zip(units["source_id"].astype(str), units["modality"].astype(str),
                                                           units["extent"], units["observed_at"], strict=True)):
        if sid not in laid and sid in by_source:
            laid[sid] = mods[modality].extent_segments(by_source[sid])
        cols = mods[modality].atom_from_extent(json.loads(extent), laid.get(sid))
        rows.setdefault(modality, []).append({**cols, "atom_id": str(i), "source_id": sid, "observed_at": seen})
    return {m: pd.DataFrame(r).assign(observed_at=lambda f: pd.to_datetime(f["observed_at"], utc=True)) for m, r in rows.items()}


def resolve_memories(entries: list[dict], hits: pd.DataFrame, judged: pd.DataFrame, segments: pd.DataFrame) -> MemoryGold:
    """Gold rows of the memory hits (module docstring, step 2) and the boxes of the credited
    units in gold sources. `hits`: query_id, atom (memory codes); `segments`: those of the gold sources."""
    flat = [(e["query_id"], i, g["source_id"], g["region"], e["as_of"], e["modality"]) for e in entries for i, g in enumerate(e["gold"])]
    regions = pd.DataFrame(flat, columns=["query_id", "gold_idx", "source_id", "region", "as_of", "modality"])
    sources = set(regions["source_id"].astype(str))
    units = judged.loc[judged["credited"].astype(bool) & judged["source_id"].astype(str).isin(sources)].reset_index(drop=True)
    empty = pd.DataFrame({"query_id": pd.Series(dtype=str), "gold_idx": pd.Series(dtype=np.int64), ATOM_CODE: pd.Series(dtype=np.int64)})
    # each distinct unit once (a unit is cited by many memories, and by every version of one)
    distinct = units.drop_duplicates(["source_id", "extent"]).reset_index(drop=True)
    unit_of = pd.Series(np.arange(len(distinct)), index=pd.MultiIndex.from_frame(distinct[["source_id", "extent"]]))
    owner = pd.DataFrame({"unit": unit_of.reindex(pd.MultiIndex.from_frame(units[["source_id", "extent"]])).to_numpy(dtype=np.int64),
                          ATOM_CODE: units[ATOM_CODE].astype(np.int64).to_numpy()})
    boxes = _boxes(distinct, segments)
    boxes = owner.merge(boxes, on="unit").drop(columns="unit")[[ATOM_CODE, "source_id", "part", *BOX]]
    if not len(distinct) or not len(hits):
        return MemoryGold(empty, boxes)
    as_of = pd.to_datetime(regions["as_of"], utc=True, format="ISO8601").to_numpy()
    mods, found = modalities(), []
    for modality, atoms in _unit_atoms(distinct, segments).items():
        rows = np.flatnonzero(regions["modality"].to_numpy() == modality)
        if not len(rows):
            continue
        pairs = mods[modality].overlap_pairs(regions.iloc[rows].reset_index(drop=True), atoms, segments)
        r = rows[pairs["region_row"].to_numpy()]
        a = pairs["atom_row"].to_numpy()
        ok = atoms["observed_at"].to_numpy()[a] <= as_of[r]
        found.append(pd.DataFrame({"query_id": regions["query_id"].to_numpy()[r][ok].astype(str), "gold_idx": regions["gold_idx"].to_numpy()[r][ok],
                                   "unit": atoms["atom_id"].to_numpy()[a][ok].astype(np.int64)}))
    if not found:
        return MemoryGold(empty, boxes)
    # a region found by a unit is found by every memory hit of its query that credits the unit
    pairs = pd.concat(found, ignore_index=True).merge(owner, on="unit")
    named = hits[["query_id", ATOM_CODE]].astype({"query_id": str, ATOM_CODE: np.int64}).drop_duplicates()
    gold = pairs.merge(named, on=["query_id", ATOM_CODE])[GOLD_COLUMNS]
    gold = gold.drop_duplicates().sort_values(GOLD_COLUMNS, kind="stable").reset_index(drop=True)
    return MemoryGold(gold.astype({"gold_idx": np.int64, ATOM_CODE: np.int64}), boxes)


def _boxes(units: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
    """Each distinct unit's box in its source (its extent placed as a region of its modality,
    ``Modality.place_regions``), by row (``unit``); a unit whose source has no segments is not placed."""
    cols = ["unit", "source_id", "part", *BOX]
    sources = set(segments["source_id"].astype(str)) if len(segments) else set()
    frames = []
    mods = modalities()
    for modality, rows in units.groupby(units["modality"].astype(str), sort=True).indices.items() if len(units) else []:
        mine = units.iloc[rows]
        mine = mine.loc[mine["source_id"].astype(str).isin(sources)]
        if not len(mine):
            continue
        regions = [json.loads(e) for e in mine["extent"]]
        frame = pd.DataFrame({"source_id": mine["source_id"].astype(str).to_numpy(), "region": pd.Series(regions, dtype=object)})
        placed = mods[modality].place_regions(frame.assign(**mods[modality].region_table(regions)), segments)
        frames.append(placed.assign(unit=mine.index.to_numpy(dtype=np.int64), source_id=frame["source_id"].to_numpy()))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=float if c in BOX else (np.int64 if c == "unit" else object)) for c in cols})
    out = pd.concat(frames, ignore_index=True).astype({"part": str})
    return out.dropna(subset=BOX)[cols].reset_index(drop=True)


@dataclass(frozen=True)
class Resolution:
    """The resolve step's gold with the run's memories in it (:func:`with_memories`)."""

    gold: pd.DataFrame  # query_id, gold_idx, atom: served atoms' and memories' codes
    memories: pd.DataFrame  # MEMORY_ROW_COLUMNS
    units: pd.DataFrame  # the judged units (judge_units)
    boxes: pd.DataFrame  # MemoryGold.boxes

    @property
    def ids(self) -> list[str]:
        """The memory ids in code order (after the served atoms'): what the qrels' writer names them by."""
        return self.memories.sort_values(ATOM_CODE, kind="stable")["memory_id"].astype(str).tolist()


def read_memories(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict]:
    """data/memories as the retrieve stage wrote it: memories, units, hits, replay.json (empty when absent)."""
    def frame(name: str, columns: list[str]) -> pd.DataFrame:
        path = folder / name
        return pd.read_parquet(path) if path.is_file() else pd.DataFrame(columns=columns)

    replay = json.loads((folder / "replay.json").read_text(encoding="utf-8")) if (folder / "replay.json").is_file() else {}
    # the columns of bench.systems.credit.provenance's tables (none when the folder is empty)
    return (frame("memories.parquet", MEMORY_TABLE_COLUMNS), frame("units.parquet", UNIT_TABLE_COLUMNS), frame("hits.parquet", HIT_COLUMNS), replay)


def write_memories(folder: Path, found: Resolution, hits: pd.DataFrame) -> None:
    """The memory files of data/resolved/ (bench.evaluation.memory_report.load_memory_inputs reads
    them), each written atomically; written for every run (empty without memories)."""
    from bench.io import write_parquet

    for name, frame in (("memories", found.memories), ("memory_units", found.units), ("memory_boxes", found.boxes), ("memory_hits", hits)):
        write_parquet(folder / f"{name}.parquet", frame)


def with_memories(entries: list[dict], gold: pd.DataFrame, gold_segments: pd.DataFrame, memories: pd.DataFrame, units: pd.DataFrame,
                  hits: pd.DataFrame, given_atoms: bool = True) -> Resolution:
    """The served atoms' `gold` with the memory hits' gold added. A replayed system
    (`given_atoms` False) was given no atoms and can name none: their rows are dropped, so
    its gold is the gold of what it can name (its memories)."""
    judged = judge_units(memories, units)
    found = resolve_memories(entries, hits, judged, gold_segments)
    if given_atoms and not len(found.gold):  # the served atoms' gold as it was, row for row
        return Resolution(gold, memory_rows(memories, judged), judged, found.boxes)
    keep = np.ones(len(gold), dtype=bool) if given_atoms else np.zeros(len(gold), dtype=bool)
    mem = found.gold.assign(**{ATOM_CODE: found.gold[ATOM_CODE].astype(CODE_DTYPE)})
    out = pd.concat([gold.loc[keep].astype({"query_id": str}), mem], ignore_index=True)[list(gold.columns)]
    # the resolve order: region by region (entries, then gold order), atoms by code
    region = {(str(e["query_id"]), i): n for n, (e, i) in enumerate((e, i) for e in entries for i in range(len(e["gold"])))}
    at = np.asarray([region[(str(q), int(i))] for q, i in zip(out["query_id"], out["gold_idx"], strict=True)], dtype=np.int64)
    order = np.lexsort((out[ATOM_CODE].to_numpy(), at))
    return Resolution(out.iloc[order].reset_index(drop=True), memory_rows(memories, judged), judged, found.boxes)
