"""Clusters of entries (bench.evaluation.stats.clusters) and the statistics over them: on LoCoMo's
real set file the askings of one question form one cluster; entries asked twice with the same
values give the interval, p-value and MDE of the questions asked once; a cluster of one entry
leaves every number as it was, bit for bit; everything stays seeded."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.evaluation.measures.auroc import auroc_from_codes
from bench.evaluation.stats.clusters import CLUSTERINGS, cluster_codes, clusters_of, entry_clusters
from bench.evaluation.stats.power import fewest, mde_of, standard_error
from bench.evaluation.stats.uncertainty import bootstrap_ci, paired_randomization_test, rng_for, weighted_percentile
from tests.conftest import ROOT


def locomo_dev() -> list[dict]:
    lines = (ROOT / "bench" / "sets" / "locomo.jsonl").read_text(encoding="utf-8").splitlines()
    return [e for e in map(json.loads, lines) if e["split"] == "dev"]


def test_locomo_s_questions_asked_at_two_moments_are_one_cluster_and_its_conversations_the_sources() -> None:
    entries = locomo_dev()
    found = entry_clusters(entries)
    assert len(found) == 2071 and found["cluster"].nunique() == 1422  # the count: 1,422 distinct questions
    assert found["source_cluster"].nunique() == 7  # the dev conversations
    by_id = found.set_index("query_id")
    moments = [e for e in entries if e["query_id"].endswith(":mid")]
    assert len(moments) > 500
    for e in moments[:50]:  # the mid-conversation asking and the one at the end ask one question: one cluster
        first = e["query_id"].removesuffix(":mid")
        if first in by_id.index:
            assert by_id.loc[e["query_id"], "cluster"] == by_id.loc[first, "cluster"]
    # a question cluster never straddles two source clusters; labels do not depend on the input order
    assert found.groupby("cluster")["source_cluster"].nunique().max() == 1
    assert set(found["source_cluster"]) == {f"locomo:{h.split(':')[1]}" for h in {e["scope"]["holder"] for e in entries}}
    pd.testing.assert_frame_equal(entry_clusters(entries[::-1]), found)


def test_cluster_codes_read_the_table_s_labels_or_make_every_entry_its_own() -> None:
    table = pd.DataFrame({"query_id": ["a", "b", "c"], "cluster": ["x", "y", "x"], "source_cluster": ["s", "s", "s"]})
    assert cluster_codes(table).tolist() == [0, 1, 0] and cluster_codes(table, "source").tolist() == [0, 0, 0]
    assert cluster_codes(table, "entry").tolist() == [0, 1, 2] == cluster_codes(table.drop(columns="cluster")).tolist()
    assert "independent" in clusters_of(table.drop(columns="cluster")) and CLUSTERINGS == ("question", "source", "entry")
    with pytest.raises(ValueError, match="not one of"):
        cluster_codes(table, "document")  # type: ignore[arg-type]


def test_entries_asked_twice_give_the_interval_and_p_value_of_the_questions_asked_once() -> None:
    rng = np.random.default_rng(4)
    once = (rng.random(400) < 0.4).astype(float)
    twice, clusters = np.repeat(once, 2), np.repeat(np.arange(400), 2)
    # the same multinomial draw over the same kinds: equal, not merely close
    assert bootstrap_ci(twice, rng=rng_for(0, "x"), clusters=clusters) == bootstrap_ci(once, rng=rng_for(0, "x"))
    assert bootstrap_ci(twice, rng=rng_for(0, "x")) != bootstrap_ci(once, rng=rng_for(0, "x"))  # as independent: narrower
    lo, hi = bootstrap_ci(twice, rng=rng_for(0, "x"))  # type: ignore[misc]
    lo1, hi1 = bootstrap_ci(once, rng=rng_for(0, "x"))  # type: ignore[misc]
    assert hi - lo < 0.8 * (hi1 - lo1)
    # three questions improved at both askings: the p-value of three questions, not of six
    d = np.zeros(200)
    d[:6] = 1.0
    asked = np.repeat(np.arange(100), 2)
    assert paired_randomization_test(d, rng=rng_for(0), clusters=asked) == pytest.approx(0.25)
    assert paired_randomization_test(d[::2], rng=rng_for(0)) == pytest.approx(0.25)
    assert paired_randomization_test(d, rng=rng_for(0)) == pytest.approx(2 / 64)
    # a gain and a loss in one question's two askings cancel: nothing to flip
    both = np.zeros(200)
    both[[0, 1]] = [1.0, -1.0]
    assert paired_randomization_test(both, rng=rng_for(0), clusters=asked) == 1.0


def test_clusters_of_one_entry_change_no_number_and_everything_is_seeded() -> None:
    rng = np.random.default_rng(5)
    binary, spread = (rng.random(300) < 0.3).astype(float), rng.gamma(2.0, 1.0, 300)
    own = np.arange(300)[::-1]
    for values, stat in ((binary, "mean"), (spread, "mean"), (spread, "p95")):
        assert bootstrap_ci(values, rng=rng_for(1), statistic=stat, clusters=own) == bootstrap_ci(values, rng=rng_for(1), statistic=stat)
    d = rng.normal(0, 1, 300) * (rng.random(300) < 0.2)
    assert paired_randomization_test(d, rng=rng_for(2), clusters=own) == paired_randomization_test(d, rng=rng_for(2))
    pairs = np.repeat(np.arange(150), 2)
    assert bootstrap_ci(spread, rng=rng_for(3), statistic="p50", clusters=pairs) == bootstrap_ci(spread, rng=rng_for(3), statistic="p50",
                                                                                                clusters=pairs)
    assert bootstrap_ci(spread, rng=rng_for(3), clusters=np.zeros(300)) is None  # one cluster: no interval


def test_a_weighted_percentile_and_auroc_equal_those_of_the_repeated_entries() -> None:
    rng = np.random.default_rng(6)
    x = np.sort(rng.random(40))
    w = rng.integers(0, 4, size=(30, 40)).astype(float)
    w[:, 0] += 1
    for q in (2.5, 50.0, 95.0):
        want = [np.percentile(np.repeat(x, row.astype(int)), q) for row in w]
        assert weighted_percentile(x, w, q).tolist() == want
    codes = 2 * rng.integers(0, 10, 40) + (rng.random(40) < 0.5)
    got = auroc_from_codes(codes, weights=w)
    assert got == pytest.approx([float(auroc_from_codes(np.repeat(codes, row.astype(int)))) for row in w])


def test_the_mde_counts_clusters() -> None:
    rng = np.random.default_rng(7)
    once = (rng.random(500) < 0.4).astype(float)
    twice, clusters = np.repeat(once, 2), np.repeat(np.arange(500), 2)
    assert standard_error(twice, clusters) == pytest.approx(standard_error(once))
    assert standard_error(once) == pytest.approx(np.std(once, ddof=1) / np.sqrt(500))
    got = mde_of(twice, clusters=clusters)
    assert (got["n"], got["clusters"]) == (1000, 500) and got["fewest"] == fewest(500)
    assert got["independent"] == pytest.approx(mde_of(once)["independent"])
    assert got["entries"] == {"fewest": fewest(1000), "independent": pytest.approx(mde_of(twice)["independent"])}
    assert got["fewest"] > got["entries"]["fewest"] and got["independent"] > got["entries"]["independent"]
