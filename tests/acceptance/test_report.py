"""The locked test split, end to end on the real mirror (MMLongBench-Doc + LoCoMo).

One temp copy of the project: every test entry's question carries a unique marker
(poison), and every Python process started under it logs which set files it opens
(an audit hook installed through sitecustomize). The dev pipeline runs with both;
then `bench accept` and every refusal are exercised on that copy.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bench.acceptance.report import experiment_reason, recorded_hash_mismatch, stage_refusal
from tests.conftest import need_mirror
from tests.project_copy import copy_project, keep_ocr_cache, project_env, run

pytestmark = pytest.mark.e2e

POISON = "ZQXPOISONQZX"
#: beyond the usual: earlier acceptances and lock files of the working tree
SKIP = ("acceptance.jsonl", "test.json", "test.md", "dvc.lock")
SITECUSTOMIZE = '''
import os, sys
_LOG = os.environ.get("BENCH_AUDIT_LOG")
def _hook(event, args):
    if event != "open" or not args or isinstance(args[0], int):
        return
    path = os.fsdecode(args[0]).replace(os.sep, "/")
    if "/bench/sets/" in "/" + path and path.endswith(".jsonl"):
        with open(_LOG, "a", encoding="utf-8") as fh:
            fh.write(f"{os.path.basename(sys.argv[0]) if sys.argv else '?'}\\t{path}\\n")
if _LOG:
    sys.addaudithook(_hook)
'''


sh = run


def accept(work: Path, env: dict, ok: bool = True) -> subprocess.CompletedProcess:
    return sh([sys.executable, "-m", "bench.cli", "accept"], work, env, ok)


def acceptances(work: Path, env: dict, n: int) -> bytes:
    """reports/acceptance.jsonl holding at least `n` acceptances: those an earlier test of the
    module made on this project (test_accept_on_real_data_and_again_on_the_same_commit makes
    two), else `bench accept` run here until there are `n`. So a test that needs them does
    not depend on which tests ran before it on its xdist worker, and costs nothing more
    when they did."""
    audit = work / "reports/acceptance.jsonl"
    have = len(audit.read_bytes().splitlines()) if audit.is_file() else 0
    for _ in range(have, n):
        accept(work, env)
    return audit.read_bytes()


def audit_lines(work: Path) -> list[tuple[str, str]]:
    log = work.parent / "audit.log"
    if not log.is_file():
        return []
    return [tuple(line.split("\t", 1)) for line in log.read_text().splitlines()]


def contains_poison(path: Path) -> bool:
    if path.suffix == ".parquet":  # compressed: look into the decoded strings
        return _poisoned(pd.read_parquet(path))
    if path.suffix == ".zip":  # a result bundle (bench/bundle/): look into every member, decoded
        with zipfile.ZipFile(path) as zf:
            return any(_poisoned(pd.read_parquet(io.BytesIO(zf.read(n)))) if n.endswith(".parquet") else POISON.encode() in zf.read(n)
                       for n in zf.namelist())
    return POISON.encode() in path.read_bytes()


def _poisoned(df: pd.DataFrame) -> bool:
    return any(df[c].astype(str).str.contains(POISON, regex=False).any() for c in df.columns if df[c].dtype == object or str(df[c].dtype).startswith("str"))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, ocr_cache: Path) -> tuple[Path, dict]:
    need_mirror("mmlongbench-doc", "locomo")
    base = tmp_path_factory.mktemp("accept")
    work = copy_project(base / "project", datasets=["mmlongbench", "locomo"], skip=SKIP, ocr_cache=ocr_cache)
    params = yaml.safe_load((work / "params.yaml").read_text())
    # the tests compare shapes, refusals and leaks, not interval widths: 200 bootstrap resamples
    # (as conftest.locomo_reproduced) for the dev run, each `bench accept` and the experiment
    params["metrics"]["bootstrap_resamples"] = 200
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    # poison: every test entry's question carries the marker (ids and splits unchanged)
    for key in params["datasets"]:
        path = work / "bench" / "sets" / f"{key}.jsonl"
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            e = json.loads(line)
            if e["split"] == "test":
                e["question"] = f"{e['question']} {POISON}"
            out.append(json.dumps(e, ensure_ascii=False))
        path.write_text("\n".join(out) + "\n", encoding="utf-8")
    (base / "audit").mkdir()
    (base / "audit" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = project_env(
        base / "site-cache", drop=("DVC_EXP", "DVC_STAGE", "BENCH_ACCEPT"),
        PYTHONPATH=str(base / "audit"), BENCH_AUDIT_LOG=str(base / "audit.log"),
    )
    sh(["git", "init", "-q"], work, env)
    sh(["git", "add", "-A"], work, env)
    sh(["git", "commit", "-q", "-m", "copy"], work, env)
    sh(["dvc", "repro"], work, env)
    keep_ocr_cache(work, ocr_cache)
    sh(["git", "add", "-A"], work, env)
    sh(["git", "commit", "-q", "-m", "dev run"], work, env)
    return work, env


def test_dev_pipeline_never_reads_test_entries(project):
    work, _ = project
    stages_opening_sets = {prog for prog, path in audit_lines(work) if prog.endswith(".py") and "/stages/" not in prog}
    readers = {prog for prog, _ in audit_lines(work)}
    # of all stage scripts, only validate opens the set files (it must, to split them)
    assert "validate.py" in readers
    assert readers & {"fetch.py", "extract.py", "chunk.py", "retrieve.py", "resolve.py", "evaluate.py", "accept.py"} == set(), readers
    assert stages_opening_sets <= {"validate.py"}
    # and nothing the dev pipeline wrote carries a test entry (the marker is in every test question)
    written = [p for d in ("data", "reports") for p in (work / d).rglob("*") if p.is_file() and "corpus" not in p.parts]
    assert len(written) > 10
    leaked = [p.relative_to(work).as_posix() for p in written if contains_poison(p)]
    assert leaked == []
    dev = [json.loads(x) for x in (work / "data/sets/dev.jsonl").read_text().splitlines()]
    assert dev and {e["split"] for e in dev} == {"dev"}


def test_fresh_repro_and_exp_run_never_run_acceptance(project):
    work, env = project
    assert "up to date" in sh(["dvc", "status", "dvc.yaml"], work, env).stdout
    out = sh(["dvc", "repro"], work, env)
    assert "accept" not in out.stdout + out.stderr
    log = work.parent / "audit.log"
    log.unlink()
    sh(["dvc", "exp", "run", "-S", "metrics.k=5"], work, env)
    assert not (work / "reports/metrics/test.json").exists() and not (work / "reports/acceptance.jsonl").exists()
    assert {prog for prog, _ in audit_lines(work)} & {"accept.py", "retrieve.py", "resolve.py"} == set()
    assert "test.json" not in sh(["dvc", "metrics", "show"], work, env).stdout
    # back to the committed dev run
    sh(["git", "checkout", "--", "."], work, env)
    sh(["dvc", "checkout"], work, env)
    assert "up to date" in sh(["dvc", "status", "dvc.yaml"], work, env).stdout


def test_stage_refuses_unless_called_by_bench_accept(project):
    work, env = project
    proc = sh([sys.executable, "-m", "stages.accept"], work, env, ok=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "error: accept: refused: the acceptance stage runs only through `bench accept` (no valid acceptance token)"
    # even a forged token in the environment is not enough, and `dvc repro -P` cannot run it
    proc = sh([sys.executable, "-m", "stages.accept"], work, {**env, "BENCH_ACCEPT_TOKEN": "guess"}, ok=False)
    assert proc.returncode == 1 and "only through `bench accept`" in proc.stderr
    # `dvc repro -P` does not even see the acceptance pipeline (.dvcignore; bench accept lifts it)
    proc = sh(["dvc", "repro", "-P"], work, env, ok=False)
    assert "stages.accept" not in proc.stdout + proc.stderr
    assert not (work / "reports/metrics/test.json").exists()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("exp-env", "refused: inside a DVC experiment (DVC_EXP_BASELINE_REV=abc): acceptance never runs while tuning"),
        ("stage-env", "refused: called from the DVC stage dvc.yaml:evaluate: run `bench accept` yourself, not from a pipeline"),
        ("params", "refused: uncommitted changes to code, params or sets: params.yaml; commit them first"),
        ("code", "refused: uncommitted changes to code, params or sets: bench/evaluation/per_query.py; commit them first"),
        ("untracked-set", "refused: uncommitted changes to code, params or sets: bench/sets/new.jsonl; commit them first"),
        ("stale", "refused: dev metrics are stale: `dvc status dvc.yaml` reports evaluate changed; run `dvc repro` and commit"),
    ],
)
def test_accept_refuses(project, change, reason):
    work, env = project
    run_env = dict(env)
    restore: list[tuple[Path, bytes | None]] = []

    def edit(rel: str, data: bytes) -> None:
        path = work / rel
        restore.append((path, path.read_bytes() if path.exists() else None))
        path.write_bytes(data)

    if change == "exp-env":
        run_env["DVC_EXP_BASELINE_REV"] = "abc"
    elif change == "stage-env":
        run_env["DVC_STAGE"] = "dvc.yaml:evaluate"
    elif change == "params":
        edit("params.yaml", (work / "params.yaml").read_bytes() + b"# tuned\n")
    elif change == "code":
        edit("bench/evaluation/per_query.py", (work / "bench/evaluation/per_query.py").read_bytes() + b"\n")
    elif change == "untracked-set":
        edit("bench/sets/new.jsonl", b"{}\n")
    elif change == "stale":
        edit("data/eval/per_query.parquet", (work / "data/eval/per_query.parquet").read_bytes() + b"x")
    try:
        proc = accept(work, run_env, ok=False)
    finally:
        for path, data in restore:
            path.unlink() if data is None else path.write_bytes(data)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [f"bench accept: {reason}"]
    assert not (work / "reports/acceptance.jsonl").exists() and not (work / "reports/metrics/test.json").exists()


def test_accept_on_real_data_and_again_on_the_same_commit(project):
    work, env = project
    (work.parent / "audit.log").unlink(missing_ok=True)
    proc = accept(work, env)
    assert "acceptance #1 on commit" in proc.stdout
    head = sh(["git", "rev-parse", "HEAD"], work, env).stdout.strip()
    dev = json.loads((work / "reports/metrics/dev.json").read_text())
    test = json.loads((work / "reports/metrics/test.json").read_text())
    # same shape as dev.json
    assert set(test) == set(dev) and set(test["by_modality"]) == set(dev["by_modality"])
    for block, dev_block in [(test["overall"], dev["overall"]), *((test["by_modality"][m], dev["by_modality"][m]) for m in dev["by_modality"])]:
        assert set(block) == set(dev_block)
        for name, cell in block.items():
            assert set(cell) == set(dev_block[name]) >= {"value", "n", "denominator"} and 0 <= cell["n"] <= cell["denominator"]
    assert test["sha256"] == dev["sha256"] and test["run"]["split"] == "test"
    # the isolation the test run ran under (the builtin system: in the harness's process)
    assert test["run"]["isolation"] == dev["run"]["isolation"] == "none"
    # its denominators are the valid test entries, disjoint from dev
    n_test = sum(1 for key in ("mmlongbench", "locomo") for line in (work / f"bench/sets/{key}.jsonl").read_text().splitlines() if '"split": "test"' in line)
    assert test["overall"]["temporal_correctness"]["denominator"] + test["invalid_entries"] == n_test
    assert test["overall"]["recall@10"]["value"] is not None
    # the acceptance's report: the verdict of test.json under dev.md's rules
    report = (work / "reports/test.md").read_text()
    assert report.startswith("# Acceptance report (test split)") and f"Acceptance #1 on commit `{head[:12]}`" in report
    assert "## Verdict" in report and "met only by atom size" in report and "recall@budget" in report
    # the accept stage is the one reader (positive control of the audit hook); `bench accept`
    # itself (cli.py) opens the sets only to hash them against the dev run's record
    assert {prog for prog, _ in audit_lines(work)} == {"accept.py", "cli.py"}
    rows = [json.loads(x) for x in (work / "reports/acceptance.jsonl").read_text().splitlines()]
    assert len(rows) == 1
    row = rows[0]
    assert row["git_commit"] == head and row["acceptance"] == 1 and row["earlier_on_this_commit"] == []
    assert row["sha256"] == dev["sha256"] and len(row["params_sha256"]) == 64 and row["utc"].endswith("+00:00")
    assert row["metrics"]["overall"] == test["overall"] and row["isolation"] == "none"
    leaked = [p.name for p in (work / "reports").rglob("*") if p.is_file() and contains_poison(p)]
    assert leaked == [] and (work / "reports/test.bundle.zip").is_file()  # the test run's bundle holds no test question

    # the accepted result is current; .dvcignore is back, so a bare `dvc status` stays clean
    assert "is current" in sh([sys.executable, "-m", "bench.cli", "accept", "--status"], work, env).stdout
    assert sh(["git", "status", "--porcelain", ".dvcignore"], work, env).stdout == ""

    first = (work / "reports/acceptance.jsonl").read_bytes()
    proc = accept(work, env)
    assert f"acceptance #2 on commit {head[:12]} (this commit was already accepted: #1; all rows kept)" in proc.stdout
    text = (work / "reports/acceptance.jsonl").read_bytes()
    assert text.startswith(first) and len(text.splitlines()) == 2
    assert json.loads(text.splitlines()[1])["earlier_on_this_commit"] == [1]


def test_hand_run_stage_with_uncommitted_params_is_refused(project):
    """Probe: `echo T > data/.accept-token; BENCH_ACCEPT_TOKEN=T python -m stages.accept`
    with uncommitted chunking. A plain token opens nothing; even a token bound to the
    current commit and params hash (as `bench accept` writes it) does not: the stage
    runs every check itself."""
    from bench.acceptance.report import token_text
    from bench.io import sha256_file

    work, env = project
    params_path = work / "params.yaml"
    committed = params_path.read_bytes()
    tuned = yaml.safe_load(committed)
    tuned["chunking"]["conversation"]["strategy"] = "window"
    params_path.write_text(yaml.safe_dump(tuned, sort_keys=False))
    audit_file = work / "reports/acceptance.jsonl"
    audit_before = audit_file.read_bytes() if audit_file.is_file() else None  # none yet when no acceptance ran on this worker
    head = sh(["git", "rev-parse", "HEAD"], work, env).stdout.strip()
    try:
        (work / "data/.accept-token").write_text("T\n")
        proc = sh([sys.executable, "-m", "stages.accept"], work, {**env, "BENCH_ACCEPT_TOKEN": "T"}, ok=False)
        assert proc.returncode == 1
        assert proc.stderr.strip() == "error: accept: refused: the acceptance stage runs only through `bench accept` (no valid acceptance token)"
        (work / "data/.accept-token").write_text(token_text("T", head, sha256_file(params_path)))
        proc = sh([sys.executable, "-m", "stages.accept"], work, {**env, "BENCH_ACCEPT_TOKEN": "T"}, ok=False)
        assert proc.returncode == 1
        assert proc.stderr.strip() == "error: accept: refused: uncommitted changes to code, params or sets: params.yaml; commit them first"
        # a token bound to other params is refused before anything else
        (work / "data/.accept-token").write_text(token_text("T", head, "0" * 64))
        proc = sh([sys.executable, "-m", "stages.accept"], work, {**env, "BENCH_ACCEPT_TOKEN": "T"}, ok=False)
        assert proc.stderr.strip() == "error: accept: refused: params.yaml changed since `bench accept` checked it: run `bench accept` again"
    finally:
        params_path.write_bytes(committed)
        (work / "data/.accept-token").unlink(missing_ok=True)
    assert (audit_file.read_bytes() if audit_file.is_file() else None) == audit_before


def test_edited_or_deleted_audit_rows_are_refused(project):
    """Rows of reports/acceptance.jsonl edited and committed, or deleted: the next
    acceptance refuses, naming the row; the audit file is left as it is."""
    work, env = project
    audit = work / "reports/acceptance.jsonl"
    acceptances(work, env, 2)
    sh(["git", "add", "reports", "bench/test"], work, env)
    sh(["git", "commit", "-q", "-m", "two acceptances"], work, env)
    good = audit.read_bytes()
    lines = good.splitlines(keepends=True)
    assert len(lines) == 2
    row1 = json.loads(lines[0])
    row1["metrics"]["overall"]["recall@10"]["value"] = 0.99
    edited1 = (json.dumps(row1, ensure_ascii=False) + "\n").encode()
    row2 = json.loads(lines[1])
    row2["metrics"]["overall"]["mrr"]["value"] = 0.99
    edited2 = (json.dumps(row2, ensure_ascii=False) + "\n").encode()
    from bench.acceptance.report import line_sha256

    row2_rechained = dict(json.loads(lines[1]), prev_sha256=line_sha256(edited1))
    cases = {
        "edit row 1": (edited1 + lines[1], "reports/acceptance.jsonl:2: prev_sha256 does not match the sha256 of line 1: an earlier row was edited"),
        "edit row 2": (lines[0] + edited2, "reports/acceptance.jsonl: the version committed in "),
        "edit row 1, chain recomputed": (edited1 + (json.dumps(row2_rechained) + "\n").encode(), "reports/acceptance.jsonl: the version committed in "),
        "delete row 1": (lines[1], "reports/acceptance.jsonl:1: acceptance #2 where #1 was due: a row was deleted or reordered"),
        "delete row 2": (lines[0], "reports/acceptance.jsonl: the version committed in "),
        "delete the file": (None, "reports/acceptance.jsonl: the version committed in "),
    }
    for name, (data, message) in cases.items():
        for commit in (False, True):
            if data is None:
                audit.unlink()
            else:
                audit.write_bytes(data)
            if commit:
                sh(["git", "add", "-A", "reports"], work, env)
                sh(["git", "commit", "-q", "-m", name], work, env)
            proc = accept(work, env, ok=False)
            if commit:
                sh(["git", "reset", "-q", "--hard", "HEAD~1"], work, env)
            assert proc.returncode == 1, name
            assert proc.stderr.strip().startswith(f"bench accept: refused: {message}"), (name, commit, proc.stderr)
            assert len(proc.stderr.strip().splitlines()) == 1
            audit.write_bytes(good)


def test_accept_refuses_sets_that_differ_from_the_dev_run(project):
    """`dvc commit -f` makes dvc status clean without a dev run: the recorded sha256 still differ."""
    work, env = project
    path = work / "bench/sets/locomo.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    i = next(n for n, x in enumerate(lines) if '"split": "dev"' in x)
    e = json.loads(lines[i])
    e["question"] += " (edited)"
    lines[i] = json.dumps(e, ensure_ascii=False)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    sh(["dvc", "commit", "-f", "dvc.yaml"], work, env)
    sh(["git", "add", "-A"], work, env)
    sh(["git", "commit", "-q", "-m", "edit without a dev run"], work, env)
    assert "up to date" in sh(["dvc", "status", "dvc.yaml"], work, env).stdout
    audit = work / "reports/acceptance.jsonl"
    before = audit.read_bytes() if audit.is_file() else None  # none when no acceptance ran on this worker
    proc = accept(work, env, ok=False)
    assert proc.returncode == 1
    line = proc.stderr.strip()
    assert line.startswith("bench accept: refused: bench/sets/locomo.jsonl: sha256 ") and "differs from the dev run's" in line
    assert (audit.read_bytes() if audit.is_file() else None) == before


# --------------------------------------------------------------------------- unit checks


def test_experiment_detection(tmp_path):
    assert experiment_reason({}, tmp_path) is None
    assert "inside a DVC experiment" in experiment_reason({"DVC_EXP_NAME": "x"}, tmp_path)
    assert "queued DVC experiment" in experiment_reason({}, tmp_path / ".dvc" / "tmp" / "exps" / "tmpabc")


def test_stage_guard_needs_matching_single_use_token(tmp_path):
    from bench.acceptance.report import token_text

    token = tmp_path / ".accept-token"
    assert "only through `bench accept`" in stage_refusal({}, token)
    token.write_text("abc\n")  # a bare token, as written by hand: not a token of `bench accept`
    assert "only through `bench accept`" in stage_refusal({"BENCH_ACCEPT_TOKEN": "abc"}, token)
    token.write_text(token_text("abc", None, "0" * 64))
    assert "only through `bench accept`" in stage_refusal({"BENCH_ACCEPT_TOKEN": "abd"}, token)
    assert stage_refusal({"BENCH_ACCEPT_TOKEN": "abc"}, token) is None
    assert "inside a DVC experiment" in stage_refusal({"BENCH_ACCEPT_TOKEN": "abc", "DVC_EXP_BASELINE_REV": "r"}, token)


def test_recorded_hash_mismatch_names_the_file(tmp_path):
    (tmp_path / "bench/corpus").mkdir(parents=True)
    (tmp_path / "bench/sets").mkdir(parents=True)
    (tmp_path / "bench/corpus/manifest.jsonl").write_text("{}\n")
    s = tmp_path / "bench/sets/a.jsonl"
    s.write_text("{}\n")
    from bench.io import sha256_file

    rec = {"sha256": {"manifest": sha256_file(tmp_path / "bench/corpus/manifest.jsonl"), "sets": {"bench/sets/a.jsonl": sha256_file(s)}}}
    assert recorded_hash_mismatch(tmp_path, [s], rec, rec) is None
    s.write_text("{} \n")
    assert recorded_hash_mismatch(tmp_path, [s], rec, rec).startswith("bench/sets/a.jsonl: sha256 ")
    (tmp_path / "bench/corpus/manifest.jsonl").write_text("[]\n")
    assert recorded_hash_mismatch(tmp_path, [s], rec, rec).startswith("bench/corpus/manifest.jsonl: sha256 ")


def test_audit_chain_breaks_are_named():
    from bench.acceptance.report import chain_problem, line_sha256

    def row(n: int, prev: str | None) -> bytes:
        return (json.dumps({"acceptance": n, "prev_sha256": prev, "metrics": {"x": n}}) + "\n").encode()

    r1 = row(1, None)
    r2 = row(2, line_sha256(r1))
    r3 = row(3, line_sha256(r2))
    assert chain_problem(b"") is None and chain_problem(r1 + r2 + r3) is None
    assert chain_problem(r1 + r2.replace(b'"x": 2', b'"x": 9') + r3).startswith("reports/acceptance.jsonl:3: prev_sha256 does not match")
    assert chain_problem(r1 + r3).startswith("reports/acceptance.jsonl:2: acceptance #3 where #2 was due")
    assert chain_problem(row(1, "f" * 64)).startswith("reports/acceptance.jsonl:1: prev_sha256 does not match")
    # migration: rows from before the chain (no field) may lead the file; the first chained row links to the last
    legacy1 = (json.dumps({"acceptance": 1, "git_commit": "abc"}) + "\n").encode()
    legacy2 = (json.dumps({"acceptance": 2, "git_commit": "abd"}) + "\n").encode()
    assert chain_problem(legacy1 + legacy2 + row(3, line_sha256(legacy2))) is None
    assert chain_problem(legacy1 + legacy2 + row(3, None)).startswith("reports/acceptance.jsonl:3: prev_sha256 does not match")
    assert chain_problem(r1 + legacy2.replace(b'"acceptance": 2', b'"acceptance": 2')).startswith("reports/acceptance.jsonl:2: prev_sha256 does not match")


def test_audit_history_must_be_a_prefix(tmp_path):
    from bench.acceptance.report import audit_problem

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True,
                       env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.invalid", "GIT_COMMITTER_NAME": "t",
                            "GIT_COMMITTER_EMAIL": "t@e.invalid", "PATH": __import__("os").environ["PATH"]})

    audit = tmp_path / "reports" / "acceptance.jsonl"
    audit.parent.mkdir()
    git("init", "-q")
    r1 = json.dumps({"acceptance": 1, "prev_sha256": None}) + "\n"
    audit.write_text(r1)
    _lock_records(tmp_path, r1.encode())
    git("add", "-A")
    git("commit", "-qm", "one")
    assert audit_problem(tmp_path) is None
    audit.write_text("")
    assert "is not a prefix of the current file (first difference at row 1)" in audit_problem(tmp_path)
    audit.unlink()
    git("add", "-A")
    git("commit", "-qm", "deleted")  # a deletion commit does not hide the earlier version
    assert "is not a prefix" in audit_problem(tmp_path)


def _lock_records(root: Path, data: bytes) -> None:
    """bench/test/dvc.lock as DVC writes it after an acceptance whose audit file is `data`."""
    import hashlib

    lock = root / "bench/test/dvc.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(yaml.safe_dump({"schema": "2.0", "stages": {"accept": {"cmd": "python -m stages.accept", "outs": [
        {"path": "reports/metrics/test.json", "hash": "md5", "md5": "0" * 32, "size": 2},
        {"path": "reports/acceptance.jsonl", "hash": "md5", "md5": hashlib.md5(data).hexdigest(), "size": len(data)}]}}}))


APPEND_ROW = """
import json, sys
from pathlib import Path
from bench.acceptance.report import CHAIN, last_line_sha256
path = Path("reports/acceptance.jsonl")
n = len(path.read_bytes().splitlines()) if path.is_file() else 0
row = {"acceptance": n + 1, CHAIN: last_line_sha256(path), "git_commit": "c", "metrics": {"recall@10": 0.25}}
path.parent.mkdir(exist_ok=True)
with open(path, "a", encoding="utf-8") as fh:
    fh.write(json.dumps(row) + "\\n")
"""


def test_forged_last_row_is_refused_uncommitted_or_amended(tmp_path):
    """The probe: the last row of reports/acceptance.jsonl edited (recall 0.25 -> 0.99), then
    the next acceptance chained over it and `--status` said current. The row is now checked
    against the md5 DVC recorded in bench/test/dvc.lock when the stage ended: refused,
    uncommitted and after `git commit --amend`. A real DVC pipeline with the acceptance
    stage's shape (wdir ../.., persist, uncached outs) writes the lock."""
    import os

    from bench.acceptance.report import audit_problem, line_sha256
    from tests.conftest import ROOT

    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e.invalid", "DVC_SITE_CACHE_DIR": str(tmp_path / "site-cache"), "PYTHONPATH": str(ROOT)}
    work = tmp_path / "project"
    (work / "bench/test").mkdir(parents=True)
    (work / "append_row.py").write_text(APPEND_ROW)
    (work / "bench/test/dvc.yaml").write_text(yaml.safe_dump({"stages": {"accept": {
        "wdir": "../..", "cmd": f"{sys.executable} append_row.py", "always_changed": True,
        "outs": [{"reports/acceptance.jsonl": {"cache": False, "persist": True}}]}}}))

    def sh(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(list(args), cwd=work, env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == 0 or not ok, proc.stderr
        return proc

    sh("git", "init", "-q")
    sh(sys.executable, "-m", "dvc", "init", "-q")
    sh("git", "add", "-A")
    sh("git", "commit", "-qm", "project")
    for n in range(2):  # two acceptances, the first committed with the lock DVC wrote, the second not yet
        sh(sys.executable, "-m", "dvc", "repro", "-q", "bench/test/dvc.yaml")
        assert audit_problem(work) is None
        if n == 0:
            sh("git", "add", "-A")
            sh("git", "commit", "-qm", "acceptance 1")
    audit = work / "reports/acceptance.jsonl"
    good = audit.read_bytes()
    lines = good.splitlines(keepends=True)
    forged_row = json.loads(lines[1])
    forged_row["metrics"]["recall@10"] = 0.99
    forged = lines[0] + (json.dumps(forged_row) + "\n").encode()
    refusal = "reports/acceptance.jsonl:2: the last row is not the one the acceptance stage wrote (file md5 "

    audit.write_bytes(forged)  # uncommitted edit of the last row: the chain and git history hold
    from bench.acceptance.report import chain_problem, history_problem

    assert chain_problem(forged) is None and history_problem(work, forged) is None
    reason = audit_problem(work)
    import hashlib

    assert reason == (f"{refusal}{hashlib.md5(forged).hexdigest()[:12]}…, bench/test/dvc.lock records "
                      f"{hashlib.md5(good).hexdigest()[:12]}…): it was edited; restore it from git")
    assert "\n" not in reason and "it was edited; restore it from git" in reason
    # and `bench accept --status` (dvc status of the stage) no longer calls it current
    assert "modified" in sh(sys.executable, "-m", "dvc", "status", "bench/test/dvc.yaml").stdout

    audit.write_bytes(good)
    sh("git", "add", "-A")
    sh("git", "commit", "-qm", "acceptance 2")
    audit.write_bytes(forged)
    sh("git", "commit", "-q", "--amend", "-a", "--no-edit")  # the forgery amended into the commit of row 2
    assert history_problem(work, audit.read_bytes()) is None
    assert audit_problem(work).startswith(refusal)

    # the next acceptance would have chained over the forged row: its chain alone cannot tell
    rechained = forged + (json.dumps({"acceptance": 3, "prev_sha256": line_sha256(forged.splitlines()[1])}) + "\n").encode()
    assert chain_problem(rechained) is None

    sh("git", "reset", "-q", "--hard", "HEAD~1")  # back to acceptance 1, as committed: audit file and lock agree
    assert audit_problem(work) is None
    (work / "bench/test/dvc.lock").unlink()
    assert audit_problem(work).startswith("reports/acceptance.jsonl:1: bench/test/dvc.lock records no acceptance output")
