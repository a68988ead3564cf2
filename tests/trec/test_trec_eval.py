"""`bench eval QRELS RUN` agrees with trec_eval (through pytrec_eval) on every query:
synthetic runs full of score ties and graded/negative judgments, and a real run of the
built-in BM25 over real MMLongBench-Doc and LoCoMo atoms with gold resolved by the harness."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from bench.cli import cli
from bench.trec.trec_eval import MEASURES, evaluate, rank_run, read_qrels, read_run
from tests.conftest import ROOT

pytrec_eval = pytest.importorskip("pytrec_eval")
THEIRS = {"map": "map", "recip_rank": "recip_rank", "P_10": "P_10", "recall_10": "recall_10", "ndcg_cut_10": "ndcg_cut_10"}


def pytrec(qrels_path: Path, run_path: Path) -> dict[str, dict[str, float]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in qrels_path.read_text().split("\n"):
        if line.strip():
            q, _, d, r = line.split()
            qrels.setdefault(q, {})[d] = int(r)
    run: dict[str, dict[str, float]] = {}
    for line in run_path.read_text().split("\n"):
        if line.strip():
            q, _, d, _, s, _ = line.split()
            run.setdefault(q, {})[d] = float(s)
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"map", "recip_rank", "P.10", "recall.10", "ndcg_cut.10"})
    return ev.evaluate(run)


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def synthetic(tmp_path: Path, seed: int) -> tuple[Path, Path]:
    """Graded judgments in -1..3, scores from 5 values (ties everywhere), queries only in
    the qrels, only in the run, and judged queries without a relevant document."""
    rng = np.random.default_rng(seed)
    qrels, run = [], []
    for q in range(80):
        qid = f"q{q:02d}"
        judged = list(dict.fromkeys(f"doc-{rng.integers(0, 50)}" for _ in range(20)))
        for d in judged:
            rel = 0 if q % 11 == 0 else int(rng.integers(-1, 4))
            qrels.append(f"{qid} 0 {d} {rel}")
        if q % 9 == 0:
            continue  # judged, not run
        ranked = list(dict.fromkeys(f"doc-{rng.integers(0, 50)}" for _ in range(int(rng.integers(1, 30)))))
        for i, d in enumerate(ranked):  # rank column deliberately wrong: trec_eval ignores it
            run.append(f"{qid}\tQ0\t{d}\t{len(ranked) - i}\t{rng.integers(0, 5) / 2}\tsys")
    run += [f"extra Q0 doc-{i} {i + 1} 1.0 sys" for i in range(3)]  # run, not judged
    return write(tmp_path / "s.qrels", qrels), write(tmp_path / "s.run", run)


def assert_equal_to_pytrec(qrels_path: Path, run_path: Path) -> tuple[int, int]:
    theirs = pytrec(qrels_path, run_path)
    ev = evaluate(read_qrels(qrels_path), read_run(run_path))
    assert sorted(ev.per_query.index) == sorted(theirs)
    for q, values in theirs.items():
        for ours, name in THEIRS.items():
            assert ev.per_query.loc[q, ours] == pytest.approx(values[name], abs=1e-12), (q, ours)
    for ours, name in THEIRS.items():  # the mean over queries in both files
        assert ev.means[ours] == pytest.approx(np.mean([v[name] for v in theirs.values()]), abs=1e-12)
    return len(theirs), ev.denominator


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_synthetic_runs_with_ties_equal_pytrec_eval(tmp_path, seed):
    qrels_path, run_path = synthetic(tmp_path, seed)
    n, denominator = assert_equal_to_pytrec(qrels_path, run_path)
    assert n == denominator == 80 - 9  # 9 judged queries are not in the run; "extra" is not judged


def test_ties_are_broken_by_doc_id_descending():
    run = pd.DataFrame({"query_id": ["a", "a", "a", "b"], "doc_id": ["d1", "d3", "d2", "d1"], "score": [1.0, 1.0, 2.0, 0.5]})
    ranked = rank_run(run)
    assert ranked.loc[ranked["query_id"] == "a", "doc_id"].tolist() == ["d2", "d3", "d1"]
    assert ranked["rank"].tolist() == [1, 2, 3, 1]
    qrels = pd.DataFrame({"query_id": ["a"], "doc_id": ["d1"], "rel": [1]})
    assert evaluate(qrels, run).per_query.loc["a", "recip_rank"] == pytest.approx(1 / 3)


def test_complete_averages_over_every_judged_query(tmp_path):
    qrels_path, run_path = synthetic(tmp_path, 3)
    theirs = pytrec(qrels_path, run_path)
    ev = evaluate(read_qrels(qrels_path), read_run(run_path), complete=True)
    assert ev.denominator == 80 and ev.n == 71
    missing = ev.per_query.drop(index=list(theirs))
    assert len(missing) == 9 and (missing.to_numpy() == 0).all()
    for ours, name in THEIRS.items():
        assert ev.means[ours] == pytest.approx(sum(v[name] for v in theirs.values()) / 80, abs=1e-12)
    # as trec_eval -q -c: per-query lines for the queries of both files only, the mean over all 80
    res = CliRunner().invoke(cli, ["eval", "-q", "-c", str(qrels_path), str(run_path)])
    rows = [line.split("\t") for line in res.output.splitlines()]
    assert {q for _, q, _ in rows if q != "all"} == set(theirs)
    assert ["num_q                 ", "all", "80"] in rows


def test_no_common_query_is_an_error_unless_complete(tmp_path):
    q = write(tmp_path / "x.qrels", ["q1 0 d0 1", "q2 0 d1 0"])
    r = write(tmp_path / "x.run", ["other Q0 d0 1 1.0 sys"])
    res = CliRunner().invoke(cli, ["eval", str(q), str(r)])
    assert res.exit_code == 1 and "no query of the run is judged in the qrels" in res.output
    res = CliRunner().invoke(cli, ["eval", "-c", str(q), str(r)])
    assert res.exit_code == 0 and "num_q                 \tall\t2\n" in res.output and "map                   \tall\t0.0000" in res.output


def test_cli_prints_trec_eval_columns_and_json(tmp_path):
    qrels_path, run_path = synthetic(tmp_path, 4)
    theirs = pytrec(qrels_path, run_path)
    res = CliRunner().invoke(cli, ["eval", "-q", str(qrels_path), str(run_path)])
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in res.output.splitlines()]
    assert all(len(r) == 3 for r in rows)
    per_q = {(m.strip(), q): v for m, q, v in rows if q != "all"}
    assert len(per_q) == len(theirs) * len(MEASURES)
    for (m, q), v in per_q.items():
        assert v == f"{theirs[q][THEIRS[m]]:.4f}", (m, q)  # printed as trec_eval does (%.4f)
    summary = {m.strip(): v for m, q, v in rows if q == "all"}
    assert summary["num_q"] == str(len(theirs))
    assert rows[-len(MEASURES):] and [r[0].strip() for r in rows[-len(MEASURES):]] == list(MEASURES)

    res = CliRunner().invoke(cli, ["eval", "--complete", "--json", str(qrels_path), str(run_path)])
    doc = json.loads(res.output)
    assert doc["all"]["map"]["denominator"] == 80 and doc["all"]["map"]["n"] == len(theirs)
    assert doc["run_queries_not_judged"] == 1


@pytest.mark.parametrize(
    ("which", "line", "expected"),
    [
        ("run", "q1 Q0 d1 1 high sys", "s.run:2: score: not a number (ASCII decimal, e.g. 1.5 or -2e-3) (value: high)"),
        ("run", "q1 Q0 d1 1 nan sys", "s.run:2: score: not a number (ASCII decimal, e.g. 1.5 or -2e-3) (value: nan)"),
        ("run", "q1 Q0 d1 1 1e999 sys", "s.run:2: score: not a finite number (value: 1e999)"),
        # Python's float() reads these, C's atof (trec_eval) does not: refused, never read differently
        ("run", "q1 Q0 d1 1 1_000 sys", "s.run:2: score: not a number (ASCII decimal, e.g. 1.5 or -2e-3) (value: 1_000)"),
        ("run", "q1 Q0 d1 1 \u0661 sys", "s.run:2: score: not a number (ASCII decimal, e.g. 1.5 or -2e-3) (value: \u0661)"),
        ("qrels", "q1 0 d1 99999999999999999999", "s.qrels:2: relevance: out of range (|relevance| <= 9223372036854775807) (value: 99999999999999999999)"),
        ("qrels", "q1 0 d1 1_000", "s.qrels:2: relevance: not an integer (ASCII digits, optional sign) (value: 1_000)"),
        ("qrels", "q1 0 d1 \u0661", "s.qrels:2: relevance: not an integer (ASCII digits, optional sign) (value: \u0661)"),
        ("qrels", "q1 0 d1 1.0", "s.qrels:2: relevance: not an integer (ASCII digits, optional sign) (value: 1.0)"),
        ("run", "q1 Q0 d1 1 2.0", "s.run:2: <line>: expected 6 fields (query Q0 doc rank score tag), found 5 (value: q1 Q0 d1 1 2.0)"),
        ("run", "q1 Q0 d0 2 1.0 sys", "s.run:2: doc: returned twice for query q1 (first at line 1) (value: d0)"),
        ("qrels", "q1 0 d1 yes", "s.qrels:2: relevance: not an integer (ASCII digits, optional sign) (value: yes)"),
        ("qrels", "q1 0 d1 1 extra", "s.qrels:2: <line>: expected 4 fields (query iter doc relevance), found 5 (value: q1 0 d1 1 extra)"),
        ("qrels", "q1 0 d0 2", "s.qrels:2: doc: judged twice for query q1 (first at line 1) (value: d0)"),
    ],
)
def test_bad_files_one_line_error_exit_1(tmp_path, which, line, expected):
    qrels = ["q1 0 d0 1"] + ([line] if which == "qrels" else [])
    run = ["q1 Q0 d0 1 3.5 sys"] + ([line] if which == "run" else [])
    write(tmp_path / "s.qrels", qrels), write(tmp_path / "s.run", run)
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "eval", "s.qrels", "s.run"], capture_output=True, text=True,
                          cwd=tmp_path, check=False, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 1 and proc.stdout == ""
    err = proc.stderr.strip()
    assert err == f"error: {expected}"


@pytest.fixture(scope="module")
def real_trec_files(real_corpus, tmp_path_factory) -> tuple[Path, Path]:
    """A real run: BM25 over the real page and turn atoms, dev questions of the real sets,
    gold resolved to atoms by the harness, written by the harness's TREC writers."""
    from bench.annotations.splits import load_lock
    from bench.gold.resolve import resolve
    from bench.ingest.atom_codes import served_ids, with_atom_ids
    from bench.io import iter_jsonl
    from bench.systems import build_system
    from bench.trec.files import trec_qrels, trec_run
    from tests.ingest.chunks import chunk_all
    from tests.systems.python_system import run_python_system

    atoms = chunk_all(real_corpus["segments"], {"pdf": {"strategy": "page"}, "conversation": {"strategy": "turn"}})
    dev = {e.query_id for e in load_lock(ROOT / "bench/sets/splits.lock").entries if e.split == "dev"}
    sources = set(real_corpus["segments"]["source_id"].astype(str))
    entries = []
    for key in ("mmlongbench", "locomo"):
        rows = [e for _, e in iter_jsonl(ROOT / f"bench/sets/{key}.jsonl") if e["query_id"] in dev]
        rows = [e for e in rows if not e["unanswerable"] and all(g["source_id"] in sources for g in e["gold"])]
        entries += rows[:150]
    gold, _ = resolve(entries, atoms, real_corpus["segments"])
    system = build_system("bm25", pd.concat(atoms.values(), ignore_index=True))
    run, _ = run_python_system(system, entries, 100)
    base = tmp_path_factory.mktemp("real-trec")
    (base / "dev.run").write_text(trec_run(run, "bm25"), encoding="utf-8")
    (base / "dev.qrels").write_text(trec_qrels(with_atom_ids(gold, served_ids(atoms))), encoding="utf-8")
    return base / "dev.qrels", base / "dev.run"


def test_real_run_equals_pytrec_eval_on_every_query(real_trec_files):
    qrels_path, run_path = real_trec_files
    n, _ = assert_equal_to_pytrec(qrels_path, run_path)
    assert n >= 250  # every query with resolved gold and a result, both data sets
    run = read_run(run_path)
    assert run.duplicated(["query_id", "score"]).any()  # real BM25 scores tie: the tie rule is exercised
    ev = evaluate(read_qrels(qrels_path), run)
    assert 0 < ev.means["recip_rank"] < 1 and 0 < ev.means["ndcg_cut_10"] < 1
