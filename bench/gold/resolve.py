"""Resolve gold regions into the atoms that overlap them now (spec 2.2), and place them.

Gold is "source + region"; atoms depend on the chunking strategy. At run time each
gold region of each dev entry becomes the set of atoms of its source that overlap it
by the modality's own rule, leaving out atoms observed after the entry's `as_of`
(spec constraint 4: future memory never counts as a hit). A region that no atom
overlaps stays in the entry's denominator as a miss and is listed.

`resolve` joins all regions of one modality with that modality's atoms at once
(`Modality.overlap_pairs`: a sorted-array interval join over (source, span) that
applies the modality's own overlap rule to the candidate pairs). In the same pass each
region becomes a typed row: its own keys in its modality's columns
(`Modality.region_columns`, `region_table`) and its box in the atoms' coordinates
(`Modality.place_regions`), which the extent measures read. `resolve_per_region` is
the plain reference, one `Modality.overlap` and one `Modality.region_extent` call per
region; both give the same frames, row for row (tests/gold/test_resolve.py
checks it on random cases).

`resolve_files` is the resolve step's step: the same over partitions on disk, keeping
only the gold sources' rows, and it hands on the gold sources' segments it read (the
evaluation's report reads no others) with the entries whose gold has no text to find
(bench.gold.table).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from bench.gold.table import GOLD_COLUMNS, Resolved
from bench.ingest.atom_codes import ATOM_CODE, CODE_DTYPE
from bench.ingest.partitions import Partition, scan_files, scan_sources
from bench.ingest.store import segment_files
from bench.io import gc_paused
from bench.modalities import RESOLVED_REGION_COLUMNS, modalities, region_columns, unreadable_gold
from bench.modalities.base import PLACED, Modality, place_regions_per_region

#: ``atom``: the atom's code, its row in the served table (bench.ingest.atom_codes:
#: the atom frames in modality-name order, concatenated)
#: how a modality's regions are placed: its vectorised hook, or the per-region reference
Place = Callable[[Modality, pd.DataFrame, pd.DataFrame], pd.DataFrame]


def _flatten(entries: list[dict]) -> pd.DataFrame:
    """One row per gold region, in entry order then gold order."""
    golds = [entry["gold"] for entry in entries]
    counts = np.fromiter(map(len, golds), dtype=np.int64, count=len(golds))
    flat = [g for gold in golds for g in gold]
    starts = np.repeat(np.cumsum(counts) - counts, counts)

    def per_entry(key: str) -> np.ndarray:
        return np.repeat(np.asarray([entry[key] for entry in entries], dtype=object), counts)

    return pd.DataFrame(
        {"query_id": per_entry("query_id"), "modality": per_entry("modality"),
         "gold_idx": np.arange(len(flat), dtype=np.int64) - starts,
         "source_id": np.asarray([g["source_id"] for g in flat], dtype=object),
         "region": pd.Series([g["region"] for g in flat], dtype=object), "as_of": per_entry("as_of")},
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


@dataclass(frozen=True)
class _Part:
    """Atoms of one modality (all of them, or one partition's rows of gold sources) for the join."""

    modality: str
    atoms: pd.DataFrame
    codes: np.ndarray  # code of each row of `atoms`
    segments: pd.DataFrame  # segments of (at least) the atoms' sources


def resolve(entries: list[dict], atoms: dict[str, pd.DataFrame], segments: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (gold: query_id, gold_idx, atom code) and (regions: one row per gold region,
    typed and placed), over atom frames held in memory (modality -> frame, the served
    table's order) and segments of (at least) the gold sources."""
    offset = _code_offsets(atoms)
    parts = (_Part(m, f, offset[m] + np.arange(len(f), dtype=np.int64), segments) for m, f in atoms.items())
    with gc_paused():
        return _resolve(_flatten(entries), parts, segments)


def resolve_files(entries: list[dict], served: list[Partition], segments_dir: Path, batch_rows: int = 65_536) -> Resolved:
    """The resolve step's step: :func:`resolve` over the served partitions on disk, one
    partition at a time, and the gold sources' segments it read for it.

    Each partition ``<modality>/<dataset>.parquet``, and every segment file under
    `segments_dir`, is scanned in batches keeping only the rows of gold sources
    (bench.ingest.partitions.scan_sources), so memory holds one batch plus the gold
    sources' atoms and segments, whatever the corpus's size (`batch_rows` rows per
    read). Same frames as :func:`resolve` over the whole served table
    (tests/gold/test_resolve.py).
    """
    flat = _flatten(entries)
    wanted = pa.array(pd.unique(flat["source_id"].to_numpy(dtype=object)).tolist(), type=pa.string())
    # every segment file's gold-source rows, in the store's file order: what each modality's
    # join and placement need, and all the evaluation's report reads of the corpus text
    gold_segments = scan_files(segment_files(Path(segments_dir)), wanted, batch_rows)
    needed = set(flat["modality"])
    join_parts: list[_Part] = []
    for part in served:
        if part.modality not in needed:
            continue
        rows = list(scan_sources(part.path, wanted, batch_rows))
        if not rows:
            continue
        atoms = pd.concat([r for r, _ in rows], ignore_index=True) if len(rows) > 1 else rows[0][0]
        codes = part.offset + np.concatenate([pos.to_numpy() for _, pos in rows])
        join_parts.append(_Part(part.modality, atoms, codes, gold_segments))
    with gc_paused():
        gold, regions = _resolve(flat, join_parts, gold_segments)
    return Resolved(regions=regions, segments=gold_segments, unreadable=unreadable_gold(entries, gold_segments), gold=gold)


def resolve_frames(entries: list[dict], served: dict[str, pd.DataFrame], segments: pd.DataFrame) -> Resolved:
    """:func:`resolve_files` over served atoms and segments in memory (the acceptance, the test fixtures)."""
    gold, regions = resolve(entries, served, segments)
    wanted = set(regions["source_id"].astype(str))
    gold_segments = segments.loc[segments["source_id"].astype(str).isin(wanted)] if len(segments) else segments
    return Resolved(regions=regions, segments=gold_segments, unreadable=unreadable_gold(entries, gold_segments), gold=gold)


def _resolve(flat: pd.DataFrame, parts: Iterable[_Part], segments: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
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
            ATOM_CODE: codes.astype(CODE_DTYPE),
        },
        columns=GOLD_COLUMNS,
    )
    return gold, _regions_frame(flat, segments, n_atoms, n_future, lambda mod, regs, segs: mod.place_regions(regs, segs))


def _regions_frame(flat: pd.DataFrame, segments: pd.DataFrame, n_atoms: np.ndarray, n_future: np.ndarray, place: Place) -> pd.DataFrame:
    """One row per gold region (:func:`_flatten`'s order): its modality's typed columns
    (`Modality.region_table`), its box in the atoms' coordinates (`place`, over segments of
    at least the regions' sources; a region whose source has no segments is not placed:
    part "", NaN box, extent 0), n_atoms, n_future_atoms."""
    mods = modalities()
    n = len(flat)
    dtypes = region_columns()
    typed: dict[str, list[tuple[np.ndarray, pd.api.extensions.ExtensionArray]]] = {name: [] for name in dtypes}
    part = np.full(n, "", dtype=object)
    box = np.full((n, 4), np.nan)
    modality = flat["modality"].to_numpy(dtype=object)
    # the regions whose source has segments (the others are not placed)
    sources = pc.unique(pa.array(segments["source_id"], type=pa.string(), from_pandas=True)) if len(segments) else pa.array([], pa.string())
    with_segments = pc.is_in(pa.array(flat["source_id"], type=pa.string(), from_pandas=True), value_set=sources)
    with_segments = with_segments.to_numpy(zero_copy_only=False).astype(bool)
    for name in sorted(set(modality)):
        rows = np.flatnonzero(modality == name)
        mine = flat.iloc[rows].reset_index(drop=True)[["source_id", "region"]]
        table = mods[name].region_table(mine["region"].tolist())
        for column, values in table.items():
            typed[column].append((rows, pd.array(values, dtype=dtypes[column])))
        has = with_segments[rows]
        if not has.any():
            continue
        placed = place(mods[name], mine.assign(**table).loc[has].reset_index(drop=True), segments)
        part[rows[has]] = placed["part"].to_numpy(dtype=object)
        box[rows[has]] = placed[PLACED[1:]].to_numpy(dtype=float)
    x0, x1, y0, y1 = box.T
    extent = np.where(np.isnan(x0), 0.0, np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None))
    columns = {"query_id": flat["query_id"].to_numpy(dtype=object), "modality": modality,
               "gold_idx": flat["gold_idx"].to_numpy(dtype=np.int64), "source_id": flat["source_id"].to_numpy(dtype=object),
               **{name: _spread(pieces, n, dtypes[name]) for name, pieces in typed.items()},
               "part": part, "x0": x0, "x1": x1, "y0": y0, "y1": y1, "extent": extent, "n_atoms": n_atoms, "n_future_atoms": n_future}
    out = pd.DataFrame(columns)
    return out[[*RESOLVED_REGION_COLUMNS[:4], *typed, *RESOLVED_REGION_COLUMNS[4:]]].astype(
        {"query_id": "str", "modality": "str", "source_id": "str", "part": "str"})


def _spread(pieces: list[tuple[np.ndarray, pd.api.extensions.ExtensionArray]], n: int, dtype: str) -> pd.api.extensions.ExtensionArray:
    """A column of `n` rows holding each piece's values at its rows, <NA> elsewhere (one take)."""
    values = pd.concat([pd.Series(v) for _, v in pieces], ignore_index=True).array if pieces else pd.array([], dtype=dtype)
    index = np.full(n, -1, dtype=np.int64)
    if pieces:
        index[np.concatenate([rows for rows, _ in pieces])] = np.arange(len(values))
    return values.take(index, allow_fill=True)


def resolve_per_region(entries: list[dict], atoms: dict[str, pd.DataFrame], segments: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The reference: one `Modality.overlap` and one `Modality.region_extent` call per gold
    region (slow; tests and benchmarks)."""
    mods = modalities()
    atoms_by_source = {
        m: {sid: grp for sid, grp in frame.groupby("source_id", sort=False)} for m, frame in atoms.items()
    }
    segs_by_source = {sid: grp for sid, grp in segments.groupby("source_id", sort=False)} if len(segments) else {}
    offset = _code_offsets(atoms)
    gold_rows: list[tuple[str, int, int]] = []
    counts: list[tuple[int, int]] = []
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
            counts.append((n_atoms, n_future))
    gold = pd.DataFrame(
        {
            "query_id": np.asarray([r[0] for r in gold_rows], dtype=object),
            "gold_idx": np.asarray([r[1] for r in gold_rows], dtype=np.int64),
            ATOM_CODE: np.asarray([r[2] for r in gold_rows], dtype=CODE_DTYPE),
        },
        columns=GOLD_COLUMNS,
    )
    n = np.asarray(counts, dtype=np.int64).reshape(-1, 2)
    return gold, _regions_frame(_flatten(entries), segments, n[:, 0], n[:, 1], place_regions_per_region)
