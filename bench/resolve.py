"""Resolve gold regions into the atom ids that overlap them now (spec 2.2).

Gold is "source + region"; atoms depend on the chunking strategy. At run time each
gold region of each dev entry becomes the set of atoms of its source that overlap it
by the modality's own rule, leaving out atoms observed after the entry's `as_of`
(spec constraint 4: future memory never counts as a hit). A region that no atom
overlaps stays in the entry's denominator as a miss and is listed.
"""

from __future__ import annotations

import json

import pandas as pd

from bench.modalities import modalities

GOLD_COLUMNS = ["query_id", "gold_idx", "atom_id"]
REGION_COLUMNS = ["query_id", "modality", "gold_idx", "source_id", "region", "n_atoms", "n_future_atoms"]


def resolve(entries: list[dict], atoms: dict[str, pd.DataFrame], segments: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (gold: query_id, gold_idx, atom_id) and (regions: one row per gold region)."""
    mods = modalities()
    atoms_by_source = {
        m: {sid: grp for sid, grp in frame.groupby("source_id", sort=False)} for m, frame in atoms.items()
    }
    segs_by_source = {sid: grp for sid, grp in segments.groupby("source_id", sort=False)}
    gold_rows: list[tuple[str, int, str]] = []
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
                ids = cand["atom_id"].to_numpy()[ok]
                n_atoms = len(ids)
                gold_rows.extend((entry["query_id"], idx, str(a)) for a in ids)
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
    gold = pd.DataFrame(gold_rows, columns=GOLD_COLUMNS)
    regions = pd.DataFrame(region_rows, columns=REGION_COLUMNS)
    return gold, regions
