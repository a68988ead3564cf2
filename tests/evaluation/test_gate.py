"""`bench gate BASE`: exit 1 when a verdict metric of the current run is significantly worse
(Holm) by more than --min-effect, or latency grows beyond --max-latency-ratio; exit 0
otherwise; exit 2 with bench compare's one-line refusal. On runs made from the committed
real per-query table."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from bench.cli import cli
from bench.evaluation.gate import MAX_LATENCY_RATIO, gate, gated
from tests.evaluation.test_leaderboard import better, real_table, run_of, worse

K = 10


def test_the_gated_measures_are_the_verdict_s_mean_measures() -> None:
    assert [m.name for m in gated(K)] == ["recall@10", "recall@budget", "mrr", "ndcg@10", "false_recall", "abstention_rate",
                                          "temporal_correctness", "holder_correctness"]


def test_an_identical_rerun_passes_and_a_worse_run_fails_with_one_line_per_reason() -> None:
    base = real_table()
    same = gate(run_of("a", base), run_of("b", base.copy()), k=K, resamples=200, permutations=5000)
    assert same.passed and same.rows == 3 * len(gated(K)) and same.latency == {"p50": 1.0, "p95": 1.0}
    down = gate(run_of("a", base), run_of("b", worse(base, 0.3)), k=K, resamples=200, permutations=5000)
    assert not down.passed
    assert any(r.startswith("gate: overall recall@budget is worse: ") and "p_holm" in r for r in down.reasons), down.reasons
    assert all("\n" not in r for r in down.reasons)
    # a better run passes; so does a worse one within --min-effect
    assert gate(run_of("a", base), run_of("b", better(base, 0.3)), k=K, resamples=200, permutations=5000).passed
    assert gate(run_of("a", base), run_of("b", worse(base, 0.3)), k=K, resamples=200, permutations=5000, min_effect=0.5).passed


def test_latency_fails_only_beyond_the_ratio() -> None:
    base = real_table()
    slow = base.assign(latency_ms=base["latency_ms"] * 1.5)
    assert gate(run_of("a", base), run_of("b", slow), k=K, resamples=50, permutations=500).passed  # noise-sized
    slower = base.assign(latency_ms=base["latency_ms"] * (MAX_LATENCY_RATIO + 0.5))
    result = gate(run_of("a", base), run_of("b", slower), k=K, resamples=50, permutations=500)
    assert [r.split(" is ")[0] for r in result.reasons] == ["gate: overall latency p50", "gate: overall latency p95"]
    assert result.latency["p50"] == pytest.approx(MAX_LATENCY_RATIO + 0.5)


def _write(folder: Path, table, k: int = K) -> None:
    (folder / "reports" / "per_query").mkdir(parents=True, exist_ok=True)
    (folder / "reports" / "metrics").mkdir(parents=True, exist_ok=True)
    table.to_parquet(folder / "reports" / "per_query" / "dev.parquet")
    (folder / "reports" / "metrics" / "dev.json").write_text(json.dumps({"run": {"k": k}}))
    (folder / "params.yaml").write_text("metrics:\n  k: 10\n  bootstrap_resamples: 200\n")


def test_the_command_exits_0_1_or_2(tmp_path: Path) -> None:
    base = real_table()
    project, same, down, other = (tmp_path / n for n in ("project", "same", "down", "other"))
    _write(project, base)
    _write(same, base)
    _write(down, better(base, 0.3))  # BASE better than the project's run: the project's run is worse
    _write(other, base.iloc[: len(base) // 2])
    cwd = os.getcwd()
    os.chdir(project)
    try:
        ok = CliRunner().invoke(cli, ["gate", str(same)])
        bad = CliRunner().invoke(cli, ["gate", str(down)])
        refused = CliRunner().invoke(cli, ["gate", str(other)])
    finally:
        os.chdir(cwd)
    assert ok.exit_code == 0 and ok.output.startswith("gate: passed: no verdict metric is significantly worse"), ok.output
    assert bad.exit_code == 1 and "recall@budget is worse" in bad.output, bad.output
    assert all(line.startswith("gate: ") for line in bad.output.strip().splitlines())
    assert refused.exit_code == 2 and refused.output.strip().count("\n") == 0
    assert refused.output.startswith("gate: refused: A and B were evaluated on different query sets")
    assert np.isfinite(base["latency_ms"].dropna()).all()
