"""`bench gate BASE`: the primary measures (declared ``primary``: the objective, holder and
temporal correctness; Holm over their rows) fail it, the others (recall@budget and false recall,
the objective's parts, among them) are reported; latency fails only
beyond a floor and noise; a measure with a value in BASE and none now fails with its
reason; different set files are refused unless allowed; the gate's one line names every
unpaired count. On the committed real per-query table (all eight data sets) and on real
CoSQA runs built here (symbol atoms against 10-line windows; a system that answers nothing)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from bench.cli import cli
from bench.comparison.gate import LATENCY_FLOOR_MS, MAX_LATENCY_RATIO, gate, latency_check, primary, reported, summary
from bench.comparison.runs import CompareError, LoadedRun
from bench.evaluation.measures import measures
from bench.evaluation.measures.base import Mean
from tests.conftest import ROOT, need_mirror

K = 10
REAL = ROOT / "reports" / "per_query" / "dev.parquet"
FAST = {"k": K, "resamples": 100, "permutations": 2000}


def real() -> tuple[pd.DataFrame, dict[str, Any]]:
    """The committed real per-query table (every dev query of the eight data sets) and its dev.json."""
    return pd.read_parquet(REAL), json.loads((ROOT / "reports" / "metrics" / "dev.json").read_text())


def line(result: Any, base: str = "BASE") -> str:
    return summary(result, base, 0.05, 0.0, MAX_LATENCY_RATIO)


# --------------------------------------------------------------------------- what is gated


def test_the_primary_set_is_declared_on_the_measures_and_read_by_their_flag() -> None:
    assert [m.name for m in primary(K)] == [m.name for m in measures(K) if m.primary] == ["objective", "temporal_correctness",
                                                                                        "holder_correctness"]
    verdict = [m.name for m in measures(K) if m.heading is not None and isinstance(m.reducer, Mean)]
    assert sorted([m.name for m in primary(K)] + [m.name for m in reported(K)]) == sorted(verdict)
    # the objective's parts are reported beside it, as recall@k and the verdict's nDCG@k (content read) are
    assert {"recall@budget", "false_recall", "recall@10", "content_ndcg@10"} <= {m.name for m in reported(K)}


def test_an_identical_rerun_of_the_real_table_passes_and_its_line_says_what_was_compared() -> None:
    table, doc = real()
    result = gate(LoadedRun("main", table, doc), LoadedRun(".", table.copy(), copy.deepcopy(doc)), **FAST)
    assert result.passed and not result.notes
    assert len(result.rows) == len(primary(K)) * 7 and result.family == 0  # 6 modalities and overall; no query differs
    text = line(result, "main")
    assert text.startswith("gate: passed: no primary measure is significantly worse than main ("), text
    assert f"queries: {len(table)} paired, 0 only in BASE, 0 only in the current run; the same 8 set files (sha256)" in text
    assert "\n" not in text


def test_only_the_primary_rows_fail_a_loss_elsewhere_is_reported() -> None:
    table, doc = real()
    rng = np.random.default_rng(0)
    # a holder leak: 5% of the conversation queries now return someone else's memory
    leak = table.copy()
    conv = np.flatnonzero((leak["modality"] == "conversation") & (leak["holder_ok"] == 1))
    leak.loc[rng.choice(conv, 60, replace=False), "holder_ok"] = 0.0
    result = gate(LoadedRun("main", table, doc), LoadedRun(".", leak, doc), **FAST)
    assert [r.split(" is worse")[0] for r in result.reasons] == ["gate: conversation holder_correctness",
                                                                 "gate: overall holder_correctness"]
    assert "0 wins / 60 losses" in result.reasons[0]
    # nDCG@10 and MRR (the verdict's: content read) 0.1 lower on a third of the pdf hits: reported only
    ranked = table.copy()
    hits = np.flatnonzero((ranked["modality"] == "pdf") & (ranked["content_ndcg@10"] > 0.2))
    pick = rng.choice(hits, len(hits) // 3, replace=False)
    ranked.loc[pick, ["content_ndcg@10", "content_mrr"]] -= 0.1
    result = gate(LoadedRun("main", table, doc), LoadedRun(".", ranked, doc), **FAST)
    assert result.passed, result.reasons
    assert any(n.startswith("gate: reported, not gated: pdf content_ndcg@10 is worse") for n in result.notes), result.notes


# --------------------------------------------------------------------------- latency


def _noisy(rng: np.random.Generator, latencies: np.ndarray, n: int, *, scale: float, load: float, spikes: float,
           spike_ms: float) -> np.ndarray:
    """`n` latencies drawn from the real ones: times `scale`, a machine load factor in [1, load]
    for the whole run, per-query jitter, and a random share (up to `spikes`) of stalls."""
    x = rng.choice(latencies, size=n) * scale * rng.uniform(1.0, load) * rng.lognormal(0.0, 0.25, size=n)
    stalled = rng.random(n) < rng.uniform(0.0, spikes)
    x[stalled] += rng.exponential(spike_ms, size=int(stalled.sum()))
    return x


def sub_millisecond(n: int) -> np.ndarray:
    """A quiet sub-millisecond run's per-query latencies (the issue's: the default run's bm25 on a quiet machine,
    p50 0.64 ms, p95 0.95 ms, as committed at 55c57c9): log-normal with that median and p95, seeded. Fixed here so the
    rule is tested on the issue's case whatever machine and load the committed run was measured on."""
    sigma = float(np.log(0.952 / 0.637) / 1.6449)
    return np.random.default_rng(35).lognormal(np.log(0.637), sigma, n)


def test_sub_millisecond_reruns_never_fail_on_latency() -> None:
    table, doc = real()
    table = table.assign(latency_ms=sub_millisecond(len(table)))
    lat = table["latency_ms"].to_numpy(float)
    # the rerun: p95 5.84 x BASE's (0.95 ms -> 5.6 ms) on a loaded machine
    slow = table.copy()
    tail = slow["latency_ms"] >= np.percentile(lat, 90)
    slow.loc[tail, "latency_ms"] = slow.loc[tail, "latency_ms"] * 5.84
    result = gate(LoadedRun("main", table, doc), LoadedRun(".", slow, doc), **FAST)
    p95 = next(c for c in result.latency if c.name == "p95")
    assert p95.ratio is not None and p95.ratio > 5 and not p95.failed and result.passed
    # reruns drawn from one noisy distribution (load up to 4 x, stalls up to 4% of queries): the ratio alone
    # would fail some, the gate never does
    over_ratio = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        a, b = (_noisy(rng, lat, 1000, scale=1.0, load=4.0, spikes=0.04, spike_ms=30.0) for _ in range(2))
        check = latency_check(a, b, name="p95", q=95.0, resamples=50, seed=seed)
        assert not check.failed, (seed, check)
        over_ratio += bool(check.ratio and check.ratio > MAX_LATENCY_RATIO)
    assert over_ratio >= 5


def test_heavy_tailed_reruns_pass_and_real_slowdowns_fail() -> None:
    lat = sub_millisecond(len(real()[0]))
    point_rule = 0  # ratio and floor on the point estimates, without the intervals
    for seed in range(100):
        rng = np.random.default_rng(seed)
        a, b = (_noisy(rng, lat, 100, scale=30.0, load=1.0, spikes=0.08, spike_ms=300.0) for _ in range(2))
        check = latency_check(a, b, name="p95", q=95.0, resamples=100, seed=seed)
        assert not check.failed, (seed, check)
        assert check.base is not None and check.current is not None
        point_rule += check.current > MAX_LATENCY_RATIO * check.base and check.current - check.base > LATENCY_FLOOR_MS
    assert point_rule >= 5
    for seed in range(5):
        rng = np.random.default_rng(seed)
        a = _noisy(rng, lat, 1000, scale=1.0, load=4.0, spikes=0.04, spike_ms=30.0)
        b = _noisy(rng, lat, 1000, scale=1.0, load=4.0, spikes=0.04, spike_ms=30.0) + 20.0  # a 20 ms call added
        assert latency_check(a, b, name="p50", q=50.0, resamples=50, seed=seed).failed
        c = _noisy(rng, lat, 300, scale=30.0, load=1.0, spikes=0.0, spike_ms=1.0)
        assert latency_check(c, c * 3, name="p95", q=95.0, resamples=50, seed=seed).failed  # 3 x slower everywhere
    # the floor alone: 0.6 -> 4 ms is 6 x, and still within it
    assert not latency_check(np.full(50, 0.6), np.full(50, 4.0), name="p50", q=50.0, resamples=20).failed
    assert latency_check(np.full(50, 0.6), np.full(50, 6.0), name="p50", q=50.0, resamples=20).failed


# --------------------------------------------------------------------------- set files and unpaired queries


def _crashing_deleted(table: pd.DataFrame, doc: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The current run with 18 code entries it crashed on deleted from the set file: 18 queries fewer, another sha256."""
    drop = table.index[table["modality"] == "code"][:18]
    now = copy.deepcopy(doc)
    now["sha256"]["sets"]["bench/sets/cosqa.jsonl"] = hashlib.sha256(b"18 entries fewer").hexdigest()
    return table.drop(index=drop).reset_index(drop=True), now


def test_different_set_files_are_refused_unless_allowed_and_the_line_names_every_unpaired_count() -> None:
    table, doc = real()
    fewer, now = _crashing_deleted(table, doc)
    with pytest.raises(CompareError) as err:
        gate(LoadedRun("main", table, doc), LoadedRun(".", fewer, now), **FAST)
    message = str(err.value)
    digest = doc["sha256"]["sets"]["bench/sets/cosqa.jsonl"][:12]
    assert message.startswith("BASE and the current run were evaluated over different set files (1 of 8: bench/sets/cosqa.jsonl "
                              f"sha256 {digest}… in BASE, "), message
    assert "--allow-different-sets" in message and "\n" not in message
    result = gate(LoadedRun("main", table, doc), LoadedRun(".", fewer, now), allow_different_sets=True, **FAST)
    text = line(result)
    assert f"queries: {len(table) - 18} paired, 18 only in BASE (code 18), 0 only in the current run; different set files, allowed" in text, text
    # the same set files and queries missing from the table (within the 1% tolerance): still named
    result = gate(LoadedRun("main", table, doc), LoadedRun(".", fewer, doc), **FAST)
    assert f"queries: {len(table) - 18} paired, 18 only in BASE (code 18), 0 only in the current run; the same 8 set files" in line(result)
    # runs whose dev.json records no digests: compared, and the line says the files were not checked
    bare = {k: v for k, v in doc.items() if k != "sha256"}
    assert "set files not checked (no sha256 of them in the dev.json of BASE)" in line(
        gate(LoadedRun("main", table, bare), LoadedRun(".", table, doc), **FAST))


# --------------------------------------------------------------------------- real CoSQA runs


@pytest.fixture(scope="module")
def code_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, LoadedRun]:
    """Real runs of the built-in bm25 over CoSQA's dev entries (500 answerable, 161 unanswerable):
    symbol atoms (the default), 10-line windows (2 lines shared), and a system that returns
    nothing and never abstains (false recall under the calibrated rule: not measurable), evaluated
    as the stages do (bench.acceptance.in_memory)."""
    mirror = need_mirror("cosqa")
    from bench.acceptance.in_memory import evaluate_entries
    from bench.corpus_sources import datasets
    from bench.evaluation.evaluate import EvalOptions, RunDescription
    from bench.ingest.corpus import Manifest, extract_all
    from bench.ingest.fetch import FetchLog, fetch_dataset, sort_manifest
    from bench.io import write_jsonl
    from bench.systems.config import check_system, make_adapter
    from bench.systems.run import SYSTEM_COLUMNS, run_queries
    from tests.ingest.chunks import chunk_all

    base = tmp_path_factory.mktemp("cosqa")
    write_jsonl(base / "manifest.jsonl", sort_manifest(fetch_dataset(datasets()["cosqa"], base / "store", [mirror], False, FetchLog())))
    manifest = Manifest.load(base / "manifest.jsonl")
    segments = pd.concat(extract_all(manifest, base / "store").values(), ignore_index=True)
    set_file = ROOT / "bench" / "sets" / "cosqa.jsonl"
    # the set file's dev entries as they are: bench.annotations.validate keeps every one of CoSQA's (checked by its own tests;
    # skipped here, it would double the fixture's time)
    entries = [e for e in map(json.loads, set_file.read_text(encoding="utf-8").splitlines()) if e["split"] == "dev"]
    sha = {"manifest": "-", "sets": {"bench/sets/cosqa.jsonl": hashlib.sha256(set_file.read_bytes()).hexdigest()}}
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    cfg = check_system(params["system"])
    no_failures = pd.DataFrame(columns=["query_id", "kind"])

    def retrieve(code: dict[str, Any]) -> tuple[Any, dict[str, pd.DataFrame], RunDescription]:
        chunking = copy.deepcopy(params["chunking"])
        chunking["code"].update(code)
        served = chunk_all(segments, chunking)
        atoms = pd.concat([f[SYSTEM_COLUMNS] for f in served.values()], ignore_index=True)
        ran = run_queries(make_adapter(cfg, atoms), entries, cfg.depth, timeout_s=cfg.timeout_s,
                          known_atoms=set(atoms["atom_id"].astype(str)))
        return ran, served, RunDescription(system=cfg.name, depth=cfg.depth, chunking=chunking, concurrency=1, warm=False,
                                           adapter=cfg.adapter, warmup_queries=0, timeout_s=cfg.timeout_s, latency=None)

    def evaluate(rows: pd.DataFrame, answered: pd.DataFrame, served: dict[str, pd.DataFrame], description: RunDescription,
                 abstains: bool) -> LoadedRun:
        options = EvalOptions(k=K, bootstrap_resamples=20, bootstrap_seed=0, calibration_recall=0.9, abstains=abstains)
        result = evaluate_entries(entries, [], rows, answered, no_failures, served, segments, options, description,
                                  in_core_rows=10**9, sha256=sha)
        return LoadedRun("x", result.query_table, json.loads(json.dumps(result.document, default=str)))

    symbol, served, description = retrieve({})
    windows = retrieve({"strategy": "lines", "window_lines": 10, "overlap_lines": 2})
    silent = symbol.latency.assign(n_returned=0, abstain=False)  # nothing returned, no abstention declared
    # the rankings as handed over: the built-in bm25 abstains on about half of CoSQA's questions, and an abstaining
    # answer counts nothing in recall@budget (bench.evaluation.measures.false_recall), which would halve what the
    # chunking change can show; a system that never abstains is judged on its ranking alone
    return {"symbol": evaluate(symbol.run, symbol.latency.assign(abstain=False), served, description, False),
            "windows": evaluate(windows[0].run, windows[0].latency.assign(abstain=False), windows[1], windows[2], False),
            "nothing": evaluate(symbol.run.iloc[:0], silent, served, description, False)}


def test_code_symbols_to_10_line_windows_fail_on_the_objective(code_runs: dict[str, LoadedRun]) -> None:
    """The loss of held credit fails the gate on the objective, which is exactly its two parts weighed by their entries
    (500 answerable, 161 unanswerable); recall@budget, recall@10 and the content nDCG@10 are reported beside it."""
    result = gate(code_runs["symbol"], code_runs["windows"], k=K, resamples=200, permutations=10000)
    assert not result.passed
    assert [r.split(" is worse")[0] for r in result.reasons] == ["gate: code objective", "gate: overall objective"]
    row = next(r for r in result.rows if r["modality"] == "code" and r["metric"] == "objective")
    assert row["n"] == 661 and row["diff"] < -0.02 and row["losses"] > 2 * row["wins"] and row["p_holm"] < 0.05
    part = next(r for r in result.reported if r["modality"] == "code" and r["metric"] == "recall@budget")
    fr = next(r for r in result.reported if r["modality"] == "code" and r["metric"] == "false_recall")
    assert row["diff"] * 661 == pytest.approx(part["diff"] * 500 - fr["diff"] * 161)
    assert {n.split(" is worse")[0] for n in result.notes} >= {f"gate: reported, not gated: code {m}"
                                                              for m in ("recall@budget", "recall@10", "content_ndcg@10")}
    assert line(result).startswith("gate: failed: 2 reasons against BASE (")


def test_a_run_that_answers_nothing_fails_with_the_reason(code_runs: dict[str, LoadedRun]) -> None:
    base, nothing = code_runs["symbol"], code_runs["nothing"]
    assert nothing.metrics["run"]["false_recall_rule"]["code"]["rule"] == "not measurable"
    result = gate(base, nothing, **FAST)
    assert not result.passed
    # the objective cannot be measured without its unanswerable part: it fails with the part's reason
    lost = [r for r in result.reasons if "objective has no value" in r]
    assert [r.split(" has no value")[0] for r in lost] == ["gate: code objective", "gate: overall objective"]
    assert lost[0].startswith(f"gate: code objective has no value in the current run (BASE "
                              f"{base.per_query['objective'].mean():.4f}, n 661): no value for 161 of its 661 queries"), lost[0]
    assert "false_recall: not measurable" in lost[0] and "none of the 500 answerable entries got a hit" in lost[0]
    assert any(n.startswith("gate: reported, not gated: code recall@budget is worse: ") and "-> 0.0000" in n for n in result.notes)
    assert any(n.startswith("gate: reported, not gated: code false_recall has no value in the current run") for n in result.notes)
    # the other way round, BASE has no value: not gated, said so
    back = gate(nothing, base, **FAST)
    assert any(n.startswith("gate: not gated: code objective has no value in BASE: ") for n in back.notes), back.notes


# --------------------------------------------------------------------------- the command


def _write(folder: Path, table: pd.DataFrame, doc: dict[str, Any]) -> Path:
    (folder / "reports" / "per_query").mkdir(parents=True, exist_ok=True)
    (folder / "reports" / "metrics").mkdir(parents=True, exist_ok=True)
    table.to_parquet(folder / "reports" / "per_query" / "dev.parquet")
    (folder / "reports" / "metrics" / "dev.json").write_text(json.dumps(doc))
    (folder / "params.yaml").write_text("metrics:\n  k: 10\n  bootstrap_resamples: 100\n")
    return folder


def test_the_command_exits_0_1_or_2(tmp_path: Path) -> None:
    table, doc = real()
    fewer, now = _crashing_deleted(table, doc)
    leak = table.assign(holder_ok=np.where(table["modality"] == "image", 0.0, table["holder_ok"]))
    project = _write(tmp_path / "project", fewer, now)
    same, leaky, half = (_write(tmp_path / n, t, d) for n, t, d in (("same", fewer, now), ("leaky", leak, doc),
                                                                     ("half", table.iloc[: len(table) // 2], now)))
    other = _write(tmp_path / "other", table, doc)
    cwd = os.getcwd()
    os.chdir(project)
    try:
        args = ["--permutations", "2000"]
        ok = CliRunner().invoke(cli, ["gate", str(same), *args])
        refused = CliRunner().invoke(cli, ["gate", str(other), *args])
        allowed = CliRunner().invoke(cli, ["gate", str(other), "--allow-different-sets", *args])
        bad = CliRunner().invoke(cli, ["gate", str(leaky), "--allow-different-sets", *args])  # BASE without the leak: better
        different = CliRunner().invoke(cli, ["gate", str(half), *args])
    finally:
        os.chdir(cwd)
    assert ok.exit_code == 0 and ok.output.count("\n") == 1 and ok.output.startswith("gate: passed: "), ok.output
    assert refused.exit_code == 2 and refused.output.count("\n") == 1, refused.output
    assert refused.output.startswith("gate: refused: BASE and the current run were evaluated over different set files")
    assert allowed.exit_code == 0 and "18 only in BASE (code 18)" in allowed.output.splitlines()[-1], allowed.output
    assert bad.exit_code == 0 and "image holder_correctness is worse" not in bad.output  # BASE leaks: the current run is better
    assert different.exit_code == 2 and "different query sets" in different.output and different.output.count("\n") == 1
    os.chdir(tmp_path / "leaky")
    try:
        worse = CliRunner().invoke(cli, ["gate", str(other), *["--permutations", "2000"]])
    finally:
        os.chdir(cwd)
    lines = worse.output.strip().splitlines()
    assert worse.exit_code == 1 and lines[0].startswith("gate: image holder_correctness is worse: "), worse.output
    assert lines[-1].startswith("gate: failed: 2 reasons against ") and f"queries: {len(real()[0])} paired, 0 only in BASE" in lines[-1]
    assert all(x.startswith("gate: ") for x in lines)


def test_four_questions_lost_at_both_askings_fail_the_gate_only_as_four_independent_losses_would() -> None:
    """Issue 46 row 5: four LoCoMo questions lost at both of their askings failed the gate (p_holm 0.016: eight
    independent entries). Over clusters they are four questions, p 2 / 2^4 = 0.125: the gate passes, as it does for
    four independent losses; by entries (--clusters entry) it fails as before."""
    from tests.comparison.test_compare import asked_twice, real_with_clusters

    table, doc = real_with_clusters(), real()[1]
    rows = asked_twice(table, 1.0, 4)
    lost = table.copy()
    lost.loc[rows, "recall@budget"] = 0.0
    base, current = LoadedRun("main", table, doc), LoadedRun(".", lost, doc)
    by_question = gate(base, current, **FAST)
    assert by_question.passed, by_question.reasons
    row = next(r for r in by_question.rows if r["modality"] == "conversation" and r["metric"] == "objective")
    assert (row["losses"], row["clusters"], row["n"]) == (8, 1422, 2071) and row["p"] == pytest.approx(2 / 2**4)
    assert "clusters of entries by question" in line(by_question)
    by_entry = gate(base, current, clusters="entry", **FAST)
    assert [r.split(" is worse")[0] for r in by_entry.reasons] == ["gate: conversation objective", "gate: overall objective"]
    assert next(r for r in by_entry.rows if r["modality"] == "conversation" and r["metric"] == "objective")["p"] == pytest.approx(2 / 2**8)
    # four independent questions lost once each: passes too (the same p as the four clustered ones)
    once = table.copy()
    first = table.iloc[rows].groupby("cluster").head(1).index
    assert len(first) == 4
    once.loc[first, "recall@budget"] = 0.0
    assert gate(base, LoadedRun(".", once, doc), clusters="entry", **FAST).passed
