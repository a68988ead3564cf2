"""Minimum detectable effects (bench.evaluation.stats.power): the normal quantiles against scipy,
the power of a paired test at the reported effect checked by simulation with scipy's
paired t-test, and the block dev.json carries."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bench.evaluation.stats.power import fewest, mde, mde_block, mde_of, z_total
from bench.evaluation.stats.uncertainty import paired_randomization_test


def test_z_is_scipy_s() -> None:
    assert z_total() == pytest.approx(stats.norm.ppf(0.975) + stats.norm.ppf(0.8), rel=1e-12)
    assert z_total(0.01, 0.9) == pytest.approx(stats.norm.ppf(0.995) + stats.norm.ppf(0.9), rel=1e-12)


def _power(n: int, effect: float, draw, trials: int = 600, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        a, b = draw(rng, n, effect)
        hits += stats.ttest_rel(b, a).pvalue < 0.05
    return hits / trials


def test_independent_runs_are_detected_at_the_reported_effect_with_80_percent_power() -> None:
    """Two unrelated runs (B re-drawn independently, its hit rate `effect` higher): at the
    ``independent`` MDE of A's values a paired t-test rejects about 80% of the time."""
    n, p = 400, 0.45
    a0 = (np.random.default_rng(1).random(n) < p).astype(float)
    effect = mde_of(a0)["independent"]

    def draw(rng, n, effect):
        return (rng.random(n) < p).astype(float), (rng.random(n) < p + effect).astype(float)

    assert 0.74 <= _power(n, effect, draw) <= 0.86


def test_a_one_way_change_is_detected_at_the_fewest_effect_by_the_sign_flip_test() -> None:
    """Entries moving one way only (0 -> 1 with probability `fewest`): the paired randomization
    test bench compare runs (bench.evaluation.stats.uncertainty) rejects with 80% power; at half
    that effect it rarely does. The binomial tail is scipy's."""
    n = 400
    effect = mde_of(np.zeros(n))["fewest"]
    assert stats.binom.sf(5, n, effect) == pytest.approx(0.8, abs=1e-9)  # X >= 6 moved entries: p = 2 / 2**6 < 0.05
    rng = np.random.default_rng(3)

    def power(delta: float, trials: int = 400) -> float:
        hits = 0
        for _ in range(trials):
            d = (rng.random(n) < delta).astype(float)
            hits += paired_randomization_test(d, resamples=10_000, rng=rng) < 0.05
        return hits / trials

    assert 0.74 <= power(effect) <= 0.86
    assert power(effect / 2) < 0.45
    assert mde_of(np.zeros(n))["independent"] is None  # a baseline that never varies says nothing of unrelated runs
    assert fewest(3) is None and mde(0.5, 1) is None and mde(0.5, 100) == pytest.approx(z_total() * 0.05)


def test_the_block_dev_json_carries() -> None:
    rng = np.random.default_rng(0)
    n = 200
    table = pd.DataFrame({"modality": np.where(np.arange(n) < 120, "pdf", "conversation"), "unanswerable": np.arange(n) % 10 == 0,
                          "failed": np.arange(n) == 5})
    table["recall@10"] = np.where(table["unanswerable"], np.nan, (rng.random(n) < 0.5).astype(float))
    table["recall@budget"] = np.where(table["unanswerable"], np.nan, (rng.random(n) < 0.3).astype(float))
    block = mde_block(table, 10)
    assert (block["alpha"], block["power"]) == (0.05, 0.8)
    assert set(block["by_modality"]) == {"conversation", "pdf"} and set(block["overall"]) == {"recall@10", "recall@budget"}
    pdf = block["by_modality"]["pdf"]["recall@10"]
    assert pdf["n"] == int(((table["modality"] == "pdf") & ~table["unanswerable"]).sum())  # the denominator, a failed one included
    assert pdf["fewest"] < pdf["independent"]
    assert block["overall"]["recall@10"]["independent"] < pdf["independent"]  # more entries, smaller effects
