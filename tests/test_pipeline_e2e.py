"""End to end: a fresh copy of the project runs `dvc repro` on the real mirror
(MMLongBench-Doc and LoCoMo: the small selection, about half a minute)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.project_copy import clone_project, project_env, run

pytestmark = pytest.mark.e2e

def sh(args: list[str], cwd: Path, env: dict) -> str:
    proc = run(args, cwd, env)
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, reproduced: Path) -> tuple[Path, dict]:
    """A clone of the session's reproduced project ([mmlongbench, locomo], committed) with its memo
    (an experiment that changes the pdf chunking re-runs only the pdf answers)."""
    work = clone_project(reproduced, tmp_path_factory.mktemp("e2e") / "project", memo=True)
    return work, project_env(work.parent / "site-cache")


def test_metrics_file_shape(project):
    work, _ = project
    doc = json.loads((work / "reports/metrics/dev.json").read_text())
    assert set(doc["by_modality"]) >= {"pdf", "conversation"}
    names = {"recall@10", "mrr", "ndcg@10", "false_recall", "temporal_correctness", "holder_correctness", "latency_p50_ms", "latency_p95_ms"}
    for block in [*doc["by_modality"].values(), doc["overall"]]:
        assert names <= set(block)
        for cell in block.values():
            # reason: why a value is null; clusters: how many clusters of entries the interval of a value rests on
            assert set(cell) - {"reason", "clusters"} == {"value", "n", "denominator", "ci95"}
            assert 0 <= cell["n"] <= cell["denominator"]
            assert cell["value"] is None or 1 <= cell["clusters"] <= cell["denominator"] or cell["denominator"] == 0
    # LoCoMo asks many questions at two moments: fewer clusters than entries (bench/evaluation/stats/clusters.py)
    conv = doc["by_modality"]["conversation"]["temporal_correctness"]
    assert conv["clusters"] < conv["denominator"]
    pdf = doc["by_modality"]["pdf"]
    # unavailable PDFs make entries invalid: counted, not in any denominator
    assert doc["invalid_entries"] > 0 and doc["invalid_by_reason"] == {"corpus file unavailable": doc["invalid_entries"]}
    entries = [json.loads(line) for line in (work / "data/sets/dev.jsonl").read_text().splitlines()]
    pdf_dev = [e for e in entries if e["modality"] == "pdf"]
    assert pdf["temporal_correctness"]["denominator"] == len(pdf_dev)
    assert pdf["recall@10"]["denominator"] == sum(not e["unanswerable"] for e in pdf_dev)
    assert pdf["false_recall"]["denominator"] == sum(e["unanswerable"] for e in pdf_dev)
    # provenance: the sha256 cited are those of the files
    import hashlib

    assert doc["sha256"]["manifest"] == hashlib.sha256((work / "bench/corpus/manifest.jsonl").read_bytes()).hexdigest()
    for path, sha in doc["sha256"]["sets"].items():
        assert sha == hashlib.sha256((work / path).read_bytes()).hexdigest()
    report = (work / "reports/dev.md").read_text()
    assert doc["sha256"]["manifest"] in report and "corpus file unavailable" in report


def test_second_repro_does_nothing(project):
    work, env = project
    out = sh(["dvc", "repro"], work, env)
    assert "Running stage" not in out
    # the acceptance pipeline (bench/test/dvc.yaml) is not part of the dev pipeline,
    # and a bare `dvc status` does not list it as changed merely because it never ran
    assert "up to date" in sh(["dvc", "status", "dvc.yaml"], work, env)
    assert sh(["dvc", "status"], work, env).strip() == "Data and pipelines are up to date."
    proc = run([sys.executable, "-m", "bench.cli", "accept", "--status"], work, env, ok=False)
    assert proc.returncode == 1 and "no accepted test result" in proc.stdout
    assert sh(["git", "status", "--porcelain", ".dvcignore"], work, env) == ""  # the ignore line is back


def test_pdf_edit_reruns_no_ocr_stage(project):
    """Editing the PDF modality makes only its own extract stage (and what reads
    segments) stale; the OCR stages of screenshots and photos stay up to date."""
    work, env = project
    target = work / "bench/modalities/pdf/modality.py"
    before = target.read_bytes()
    try:
        target.write_bytes(before + b"\n# an edit\n")
        status = json.loads(run(["dvc", "status", "--json"], work, env).stdout)
    finally:
        target.write_bytes(before)
    assert "extract@pdf" in status
    assert not {"extract@image", "extract@ui_screenshot", "extract@video", "extract@code", "extract@conversation"} & set(status)
    assert json.loads(run(["dvc", "status", "--json"], work, env).stdout) == {}


def test_manifest_is_deterministic(project):
    work, env = project
    before = (work / "bench/corpus/manifest.jsonl").read_bytes()
    sh(["dvc", "repro", "-f", "fetch", "--single-item"], work, env)
    assert (work / "bench/corpus/manifest.jsonl").read_bytes() == before


def test_ranking_metrics_agree_with_ir_measures(project):
    ir_measures = pytest.importorskip("ir_measures")
    work, _ = project
    qrels = list(ir_measures.read_trec_qrels(str(work / "reports/runs/dev.qrels")))
    run = list(ir_measures.read_trec_run(str(work / "reports/runs/dev.run")))
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc([ir_measures.RR, ir_measures.nDCG @ 10], qrels, run)}
    ours = pd.read_parquet(work / "data/eval/per_query.parquet").set_index("query_id")
    # trec_eval breaks score ties by doc id descending, we by atom id ascending: compare
    # the queries with no tie up to where the metrics look (rank 10 or the first hit)
    ranks = pd.read_csv(work / "reports/runs/dev.run", sep=" ", header=None, names=["q", "x", "d", "rank", "s", "tag"])
    cut = ours["first_hit_rank"].fillna(100).clip(lower=10)
    ranks = ranks[ranks["rank"] <= ranks["q"].map(cut).fillna(100) + 1]
    tied = set(ranks[ranks.duplicated(["q", "s"], keep=False)]["q"])
    compared = 0
    abstained = set(ours.index[ours["abstained"] == 1])  # MRR counts nothing for an abstaining answer; the ranking's is trec's
    assert abstained and (ours.loc[list(abstained), "mrr"].fillna(0) == 0).all()
    for (qid, measure), value in theirs.items():
        if qid in tied or (measure == "RR" and qid in abstained):
            continue
        col = "mrr" if measure == "RR" else "atom_ndcg@10"
        assert ours.loc[qid, col] == pytest.approx(value, abs=1e-9), (qid, measure)
        compared += 1
    # not vacuous: thousands of (query, measure) pairs are compared (ties are common in
    # short video cues and OCR lines, so not all are)
    assert compared >= 1000 and compared > 0.25 * len(theirs), (compared, len(theirs))


def test_exp_run_and_metrics_diff_show_the_change(project):
    work, env = project
    sh(["dvc", "exp", "run", "-S", "chunking.pdf.strategy=window"], work, env)
    proc = subprocess.run(["dvc", "metrics", "diff", "--json"], cwd=work, env=env, capture_output=True, text=True, check=True)
    diff = json.loads(proc.stdout)
    changed = diff["reports/metrics/dev.json"]
    assert "by_modality.pdf.recall@10.value" in changed
    assert "by_modality.pdf.recall@10.denominator" not in changed  # same entries, new chunking
    atoms = pd.read_parquet(work / "data/atoms/pdf/mmlongbench.parquet")
    assert atoms["atom_id"].str.contains("#w").all()
