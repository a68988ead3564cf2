"""Final acceptance: the only code path that evaluates the test split.

`bench accept` (bench/cli.py) runs the pre-flight checks below and, when none
refuses, runs the one DVC stage of bench/test/dvc.yaml (stages/accept.py) with a
single-use token. Every check returns a one-line reason or None; the functions take
the environment and paths as arguments and read nothing else of the machine, except
`git` and `dvc` asked through subprocesses about the project's own state.

The audit file reports/acceptance.jsonl only grows: each acceptance appends one row
(git commit, params hash, sha256 of manifest, sets and split lock, UTC time, metrics);
earlier rows are kept byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any

from bench.io import LineError, atomic_writer, dumps_line, iter_jsonl, sha256_file

#: environment variable and token file through which `bench accept` calls the stage
TOKEN_ENV = "BENCH_ACCEPT_TOKEN"
TOKEN_FILE = "data/.accept-token"
#: the acceptance pipeline and its stage (not run by a bare `dvc repro` / `dvc exp run`)
PIPELINE = "bench/test/dvc.yaml"
STAGE = f"{PIPELINE}:accept"
AUDIT = "reports/acceptance.jsonl"
TEST_METRICS = "reports/metrics/test.json"
DEV_METRICS = "reports/metrics/dev.json"
SUMMARY = "data/sets/summary.json"
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


def stage_refusal(env: Mapping[str, str], token_file: Path) -> str | None:
    """The acceptance stage's own guard: only `bench accept`'s single-use token opens it."""
    for name in EXPERIMENT_ENV:
        if env.get(name):
            return f"inside a DVC experiment ({name}={env[name]}): the test split is never read while tuning"
    token = env.get(TOKEN_ENV, "")
    expected = token_file.read_text(encoding="utf-8").strip() if token_file.is_file() else ""
    if not token or token != expected:
        return "the acceptance stage runs only through `bench accept` (no valid acceptance token)"
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
    manifest = root / "bench" / "corpus" / "manifest.jsonl"
    current = {
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
) -> dict[str, Any]:
    same = [r.get("acceptance") for r in earlier if r.get("git_commit") == git_commit]
    return {
        "acceptance": len(earlier) + 1,
        "utc": utc,
        "git_commit": git_commit,
        "params_sha256": params_sha256,
        "sha256": sha256,
        "dev_metrics_sha256": dev_metrics_sha256,
        "earlier_on_this_commit": same,
        "test_entries": test_entries,
        "invalid_entries": doc["invalid_entries"],
        "run": doc["run"],
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
    value = cell.get("value")
    return (
        f"{head}: recall@{k} {value if value is None else round(value, 4)} (n={cell.get('n')}/{cell.get('denominator')}), "
        f"mrr {mrr.get('value') if mrr.get('value') is None else round(mrr['value'], 4)}; {row['test_entries']} test entries, "
        f"{row['invalid_entries']} invalid"
    )


def dev_thresholds(dev_doc: dict[str, Any]) -> tuple[bool, dict[str, float | None]]:
    """(the dev run read false recall by abstention, its calibrated top-1 threshold per
    modality) from dev.json's ``run.false_recall_rule``; the acceptance reuses them."""
    rules = {m: r for m, r in dev_doc.get("run", {}).get("false_recall_rule", {}).items() if m != "overall"}
    abstains = any(r.get("rule") == "abstention" for r in rules.values())
    return abstains, {m: r.get("threshold_score") for m, r in rules.items()}


def preflight(root: Path, env: Mapping[str, str], set_paths: Sequence[Path]) -> str | None:
    """The first reason to refuse an acceptance, or None (checks in the README's order)."""
    reason = experiment_reason(env, root)
    if reason:
        return reason
    if git_commit(root) is None:
        return "not a git repository with a commit: acceptance records the commit it ran on"
    changed = uncommitted(root)
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        return f"uncommitted changes to code, params or sets: {changed[0]}{more}; commit them first"
    status = dev_status(root, env)
    if status:
        stage = sorted(status)[0]
        return f"dev metrics are stale: `dvc status dvc.yaml` reports {stage} changed; run `dvc repro` and commit"
    summary_path, dev_path = root / SUMMARY, root / DEV_METRICS
    if not summary_path.is_file() or not dev_path.is_file():
        return f"no dev run recorded ({SUMMARY if not summary_path.is_file() else DEV_METRICS} missing): run `dvc repro` first"
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    dev_doc = json.loads(dev_path.read_text(encoding="utf-8"))
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
