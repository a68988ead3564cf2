"""The resolve step of a dev run: the dev entries' gold regions -> the served atoms they
overlap (bench.gold.resolve.resolve_files, partition by partition), with the run's memory
hits' gold by provenance (bench.gold.memories), and the qrels' pairs (the stage writes them as
TREC qrels, bench.trec.files.trec_qrels).

The retrieve stage runs it once the system has answered every query, over the atoms it
served (data/served/) and the memories it wrote, and writes what it gives under
data/resolved/ (bench.gold.table) and reports/runs/dev.qrels in the same atomic block as
the run: a run and its gold change together or not at all."""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.gold.memories import Resolution, with_memories, write_memories
from bench.gold.resolve import resolve_files
from bench.gold.table import Resolved, write_resolved
from bench.ingest.atom_codes import ATOM_CODE, partition_ids
from bench.ingest.partitions import Partition

__all__ = ["RunGold", "resolve_run", "write_gold"]


@dataclass(frozen=True)
class RunGold:
    """A dev run's gold: what data/resolved/ and reports/runs/dev.qrels hold."""

    found: Resolved  # gold (served atoms' codes, memories' after them), typed and placed regions, segments, unreadable gold
    memories: Resolution  # the memories' rows, judged units and credited boxes
    hits: pd.DataFrame  # the run's memory hits
    qrels: pd.DataFrame  # query_id, atom_id (a memory: its memory id) of every gold (region, atom) row
    n_served: int  # served partitions

    @property
    def summary(self) -> str:
        regions, missed = self.found.regions, int((self.found.regions["n_atoms"] == 0).sum())
        return (f"{len(regions)} gold regions -> {len(self.found.gold)} (region, atom) pairs over {self.n_served} served "
                f"partitions; {missed} regions overlap no atom")


def _as_written(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` as it reads back from the Parquet file the run writes it to (its dtypes as the file keeps them)."""
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    buffer.seek(0)
    return pd.read_parquet(buffer)


def resolve_run(entries: list[dict], served: list[Partition], segments_dir: Path, memories: pd.DataFrame, units: pd.DataFrame,
                hits: pd.DataFrame, *, replay: bool) -> RunGold:
    """The gold of a run over the served partitions `served` (data/served/, on disk), the
    segment store `segments_dir` and the run's memories, units and memory hits (as the run
    writes them to data/memories/); `replay`: the system was replayed the stream and given no
    atoms (its gold is the gold of what it can name, its memories)."""
    memories, units, hits = (_as_written(f) for f in (memories, units, hits))
    found = resolve_files(entries, served, segments_dir)
    mem = with_memories(entries, found.gold, found.segments, memories, units, hits, given_atoms=not replay)
    gold = mem.gold
    qrels = gold.assign(atom_id=partition_ids(gold[ATOM_CODE], served, mem.ids).to_numpy(), query_id=gold["query_id"].astype(str))
    return RunGold(found=dataclasses.replace(found, gold=gold), memories=mem, hits=hits, qrels=qrels, n_served=len(served))


def write_gold(folder: Path, gold: RunGold) -> None:
    """data/resolved/ (`folder`), each file written atomically."""
    write_resolved(folder, gold.found)
    write_memories(folder, gold.memories, gold.hits)
