"""The resolve step of a dev run (bench.gold.step), as the retrieve stage runs it: over served
partitions and segments on disk and the run's memory frames, the gold the in-memory resolution
gives, memories named in the qrels by their ids, a replayed system's gold its memories alone,
and every file of data/resolved/ written."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.gold.memories import with_memories
from bench.gold.resolve import resolve_frames
from bench.gold.step import resolve_run, write_gold
from bench.gold.table import GOLD_FILE, read_regions
from bench.ingest.atom_codes import served_ids
from bench.ingest.partitions import partitions, write_partitions
from bench.systems.credit.provenance import CitationCheck, coded_run
from bench.systems.run import MEMORY_COLUMNS
from bench.trec.files import trec_qrels
from tests.gold.test_memories import CITES, PIXEL, entry, hit, segments
from tests.ingest.chunks import chunk_all

ENTRIES = [entry("q1", [("c:h1:s1", 1)]), entry("q2", [("c:h1:s2", 2)]), entry("q3", [("c:h2:s9", 1)])]


def _run(tmp_path: Path):
    """The served atoms and segments written as partitions; the run's memory frames as the retrieve step hands them on."""
    seg = segments()
    served = chunk_all(seg, {"conversation": {"strategy": "turn"}})
    write_partitions(tmp_path / "served", [("conversation", "c", served["conversation"])])
    write_partitions(tmp_path / "segments", [("conversation", "c", seg)])
    hits = [hit("q1", 1, "pixel", PIXEL, CITES)]
    run = pd.DataFrame([(h[0], h[1], h[2], 1.0) for h in hits], columns=["query_id", "rank", "atom_id", "score"])
    table = served_ids(served)
    coded, tables = coded_run(run, pd.DataFrame(hits, columns=MEMORY_COLUMNS), table, CitationCheck(lambda: seg))
    mine = coded.loc[coded["atom"] >= len(table), ["query_id", "rank", "atom"]].astype({"query_id": str})
    return served, seg, tables, mine, len(table)


def test_the_run_gold_is_the_in_memory_resolution_with_memories_named_in_the_qrels(tmp_path: Path) -> None:
    served, seg, tables, mine, n = _run(tmp_path)
    gold = resolve_run(ENTRIES, partitions(tmp_path / "served"), tmp_path / "segments", tables.memories, tables.units, mine, replay=False)
    found = resolve_frames(ENTRIES, served, seg)
    expected = with_memories(ENTRIES, found.gold, found.segments, tables.memories, tables.units, mine).gold
    got = gold.found.gold.astype({"query_id": str}).reset_index(drop=True)
    assert got.values.tolist() == expected.astype({"query_id": str}).reset_index(drop=True).values.tolist()
    assert (got["atom"] == n).sum() == 1  # the memory hit found q1's turn, as the atom after the served ones
    ids = served_ids(served).to_pylist()
    lines = trec_qrels(gold.qrels).splitlines()
    assert "q1 0 pixel 1" in lines and all(line.endswith(" 1") for line in lines)
    assert {line.split()[2] for line in lines} - {"pixel"} <= set(ids) and len(lines) == len(set(lines)) >= 3
    assert gold.summary.startswith(f"3 gold regions -> {len(got)} (region, atom) pairs over 1 served partitions")


def test_a_replayed_system_s_gold_is_its_memories_alone(tmp_path: Path) -> None:
    _, _, tables, mine, n = _run(tmp_path)
    gold = resolve_run(ENTRIES, partitions(tmp_path / "served"), tmp_path / "segments", tables.memories, tables.units, mine, replay=True)
    assert gold.found.gold["atom"].tolist() == [n] and trec_qrels(gold.qrels) == "q1 0 pixel 1\n"


def test_every_file_of_data_resolved_is_written(tmp_path: Path) -> None:
    _, _, tables, mine, _ = _run(tmp_path)
    gold = resolve_run(ENTRIES, partitions(tmp_path / "served"), tmp_path / "segments", tables.memories, tables.units, mine, replay=False)
    write_gold(tmp_path / "resolved", gold)
    back = read_regions(tmp_path / "resolved")
    pd.testing.assert_frame_equal(back.regions, gold.found.regions)
    assert len(pd.read_parquet(tmp_path / "resolved" / GOLD_FILE)) == len(gold.found.gold)
    written = sorted(p.name for p in (tmp_path / "resolved").iterdir())
    assert written == sorted(["gold.parquet", "regions.parquet", "segments.parquet", "unreadable_gold.json", "memories.parquet",
                              "memory_units.parquet", "memory_boxes.parquet", "memory_hits.parquet"])
    assert len(pd.read_parquet(tmp_path / "resolved" / "memories.parquet")) == 1
