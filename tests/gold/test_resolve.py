"""The vectorised gold resolution against its per-region reference, on random cases of
every modality (benchmarks/synth.py builds them: hits, misses and future atoms)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.gold.resolve import resolve, resolve_files, resolve_per_region
from benchmarks.synth import MODALITIES, make_case


@pytest.mark.parametrize(("seed", "mixed"), [(0, True), (1, False), (2, True)])
def test_vectorised_resolve_equals_per_region_reference(seed: int, mixed: bool) -> None:
    case = make_case(600, 6000, seed=seed, mixed=mixed)
    assert set(case.atoms) == set(MODALITIES)
    gold, regions = resolve(case.entries, case.atoms, case.segments)
    ref_gold, ref_regions = resolve_per_region(case.entries, case.atoms, case.segments)
    pd.testing.assert_frame_equal(regions, ref_regions)
    pd.testing.assert_frame_equal(gold, ref_gold)
    # the case exercises hits, misses and future atoms in every modality, and placed regions
    for m in MODALITIES:
        mine = regions[regions["modality"] == m]
        assert (mine["n_atoms"] > 0).any() and (mine["n_atoms"] == 0).any(), m
        assert (mine["extent"] > 0).any(), m
    assert regions["n_future_atoms"].sum() > 0


def test_resolve_without_atoms_or_entries() -> None:
    case = make_case(60, 600, seed=3)
    gold, regions = resolve(case.entries, {}, case.segments)
    assert gold.empty and (regions["n_atoms"] == 0).all() and len(regions) == case.n_regions
    gold, regions = resolve([], case.atoms, case.segments)
    assert gold.empty and regions.empty


def _partitioned(case, folder: Path) -> tuple[dict[str, pd.DataFrame], Path]:
    """Write the case's atoms and segments as partitions, two data sets per modality (each
    source in one of them), as the chunk stage does; return the in-memory served table
    (modality -> its partitions concatenated in data set order) and the segments folder."""
    from bench.ingest.partitions import concat_partitions, write_partitions

    def dataset_of(frame: pd.DataFrame) -> pd.Series:
        return frame["modality"].astype(str) + "-" + frame["source_id"].astype(str).map(lambda s: "ab"[sum(map(ord, s)) % 2])

    atoms, segments = {}, []
    parts = []
    for m, frame in sorted(case.atoms.items()):
        frame = frame.assign(dataset=dataset_of(frame))
        mine = [(m, str(d), g.reset_index(drop=True)) for d, g in frame.groupby("dataset", sort=True)]
        parts += mine
        atoms[m] = concat_partitions([g for _, _, g in mine])
    write_partitions(folder / "served", parts)
    seg = case.segments.assign(dataset=dataset_of(case.segments))
    for (m, d), g in seg.groupby(["modality", "dataset"], sort=True):
        segments.append((str(m), str(d), g.reset_index(drop=True)))
    write_partitions(folder / "segments", segments)
    return atoms, folder / "segments"


@pytest.mark.parametrize("batch_rows", [7, 65_536])
def test_resolve_files_streams_partitions_with_the_same_result(tmp_path: Path, batch_rows: int) -> None:
    """Partition by partition, only gold sources' rows kept, in batches of a few rows or
    one: the frames of the in-memory resolve over the whole served table; the qrels
    writer names every gold atom from the partitions alone (atom_codes.partition_ids)."""
    from bench.ingest.atom_codes import partition_ids, served_ids
    from bench.ingest.partitions import partitions

    case = make_case(600, 6000, seed=4, mixed=True)
    atoms, seg_dir = _partitioned(case, tmp_path)
    served = partitions(tmp_path / "served")
    assert sorted(p.modality for p in served) == sorted([*MODALITIES] * 2)  # each modality in two partitions
    gold, regions = resolve(case.entries, atoms, case.segments)
    found = resolve_files(case.entries, served, seg_dir, batch_rows=batch_rows)
    pd.testing.assert_frame_equal(found.regions, regions)
    pd.testing.assert_frame_equal(found.gold, gold)
    assert len(gold) and regions["n_future_atoms"].sum() > 0
    ids = served_ids(atoms).to_pylist()
    assert partition_ids(gold["atom"], served).tolist() == [ids[c] for c in gold["atom"]]
    # only gold sources' segments were kept, and all of them
    assert set(found.segments["source_id"]) == set(case.segments["source_id"]) & set(regions["source_id"])


def test_resolve_files_of_an_unserved_source_is_a_miss(tmp_path: Path) -> None:
    case = make_case(60, 600, seed=5)
    _partitioned(case, tmp_path)
    entry = {**case.entries[0], "gold": [{**case.entries[0]["gold"][0], "source_id": "nowhere:1"}]}
    found = resolve_files([entry], [], tmp_path / "segments")
    assert found.gold.empty and found.regions["n_atoms"].tolist() == [0]


def test_regions_are_typed_columns_of_their_modality() -> None:
    """Each region's own keys in its modality's typed columns (<NA> elsewhere), no JSON text;
    its box beside them; a region whose source has no segments is not placed."""
    from bench.modalities import RESOLVED_REGION_COLUMNS, region_columns

    case = make_case(300, 3000, seed=6)
    entries = [*case.entries, {"query_id": "lost:0", "modality": "video", "as_of": case.entries[0]["as_of"],
                               "gold": [{"source_id": "nowhere:1", "region": {"t_start": 1, "t_end": 2.5}}]}]
    _, regions = resolve(entries, case.atoms, case.segments)
    typed = region_columns()
    assert list(regions.columns) == [*RESOLVED_REGION_COLUMNS[:4], *typed, *RESOLVED_REGION_COLUMNS[4:]]
    assert {c: str(regions[c].dtype) for c in typed} == typed and "region" not in regions.columns
    flat = [(e["query_id"], i, g["region"]) for e in entries for i, g in enumerate(e["gold"])]
    for (qid, idx, region), row in zip(flat, regions.itertuples(index=False), strict=True):
        assert (row.query_id, row.gold_idx) == (qid, idx)
        given = {c: getattr(row, c) for c in typed if not pd.isna(getattr(row, c))}
        if "bbox" in region:
            assert [given[f"bbox_{c}"] for c in ("x0", "y0", "x1", "y1")] == region["bbox"]
        else:
            assert given == region
    lost = regions.iloc[-1]
    assert lost["part"] == "" and np.isnan(lost["x0"]) and lost["extent"] == 0.0 and lost["t_end"] == 2.5
