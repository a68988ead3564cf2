"""Final acceptance: the only code path that evaluates the test split.

`bench accept` (bench/cli.py) runs the pre-flight checks below and, when none
refuses, runs the one DVC stage of bench/test/dvc.yaml (stages/accept.py) with a
single-use token. Every check returns a one-line reason or None; the functions take
the environment and paths as arguments and read nothing else of the machine, except
`git` and `dvc` asked through subprocesses about the project's own state.

The audit file reports/acceptance.jsonl only grows: each acceptance appends one row
(git commit, params hash, sha256 of manifest, sets and split lock, UTC time, metrics);
earlier rows are kept byte for byte. It is a hash chain: every row carries
`prev_sha256`, the sha256 of the previous line's bytes (null on the first row), and its
`acceptance` number is its line number (rows from before the chain, without the
field, may only lead the file: the first chained row then carries the sha256 of the
last of them, and the git-history check guards them). Before any acceptance, `audit_problem`
verifies the whole chain, the file's git history (every committed version, from
`git log` of HEAD, must be a prefix of the current file) and the last row, which no
successor's digest covers yet: the file's md5 must be the one DVC recorded in
bench/test/dvc.lock when the acceptance stage ended (a chain head outside the
editable file). An edited, reordered or deleted row, committed, amended or not,
refuses the acceptance.

The acceptance stage cannot be walked around: `bench accept` hands it a single-use
token bound to the commit and the params hash it checked (data/.accept-token, JSON),
and the stage itself runs the same `preflight` again (experiment, uncommitted
changes, `dvc status dvc.yaml`, recorded hashes, audit chain and history, and the dev
run's recorded chunking and system equal to params), so a hand-made token changes
nothing: the stage still evaluates only the atoms the committed params produced.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from bench.io import LineError, atomic_writer, dumps_line, iter_jsonl, sha256_bytes, sha256_file, write_bytes, write_json, write_text
from bench.numbers import number
from bench.project.layout import ACCEPT_PIPELINE, ACCEPT_TOKEN, AUDIT, DEV_METRICS, MANIFEST_FILE, SUMMARY, TEST_METRICS, TEST_REPORT
from bench.reporting.report import acceptance_markdown

if TYPE_CHECKING:
    from bench.params import Params

#: environment variable and token file through which `bench accept` calls the stage
TOKEN_ENV = "BENCH_ACCEPT_TOKEN"
TOKEN_FILE = ACCEPT_TOKEN
#: the acceptance pipeline and its stage (not run by a bare `dvc repro` / `dvc exp run`)
PIPELINE = ACCEPT_PIPELINE
STAGE = f"{PIPELINE}:accept"
#: paths whose uncommitted changes refuse an acceptance (code, params, sets, dev run)
GUARDED = ("bench", "stages", "params.yaml", "dvc.yaml", "dvc.lock", "pyproject.toml", DEV_METRICS)
#: written by the acceptance itself; a second acceptance on the same commit may follow
UNGUARDED = ("bench/test/dvc.lock",)
#: set by DVC for the commands of `dvc exp run`, queued or not (dvc/env.py)
EXPERIMENT_ENV = ("DVC_EXP_BASELINE_REV", "DVC_EXP_NAME")


def experiment_reason(env: Mapping[str, str], root: Path) -> str | None:
    """Refuse inside `dvc exp run`, a queued experiment or any DVC stage command."""
    for name in EXPERIMENT_ENV:
        if env.get(name):
            return f"inside a DVC experiment ({name}={env[name]}): acceptance never runs while tuning"
    parts = PurePath(root).parts
    if any(parts[i : i + 3] == (".dvc", "tmp", "exps") for i in range(len(parts))):
        return f"inside a queued DVC experiment's workspace ({root}): acceptance never runs while tuning"
    if env.get("DVC_STAGE"):
        return f"called from the DVC stage {env['DVC_STAGE']}: run `bench accept` yourself, not from a pipeline"
    return None


def token_text(token: str, commit: str | None, params_sha256: str) -> str:
    """The token file `bench accept` writes: the token bound to what it checked."""
    return json.dumps({"token": token, "git_commit": commit, "params_sha256": params_sha256}) + "\n"


def stage_refusal(env: Mapping[str, str], token_file: Path, root: Path | None = None) -> str | None:
    """The acceptance stage's own guard: only `bench accept`'s single-use token opens it,
    and only on the commit and params it was issued for (checked when `root` is given)."""
    for name in EXPERIMENT_ENV:
        if env.get(name):
            return f"inside a DVC experiment ({name}={env[name]}): the test split is never read while tuning"
    token = env.get(TOKEN_ENV, "")
    bound: dict[str, Any] = {}
    if token_file.is_file():
        try:
            loaded = json.loads(token_file.read_text(encoding="utf-8"))
            bound = loaded if isinstance(loaded, dict) else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            bound = {}
    if not token or token != bound.get("token"):
        return "the acceptance stage runs only through `bench accept` (no valid acceptance token)"
    if root is not None:
        head = git_commit(root)
        if head != bound.get("git_commit"):
            return f"the acceptance token was issued for commit {str(bound.get('git_commit'))[:12]}, HEAD is {str(head)[:12]}: run `bench accept` again"
        params = root / "params.yaml"
        if not params.is_file() or sha256_file(params) != bound.get("params_sha256"):
            return "params.yaml changed since `bench accept` checked it: run `bench accept` again"
    return None


def _run(args: Sequence[str], root: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=root, env=dict(env) if env is not None else None, capture_output=True, text=True, check=False)


def git_commit(root: Path) -> str | None:
    proc = _run(["git", "rev-parse", "--verify", "-q", "HEAD"], root)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def uncommitted(root: Path) -> list[str]:
    """Changed or untracked files under the guarded paths (git status --porcelain)."""
    spec = [*GUARDED, *(f":(exclude){p}" for p in UNGUARDED)]
    proc = _run(["git", "status", "--porcelain=v1", "--untracked-files=all", "--", *spec], root)
    if proc.returncode != 0:
        raise RuntimeError(f"git status failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
    return [line[3:] for line in proc.stdout.splitlines() if line.strip()]


def dev_status(root: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """`dvc status dvc.yaml --json` of the dev pipeline: {} when up to date."""
    proc = _run([sys.executable, "-m", "dvc", "status", "dvc.yaml", "--json"], root, env)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        raise RuntimeError(f"dvc status failed: {tail[-1] if tail else proc.returncode}")
    text = proc.stdout.strip()
    start = text.find("{")
    return json.loads(text[start:]) if start >= 0 else {}


def recorded_hash_mismatch(root: Path, set_paths: Sequence[Path], summary: dict, dev_doc: dict, lock: Path | None = None) -> str | None:
    """Manifest, sets and split lock must be the files the dev run recorded, in both records."""
    manifest = root / MANIFEST_FILE
    current: dict[str, Any] = {
        "manifest": sha256_file(manifest),
        "sets": {p.resolve().relative_to(root.resolve()).as_posix(): sha256_file(p) for p in set_paths},
    }
    if lock is not None and lock.is_file():
        current["split_lock"] = sha256_file(lock)
    for name, rec in ((SUMMARY, summary.get("sha256", {})), (DEV_METRICS, dev_doc.get("sha256", {}))):
        if rec.get("manifest") != current["manifest"]:
            return f"bench/corpus/manifest.jsonl: sha256 {current['manifest'][:12]}… differs from the dev run's {str(rec.get('manifest'))[:12]}… ({name})"
        recorded_sets = rec.get("sets", {})
        for path, sha in sorted(current["sets"].items()):
            if recorded_sets.get(path) != sha:
                was = recorded_sets.get(path)
                return f"{path}: sha256 {sha[:12]}… differs from the dev run's {str(was)[:12] + '…' if was else 'none (not in the dev run)'} ({name})"
        for path in sorted(set(recorded_sets) - set(current["sets"])):
            return f"{path}: in the dev run ({name}) but not among the enabled sets now"
        if "split_lock" in current and "split_lock" in rec and rec["split_lock"] != current["split_lock"]:
            return f"bench/sets/splits.lock: sha256 {current['split_lock'][:12]}… differs from the dev run's {rec['split_lock'][:12]}… ({name})"
    return None


CHAIN = "prev_sha256"


def line_sha256(line: bytes) -> str:
    """sha256 of one audit line's bytes, without its newline."""
    return sha256_bytes(line.rstrip(b"\n"))


def chain_problem(data: bytes) -> str | None:
    """The first break in the audit file's hash chain, or None."""
    prev: str | None = None
    legacy = True  # rows written before the chain existed (no prev_sha256 field) may lead the file
    for i, line in enumerate(data.splitlines(), start=1):
        try:
            row = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return f"{AUDIT}:{i}: not a JSON row; the audit file is never rewritten: restore it from git"
        if not isinstance(row, dict):
            return f"{AUDIT}:{i}: not an acceptance row; restore it from git"
        if row.get("acceptance") != i:
            return f"{AUDIT}:{i}: acceptance #{row.get('acceptance')} where #{i} was due: a row was deleted or reordered; restore it from git"
        if legacy and CHAIN not in row:
            prev = line_sha256(line)
            continue
        legacy = False
        if row.get(CHAIN) != prev:
            return (f"{AUDIT}:{i}: {CHAIN} does not match the sha256 of line {i - 1}: an earlier row was edited"
                    f"{'' if i > 1 else ' (the first row has null)'}; restore it from git")
        prev = line_sha256(line)
    return None


def committed_versions(root: Path, rel: str = AUDIT) -> list[tuple[str, bytes]]:
    """(commit, file bytes) of every commit in HEAD's history that changed `rel`
    (b"" where a commit deleted it), newest first."""
    proc = subprocess.run(["git", "log", "--format=%H", "HEAD", "--", rel], cwd=root, capture_output=True, check=False)
    if proc.returncode != 0:
        return []
    out = []
    for commit in proc.stdout.decode().split():
        shown = subprocess.run(["git", "show", f"{commit}:{rel}"], cwd=root, capture_output=True, check=False)
        out.append((commit, shown.stdout if shown.returncode == 0 else b""))
    return out


def history_problem(root: Path, current: bytes) -> str | None:
    """Every committed version of the audit file must be a prefix of the current one."""
    for commit, data in committed_versions(root):
        if not current.startswith(data):
            kept = sum(1 for a, b in zip(data.splitlines(), current.splitlines(), strict=False) if a == b)
            return (f"{AUDIT}: the version committed in {commit[:12]} ({len(data.splitlines())} rows) is not a prefix of the current file "
                    f"(first difference at row {kept + 1}): rows were edited or deleted; restore it with `git checkout {commit[:12]} -- {AUDIT}`")
    return None


#: where DVC records what the acceptance stage wrote: the md5 of each of its outputs
STAGE_LOCK = PurePath(PIPELINE).with_suffix(".lock").as_posix()


def recorded_md5(root: Path, out: str = AUDIT) -> str | None:
    """The md5 DVC recorded in bench/test/dvc.lock for the acceptance stage's output `out`
    (written by DVC when the stage ended, outside the audit file), or None."""
    import yaml

    lock = root / STAGE_LOCK
    try:
        doc = yaml.safe_load(lock.read_text(encoding="utf-8")) if lock.is_file() else None
    except (yaml.YAMLError, UnicodeDecodeError):
        return None
    stage = ((doc or {}).get("stages") or {}).get(STAGE.split(":")[-1]) if isinstance(doc, dict) else None
    for entry in (stage or {}).get("outs") or []:
        if isinstance(entry, dict) and entry.get("path") == out:
            return str(entry.get("md5"))
    return None


def last_row_problem(root: Path, current: bytes) -> str | None:
    """The last row must be the one the acceptance stage wrote: the chain covers every
    row but the last (its successor carries its digest), so the file as a whole must have
    the md5 DVC recorded in bench/test/dvc.lock when the stage ended. An uncommitted edit
    of the last row, or a `git commit --amend` of it, is refused here."""
    rows = len(current.splitlines())
    if rows == 0:
        return None
    recorded = recorded_md5(root)
    if recorded is None:
        return (f"{AUDIT}:{rows}: {STAGE_LOCK} records no acceptance output, so the last row cannot be verified "
                f"as the one the acceptance stage wrote; restore both files from git")
    actual = hashlib.md5(current, usedforsecurity=False).hexdigest()
    if actual != recorded:
        return (f"{AUDIT}:{rows}: the last row is not the one the acceptance stage wrote (file md5 {actual[:12]}…, "
                f"{STAGE_LOCK} records {recorded[:12]}…): it was edited; restore it from git")
    return None


def audit_problem(root: Path) -> str | None:
    """The audit file's chain, git history and last row, verified whole (None when all hold)."""
    path = root / AUDIT
    current = path.read_bytes() if path.is_file() else b""
    return chain_problem(current) or history_problem(root, current) or last_row_problem(root, current)


def dev_run_problem(dev_doc: dict, cfg: Params) -> str | None:
    """The dev run's recorded chunking and system must be the params' (the acceptance
    evaluates the atoms the dev run served)."""
    run = dev_doc.get("run", {}) if isinstance(dev_doc.get("run"), dict) else {}
    if run.get("chunking") != cfg.chunking_written:
        return f"{DEV_METRICS} was made with other chunking than params.yaml's: run `dvc repro` and commit"
    name = cfg.system.name
    if run.get("system") != name:
        return f"{DEV_METRICS} was made with system {run.get('system')!r}, params.yaml names {name!r}: run `dvc repro` and commit"
    return None


def read_audit(path: Path) -> list[dict]:
    """Earlier acceptances; a damaged audit file stops the run (it is never rewritten)."""
    if not path.is_file():
        return []
    rows = []
    for lineno, row in iter_jsonl(path):
        if not isinstance(row, dict) or "git_commit" not in row:
            raise LineError(str(path), lineno, "<row>", "not an acceptance row")
        rows.append(row)
    return rows


def audit_row(
    earlier: list[dict],
    *,
    utc: str,
    git_commit: str | None,
    params_sha256: str,
    sha256: dict[str, Any],
    dev_metrics_sha256: str,
    doc: dict[str, Any],
    test_entries: int,
    prev_sha256: str | None = None,
) -> dict[str, Any]:
    same = [r.get("acceptance") for r in earlier if r.get("git_commit") == git_commit]
    return {
        "acceptance": len(earlier) + 1,
        CHAIN: prev_sha256,
        "utc": utc,
        "git_commit": git_commit,
        "params_sha256": params_sha256,
        "sha256": sha256,
        "dev_metrics_sha256": dev_metrics_sha256,
        "earlier_on_this_commit": same,
        "test_entries": test_entries,
        "invalid_entries": doc["invalid_entries"],
        "run": doc["run"],
        # the isolation the test run ran under (bench/systems/sandbox/isolation.py), on the row itself
        "isolation": doc["run"].get("isolation", "not recorded"),
        "metrics": {"overall": doc["overall"], "by_modality": doc["by_modality"]},
    }


def append_audit(path: Path, row: dict) -> None:
    """Earlier bytes unchanged, one more line, replaced atomically."""
    old = path.read_bytes() if path.is_file() else b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    with atomic_writer(path, "wb") as fh:
        fh.write(old)
        fh.write((dumps_line(row) + "\n").encode("utf-8"))


def describe(row: dict, k: int) -> str:
    o = row["metrics"]["overall"]
    cell = o.get(f"recall@{k}", {})
    mrr = o.get("mrr", {})
    head = f"acceptance #{row['acceptance']} on commit {str(row['git_commit'])[:12]}"
    if row["earlier_on_this_commit"]:
        head += f" (this commit was already accepted: #{', #'.join(str(n) for n in row['earlier_on_this_commit'])}; all rows kept)"
    return (
        f"{head}: recall@{k} {number(cell.get('value'))} (n={cell.get('n')}/{cell.get('denominator')}), "
        f"mrr {number(mrr.get('value'))}; {row['test_entries']} test entries, "
        f"{row['invalid_entries']} invalid"
    )


def dev_thresholds(dev_doc: dict[str, Any]) -> tuple[bool, dict[str, float | None]]:
    """(the dev run read false recall by abstention, its calibrated top-1 threshold per
    modality) from dev.json's ``run.false_recall_rule``; the acceptance reuses them."""
    rules = {m: r for m, r in dev_doc.get("run", {}).get("false_recall_rule", {}).items() if m != "overall"}
    abstains = any(r.get("rule") == "abstention" for r in rules.values())
    return abstains, {m: r.get("threshold_score") for m, r in rules.items()}


def last_line_sha256(path: Path) -> str | None:
    data = path.read_bytes() if path.is_file() else b""
    lines = data.splitlines()
    return line_sha256(lines[-1]) if lines else None


def preflight(root: Path, env: Mapping[str, str], set_paths: Sequence[Path], cfg: Params | None = None, *, in_stage: bool = False) -> str | None:
    """The first reason to refuse an acceptance, or None (checks in docs/acceptance.md's order).

    `bench accept` runs it, and the acceptance stage runs it again itself
    (`in_stage`: the stage's own DVC_STAGE is expected there)."""
    if in_stage and env.get("DVC_STAGE") == STAGE:
        env = {k: v for k, v in env.items() if k != "DVC_STAGE"}
    reason = experiment_reason(env, root)
    if reason:
        return reason
    if git_commit(root) is None:
        return "not a git repository with a commit: acceptance records the commit it ran on"
    changed = uncommitted(root)
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        return f"uncommitted changes to code, params or sets: {changed[0]}{more}; commit them first"
    reason = audit_problem(root)
    if reason:
        return reason
    status = dev_status(root, env)
    if status:
        stage = sorted(status)[0]
        return f"dev metrics are stale: `dvc status dvc.yaml` reports {stage} changed; run `dvc repro` and commit"
    summary_path, dev_path = root / SUMMARY, root / DEV_METRICS
    if not summary_path.is_file() or not dev_path.is_file():
        return f"no dev run recorded ({SUMMARY if not summary_path.is_file() else DEV_METRICS} missing): run `dvc repro` first"
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    dev_doc = json.loads(dev_path.read_text(encoding="utf-8"))
    if cfg is not None:
        reason = dev_run_problem(dev_doc, cfg)
        if reason:
            return reason
    return recorded_hash_mismatch(root, set_paths, summary, dev_doc, root / "bench" / "sets" / "splits.lock")


def stage_env(env: Mapping[str, str], token: str) -> dict[str, str]:
    out = {k: v for k, v in env.items() if k != "DVC_STAGE"}
    out[TOKEN_ENV] = token
    return out


def remove_token(root: Path) -> None:
    try:
        os.unlink(root / TOKEN_FILE)
    except FileNotFoundError:
        pass


#: served-atom columns the system under test is opened with (as the dev retrieve stage does)


# --------------------------------------------------------------------------- the acceptance stage's steps




def acceptance_row(root: Path, doc: dict, *, summary: dict, test_entries: int, params_path: Path) -> dict:
    """The audit row of this acceptance, the chain checked again right before; ValueError (one
    line) when the audit file forbids it. Nothing is written (write_acceptance)."""
    audit = root / AUDIT
    try:
        earlier = read_audit(audit)
    except LineError as exc:
        raise ValueError(f"{exc}; the audit file is never rewritten: repair it from git") from None
    broken = audit_problem(root)
    if broken:
        raise ValueError(f"accept: refused: {broken}")
    row = audit_row(earlier, utc=datetime.now(UTC).isoformat(timespec="seconds"), git_commit=git_commit(root),
                    params_sha256=sha256_file(params_path), sha256=summary["sha256"], dev_metrics_sha256=sha256_file(root / DEV_METRICS),
                    doc=doc, test_entries=test_entries, prev_sha256=last_line_sha256(audit))
    return row


def write_acceptance(root: Path, doc: dict, row: dict, bundle: bytes) -> None:
    """test.json, test.md, the test run's bundle and one more audit row (the stage writes them together: io.atomic_outputs)."""
    from bench.project.layout import TEST_BUNDLE

    write_json(root / TEST_METRICS, doc)
    write_bytes(root / TEST_BUNDLE, bundle)
    write_text(root / TEST_REPORT, acceptance_markdown(doc, row["acceptance"], row["git_commit"]))
    append_audit(root / AUDIT, row)
