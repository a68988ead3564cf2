"""Memory hits at retrieve time: each citation checked against the corpus, the memories numbered.

A memory hit (docs/systems.md, *Memory hits*) names its provenance: citations of
``{source_id, extent}`` in the modality's atom-extent terms. :class:`CitationCheck`
refuses a citation whose source the corpus does not have, or whose extent is malformed
or does not lie within its source (``Modality.cited_units`` says which units it covers):
the run stops naming the query, as for any malformed hit.

:func:`memory_tables` numbers the distinct memories of a run -- one row per distinct
(memory_id, text, provenance): a system may rewrite a memory between queries -- with
codes after the served atoms' (bench.ingest.atom_codes: code = number of served atoms
+ row), and expands every citation into its units (a turn, a page, a line, a cue, an OCR
box of the source) with each unit's text, observed_at and holder. The resolve step judges
and resolves them (bench.gold.memories).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bench.ingest.atom_codes import ATOM_CODE, MEMORY_TABLE_COLUMNS, UNIT_TABLE_COLUMNS
from bench.modalities import modalities
from bench.modalities.base import extent_json, short
from bench.systems import MalformedResponse, MemoryHit

__all__ = ["CitationCheck", "MemoryTables", "coded_run", "memory_tables"]



class CitationCheck:
    """Checks memory hits' citations against the corpus (segments loaded on first use) and
    keeps each citation's units (one Modality.cited_units call per distinct citation)."""

    def __init__(self, segments: Callable[[], pd.DataFrame | None]) -> None:
        self._load = segments
        self._by_source: dict[str, pd.DataFrame] | None = None
        self._units: dict[tuple[str, str], pd.DataFrame] = {}
        self._lists: dict[tuple[str, str], dict[str, list[Any]]] = {}

    def _sources(self) -> dict[str, pd.DataFrame]:
        if self._by_source is None:
            seg = self._load()
            self._by_source = {} if seg is None or not len(seg) else {
                str(s): g for s, g in seg.groupby(seg["source_id"].astype(str), sort=False)}
        return self._by_source

    def units(self, source_id: str, extent: dict) -> pd.DataFrame:
        """The units one citation covers; MalformedResponse when it cannot be placed."""
        key = (source_id, extent_json(extent))
        if key in self._units:
            return self._units[key]
        seg = self._sources().get(source_id)
        if seg is None:
            raise MalformedResponse(f"source {source_id} is not a source of the corpus")
        modality = str(seg["modality"].iloc[0])
        try:
            found = modalities()[modality].cited_units(extent, seg)
        except (ValueError, TypeError, KeyError) as exc:
            raise MalformedResponse(f"extent {short(extent)} is not a {modality} extent of {source_id}: {exc}") from None
        if not len(found):
            raise MalformedResponse(f"extent {short(extent)} covers nothing of {source_id}")
        found = found.assign(source_id=source_id, modality=modality, holder=str(seg["holder"].iloc[0]),
                             extent_json=[extent_json(e) for e in found["extent"]], text=found["text"].astype(str))
        self._units[key] = found
        return found

    def unit_lists(self, source_id: str, extent: dict) -> dict[str, list[Any]]:
        """:meth:`units` as plain lists per column (the memory tables are built from many of them)."""
        key = (source_id, extent_json(extent))
        if key not in self._lists:
            found = self.units(source_id, extent)
            self._lists[key] = {c: found[c].tolist() for c in ("source_id", "modality", "observed_at", "holder", "text", "extent_json")}
        return self._lists[key]

    def __call__(self, hit: MemoryHit) -> None:
        for i, cite in enumerate(hit.provenance, start=1):
            try:
                self.units(cite.source_id, cite.extent)
            except MalformedResponse as exc:
                raise MalformedResponse(f"citation {i}: {exc}") from None


@dataclass(frozen=True)
class MemoryTables:
    """A run's memories: one row per distinct memory (its code), and one per cited unit."""

    memories: pd.DataFrame  # MEMORY_TABLE_COLUMNS
    units: pd.DataFrame  # UNIT_TABLE_COLUMNS
    run_codes: np.ndarray  # code of each memory hit row of the run, in its order


def memory_tables(hits: pd.DataFrame, first_code: int, check: CitationCheck) -> MemoryTables:
    """Number the distinct memories of `hits` (retrieve.MEMORY_COLUMNS rows) from `first_code`
    (the number of served atoms) and expand their citations into units."""
    keys = list(zip(hits["memory_id"].astype(str), hits["text"].astype(str), hits["provenance"].astype(str), strict=True))
    index: dict[tuple[str, str, str], int] = {}
    codes = np.fromiter((index.setdefault(key, len(index)) for key in keys), dtype=np.int64, count=len(keys)) + first_code
    memories = pd.DataFrame([(first_code + i, *key) for key, i in index.items()], columns=MEMORY_TABLE_COLUMNS)
    cols: dict[str, list[Any]] = {c: [] for c in UNIT_TABLE_COLUMNS}
    for code, provenance in zip(memories[ATOM_CODE].tolist(), memories["provenance"].tolist(), strict=True):
        for c, cite in enumerate(json.loads(provenance)):
            units = check.unit_lists(cite["source_id"], cite["extent"])
            n = len(units["text"])
            cols[ATOM_CODE] += [code] * n
            cols["citation"] += [c] * n
            cols["unit"] += range(n)
            for name in ("source_id", "modality", "observed_at", "holder", "text"):
                cols[name] += units[name]
            cols["extent"] += units["extent_json"]
    units_table = pd.DataFrame(cols, columns=UNIT_TABLE_COLUMNS)
    units_table["observed_at"] = pd.to_datetime(units_table["observed_at"], utc=True)
    memories[ATOM_CODE] = memories[ATOM_CODE].astype(np.int64)
    return MemoryTables(memories, units_table[UNIT_TABLE_COLUMNS], codes)


def coded_run(run: pd.DataFrame, hits: pd.DataFrame, table: Any, check: CitationCheck | None) -> tuple[pd.DataFrame, MemoryTables]:
    """The run with integer codes (bench.ingest.atom_codes.to_codes), row for row: served
    atoms by their row in `table`, memory hits (`hits`, retrieve.MEMORY_COLUMNS, in run order)
    by their memory's code."""
    from bench.ingest.atom_codes import CODE_DTYPE, encode, to_codes

    tables = memory_tables(hits, len(table), check or CitationCheck(lambda: None))
    if not len(hits):
        return to_codes(run, table, "run"), tables
    key = run["query_id"].astype(str) + "\x00" + run["rank"].astype(str)
    code_of = dict(zip(hits["query_id"].astype(str) + "\x00" + hits["rank"].astype(str), tables.run_codes.tolist(), strict=True))
    mine = key.isin(set(code_of)).to_numpy()
    codes = np.empty(len(run), dtype=np.int64)
    codes[~mine] = encode(run.loc[~mine, "atom_id"], table, "run.atom_id")
    codes[mine] = key[mine].map(code_of).to_numpy(dtype=np.int64)
    out = run.copy()
    out["query_id"] = out["query_id"].astype(str).astype("category")
    out.insert(list(out.columns).index("atom_id"), ATOM_CODE, codes.astype(CODE_DTYPE))
    return out.drop(columns="atom_id"), tables
