"""Where an A/B page's cartridges come from (bench.reporting.cartridges.locate over
bench.comparison.runs.run_outputs), for a run named by commit: its data/ outputs from the DVC
cache by its dvc.lock, refused when its per-query table is not the one that lock records; on a
small DVC repository made here (the real pipeline's folder and experiment cases:
tests/reporting/test_pages_browser.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from bench.comparison.runs import CompareError, load_run
from bench.project.layout import DEV_METRICS, PER_QUERY, Layout
from bench.reporting.cartridges import RunFiles, locate
from tests.project_copy import project_env, run

PIPELINE = """stages:
  make:
    cmd: "true"
    outs: [data/runs, data/resolved, data/sets, data/served]
  evaluate:
    cmd: "true"
    deps: [data/runs, data/resolved, data/sets, data/served]
    outs:
      - reports/per_query/dev.parquet:
          cache: false
"""


def relative() -> RunFiles:
    rel = Layout(Path())
    return RunFiles(runs=rel.runs, resolved=rel.resolved, valid=rel.valid_dir, served=rel.served, manifest=rel.manifest, store=rel.store)


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict]:
    """A git + DVC repository whose commit holds a per-query table and the dvc.lock of the run that wrote it."""
    root = tmp_path / "repo"
    env = project_env(tmp_path / "site-cache")
    for folder, name, text in (("data/runs", "dev.parquet", "run"), ("data/resolved", "gold.parquet", "gold"),
                               ("data/sets", "dev.jsonl", "{}"), ("data/served/pdf", "d.parquet", "atoms")):
        (root / folder).mkdir(parents=True)
        (root / folder / name).write_text(text)
    (root / "reports" / "per_query").mkdir(parents=True)
    pd.DataFrame({"query_id": ["q"], "modality": ["pdf"], "unanswerable": [False], "failed": [False]}).to_parquet(root / PER_QUERY)
    (root / "dvc.yaml").write_text(PIPELINE)
    for args in (["git", "init", "-q"], ["dvc", "init", "-q"], ["dvc", "commit", "-f", "-q"], ["git", "add", "-A"],
                 ["git", "commit", "-qm", "run"]):
        run(args, root, env)
    return root, env


def test_a_commit_s_outputs_come_from_the_dvc_cache(repo, tmp_path):
    root, _ = repo
    got = locate(load_run("HEAD", root, PER_QUERY, DEV_METRICS), relative(), PER_QUERY, tmp_path / "scratch")
    assert isinstance(got, RunFiles), got
    assert (got.runs / "dev.parquet").read_text() == "run" and (got.served / "pdf" / "d.parquet").read_text() == "atoms"
    assert got.store == root / "data" / "corpus"


def test_a_commit_whose_table_its_lock_does_not_record_is_refused(repo, tmp_path):
    root, env = repo
    pd.DataFrame({"query_id": ["q", "r"], "modality": "pdf", "unanswerable": False, "failed": False}).to_parquet(root / PER_QUERY)
    run(["git", "commit", "-qam", "a table without its run"], root, env)  # dvc.lock as before
    with pytest.raises(CompareError) as err:
        locate(load_run("HEAD", root, PER_QUERY, DEV_METRICS), relative(), PER_QUERY, tmp_path / "scratch")
    assert str(err.value).startswith("HEAD: its per-query table and its cartridge files are not from the same run "
                                     f"({PER_QUERY} differ from what dvc.lock records for the evaluate stage")
    assert "\n" not in str(err.value)


def test_no_cartridges_without_the_cache_or_a_lock_and_the_reason_says_so(repo, tmp_path):
    root, env = repo
    shutil.rmtree(root / ".dvc" / "cache")
    got = locate(load_run("HEAD", root, PER_QUERY, DEV_METRICS), relative(), PER_QUERY, tmp_path / "a")
    assert got == "the DVC cache holds no data/runs of commit " + run(["git", "rev-parse", "--short=7", "HEAD"], root, env).stdout.strip() \
        + " (`dvc pull` or `dvc exp pull` fetches it)"
    run(["git", "rm", "-q", "dvc.lock"], root, env)
    run(["git", "commit", "-qm", "no lock"], root, env)
    got = locate(load_run("HEAD", root, PER_QUERY, DEV_METRICS), relative(), PER_QUERY, tmp_path / "b")
    assert isinstance(got, str) and got.endswith("has no dvc.lock")


def test_the_budget_cut_follows_the_budget_measures_packing():
    """Four 100-character turns and a 30-character memory under a 250-character budget: ranks 1
    and 2 packed whole, the pdf page at rank 3 another unit, the memory (rank 4) whole (it fits:
    230), rank 5 cut to its first 20 characters, rank 6 beyond. An unanswerable entry and a
    failed one get no cut; an abstaining answer's ranking is still marked (the page says the
    answer hands over nothing)."""
    from bench.evaluation.memory_report import MemoryInputs
    from bench.gold.table import MEMORY_ROW_COLUMNS
    from bench.ingest.atom_codes import HIT_COLUMNS
    from bench.reporting.cartridges import PACK_BEYOND, PACK_CUT, PACK_OTHER, PACK_WHOLE, budget_cut

    turns = pd.DataFrame({"atom_id": [f"c:s#t{i}" for i in range(5)], "source_id": "c:s", "text": "x" * 100, "extent": "{}",
                          "char_start": [100 * i for i in range(5)], "char_end": [100 * i + 99 for i in range(5)]})
    page = pd.DataFrame({"atom_id": ["d#p1"], "source_id": "d", "text": "y", "extent": "{}", "page": [1], "char_start": [0], "char_end": [9]})
    served = {"conversation": turns, "pdf": page}  # codes: conversation 0-4, pdf 5, the memory 6
    memory = pd.DataFrame([[6, "m1", "z" * 30, "[]", "c", pd.Timestamp("2024-01-01", tz="UTC"), 30, 0, 0, 0, 0, 0, 0, ""]],
                          columns=MEMORY_ROW_COLUMNS)
    memories = MemoryInputs(memory, pd.DataFrame(columns=["atom", "source_id", "part", "x0", "x1", "y0", "y1"]),
                            pd.DataFrame(columns=HIT_COLUMNS))
    ranking = [0, 1, 5, 6, 2, 3]  # codes in rank order: two turns, the pdf page, the memory, two turns
    run = pd.DataFrame({"query_id": [q for q in ("q", "a", "u", "f") for _ in ranking], "rank": list(range(1, 7)) * 4,
                        "atom": ranking * 4})
    per_query = pd.DataFrame({"query_id": ["q", "a", "u", "f"], "modality": "conversation", "unanswerable": [False, False, True, False],
                              "failed": [False, False, False, True], "abstained": [0.0, 1.0, 0.0, 0.0]})
    cut = budget_cut(run, served, memories, per_query, {"conversation": {"amount": 250, "unit": "chars"}}, k=10)
    assert set(cut) == {"q", "a"}
    assert cut["q"] == cut["a"] == {"marks": {1: PACK_WHOLE, 2: PACK_WHOLE, 4: PACK_WHOLE, 5: PACK_CUT, 6: PACK_BEYOND}, "amount": 250.0,
                                    "unit": "chars", "spent": 250.0, "last": 5, "beyond": False}
    assert cut["q"]["marks"].get(3, PACK_OTHER) == PACK_OTHER  # the pdf page: paid from the pdf budget, not this one
