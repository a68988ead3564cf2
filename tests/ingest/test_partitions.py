"""Atoms partitioned by modality and data set (bench/ingest/partitions.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from bench.ingest.atom_codes import served_ids
from bench.ingest.partitions import concat_partitions, partition_files, partitions, read_modalities, scan_sources, write_partitions


def atoms(prefix: str, n: int) -> pd.DataFrame:
    return pd.DataFrame({"atom_id": [f"{prefix}#{i}" for i in range(n)], "source_id": [f"{prefix}:{i % 3}" for i in range(n)],
                         "page": np.arange(n, dtype=np.int64)})


def test_codes_follow_modality_then_dataset_order(tmp_path: Path) -> None:
    parts = [("video", "tutorialvqa", atoms("t", 4)), ("pdf", "mmlongbench", atoms("m", 3)), ("video", "medvidqa", atoms("v", 2))]
    write_partitions(tmp_path, parts)
    found = partitions(tmp_path)
    assert [(p.modality, p.dataset, p.offset, p.rows) for p in found] == [
        ("pdf", "mmlongbench", 0, 3), ("video", "medvidqa", 3, 2), ("video", "tutorialvqa", 5, 4)]
    served = read_modalities(tmp_path)
    assert list(served) == ["pdf", "video"]
    ids = served_ids(served).to_pylist()
    assert ids == [*atoms("m", 3)["atom_id"], *atoms("v", 2)["atom_id"], *atoms("t", 4)["atom_id"]]
    assert served["video"]["page"].dtype == np.int64


def test_write_partitions_removes_stale_partitions_only(tmp_path: Path) -> None:
    (tmp_path / "stats.json").write_text("{}")  # not a partition: left alone
    write_partitions(tmp_path, [("pdf", "a", atoms("a", 2)), ("code", "c", atoms("c", 1))])
    write_partitions(tmp_path, [("pdf", "b", atoms("b", 2))])
    assert [p.relative_to(tmp_path).as_posix() for p in partition_files(tmp_path)] == ["pdf/b.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pdf", "stats.json"]  # the emptied code/ folder is gone


def test_an_empty_partition_keeps_the_dtypes_of_the_others(tmp_path: Path) -> None:
    empty = pd.DataFrame({"atom_id": pd.Series([], dtype=object), "source_id": pd.Series([], dtype=object), "page": pd.Series([], dtype=object)})
    write_partitions(tmp_path, [("pdf", "a", atoms("a", 2)), ("pdf", "b", empty)])
    assert read_modalities(tmp_path)["pdf"]["page"].dtype == np.int64
    assert len(concat_partitions([empty, empty])) == 0


def test_scan_sources_keeps_the_rows_of_the_wanted_sources_with_their_positions(tmp_path: Path) -> None:
    frame = atoms("s", 50)
    frame.to_parquet(tmp_path / "f.parquet", index=False)
    wanted = pa.array(["s:1", "nowhere"])
    for batch in (1, 7, 1000):
        got = list(scan_sources(tmp_path / "f.parquet", wanted, batch))
        rows = pd.concat([r for r, _ in got], ignore_index=True)
        pos = np.concatenate([p.to_numpy() for _, p in got])
        expected = frame[frame["source_id"] == "s:1"]
        assert pos.tolist() == expected.index.tolist()
        pd.testing.assert_frame_equal(rows, expected.reset_index(drop=True))


def test_scan_sources_of_a_file_without_source_ids(tmp_path: Path) -> None:
    """A partition written from a frame whose source_id is all null (Arrow type null) has no wanted row."""
    pd.DataFrame({"source_id": pd.Series([None, None], dtype=object), "x": [1, 2]}).to_parquet(tmp_path / "n.parquet")
    pd.DataFrame({"source_id": pd.Series([], dtype=object)}).to_parquet(tmp_path / "e.parquet")
    assert list(scan_sources(tmp_path / "n.parquet", pa.array(["a"]))) == []
    assert list(scan_sources(tmp_path / "e.parquet", pa.array(["a"]))) == []
