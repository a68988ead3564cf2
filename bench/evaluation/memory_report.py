"""A run's memories in the evaluation: their rows in the atom table, their extents, and the
``memories`` block of dev.json (docs/systems.md, *Memory hits*).

Memory codes follow the served atoms' (bench.systems.credit.provenance), so the evaluation
reads a memory as one more row of its atom table: ``holder`` and ``observed_at`` as
bench.gold.memories sets them (the leak measures: a citation of another holder's
source is a holder leak, of what was not yet observed a temporal violation), its paid
extent its own text in characters, and the boxes of its credited units what it covers
(where the question's modality counts characters: bench.evaluation.measures.extent and
budget, *Memory hits*).

The block, per modality of the queries (and overall), over the memory hits of the run:
``memory_hits`` (run rows naming a memory) and ``memory_hits_top_k``, ``memories``
(distinct memories among them), ``citations`` with ``supported`` (a citation with at least
one supported unit) and ``unsupported``, ``units`` with ``units_supported`` and
``units_credited``, ``no_supported_citation`` (the share of those memories with no
supported citation, with n and denominator), and the median ``text_chars`` and cited
``units`` of a memory (its cost beside its cited extent).

``by_kind``: what the run handed over, by where its memories' provenance came from --
``cited`` (the system's own citations), ``attributed`` (no citation of its own: attributed by
the harness to units that support it, bench.systems.credit.attribution) and ``unattributed`` (no
unit supports it: credited nothing) -- each with its memory hits, distinct memories and
``recall@k`` by those memories alone (the regions a memory of that kind finds in the top k,
over every answerable entry of the modality: n and denominator). The three recalls never
add up to recall@k (a region found by two kinds counts in both).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.measures.extent import ATOM_EXTENT_COLUMNS, BOX, MemoryExtents, capped_memory_boxes
from bench.gold.table import MEMORY_ROW_COLUMNS
from bench.ingest.atom_codes import ATOM_CODE, HIT_COLUMNS

__all__ = ["MemoryInputs", "load_memory_inputs", "memory_block"]

@dataclass(frozen=True)
class MemoryInputs:
    rows: pd.DataFrame  # MEMORY_ROW_COLUMNS, by code
    boxes: pd.DataFrame  # atom, source_id, part, x0, x1, y0, y1 (credited units in gold sources)
    hits: pd.DataFrame  # query_id, rank, atom: the run's memory hits

    def __bool__(self) -> bool:
        return bool(len(self.rows))

    @property
    def ids(self) -> list[str]:
        """The memory ids in code order (after the served atoms' ids)."""
        return self.rows["memory_id"].astype(str).tolist()

    def joined(self, atoms: pd.DataFrame, atom_ext: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, MemoryExtents]:
        """The served atoms' rows (holder, observed_at) and extents (row i: code i) with the
        memories' after them, and the memories as the extent measures read them. A memory's
        extent row has no box and no modality, and its text's length as its extent (its cost); it
        covers its credited units' boxes up to that cost (extent.capped_memory_boxes)."""
        first = len(atoms)
        codes = self.rows[ATOM_CODE].to_numpy(np.int64)
        if not np.array_equal(codes, np.arange(first, first + len(codes))):
            raise ValueError(f"memory codes must follow the {first} served atoms' in order, got {codes[:5].tolist()}...")
        mine = pd.DataFrame({"holder": self.rows["holder"].astype(str).to_numpy(),
                             "observed_at": pd.to_datetime(self.rows["observed_at"], utc=True).to_numpy()})
        nan = np.full(len(codes), np.nan)
        ext = pd.DataFrame({"atom_id": self.rows["memory_id"].astype(str).to_numpy(), "modality": "", "source_id": "", "part": "",
                            "x0": nan, "x1": nan, "y0": nan, "y1": nan, "extent": self.rows["text_chars"].to_numpy(dtype=float)})
        return (pd.concat([atoms, mine[list(atoms.columns)]], ignore_index=True),
                pd.concat([atom_ext, ext[ATOM_EXTENT_COLUMNS]], ignore_index=True),
                MemoryExtents(first, capped_memory_boxes(self.boxes, pd.Series(self.rows["text_chars"].to_numpy(dtype=float), index=codes))))

    def info(self) -> pd.DataFrame:
        """atom_id, source_id, text, extent of each memory in code order, as the drill-down shows
        an atom: its id, the sources it cites, its text and its provenance."""
        cited = [",".join(dict.fromkeys(c["source_id"] for c in json.loads(p))) for p in self.rows["provenance"].astype(str)]
        return pd.DataFrame({"atom_id": self.rows["memory_id"].astype(str).to_numpy(), "source_id": cited,
                             "text": self.rows["text"].astype(str).to_numpy(), "extent": self.rows["provenance"].astype(str).to_numpy()})


def load_memory_inputs(resolved: Path) -> MemoryInputs:
    """The resolve step's memory rows, boxes and hits (data/resolved/memories.parquet, memory_boxes.parquet,
    memory_hits.parquet); empty for a run without memories."""
    def frame(name: str, columns: list[str]) -> pd.DataFrame:
        path = resolved / f"{name}.parquet"
        return pd.read_parquet(path) if path.is_file() else pd.DataFrame(columns=columns)

    rows = frame("memories", MEMORY_ROW_COLUMNS).sort_values(ATOM_CODE, kind="stable").reset_index(drop=True)
    return MemoryInputs(rows, frame("memory_boxes", [ATOM_CODE, "source_id", "part", *BOX]), frame("memory_hits", HIT_COLUMNS))


def _stats(hits: pd.DataFrame, rows: pd.DataFrame, k: int) -> dict[str, Any]:
    mem = rows.loc[rows[ATOM_CODE].isin(set(hits[ATOM_CODE].tolist()))]
    n = len(mem)
    none = int((mem["citations_supported"] == 0).sum())
    return {
        "memory_hits": len(hits), f"memory_hits_top_{k}": int((hits["rank"] <= k).sum()), "memories": n,
        "citations": int(mem["citations"].sum()), "supported": int(mem["citations_supported"].sum()),
        "unsupported": int((mem["citations"] - mem["citations_supported"]).sum()),
        "units": int(mem["units"].sum()), "units_supported": int(mem["units_supported"].sum()),
        "units_credited": int(mem["units_credited"].sum()),
        "no_supported_citation": {"value": none / n if n else None, "n": none, "denominator": n},
        "text_chars_p50": float(np.median(mem["text_chars"])) if n else None,
        "units_p50": float(np.median(mem["units"])) if n else None,
    }


KINDS = ("cited", "attributed", "unattributed")


def memory_kinds(rows: pd.DataFrame) -> pd.Series:
    """Each memory's kind (module docstring), by code: an ``attributed:`` id is the harness's
    attribution, supported by some unit or by none."""
    attributed = rows["memory_id"].astype(str).str.startswith("attributed:").to_numpy()
    supported = rows["citations_supported"].to_numpy() > 0
    kind = np.where(~attributed, "cited", np.where(supported, "attributed", "unattributed"))
    return pd.Series(kind, index=rows[ATOM_CODE].to_numpy(np.int64))


def _by_kind(hits: pd.DataFrame, found: pd.DataFrame | None, entries: pd.DataFrame, kinds: pd.Series, k: int) -> dict[str, Any]:
    answerable = entries.loc[~entries["unanswerable"].astype(bool)] if "unanswerable" in entries else entries.iloc[0:0]
    regions = dict(zip(answerable["query_id"].astype(str), answerable.get("n_regions", pd.Series(dtype=int)), strict=True))
    kind_of = hits[ATOM_CODE].map(kinds)
    out = {}
    for kind in KINDS:
        mine = hits.loc[kind_of.to_numpy() == kind]
        row: dict[str, Any] = {"memory_hits": len(mine), "memories": int(mine[ATOM_CODE].nunique())}
        if found is not None:
            codes = set(mine[ATOM_CODE].tolist())
            top = found.loc[(found["rank"] <= k) & found[ATOM_CODE].isin(codes) & found["query_id"].astype(str).isin(set(regions))]
            per = top.drop_duplicates(["query_id", "gold_idx"]).groupby(top["query_id"].astype(str)).size()
            values = [per.get(q, 0) / n if n else 0.0 for q, n in regions.items()]
            row[f"recall@{k}"] = {"value": float(np.mean(values)) if values else None, "n": len(values), "denominator": len(values)}
        out[kind] = row
    return out


def memory_block(inputs: MemoryInputs, entries: pd.DataFrame, k: int, found: pd.DataFrame | None = None) -> dict[str, Any]:
    """dev.json's ``memories`` block (module docstring); `entries`: query_id, modality (unanswerable,
    n_regions for recall by kind); `found`: the run rows that hit gold (query_id, gold_idx, atom, rank)."""
    modality = dict(zip(entries["query_id"].astype(str), entries["modality"].astype(str), strict=True))
    hits = inputs.hits.assign(query_id=inputs.hits["query_id"].astype(str))
    hits = hits.assign(modality=hits["query_id"].map(modality))
    kinds = memory_kinds(inputs.rows)
    out = {}
    for m, g in [*hits.groupby("modality", sort=True), ("overall", hits)]:
        mine = entries if m == "overall" else entries.loc[entries["modality"].astype(str) == m]
        out[str(m)] = {**_stats(g, inputs.rows, k), "by_kind": _by_kind(g, found, mine, kinds, k)}
    return out

