"""The resolve step's files (bench.gold.table): what the resolve step writes the
evaluate stage reads back unchanged, typed columns included, gold read block by block."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.gold.resolve import resolve_frames
from bench.gold.table import GOLD_FILE, read_regions, write_resolved
from bench.modalities import region_columns
from benchmarks.synth import make_case


def test_written_and_read_back_unchanged(tmp_path: Path) -> None:
    case = make_case(300, 3000, seed=8)
    found = resolve_frames(case.entries, case.atoms, case.segments)
    write_resolved(tmp_path, found)
    back = read_regions(tmp_path)
    pd.testing.assert_frame_equal(back.regions, found.regions)
    assert {c: str(back.regions[c].dtype) for c in region_columns()} == region_columns()
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / GOLD_FILE), found.gold)
    assert back.unreadable == found.unreadable
    pd.testing.assert_frame_equal(back.segments.reset_index(drop=True), found.segments.reset_index(drop=True), check_dtype=False)
    by_source = back.segments_by_source()
    assert set(by_source) == set(found.regions["source_id"]) & set(case.segments["source_id"])
    assert all((frame["source_id"] == source).all() for source, frame in by_source.items())
