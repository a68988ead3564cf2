"""Resolve gold regions into the atom ids that overlap them now (spec 2.2).

Gold is "source + region"; atoms depend on the chunking strategy. At run time each
gold region of each dev entry becomes the set of atoms of its source that overlap it
by the modality's own rule, leaving out atoms observed after the entry's `as_of`
(spec constraint 4: future memory never counts as a hit). A region that no atom
overlaps stays in the entry's denominator as a miss and is listed.

`resolve` joins all regions of one modality with that modality's atoms at once
(`Modality.overlap_pairs`: a sorted-array interval join over (source, span) that
applies the modality's own overlap rule to the candidate pairs). `resolve_per_region`
is the plain reference, one `Modality.overlap` call per region; both give the same
frames, row for row (tests/evaluation/test_resolve.py checks it on random cases).
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from bench.evaluation.atom_codes import ATOM_CODE, CODE_DTYPE, decode, served_ids
from bench.evaluation.placement import place_regions
from bench.ingest.partitions import Partition, scan_files, scan_sources
from bench.ingest.store import segment_files
from bench.modalities import modalities, unreadable_gold

#: ``atom``: the atom's code, its row in the served table (bench.evaluation.atom_codes:
#: the atom frames in modality-name order, concatenated)
GOLD_COLUMNS = ["query_id", "gold_idx", "atom"]
#: json.dumps(x, sort_keys=True), without building an encoder per call
_REGION_JSON = json.JSONEncoder(sort_keys=True)
# JSONEncoder.encode builds a C encoder on every call; build it once (same output)
_REGION_C = (
    c_make_encoder(None, _REGION_JSON.default, encode_basestring_ascii, None, ": ", ", ", True, False, True)
    if c_make_encoder is not None else None
)


def _region_json(regions: list) -> list[str]:
    """json.dumps(region, sort_keys=True) of each region."""
    if _REGION_C is None:
        return [_REGION_JSON.encode(x) for x in regions]
    enc, join = _REGION_C, "".join
    return [join(enc(x, 0)) for x in regions]
REGION_COLUMNS = ["query_id", "modality", "gold_idx", "source_id", "region", "n_atoms", "n_future_atoms"]


def _flatten(entries: list[dict]) -> pd.DataFrame:
    """One row per gold region, in entry order then gold order."""
    qid: list[str] = []
    mod: list[str] = []
    idx: list[int] = []
    sid: list[str] = []
    reg: list[dict] = []
    as_of: list[str] = []
    for entry in entries:
        gold = entry["gold"]
        k = len(gold)
        qid += [entry["query_id"]] * k
        mod += [entry["modality"]] * k
        idx += range(k)
        as_of += [entry["as_of"]] * k
        for g in gold:
            sid.append(g["source_id"])
            reg.append(g["region"])
    return pd.DataFrame(
        {"query_id": qid, "modality": mod, "gold_idx": np.asarray(idx, dtype=np.int64), "source_id": sid,
         "region": reg, "as_of": as_of},
    )


def _code_offsets(atoms: dict[str, pd.DataFrame]) -> dict[str, int]:
    """First code of each modality's atoms in the served table (modality-name order)."""
    out, start = {}, 0
    for name in sorted(atoms):
        out[name] = start
        start += len(atoms[name])
    return out


def _utc_ns(values: pd.Series) -> np.ndarray:
    """tz-aware timestamps -> int64 nanoseconds since the epoch (UTC); NaT -> min int."""
    ts = pd.to_datetime(values.reset_index(drop=True), utc=True)
    return ts.dt.tz_localize(None).to_numpy(dtype="datetime64[ns]").view(np.int64)


def _as_of_ns(values: list[str]) -> np.ndarray:
    """Each entry's as_of (must carry a zone, as `pd.Timestamp(...).tz_convert` demands)."""
    uniq = {v: pd.Timestamp(v).tz_convert("UTC").as_unit("ns").value for v in set(values)}
    return np.asarray([uniq[v] for v in values], dtype=np.int64)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building large lists of new objects.

    Each 700 new containers would otherwise start a collection that walks every
    tracked object (the 1M atom rows included); no cycles are made here.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass(frozen=True)
class _Part:
    """Atoms of one modality (all of them, or one partition's rows of gold sources) for the join."""

    modality: str
    atoms: pd.DataFrame
    codes: np.ndarray  # code of each row of `atoms`
    segments: pd.DataFrame  # segments of (at least) the atoms' sources


def resolve(entries: list[dict], atoms: dict[str, pd.DataFrame], segments: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (gold: query_id, gold_idx, atom code) and (regions: one row per gold region),
    over atom frames held in memory (modality -> frame, the served table's order)."""
    offset = _code_offsets(atoms)
    parts = (_Part(m, f, offset[m] + np.arange(len(f), dtype=np.int64), segments) for m, f in atoms.items())
    with _gc_paused():
        return _resolve(_flatten(entries), parts)


@dataclass(frozen=True)
class ResolvedFiles:
    """What :func:`resolve_files` found: the gold and regions of :func:`resolve`, the
    segments of the gold sources, and the atom id of every gold row (for the qrels)."""

    gold: pd.DataFrame
    regions: pd.DataFrame
    gold_segments: pd.DataFrame
    gold_atom_ids: pd.Series


def resolve_files(entries: list[dict], served: list[Partition], segments_dir: Path, batch_rows: int = 65_536) -> ResolvedFiles:
    """:func:`resolve` over the served partitions on disk, one partition at a time.

    Each partition ``<modality>/<dataset>.parquet``, and every segment file under
    `segments_dir`, is scanned in batches keeping only the rows of gold sources
    (bench.ingest.partitions.scan_sources), so memory holds one batch plus the gold
    sources' atoms and segments, whatever the corpus's size (`batch_rows` rows per
    read). Same frames as
    :func:`resolve` over the whole served table (tests/evaluation/test_resolve.py).
    """
    flat = _flatten(entries)
    wanted = pa.array(pd.unique(flat["source_id"].to_numpy(dtype=object)).tolist(), type=pa.string())
    # every segment file's gold-source rows, in the store's file order: what each modality's
    # join needs (segments of at least its sources), the placement and the report
    gold_segments = scan_files(segment_files(Path(segments_dir)), wanted, batch_rows)
    needed = set(flat["modality"])
    id_frames: list[pd.DataFrame] = []
    join_parts: list[_Part] = []
    for part in served:
        if part.modality not in needed:
            continue
        rows = list(scan_sources(part.path, wanted, batch_rows))
        if not rows:
            continue
        atoms = pd.concat([r for r, _ in rows], ignore_index=True) if len(rows) > 1 else rows[0][0]
        codes = part.offset + np.concatenate([pos.to_numpy() for _, pos in rows])
        id_frames.append(pd.DataFrame({"atom": codes, "atom_id": atoms["atom_id"].to_numpy()}))
        join_parts.append(_Part(part.modality, atoms, codes, gold_segments))
    with _gc_paused():
        gold, regions = _resolve(flat, join_parts)
    ids = pd.concat(id_frames, ignore_index=True) if id_frames else pd.DataFrame({"atom": np.zeros(0, np.int64), "atom_id": []})
    atom_ids = gold["atom"].map(pd.Series(ids["atom_id"].to_numpy(), index=ids["atom"].to_numpy())).astype(str).rename("atom_id")
    return ResolvedFiles(gold, regions, gold_segments, atom_ids)


def _resolve(flat: pd.DataFrame, parts: Iterable[_Part]) -> tuple[pd.DataFrame, pd.DataFrame]:
    mods = modalities()
    n = len(flat)
    as_of = _as_of_ns(flat["as_of"].tolist())
    n_atoms = np.zeros(n, dtype=np.int64)
    n_future = np.zeros(n, dtype=np.int64)
    hit_region: list[np.ndarray] = []
    hit_atom: list[np.ndarray] = []
    modality = flat["modality"].to_numpy(dtype=object)
    for part in parts:
        frame = part.atoms
        if not len(frame):
            continue
        rows = np.flatnonzero(modality == part.modality)
        if not len(rows):
            continue
        regions = flat.iloc[rows].reset_index(drop=True)
        pairs = mods[part.modality].overlap_pairs(regions, frame, part.segments)
        r = rows[pairs["region_row"].to_numpy(dtype=np.int64)]
        a = pairs["atom_row"].to_numpy(dtype=np.int64)
        future = _utc_ns(frame["observed_at"])[a] > as_of[r]
        n_future += np.bincount(r[future], minlength=n)
        ok = ~future
        n_atoms += np.bincount(r[ok], minlength=n)
        hit_region.append(r[ok])
        hit_atom.append(part.codes[a[ok]])
    if hit_region:
        # the reference order: by region, then by atom code
        r_all = np.concatenate(hit_region)
        codes = np.concatenate(hit_atom)
        order = np.lexsort((codes, r_all))
        r_all, codes = r_all[order], codes[order]
    else:
        r_all, codes = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    gold = pd.DataFrame(
        {
            "query_id": flat["query_id"].to_numpy(dtype=object)[r_all],
            "gold_idx": flat["gold_idx"].to_numpy(dtype=np.int64)[r_all],
            "atom": codes.astype(CODE_DTYPE),
        },
        columns=GOLD_COLUMNS,
    )
    regions_out = pd.DataFrame(
        {
            "query_id": flat["query_id"].tolist(),
            "modality": flat["modality"].tolist(),
            "gold_idx": flat["gold_idx"].tolist(),
            "source_id": flat["source_id"].tolist(),
            "region": _region_json(flat["region"].tolist()),
            "n_atoms": n_atoms.tolist(),
            "n_future_atoms": n_future.tolist(),
        },
        columns=REGION_COLUMNS,
    )
    return gold, regions_out


def resolve_per_region(entries: list[dict], atoms: dict[str, pd.DataFrame], segments: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The reference: one `Modality.overlap` call per gold region (slow; tests and benchmarks)."""
    mods = modalities()
    atoms_by_source = {
        m: {sid: grp for sid, grp in frame.groupby("source_id", sort=False)} for m, frame in atoms.items()
    }
    segs_by_source = {sid: grp for sid, grp in segments.groupby("source_id", sort=False)}
    offset = _code_offsets(atoms)
    gold_rows: list[tuple[str, int, int]] = []
    region_rows: list[dict] = []
    empty = pd.DataFrame()
    for entry in entries:
        modality = entry["modality"]
        as_of = pd.Timestamp(entry["as_of"]).tz_convert("UTC")
        for idx, g in enumerate(entry["gold"]):
            sid = g["source_id"]
            cand = atoms_by_source.get(modality, {}).get(sid, empty)
            n_atoms = n_future = 0
            if len(cand):
                hit = mods[modality].overlap(g["region"], cand, segs_by_source.get(sid, empty))
                future = (cand["observed_at"] > as_of).to_numpy()
                ok = hit & ~future
                n_future = int((hit & future).sum())
                rows = atoms[modality].index.get_indexer(cand.index[ok])  # position in its frame
                n_atoms = len(rows)
                gold_rows.extend((entry["query_id"], idx, offset[modality] + int(a)) for a in rows)
            region_rows.append(
                {
                    "query_id": entry["query_id"],
                    "modality": modality,
                    "gold_idx": idx,
                    "source_id": sid,
                    "region": json.dumps(g["region"], sort_keys=True),
                    "n_atoms": n_atoms,
                    "n_future_atoms": n_future,
                }
            )
    gold = pd.DataFrame(
        {
            "query_id": np.asarray([r[0] for r in gold_rows], dtype=object),
            "gold_idx": np.asarray([r[1] for r in gold_rows], dtype=np.int64),
            "atom": np.asarray([r[2] for r in gold_rows], dtype=CODE_DTYPE),
        },
        columns=GOLD_COLUMNS,
    )
    regions = pd.DataFrame(region_rows, columns=REGION_COLUMNS)
    return gold, regions


# --------------------------------------------------------------------------- the resolve step


@dataclass(frozen=True)
class ResolvedGold:
    """Resolved gold: (query_id, gold_idx, atom code) rows, the regions with their
    placement, the gold sources' segments and the answerable entries whose gold has no
    text to find (Modality.unreadable_gold; None when no modality has the notion)."""

    gold: pd.DataFrame
    regions: pd.DataFrame
    gold_segments: pd.DataFrame
    unreadable: dict[str, Any] | None
    gold_atom_ids: pd.Series  # the atom id of every gold row, for the qrels


def resolve_partitions(entries: list[dict], served: list[Partition], segments_dir: Path) -> ResolvedGold:
    """Resolve and place over the served partitions and segment files on disk (the resolve stage)."""
    found = resolve_files(entries, served, segments_dir)
    regions = _placed(found.regions, entries, found.gold_segments)
    return ResolvedGold(found.gold, regions, found.gold_segments, unreadable_gold(entries, found.gold_segments), found.gold_atom_ids)


def resolve_frames(entries: list[dict], served: dict[str, pd.DataFrame], segments: pd.DataFrame) -> ResolvedGold:
    """Resolve and place over served atoms and segments in memory (the acceptance, the fixtures)."""
    gold, regions = resolve(entries, served, segments)
    gold_segments = segments.loc[segments["source_id"].astype(str).isin(set(regions["source_id"].astype(str)))]
    return ResolvedGold(gold, _placed(regions, entries, gold_segments), gold_segments, unreadable_gold(entries, gold_segments),
                        decode(gold[ATOM_CODE].to_numpy(), served_ids(served)))


def _placed(regions: pd.DataFrame, entries: list[dict], segments: pd.DataFrame) -> pd.DataFrame:
    """`regions` with each region's placement (bench.evaluation.placement), placed from the
    entries' own region objects (the rows are in :func:`_flatten`'s order), so the JSON text
    written for the file is never parsed back here."""
    placed = place_regions(regions.assign(region=_flatten(entries)["region"].to_numpy()), segments)
    return placed.assign(region=regions["region"].to_numpy())
