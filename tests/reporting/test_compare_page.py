"""The A/B page's data (bench.reporting.compare_page) on the committed per-query table, and the
leaderboard's short labels; the page itself in a real browser is tests/reporting/test_pages_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from bench.cli import cli
from bench.comparison.compare import compare
from bench.comparison.runs import LoadedRun
from bench.evaluation.measures import measures
from bench.project.layout import PER_QUERY
from bench.reporting.compare_page import build, outcome_measures, outcomes, page_data, verdict_measures
from bench.reporting.leaderboard_page import page_name, short_labels

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dev() -> pd.DataFrame:
    """The project's committed per-query table (the default eight-data-set run)."""
    return pd.read_parquet(ROOT / PER_QUERY)


def test_a_failed_query_of_b_is_a_loss_where_a_found_something_and_a_tie_where_it_did_not(dev):
    budget, at_k = outcome_measures(10)
    b = dev.copy()
    ans = ~b["unanswerable"].to_numpy(bool)
    flip = ans & (np.arange(len(b)) % 7 == 0)
    b.loc[flip, "failed"] = True
    got = outcomes(dev, b, budget)
    a_found = dev[budget.column].fillna(0).to_numpy(float) > 0
    assert set(got[~ans]) == {""}  # unanswerable: outside recall@budget's denominator
    assert (got[flip & a_found] == "loss").all() and (got[flip & ~a_found] == "tie").all()
    assert (got[ans & ~flip] == "tie").all()
    # the counts agree with bench compare's win/tie/loss over the same pairs
    row = next(r for r in compare(dev, b, k=10, resamples=20, permutations=20)["rows"]
               if r["modality"] == "overall" and r["metric"] == budget.name)
    assert (row["wins"], row["ties"], row["losses"]) == tuple(int((got == o).sum()) for o in ("win", "tie", "loss"))
    assert at_k.name == "recall@10"


def test_page_data_holds_every_shared_query_and_the_verdicts_columns_from_the_catalogue(dev):
    b = dev.iloc[1:].copy()  # one query only in A: left out, and counted
    b.loc[b.index[:50], "recall@budget"] = 1.0
    data = page_data(dev, b, 10)
    assert len(data["ids"]) == len(dev) - 1 and data["only"] == [1, 0]
    assert data["ids"] == sorted(data["ids"])
    headed = [m.name for m in measures(10) if m.heading is not None]
    assert [m["name"] for m in data["measures"]] == [m.name for m in verdict_measures(10) if m.column in dev.columns
                                                     and m.name != "latency_p95_ms"]
    assert set(m["name"] for m in data["measures"]) <= set(headed)
    i = data["ids"].index(str(b["query_id"].iloc[0]))
    assert data["values"]["recall@budget"][1][i] == 1.0
    assert data["modalities"] == sorted(dev["modality"].unique())
    json.dumps(data, allow_nan=False)  # strict JSON: the page parses it


def test_the_page_of_two_revisions_has_every_query_no_cartridge_and_no_network(dev, tmp_path):
    """Runs named by revision: no data/ outputs, so the page says so; questions come from the sets."""
    b = dev.copy()
    b.loc[b.index[::3], "recall@budget"] = 0.0
    a_run, b_run = LoadedRun("HEAD", dev, {}), LoadedRun("HEAD~1", b, {})
    result = compare(dev, b, k=10, resamples=20, permutations=50)
    text = build(result, a_run, b_run, files=(None, None), set_files=sorted((ROOT / "bench" / "sets").glob("*.jsonl")))
    assert "cartridges are not shown" in text
    assert not re.search(r"""(src|href)=["']?https?:""", text)  # nothing loads from the network
    data = json.loads(re.search(r"<script type='application/json' id=data>(.*?)</script>", text, re.S).group(1))
    assert len(data["ids"]) == len(dev)


def test_short_labels(tmp_path):
    folder = tmp_path / "runs" / "window-chunks"
    (folder / "reports" / "per_query").mkdir(parents=True)
    parquet = folder / "reports" / "per_query" / "dev.parquet"
    parquet.write_bytes(b"")
    other = tmp_path / "more" / "window-chunks"
    other.mkdir(parents=True)
    specs = ["HEAD", str(folder), "0123456789abcdef0123456789abcdef01234567", "exp-calm-fern", str(other), str(parquet)]
    got = short_labels(specs, {"base": "HEAD"})
    # a colliding label keeps its spec in full
    assert got == ["base", "window-chunks", "0123456", "exp-calm-fern", str(other), str(parquet)]
    assert page_name("board", "main~1 / x") == "board.main_1_x.html"


def test_label_option_must_name_a_ranked_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["leaderboard", str(ROOT), str(ROOT / "reports"), "--label", "x=nope"])
    assert res.exit_code == 1 and "--label names a run that is not ranked: 'nope'" in res.output
    res = CliRunner().invoke(cli, ["leaderboard", str(ROOT), str(ROOT / "reports"), "--label", "no-equals-sign"])
    assert res.exit_code == 2 and "expected NAME=RUN" in res.output


def test_page_data_says_which_answer_abstained_and_keeps_the_ranking_s_value(dev):
    b = dev.copy()
    answered = dev.index[(dev["abstained"] == 0) & (dev["recall@10"] == 1) & ~dev["unanswerable"]][:5]
    b.loc[answered, ["abstained", "recall@10"]] = [1.0, 0.0]  # B abstains where A found the gold: its ranking still holds it
    data = page_data(dev, b, 10)
    at = {q: i for i, q in enumerate(data["ids"])}
    for q in dev.loc[answered, "query_id"].astype(str):
        i = at[q]
        assert data["abstained"][i] == [0, 1]
        assert data["values"]["recall@10"][1][i] == 0.0 and data["ranking"]["recall@10"][1][i] == 1.0
    assert sum(x[0] for x in data["abstained"]) == int((dev["abstained"] == 1).sum())
    assert set(data["ranking"]) == {"recall@10"}  # the table keeps the ranking's value of recall@k only


def test_the_summary_shows_holder_and_temporal_as_bench_gate_tests_them(dev):
    """bench compare does not test holder and temporal correctness; bench gate does (its primary
    measures): the page shows its paired difference, W/T/L and verdict instead of "not tested"."""
    from bench.comparison.gate import gate
    from bench.reporting.compare_page import summary_html
    from bench.reporting.compare_report import gated_rows

    b = dev.copy()
    b.loc[b["modality"] == "conversation", "holder_ok"] = 0.0  # B hands conversations another holder's atoms
    doc = json.loads((ROOT / "reports" / "metrics" / "dev.json").read_text())
    a_run, b_run = LoadedRun("A", dev, doc), LoadedRun("B", b, doc)
    result = compare(dev, b, k=10, resamples=30, permutations=200)
    gated = gated_rows(result, a_run, b_run)
    assert gated["refused"] is None and {"conversation holder_correctness", "overall temporal_correctness"} <= set(gated["rows"])
    alone = gate(a_run, b_run, k=10, resamples=30, permutations=200, allow_different_sets=True)
    row = next(r for r in alone.rows if (r["modality"], r["metric"]) == ("conversation", "holder_correctness"))
    assert gated["rows"]["conversation holder_correctness"]["diff"] == row["diff"] < 0 and row["significant"]
    html = summary_html(result, doc, doc, 10, gated)
    conv = html[html.index("<td rowspan=3 class=group>conversation</td>"):html.index("<td rowspan=3 class=group>image</td>")]
    assert "as bench gate A tests it: fails the gate" in conv and f"over its {gated['family']} gated rows" in conv
    assert conv.count("not tested") == 3  # AUROC, latency p50 and p95: neither tool tests them
    assert "not tested" in summary_html(result, doc, doc, 10).split("<td rowspan=3 class=group>code</td>")[1][:4000]


def test_the_page_says_why_a_side_has_no_cartridge(dev):
    result = compare(dev, dev, k=10, resamples=10, permutations=20)
    text = build(result, LoadedRun("HEAD", dev, {}), LoadedRun("x", dev, {}), files=("commit 1234567 has no dvc.lock", None),
                 set_files=sorted((ROOT / "bench" / "sets").glob("*.jsonl")))
    assert "A&#x27;s cartridges are not shown: commit 1234567 has no dvc.lock." in text
    assert "B&#x27;s cartridges are not shown: it is not a project folder holding its data/ outputs." in text
