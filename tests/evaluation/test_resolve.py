"""The vectorised gold resolution against its per-region reference, on random cases of
every modality (benchmarks/synth.py builds them: hits, misses and future atoms)."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.evaluation.resolve import resolve, resolve_per_region
from benchmarks.synth import MODALITIES, make_case


@pytest.mark.parametrize(("seed", "mixed"), [(0, True), (1, False), (2, True)])
def test_vectorised_resolve_equals_per_region_reference(seed: int, mixed: bool) -> None:
    case = make_case(600, 6000, seed=seed, mixed=mixed)
    assert set(case.atoms) == set(MODALITIES)
    gold, regions = resolve(case.entries, case.atoms, case.segments)
    ref_gold, ref_regions = resolve_per_region(case.entries, case.atoms, case.segments)
    pd.testing.assert_frame_equal(regions, ref_regions)
    pd.testing.assert_frame_equal(gold, ref_gold)
    # the case exercises hits, misses and future atoms in every modality
    for m in MODALITIES:
        mine = regions[regions["modality"] == m]
        assert (mine["n_atoms"] > 0).any() and (mine["n_atoms"] == 0).any(), m
    assert regions["n_future_atoms"].sum() > 0


def test_resolve_without_atoms_or_entries() -> None:
    case = make_case(60, 600, seed=3)
    gold, regions = resolve(case.entries, {}, case.segments)
    assert gold.empty and (regions["n_atoms"] == 0).all() and len(regions) == case.n_regions
    gold, regions = resolve([], case.atoms, case.segments)
    assert gold.empty and regions.empty
