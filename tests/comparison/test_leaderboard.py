"""`bench leaderboard`: ranks with intervals, paired differences Holm-corrected across runs x
metrics, the Pareto frontier, changed params, the minimum detectable effects, the same
refusals as `bench compare`; on runs made from the committed real per-query table."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from bench.cli import cli
from bench.comparison.compare import compare
from bench.comparison.leaderboard import changed_params, dominance, experiment_names, flatten, leaderboard, pareto, tied_everywhere
from bench.comparison.runs import CompareError, LoadedRun
from bench.evaluation.stats.clusters import COLUMNS as CLUSTER_COLUMNS
from bench.evaluation.stats.uncertainty import holm
from bench.reporting.leaderboard_page import as_html, markdown, page

REAL = Path(__file__).resolve().parents[2] / "reports" / "per_query" / "dev.parquet"
K = 10
BUDGET = {"conversation": {"amount": 1700, "unit": "chars"}, "pdf": {"amount": 16000, "unit": "chars"}}


def real_table() -> pd.DataFrame:
    """The committed real table's pdf and conversation rows without their cluster labels (the
    clustered comparison is tested in tests/comparison/test_compare.py), with a recall@budget column
    (recall@10 where the top 10 cost at most 4,000 units, else 0) and coverage@budget."""
    t = pd.read_parquet(REAL)
    t = t[t["modality"].isin(["pdf", "conversation"])].reset_index(drop=True)
    t = t.drop(columns=[c for c in CLUSTER_COLUMNS.values() if c in t.columns])  # every entry its own cluster here
    t = t.drop(columns=["objective"])  # computed again from its parts when loaded (better/worse change recall@budget)
    cheap = t["retrieved_extent@10"].fillna(np.inf) <= 4000
    t["recall@budget"] = np.where(t["recall@10"].isna(), np.nan, np.where(cheap, t["recall@10"], 0.0))
    t["coverage@budget"] = np.where(t["coverage@10"].isna(), np.nan, np.where(cheap, t["coverage@10"], 0.0))
    return t


SETS = {"bench/sets/locomo.jsonl": "d1943f9bf069c170abe74c35aa3c4b07af6e006261c8cb837abf2c77f07b9f64",
        "bench/sets/mmlongbench.jsonl": "15a147993cbcd440088675d2e3109adb0633444bb2ec7f19ebd43e8594b9d402"}


def run_of(label: str, table: pd.DataFrame, *, k: int = K, budget: dict | None = None, strategy: str = "turn",
           sets: dict | None = None) -> LoadedRun:
    doc = {"run": {"k": k, "system": "bm25", "chunking": {"conversation": {"strategy": strategy}},
                   "budget": BUDGET if budget is None else budget,
                   "false_recall_rule": {"conversation": {"rule": "abstention"}, "pdf": {"rule": "abstention"}}},
           "sha256": {"manifest": "-", "sets": SETS if sets is None else sets}}
    return LoadedRun(label, table, doc)


def better(table: pd.DataFrame, share: float, seed: int = 0, column: str = "recall@budget") -> pd.DataFrame:
    """`table` with `share` of its answerable misses turned into hits (recall@10 and the budget column)."""
    out = table.copy()
    rng = np.random.default_rng(seed)
    miss = np.flatnonzero((out[column] == 0).to_numpy() & ~out["unanswerable"].to_numpy(bool))
    pick = rng.choice(miss, size=int(share * len(miss)), replace=False)
    out.loc[pick, [column, "recall@10"]] = 1.0
    return out


def _hits(table: pd.DataFrame, n: int, seed: int = 0) -> pd.DataFrame:
    """`table` with `n` of its answerable conversation misses turned into hits (recall@10 and recall@budget)."""
    out = table.copy()
    miss = np.flatnonzero((out["recall@budget"] == 0).to_numpy() & ~out["unanswerable"].to_numpy(bool)
                          & (out["modality"] == "conversation").to_numpy())
    out.loc[np.random.default_rng(seed).choice(miss, size=n, replace=False), ["recall@budget", "recall@10"]] = 1.0
    return out


def worse(table: pd.DataFrame, share: float, seed: int = 0) -> pd.DataFrame:
    out = table.copy()
    rng = np.random.default_rng(seed)
    hit = np.flatnonzero((out["recall@budget"] > 0).to_numpy())
    pick = rng.choice(hit, size=int(share * len(hit)), replace=False)
    out.loc[pick, ["recall@budget", "recall@10", "content_mrr", "content_ndcg@10"]] = 0.0
    return out


@pytest.fixture(scope="module")
def board() -> dict:
    base = real_table()
    runs = [run_of("base", base), run_of("same", base.copy()), run_of("up", better(base, 0.4), strategy="window"),
            run_of("down", worse(base, 0.4), strategy="session")]
    params = [{"chunking": {"conversation": {"strategy": s}}, "executor": {"workers": w}}
              for s, w in (("turn", 1), ("turn", 2), ("window", 1), ("session", 1))]
    return leaderboard(runs, params=params, k=K, resamples=300, permutations=2000, seed=1)


def _group(board: dict, name: str) -> dict:
    return next(g for g in board["groups"] if g["group"] == name)


def test_ranks_and_intervals_separate_clear_runs_and_tie_identical_ones(board: dict) -> None:
    rows = {r["run"]: r for r in _group(board, "overall")["rows"]}
    assert rows["up"]["rank"] == 1 and rows["up"]["rank_ci95"] == [1, 1]
    assert rows["down"]["rank"] == 4 and rows["down"]["rank_ci95"] == [4, 4]
    # identical runs share every rank: statistically (and exactly) tied
    assert rows["base"]["rank"] == rows["same"]["rank"] == 2 and rows["base"]["rank_ci95"] == rows["same"]["rank_ci95"] == [2, 2]


def test_differences_equal_bench_compare_before_holm_and_holm_spans_runs_and_metrics_of_a_table(board: dict) -> None:
    diffs = [d for g in board["groups"] for d in g["diffs"]]
    assert {d["run"] for d in diffs} == {"same", "up", "down"}
    base, up = real_table(), better(real_table(), 0.4)
    alone = {(r["modality"], r["metric"]): r for r in compare(base, up, resamples=300, permutations=2000, seed=1)["rows"]}
    for d in diffs:
        if d["run"] == "up" and (d["modality"], d["metric"]) in alone:
            r = alone[(d["modality"], d["metric"])]
            assert (d["diff"], d["ci95"], d["p"]) == (r["diff"], r["ci95"], r["p"])
    for g in board["groups"]:  # Holm over each table's runs x metrics
        assert [d["p_holm"] for d in g["diffs"]] == pytest.approx(list(holm([d["p"] for d in g["diffs"]])))
        assert g["smallest_p_holm"] == pytest.approx(len(g["diffs"]) * 2 / 2001)
    same = [d for d in diffs if d["run"] == "same"]
    assert same and all(d["diff"] == 0 and d["p"] == 1.0 and not d["significant"] for d in same)
    up_recall = next(d for d in diffs if d["run"] == "up" and d["modality"] == "overall" and d["metric"] == "recall@budget")
    down_recall = next(d for d in diffs if d["run"] == "down" and d["modality"] == "overall" and d["metric"] == "recall@budget")
    assert up_recall["significant"] and up_recall["diff"] > 0 and down_recall["significant"] and down_recall["diff"] < 0


def test_changed_params_leave_out_where_work_runs(board: dict) -> None:
    changed = {r["label"]: r["changed"] for r in board["runs"]}
    assert changed == {"base": {}, "same": {}, "up": {"chunking.conversation.strategy": "window"},
                       "down": {"chunking.conversation.strategy": "session"}}
    assert flatten({"a": {"b": 1, "c": [1, 2]}}) == {"a.b": 1, "a.c": [1, 2]}
    assert changed_params({"a": 1}, {"a": 1, "b": 2}) == {"b": None}


def test_the_frontier_and_costs(board: dict) -> None:
    conv = _group(board, "conversation")
    cart = {r["run"]: r["cartridge_p50@10"] for r in conv["rows"]}
    assert cart["base"] == pytest.approx(np.percentile(real_table().query("modality == 'conversation' and not unanswerable")["retrieved_extent@10"].dropna(), 50))
    front = {r["run"]: r["frontier"] for r in conv["rows"]}
    assert front["up"] and not front["down"]  # same cost and latency, lower recall@budget
    assert _group(board, "overall")["rows"][0]["cartridge_p50@10"] is None  # units differ: no pooled cost
    # by hand: (quality up, cost down)
    assert pareto([[0.5, 10], [0.6, 10], [0.6, 5], [0.4, 1], [None, 0]], [True, False]) == [False, False, True, True, True]
    assert pareto([[0.5, 10], [None, 10]], [True, False]) == [True, False]  # a missing value counts as the worst
    assert pareto([[0.5, 10], [0.5, 10]], [True, False]) == [True, True]  # equal points dominate neither
    # ties: latency within a floor of 5, quality tied by a matrix (pairs whose paired interval holds 0)
    assert pareto([[0.5, 10.0], [0.5, 12.0]], [True, False], [None, 5.0]) == [True, True]
    assert pareto([[0.5, 10.0], [0.5, 16.0]], [True, False], [None, 5.0]) == [True, False]
    tied = np.array([[True, True], [True, True]])
    assert pareto([[0.50, 10.0], [0.51, 10.0]], [True, False], [tied, None]) == [True, True]
    assert pareto([[0.50, 10.0], [0.51, 10.0]], [True, False], [~tied | np.eye(2, dtype=bool), None]) == [False, True]
    assert (dominance([[0.5, 1.0], [0.6, 1.0]], [True, False]) == np.array([[False, False], [True, False]])).all()
    assert tied_everywhere([[0.5, 10.0], [0.5, 12.0]], [True, False], [None, 5.0]).all()


def _packed(table: pd.DataFrame, atoms_per_top_k: float = 1.0) -> pd.DataFrame:
    """`table` with a cartridge@budget column: what the budget packs from a ranking whose
    atoms are `atoms_per_top_k` times as many per top 10 (here: ten top 10s' extent, at most
    the modality's budget; NaN where cartridge@10 is NaN)."""
    amount = table["modality"].map({m: c["amount"] for m, c in BUDGET.items()}).to_numpy(float)
    return table.assign(**{"cartridge@budget": np.minimum(table["retrieved_extent@10"].to_numpy(float) * 10 * atoms_per_top_k, amount)})


def test_the_frontier_treats_differences_within_noise_as_ties() -> None:
    base = real_table()
    runs = [run_of("base", base), run_of("same", base.copy()),
            run_of("slightly", _hits(base, 4, seed=3)),  # 4 conversation misses turned into hits: noise
            run_of("faster", base.assign(latency_ms=base["latency_ms"] * 0.5)),  # 0.3 ms faster: within the floor
            run_of("slow", base.assign(latency_ms=base["latency_ms"] + 20.0)),  # 20 ms slower: beyond it
            run_of("up", better(base, 0.4))]
    board = leaderboard(runs, k=K, resamples=200, permutations=200, seed=2)
    conv = {r["run"]: r for r in _group(board, "conversation")["rows"]}
    assert conv["slightly"]["values"]["recall@budget"] > conv["base"]["values"]["recall@budget"]  # higher, within noise
    assert {r: conv[r]["frontier"] for r in conv} == {"base": False, "same": False, "slightly": False, "faster": False,
                                                       "slow": False, "up": True}
    assert conv["up"]["tied_with"] == [] and conv["slow"]["dominated_by"] == ["base", "same", "slightly", "faster", "up"]
    assert set(conv["base"]["tied_with"]) == {"same", "slightly", "faster"} and conv["base"]["dominated_by"] == ["up"]
    without_up = leaderboard(runs[:-1], k=K, resamples=200, permutations=200, seed=2)
    front = {r["run"]: r["frontier"] for r in _group(without_up, "overall")["rows"]}
    assert front == {"base": True, "same": True, "slightly": True, "faster": True, "slow": False}
    md = markdown(without_up)
    assert "| ◆ ≈ same, slightly, faster |" in md and "below base, same, slightly +1 |" in md
    assert "latency p50 within 5 ms" in md


def test_the_frontier_s_cost_is_what_the_budget_packs_when_the_table_says() -> None:
    base = real_table().drop(columns=["cartridge@budget"], errors="ignore")  # as a table from before the column
    # finer atoms: the same recall@budget, a top 10 a twentieth as long, and the budget packed alike
    fine = base.assign(**{"retrieved_extent@10": base["retrieved_extent@10"] / 20})
    old = leaderboard([run_of("base", base), run_of("fine", fine)], k=K, resamples=200, permutations=500)
    assert not old["cost"]["packed"] and "has no cartridge@budget column" in old["cost"]["note"]
    assert {r["run"]: r["frontier"] for r in _group(old, "pdf")["rows"]} == {"base": False, "fine": True}  # cartridge@10 buys it
    assert "- Cost: the per-query table of base, fine has no cartridge@budget column" in markdown(old)
    new = leaderboard([run_of("base", _packed(base)), run_of("fine", _packed(fine, 20.0))], k=K, resamples=200, permutations=500)
    assert new["cost"] == {"column": "cartridge@budget", "name": "cartridge@budget mean", "packed": True, "note": None}
    pdf = {r["run"]: r for r in _group(new, "pdf")["rows"]}
    assert pdf["base"]["cost"] == pytest.approx(np.nanmean(
        _packed(base).query("modality == 'pdf' and not unanswerable and not failed")["cartridge@budget"]))
    assert pdf["fine"]["cost"] == pytest.approx(pdf["base"]["cost"]) and 0 < pdf["base"]["cost"] <= 16000  # both pack alike
    assert pdf["base"]["frontier"] and pdf["fine"]["frontier"] and pdf["base"]["tied_with"] == ["fine"]
    assert "| cartridge@budget mean | frontier |" in markdown(new)


def test_minimum_detectable_effects_per_modality(board: dict) -> None:
    mde = board["mde"]
    assert set(mde) == {"conversation", "pdf", "overall"}
    for group, cells in mde.items():
        assert set(cells) == {"objective", "recall@10", "recall@budget"}, group
        for cell in cells.values():
            assert 0 < cell["fewest"] <= cell["typical"] < cell["independent"] < 1, (group, cell)
            # no cluster labels in these tables: every entry its own cluster, the figures as if independent
            assert cell["clusters"] == cell["n"] and cell["entries"]["fewest"] == cell["fewest"], (group, cell)
    # more entries, smaller effects
    assert mde["conversation"]["recall@10"]["fewest"] < mde["pdf"]["recall@10"]["fewest"]
    # the typical pair: the median spread of the runs that differ (the identical one left out), never below fewest
    base, up, down = (real_table(), better(real_table(), 0.4), worse(real_table(), 0.4))
    conv = lambda t: t.loc[(t["modality"] == "conversation") & ~t["unanswerable"], "recall@budget"].to_numpy(float)  # noqa: E731
    sds = [np.std(conv(t) - conv(base), ddof=1) for t in (up, down)]
    assert mde["conversation"]["recall@budget"]["typical"] == pytest.approx(max(2.8016 * np.median(sds) / np.sqrt(len(conv(base))),
                                                                            mde["conversation"]["recall@budget"]["fewest"]), rel=1e-3)


def test_markdown_json_and_html(board: dict) -> None:
    md = markdown(board)
    assert md.startswith("# Leaderboard: 4 runs against base (k = 10)")
    for needle in ("## overall", "## conversation", "## pdf", "| 1 [1, 1] | up |", "◆", "p_holm", "▲", "▼",
                   "`chunking.conversation.strategy=window`", "## Minimum detectable effects", "abstention"):
        assert needle in md, needle
    json.loads(json.dumps(board, allow_nan=False))
    html = page(board)
    assert html.count("<svg") == 2 and "<table>" in html and "Pareto frontier" in html  # per modality; latency p50 within the floor: no overall picture
    assert as_html("## overall\n\n| a | `b` |\n|---|---|\n| 1 | 2 |\n") == (
        "<h3>overall</h3>\n<table><tr><th>a</th><th><code>b</code></th></tr><tr><td>1</td><td>2</td></tr></table>")


# -- refusals: those of bench compare, one line -------------------------------------------------


def test_refusals_are_one_line() -> None:
    base = real_table()
    cases = [
        ([run_of("a", base), run_of("b", base, k=5)], "different k"),
        ([run_of("a", base), run_of("b", base, budget={"pdf": {"amount": 1, "unit": "chars"}})], "different budgets"),
        ([run_of("a", base), run_of("b", base.iloc[: len(base) // 2])], "different query sets"),
        ([run_of("a", base), run_of("b", base.drop(columns=["failed"]))], "no column 'failed'"),
        ([run_of("a", base), run_of("b", base.assign(content_mrr=np.where(base["unanswerable"], np.nan, 1.5)))], "outside [0, 1]"),
        ([run_of("a", base), run_of("b", base, sets={**SETS, "bench/sets/locomo.jsonl": "0" * 64})],
         "a and b were evaluated over different set files (1 of 2: bench/sets/locomo.jsonl sha256 d1943f9bf069… in a, 000000000000… in b)"),
    ]
    for runs, needle in cases:
        with pytest.raises(CompareError) as err:
            leaderboard(runs, resamples=20, permutations=20)
        assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)
    other = [run_of("a", base), run_of("b", base, sets={"bench/sets/locomo.jsonl": SETS["bench/sets/locomo.jsonl"]})]
    allowed = leaderboard(other, resamples=20, permutations=20, allow_different_sets=True)
    assert allowed["sets"] == {"b": "different set files, allowed (bench/sets/mmlongbench.jsonl only in the baseline)"}
    assert "- Set files against the baseline: different set files, allowed" in markdown(allowed)
    with pytest.raises(CompareError, match="not a leaderboard measure"):
        leaderboard([run_of("a", base), run_of("b", base)], resamples=20, permutations=20, rank_by="precision@10")


# -- the command: folders, revisions, experiments ------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@x"}).stdout.strip()


def _write(folder: Path, run: LoadedRun, strategy: str) -> None:
    (folder / "reports" / "per_query").mkdir(parents=True, exist_ok=True)
    (folder / "reports" / "metrics").mkdir(parents=True, exist_ok=True)
    run.per_query.to_parquet(folder / "reports" / "per_query" / "dev.parquet")
    (folder / "reports" / "metrics" / "dev.json").write_text(json.dumps(run.metrics))
    (folder / "params.yaml").write_text(f"chunking:\n  conversation:\n    strategy: {strategy}\nmetrics:\n  k: 10\n  bootstrap_resamples: 100\n")


def test_the_command_over_experiments_of_head(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    base = real_table()
    _git(repo, "init", "-q")
    _write(repo, run_of("x", base), "turn")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    head = _git(repo, "rev-parse", "HEAD")
    for name, table, strategy in (("sunny-oaks", better(base, 0.3), "window"), ("gray-elms", worse(base, 0.3), "session")):
        _write(repo, run_of(name, table), strategy)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", name)
        _git(repo, "update-ref", f"refs/exps/{head[:2]}/{head[2:]}/{name}", _git(repo, "rev-parse", "HEAD"))
        _git(repo, "reset", "-q", "--hard", head)
    _git(repo, "update-ref", "refs/exps/zz/other-baseline/not-mine", head)  # an experiment of another baseline
    assert experiment_names(repo) == ["gray-elms", "sunny-oaks"]
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        out = CliRunner().invoke(cli, ["leaderboard", "--all", "--json", str(tmp_path / "b.json"), "--html", str(tmp_path / "b.html")])
        none = CliRunner().invoke(cli, ["leaderboard"])
        bad = CliRunner().invoke(cli, ["leaderboard", "no-such-run"])
        _write(tmp_path / "edited", run_of("edited", base, sets={"bench/sets/locomo.jsonl": "0" * 64}), "turn")
        edited = CliRunner().invoke(cli, ["leaderboard", str(tmp_path / "edited")])
        allowed = CliRunner().invoke(cli, ["leaderboard", str(tmp_path / "edited"), "--allow-different-sets", "--permutations", "200"])
    finally:
        os.chdir(cwd)
    assert out.exit_code == 0, out.output
    assert "| 1 [1, 1] | sunny-oaks |" in out.output and "`chunking.conversation.strategy=session`" in out.output
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["baseline"] == "HEAD" and doc["resamples"] == 100 and [r["label"] for r in doc["runs"]] == ["HEAD", "gray-elms", "sunny-oaks"]
    assert (tmp_path / "b.html").read_text().count("<svg") == 2  # per modality; no sub-millisecond latency picture
    assert allowed.exit_code == 0 and "- Set files against the baseline: different set files, allowed" in allowed.output, allowed.output
    for result, needle in ((none, "no run to rank"), (bad, "no-such-run"), (edited, "were evaluated over different set files")):
        assert result.exit_code == 1 and needle in result.output and result.output.strip().count("\n") == 0, result.output
