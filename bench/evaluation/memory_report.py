"""A run's memories in the evaluation: their rows in the atom table, their extents, and the
``memories`` block of dev.json (docs/systems.md, *Memory hits*).

Memory codes follow the served atoms' (bench.evaluation.provenance), so the evaluation
reads a memory as one more row of its atom table: ``holder`` and ``observed_at`` as
bench.evaluation.memory_gold sets them (the leak measures: a citation of another holder's
source is a holder leak, of what was not yet observed a temporal violation), its paid
extent its own text in characters, and the boxes of its credited units what it covers.

The block, per modality of the queries (and overall), over the memory hits of the run:
``memory_hits`` (run rows naming a memory) and ``memory_hits_top_k``, ``memories``
(distinct memories among them), ``citations`` with ``supported`` (a citation with at least
one supported unit) and ``unsupported``, ``units`` with ``units_supported`` and
``units_credited``, ``no_supported_citation`` (the share of those memories with no
supported citation, with n and denominator), and the median ``text_chars`` and cited
``units`` of a memory (its cost beside its cited extent).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.memory_gold import MEMORY_ROW_COLUMNS
from bench.evaluation.placement import BOX

__all__ = ["MemoryInputs", "load_memory_inputs", "memory_block"]


@dataclass(frozen=True)
class MemoryInputs:
    rows: pd.DataFrame  # bench.evaluation.memory_gold.MEMORY_ROW_COLUMNS, by code
    boxes: pd.DataFrame  # atom, source_id, part, x0, x1, y0, y1 (credited units in gold sources)
    hits: pd.DataFrame  # query_id, rank, atom: the run's memory hits

    def __bool__(self) -> bool:
        return bool(len(self.rows))

    @property
    def ids(self) -> list[str]:
        """The memory ids in code order (after the served atoms' ids)."""
        return self.rows["memory_id"].astype(str).tolist()

    def atoms(self) -> pd.DataFrame:
        """atom_id, holder, observed_at of each memory, in code order."""
        return pd.DataFrame({"atom_id": self.rows["memory_id"].astype(str).to_numpy(), "holder": self.rows["holder"].astype(str).to_numpy(),
                             "observed_at": pd.to_datetime(self.rows["observed_at"], utc=True).to_numpy()})

    def extents(self) -> pd.DataFrame:
        """Extent rows (measures.extent's ATOM_EXTENT_COLUMNS): a paid row per memory (its text, in a
        space of its own that covers nothing) and one unpaid row per credited box."""
        ids = dict(zip(self.rows["atom"].tolist(), self.rows["memory_id"].astype(str).tolist(), strict=True))
        paid = pd.DataFrame({"atom_id": self.rows["memory_id"].astype(str).to_numpy(),
                             "modality": [m.split(",")[0] for m in self.rows["modalities"].astype(str)],
                             "source_id": "memory:" + self.rows["memory_id"].astype(str), "part": "",
                             "x0": 0.0, "x1": 0.0, "y0": 0.0, "y1": 0.0, "extent": self.rows["text_chars"].to_numpy(dtype=float)})
        boxes = self.boxes.assign(atom_id=self.boxes["atom"].map(ids).astype(str), modality="", extent=0.0,
                                  part=self.boxes["part"].astype(str))
        cols = ["atom_id", "modality", "source_id", "part", *BOX, "extent"]
        return pd.concat([paid[cols], boxes[cols]], ignore_index=True) if len(boxes) else paid[cols]


def load_memory_inputs(resolved: Path) -> MemoryInputs:
    """The resolve stage's memory rows, boxes and hits (data/resolved/memories.parquet, memory_boxes.parquet,
    memory_hits.parquet); empty for a run without memories."""
    def frame(name: str, columns: list[str]) -> pd.DataFrame:
        path = resolved / name
        return pd.read_parquet(path) if path.is_file() else pd.DataFrame(columns=columns)

    rows = frame("memories.parquet", MEMORY_ROW_COLUMNS).sort_values("atom", kind="stable").reset_index(drop=True)
    return MemoryInputs(rows, frame("memory_boxes.parquet", ["atom", "source_id", "part", *BOX]),
                        frame("memory_hits.parquet", ["query_id", "rank", "atom"]))


def _stats(hits: pd.DataFrame, rows: pd.DataFrame, k: int) -> dict[str, Any]:
    mem = rows.loc[rows["atom"].isin(set(hits["atom"].tolist()))]
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


def memory_block(inputs: MemoryInputs, entries: pd.DataFrame, k: int) -> dict[str, Any]:
    """dev.json's ``memories`` block (module docstring); `entries`: query_id, modality."""
    modality = dict(zip(entries["query_id"].astype(str), entries["modality"].astype(str), strict=True))
    hits = inputs.hits.assign(query_id=inputs.hits["query_id"].astype(str))
    hits = hits.assign(modality=hits["query_id"].map(modality))
    out = {str(m): _stats(g, inputs.rows, k) for m, g in hits.groupby("modality", sort=True)}
    out["overall"] = _stats(hits, inputs.rows, k)
    return out

