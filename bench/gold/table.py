"""What the resolve step gives the evaluation, and its files under data/resolved/.

The resolve step (bench.gold.resolve) reads the gold sources' segments once, from
the segment store, and hands on everything the evaluation and its report need of them;
the evaluate stage reads these files and never the segment store or the resolution code.

==========================  =====================================================================
``gold.parquet``            query_id (categorical), gold_idx, atom (the atom's code,
                            bench.ingest.atom_codes): one row per (region, overlapping atom)
``regions.parquet``         one row per gold region: query_id, modality, gold_idx, source_id,
                            the region's typed columns (every modality's
                            ``Modality.region_columns``, <NA> on other modalities' rows), its
                            placement (part, x0, x1, y0, y1 and the extent amount), n_atoms,
                            n_future_atoms
``segments.parquet``        the gold sources' segments (the report's pictures read them)
``unreadable_gold.json``    answerable entries whose gold holds no text to find
                            (``Modality.unreadable_gold``), or null
``memories.parquet``        one row per memory of the run (:data:`MEMORY_ROW_COLUMNS`; empty
                            without memory hits): its code after the served atoms', holder,
                            time, text, citations and their support
``memory_units.parquet``    every unit the run's memories cite, judged (bench.systems.credit.support)
``memory_boxes.parquet``    the credited units' boxes in gold sources (atom = the memory's code)
``memory_hits.parquet``     query_id, rank, atom of every memory hit of the run
==========================  =====================================================================

The gold rows of memory hits (resolved by provenance, bench.gold.memories) are
rows of ``gold.parquet`` like the atoms'; the memory files are written by
bench.gold.memories.write_memories and read by
bench.evaluation.memory_report.load_memory_inputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bench.ingest.atom_codes import ATOM_CODE

__all__ = ["GOLD_FILE", "MEMORY_ROW_COLUMNS", "Resolved", "ResolvedRegions", "read_regions", "write_resolved"]

GOLD_FILE, REGIONS, SEGMENTS, UNREADABLE = "gold.parquet", "regions.parquet", "segments.parquet", "unreadable_gold.json"
#: one row per memory (memories.parquet, bench.gold.memories.memory_rows): what the evaluation and the report read
#: the resolved gold (GOLD_FILE): one row per (entry, gold region, overlapping atom code)
GOLD_COLUMNS = ["query_id", "gold_idx", ATOM_CODE]
MEMORY_ROW_COLUMNS = [ATOM_CODE, "memory_id", "text", "provenance", "holder", "observed_at", "text_chars", "citations",
                      "citations_supported", "units", "units_judged", "units_supported", "units_credited", "modalities"]


@dataclass(frozen=True)
class ResolvedRegions:
    """What the evaluation reads of the resolution besides the gold rows (those it reads
    block by block: bench.evaluation.blocks.run_blocks)."""

    regions: pd.DataFrame
    segments: pd.DataFrame  # of the gold sources only
    unreadable: dict[str, Any] | None

    def segments_by_source(self) -> dict[str, pd.DataFrame]:
        """source_id -> its segments."""
        if not len(self.segments):
            return {}
        return {str(s): g for s, g in self.segments.groupby("source_id", sort=False)}


@dataclass(frozen=True)
class Resolved(ResolvedRegions):
    """The resolved gold of a split's entries: the four files above, in memory."""

    gold: pd.DataFrame  # query_id, gold_idx, atom: one row per (region, overlapping atom)


def write_resolved(folder: Path, found: Resolved) -> None:
    """The four files of `found` under `folder`, each written atomically."""
    from bench.io import write_json, write_parquet

    write_parquet(folder / GOLD_FILE, found.gold)
    write_parquet(folder / REGIONS, found.regions)
    write_parquet(folder / SEGMENTS, found.segments)
    write_json(folder / UNREADABLE, found.unreadable)


def read_regions(folder: Path) -> ResolvedRegions:
    """The files under `folder` but the gold rows (``folder / GOLD_FILE``: read block by block)."""
    return ResolvedRegions(regions=pd.read_parquet(folder / REGIONS), segments=pd.read_parquet(folder / SEGMENTS),
                           unreadable=json.loads((folder / UNREADABLE).read_text(encoding="utf-8")))
