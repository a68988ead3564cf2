"""`bench compare`: paired differences, intervals, Holm, win/tie/loss; finding runs."""

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
from bench.comparison.compare import check_values, compare
from bench.comparison.runs import CompareError, LoadedRun, common_k, load_run
from bench.project.layout import DEV_METRICS, PER_QUERY
from bench.reporting.compare_report import markdown


def table(seed: int, n: int = 300, shift: float = 0.0, modality_split: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    unans = np.arange(n) % 5 == 0
    recall = (rng.random(n) < 0.5).astype(float)
    df = pd.DataFrame({
        "query_id": [f"q{i:04d}" for i in range(n)],
        "modality": np.where(np.arange(n) % 2 == 0, "pdf", "conversation") if modality_split else "pdf",
        "unanswerable": unans, "failed": False,
        "recall@10": np.where(unans, np.nan, recall), "content_mrr": np.where(unans, np.nan, recall / 2),
        "content_ndcg@10": np.where(unans, np.nan, recall / 3), "coverage@10": np.where(unans, np.nan, recall),
        "precision@10": np.where(unans, np.nan, recall * 0.1), "iou@10": np.where(unans, np.nan, recall * 0.1),
        "false_recall": np.where(unans, (rng.random(n) < 0.3).astype(float), np.nan),
        "tied@10": rng.integers(0, 2, n),
    })
    return df


def test_identical_runs_are_not_significant():
    a = table(1)
    res = compare(a, a.copy(), resamples=200, permutations=2000)
    assert res["rows"] and all(r["p"] == 1.0 and not r["significant"] and r["diff"] == 0 for r in res["rows"])
    assert all(r["wins"] == 0 and r["losses"] == 0 for r in res["rows"])
    md = markdown(res, "A", "B")
    assert "No difference is significant" in md


def test_clear_improvement_is_significant_with_counts():
    a = table(1)
    b = a.copy()
    ans = ~b["unanswerable"]
    gain = ans & (b["recall@10"] == 0) & (np.arange(len(b)) % 3 == 0)
    b.loc[gain, ["recall@10", "coverage@10"]] = 1.0
    res = compare(a, b, resamples=500, permutations=5000, seed=1)
    rows = {(r["modality"], r["metric"]): r for r in res["rows"]}
    r = rows[("overall", "recall@10")]
    assert r["n"] == int(ans.sum())
    assert r["wins"] == int(gain.sum()) and r["losses"] == 0 and r["ties"] == r["n"] - r["wins"]
    assert r["diff"] == pytest.approx(gain.sum() / ans.sum())
    assert r["ci95"][0] > 0 and r["significant"] and r["verdict"] == "B better"
    assert r["p_holm"] >= r["p"]
    assert not rows[("overall", "content_mrr")]["significant"]
    # Holm runs across every row compared (all modalities and metrics)
    ps = sorted(x["p"] for x in res["rows"])
    assert min(x["p_holm"] for x in res["rows"]) == pytest.approx(min(1.0, len(ps) * ps[0]))
    assert res["ties"]["a"]["tied_positions"] == int(a["tied@10"].sum())


def test_lower_is_better_for_false_recall():
    a = table(2)
    b = a.copy()
    b.loc[b["unanswerable"], "false_recall"] = 0.0
    res = compare(a, b, resamples=200, permutations=2000)
    r = next(x for x in res["rows"] if x["modality"] == "overall" and x["metric"] == "false_recall")
    assert r["diff"] < 0 and r["wins"] == int(a.loc[a["unanswerable"], "false_recall"].sum()) and r["losses"] == 0


def test_failed_queries_count_zero_and_unpaired_are_reported():
    a = table(3)
    b = a.iloc[:-10].copy()
    b.loc[b.index[:5], "failed"] = True
    with pytest.raises(CompareError, match=r"different query sets: 10 of A's 300 queries are not in B"):
        compare(a, b, resamples=100, permutations=1000)  # 3.3% unpaired: beyond the default 1% tolerance
    res = compare(a, b, resamples=100, permutations=1000, max_unpaired=0.05)
    assert markdown(res, "A", "B").splitlines()[0] == (
        "# Comparison: B vs A (k = 10) on the 290 queries both runs share (10 only in A and 0 only in B are left out, within the 5.0% tolerance)")
    assert res["queries"] == {"both": len(a) - 10, "only_a": 10, "only_b": 0}
    r = next(x for x in res["rows"] if x["modality"] == "overall" and x["metric"] == "recall@10")
    assert r["losses"] == int(a.iloc[:5]["recall@10"].fillna(0).gt(0).sum())


def test_different_sets_are_refused():
    a = table(4)
    b = a.copy()
    b.loc[b.index[1], "unanswerable"] = True
    with pytest.raises(CompareError, match="unanswerable"):
        compare(a, b)


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _write_run(root: Path, frame: pd.DataFrame, strategy: str) -> None:
    (root / "reports/per_query").mkdir(parents=True, exist_ok=True)
    (root / "reports/metrics").mkdir(parents=True, exist_ok=True)
    frame.to_parquet(root / "reports/per_query/dev.parquet", index=False)
    (root / "reports/metrics/dev.json").write_text(json.dumps({"run": {"system": "bm25", "chunking": {"pdf": {"strategy": strategy}}}}))


def test_runs_from_folders_git_revisions_and_experiment_refs(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "bench").mkdir()
    (repo / "params.yaml").write_text("metrics:\n  bootstrap_resamples: 200\n  bootstrap_seed: 3\n")
    _git(repo, "init", "-q")
    _write_run(repo, table(5), "page")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "page")
    better = table(5)
    better.loc[~better["unanswerable"], "recall@10"] = 1.0
    _write_run(repo, better, "window")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "window")
    # a DVC experiment is a commit under refs/exps/.../<name>
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
    _git(repo, "update-ref", "refs/exps/ab/cdef0123/brisk-oaks", sha)

    assert load_run("HEAD~1", repo, PER_QUERY, DEV_METRICS).metrics["run"]["chunking"]["pdf"]["strategy"] == "page"
    assert load_run("brisk-oaks", repo, PER_QUERY, DEV_METRICS).per_query["recall@10"].max() == 1.0
    assert "window" in load_run(str(repo), repo, PER_QUERY, DEV_METRICS).describe()
    with pytest.raises(CompareError, match="not a folder, a git revision or a DVC experiment"):
        load_run("no-such-exp", repo, PER_QUERY, DEV_METRICS)

    cwd = os.getcwd()
    os.chdir(repo)
    try:
        out = CliRunner().invoke(cli, ["compare", "HEAD~1", "brisk-oaks", "--json", str(tmp_path / "c.json")])
        bad = CliRunner().invoke(cli, ["compare", "HEAD~1", "nope"])
    finally:
        os.chdir(cwd)
    assert out.exit_code == 0, out.output
    assert "| overall | recall@10 |" in out.output and "B better" in out.output and "page" in out.output
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["resamples"] == 200 and doc["seed"] == 3 and doc["rows"]
    assert bad.exit_code != 0 and "nope" in bad.output


# -- refusals: comparisons that cannot mean anything --------------------------------

REAL = Path(__file__).resolve().parents[2] / "reports" / "per_query" / "dev.parquet"


def test_same_run_over_fewer_data_sets_is_refused_not_significant():
    """The committed 8-data-set table against its own pdf + conversation rows (what a
    2-data-set run of the same system and chunking pairs with): refused, one line."""
    a = pd.read_parquet(REAL)
    b = a[a["modality"].isin(["pdf", "conversation"])].reset_index(drop=True)
    with pytest.raises(CompareError) as err:
        compare(a, b, resamples=50, permutations=200)
    msg = str(err.value)
    only_a = int((~a["modality"].isin(["pdf", "conversation"])).sum())
    assert msg.startswith(f"A and B were evaluated on different query sets: {only_a} of A's {len(a)} queries are not in B and 0 of B's {len(b)} are not in A")
    assert "\n" not in msg


def test_zero_rows_and_zero_pairs_are_refused():
    a = table(6)
    with pytest.raises(CompareError, match="^B: per-query table has no rows: nothing to compare$"):
        compare(a, a.iloc[:0])
    b = a.assign(query_id=a["query_id"] + "x")
    with pytest.raises(CompareError, match="share no query_id .*zero paired queries"):
        compare(a, b, max_unpaired=1.0)


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.drop(columns=["failed"]), "B: malformed per-query table: no column 'failed' (needs query_id, modality, unanswerable, failed)"),
    (lambda d: d.assign(query_id=["q0000"] * len(d)), "B: malformed per-query table: query_id 'q0000' appears more than once"),
    (lambda d: d.assign(unanswerable="yes"), "B: malformed per-query table: column 'unanswerable' must hold true/false only"),
    (lambda d: d.assign(**{"recall@10": "high"}), "B: malformed per-query table: recall@10 holds a non-number ('high', query q0000)"),
    (lambda d: d.assign(content_mrr=np.inf), "B: malformed per-query table: content_mrr holds an infinite value (query q0000)"),
    (lambda d: d.drop(columns=[c for c in d.columns if c.startswith("recall@")]), "B: per-query table has no recall@10 column (k = 10)"),
])
def test_malformed_tables_are_one_line(mutate, message):
    a = table(7)
    with pytest.raises(CompareError) as err:
        compare(a, mutate(a.copy()), resamples=50, permutations=200)
    assert str(err.value) == message


def test_extra_metric_columns_are_tolerated():
    a = table(8).assign(abstention_rate=0.0, auroc_unanswerable=np.nan, abstained=False)
    res = compare(a, a.copy().drop(columns=["content_ndcg@10"]), resamples=50, permutations=200)
    assert {r["metric"] for r in res["rows"]} == {"recall@10", "content_mrr", "coverage@10", "precision@10", "iou@10", "false_recall", "abstention_rate"}


def test_cli_refusals_are_one_line_exit_1(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _write_run(a, table(9), "page")
    _write_run(b, table(9).drop(columns=["failed"]), "page")
    empty = tmp_path / "empty"
    _write_run(empty, table(9).iloc[:0], "page")
    for x, y, needle in ((a, b, "no column 'failed'"), (a, empty, "no rows")):
        out = CliRunner().invoke(cli, ["compare", str(x), str(y)])
        assert out.exit_code == 1 and out.exception is None or isinstance(out.exception, SystemExit), out.output
        assert out.exit_code == 1
        assert out.output.strip().count("\n") == 0 and needle in out.output, out.output


@pytest.mark.parametrize(("mutate", "message"), [
    # values outside [0, 1]: the probe's 1.5 and -0.2 used to be paired and declared significant
    (lambda d: d.assign(**{"recall@10": np.where(d["unanswerable"], np.nan, 1.5)}),
     "B: per-query table row 1 (query q0001): column recall@10: 1.5 is outside [0, 1]"),
    (lambda d: d.assign(content_mrr=np.where(d["unanswerable"], np.nan, -0.2)),
     "B: per-query table row 1 (query q0001): column content_mrr: -0.2 is outside [0, 1]"),
    # NaN where the query is in the denominator: the denominator rule would read it as 0
    (lambda d: d.assign(**{"recall@10": np.nan}),
     "B: per-query table row 1 (query q0001): column recall@10: NaN where the query is in the denominator (answerable, not failed); it would count as 0"),
    (lambda d: d.assign(false_recall=np.nan),
     "B: per-query table row 0 (query q0000): column false_recall: NaN where the query is in the denominator (unanswerable, not failed); it would count as 0"),
    # an edited modality column: the groups are formed from it
    (lambda d: d.assign(modality=np.where(d["query_id"] == "q0004", "video", d["modality"])),
     "B: per-query table row 4 (query q0004): column modality: 'video' where A has 'pdf' for the same query: the tables disagree (edited?)"),
])
def test_values_the_paired_tests_would_misread_are_refused(mutate, message):
    a = table(11)
    with pytest.raises(CompareError) as err:
        compare(a, mutate(a.copy()), resamples=50, permutations=200)
    assert str(err.value) == message


def test_probe_of_out_of_range_values_no_longer_declares_significance():
    """The probe: B is A with every answerable recall@10 set to 1.5. Before, `bench compare`
    (default 10,000 permutations) reported recall@10 'B better', diff +1.017, p_holm 0.004;
    now nothing is compared."""
    a = table(12)
    b = a.assign(**{"recall@10": np.where(a["unanswerable"], np.nan, 1.5)})
    with pytest.raises(CompareError, match=r"outside \[0, 1\]"):
        compare(a, b, resamples=50, permutations=200)
    # NaN outside the denominator (unanswerable rows' recall) and on failed rows stays accepted
    failed = a.assign(failed=a["query_id"] == "q0001", **{"recall@10": np.where(a["query_id"] == "q0001", np.nan, a["recall@10"])})
    assert compare(a, failed, resamples=50, permutations=200)["queries"]["both"] == len(a)


def test_real_per_query_table_passes_the_value_checks():
    """The committed dev run (8,697 queries) holds no value the checks refuse."""
    from bench.comparison.compare import check_values
    from tests.conftest import ROOT

    real = pd.read_parquet(ROOT / PER_QUERY)
    check_values(real, real, 10)


def test_the_cut_off_comes_from_each_run_s_dev_json_not_from_column_names():
    a, b = table(5), table(5)
    assert common_k(LoadedRun("A", a, {"run": {"k": 5}}), LoadedRun("B", b, {"run": {"k": 5}}), 10) == 5
    assert common_k(LoadedRun("A", a), LoadedRun("B", b), 10) == 10  # no dev.json beside the tables: params metrics.k
    with pytest.raises(CompareError, match=r"^the two runs use different k \(A: 5, B: 10\): compare runs with the same metrics.k$"):
        common_k(LoadedRun("A", a, {"run": {"k": 5}}), LoadedRun("B", b, {"run": {"k": 10}}), 10)
    with pytest.raises(CompareError, match=r"^A: per-query table has no recall@5 column \(k = 5\)$"):
        compare(a, b, k=5)


def test_set_files_are_checked_by_their_sha256_and_unpaired_queries_counted_per_modality():
    from bench.comparison.compare import check_sets, unpaired

    sets = {"bench/sets/mmlongbench.jsonl": "a" * 64, "bench/sets/locomo.jsonl": "b" * 64}
    a = LoadedRun("main", table(6), {"sha256": {"sets": sets}})
    assert check_sets(a, LoadedRun("b", table(6), {"sha256": {"sets": dict(sets)}})) == "the same 2 set files (sha256)"
    edited = LoadedRun("pr", table(6), {"sha256": {"sets": {**sets, "bench/sets/locomo.jsonl": "c" * 64, "bench/sets/coco.jsonl": "d" * 64}}})
    with pytest.raises(CompareError) as err:
        check_sets(a, edited)
    assert str(err.value).startswith("main and pr were evaluated over different set files (2 of 3: bench/sets/coco.jsonl only in pr; "
                                     "bench/sets/locomo.jsonl sha256 bbbbbbbbbbbb… in main, cccccccccccc… in pr)")
    assert check_sets(a, edited, allow_different=True, labels=("BASE", "now")).startswith("different set files, allowed (bench/sets/coco")
    assert check_sets(a, LoadedRun("old", table(6), {})) == "set files not checked (no sha256 of them in the dev.json of old)"
    x = table(7)
    y = x.iloc[3:].copy()  # q0000 (pdf), q0001 (conversation), q0002 (pdf) left out
    y.loc[len(x)] = y.iloc[0].to_dict() | {"query_id": "new"}
    assert unpaired(x, y) == {"both": len(x) - 3, "only_a": 3, "only_b": 1, "only_a_by_modality": {"conversation": 1, "pdf": 2},
                              "only_b_by_modality": {"conversation": 1}}


def test_values_undefined_in_the_denominator_can_be_left_to_the_caller():
    a = table(8)
    b = a.assign(false_recall=np.nan)  # no value where the query is in its denominator
    with pytest.raises(CompareError, match="NaN where the query is in the denominator"):
        check_values(a, b, 10)
    check_values(a, b, 10, undefined_ok=True)  # bench gate fails such a measure with its reason instead
    with pytest.raises(CompareError, match="outside"):
        check_values(a, a.assign(false_recall=2.0), 10, undefined_ok=True)  # out of range is still refused


# --------------------------------------------------------------------------- clusters (issue 46, row 5)


def real_with_clusters() -> pd.DataFrame:
    """The committed dev run's per-query table, its entries' cluster labels read from the set files
    (bench.comparison.runs.with_clusters), the objective left to be computed from its parts."""
    from bench.comparison.runs import with_clusters
    from tests.conftest import ROOT

    run = with_clusters(LoadedRun("main", pd.read_parquet(ROOT / PER_QUERY)), sorted((ROOT / "bench" / "sets").glob("*.jsonl")))
    return run.per_query.drop(columns=["objective"], errors="ignore")


def asked_twice(table: pd.DataFrame, value: float, count: int) -> np.ndarray:
    """Rows of `count` LoCoMo questions asked at exactly two moments, both answerable, both scoring `value` on recall@budget."""
    conv = table.loc[(table["modality"] == "conversation") & ~table["unanswerable"].astype(bool)]
    sizes = table.groupby("cluster").size()
    both = conv.groupby("cluster")["recall@budget"].agg(["size", "min", "max"])
    picked = both.index[(both["size"] == 2) & (both["min"] == value) & (both["max"] == value) & (sizes.reindex(both.index) == 2)][:count]
    assert len(picked) == count
    return np.flatnonzero(table["cluster"].isin(picked).to_numpy())


def test_three_questions_improved_at_both_askings_weigh_as_three_questions():
    """Issue 46 row 5: the edited table's three questions found at both askings gave p 0.031 (six entries); over
    clusters of askings it is 0.25, the p-value of three questions (2 / 2^3), and by source beside it."""
    from bench.evaluation.measures import by_name

    a = real_with_clusters()
    rows = asked_twice(a, 0.0, 3)
    b = a.copy()
    b.loc[rows, "recall@budget"] = 1.0
    tested = [by_name(10)["recall@budget"]]
    got = {c: next(r for r in compare(a, b, tested=tested, resamples=200, clusters=c)["rows"] if r["modality"] == "conversation")
           for c in ("question", "entry")}
    assert got["question"]["p"] == pytest.approx(0.25) and got["question"]["clusters"] == 1099 and got["question"]["n"] == 1603
    assert got["entry"]["p"] == pytest.approx(2 / 2**6) and got["entry"]["clusters"] == 1603  # the old unit: six entries
    assert got["question"]["wins"] == 6 and got["question"]["diff"] == pytest.approx(6 / 1603)
    beside = got["question"]["beside"]
    assert beside["clustering"] == "source" and beside["clusters"] == 7 and beside["p"] >= 0.25


def test_compare_splits_each_difference_by_where_abstention_changed():
    """The three parts (abstention changed, both answered, neither) sum to the difference, on the real table with
    answers turned into abstentions and abstentions into answers."""
    a = real_with_clusters()
    rng = np.random.default_rng(3)
    conv = np.flatnonzero((a["modality"] == "conversation").to_numpy())
    flip = rng.choice(conv, 300, replace=False)
    said, held = a["abstained"].to_numpy(float).copy(), a["recall@budget"].to_numpy(float).copy()
    said[flip] = 1.0 - np.nan_to_num(said[flip])
    held[flip] = np.where(said[flip] == 1, 0.0, (rng.random(300) < 0.5).astype(float))
    unans = a["unanswerable"].to_numpy(bool)
    b = a.assign(abstained=np.where(unans, np.nan, said), **{"recall@budget": np.where(unans, np.nan, held)})
    if "handed_nothing" in a.columns:  # what compare reads when the table has it: the same flips
        nothing = a["handed_nothing"].to_numpy(float).copy()
        nothing[flip] = said[flip]
        b = b.assign(handed_nothing=nothing)
    result = compare(a, b, resamples=50, permutations=200)
    for r in result["rows"]:
        parts = r["abstention"]
        assert parts["changed"]["part"] + parts["answered"]["part"] + parts["neither"]["part"] == pytest.approx(r["diff"], abs=1e-12)
        assert parts["changed"]["entries"] + parts["answered"]["entries"] + parts["neither"]["entries"] == r["n"]
    row = next(r for r in result["rows"] if r["modality"] == "conversation" and r["metric"] == "recall@budget")
    assert row["abstention"]["changed"]["entries"] > 100 and row["abstention"]["answered"]["part"] == pytest.approx(0.0)
    assert "from abstention changed / both answered" in markdown(result, "A", "B")
