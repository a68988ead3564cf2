"""The split lock: frozen test ids, rejected split changes, recorded re-freezes."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.annotations.splits import (
    entries_digest,
    freeze,
    load_lock,
    lock_failures,
    lock_text,
    set_triples,
)
from bench.annotations.validate import format_table, validate
from bench.io import LineError, write_text
from tests.conftest import ROOT, write_set

LOCK = ROOT / "bench" / "sets" / "splits.lock"


def triples() -> list[tuple[str, str, str]]:
    return [("a", "a:1", "dev"), ("a", "a:2", "test"), ("a", "a:3", "test"), ("b", "b:1", "dev")]


def make_lock(tmp_path: Path, rows=None) -> tuple[Path, object]:
    lock = freeze(None, rows or triples(), utc="2025-01-01T00:00:00+00:00", git_commit="c0", reason="initial")
    path = tmp_path / "splits.lock"
    write_text(path, lock_text(lock))
    return path, load_lock(path, "bench/sets/splits.lock")


def entries(*pairs: tuple[str, str], key: str = "a") -> list[tuple[dict, str, int, str]]:
    return [({"query_id": q, "split": s}, f"bench/sets/{key}.jsonl", i, key) for i, (q, s) in enumerate(pairs, start=1)]


def test_unchanged_sets_pass(tmp_path):
    _, lock = make_lock(tmp_path)
    assert lock_failures(entries(("a:1", "dev"), ("a:2", "test"), ("a:3", "test")), lock) == []


def test_lock_round_trip_and_lines(tmp_path):
    path, lock = make_lock(tmp_path)
    assert lock_text(lock) == path.read_text()
    assert [e.line for e in lock.entries] == [2, 3, 4, 5]  # line 1 is the freeze record
    assert lock.freezes[0]["changes"] == {"added_to_test": 2, "removed_from_test": 0, "test_to_dev": 0, "dev_to_test": 0}
    assert lock.test_ids() == {"a:2", "a:3"}


def test_test_entry_moved_to_dev(tmp_path):
    _, lock = make_lock(tmp_path)
    rows = lock_failures(entries(("a:1", "dev"), ("a:2", "dev"), ("a:3", "test")), lock)
    assert rows == [{"file": "bench/sets/a.jsonl", "line": 2, "query_id": "a:2", "check": "split lock",
                     "value": "split changed from test (bench/sets/splits.lock:3) to dev without a recorded re-freeze"}]


def test_dev_entry_moved_to_test(tmp_path):
    _, lock = make_lock(tmp_path)
    rows = lock_failures(entries(("a:1", "test"), ("a:2", "test"), ("a:3", "test")), lock)
    assert [(r["line"], r["value"]) for r in rows] == [(1, "split changed from dev (bench/sets/splits.lock:2) to test without a recorded re-freeze")]


def test_test_entry_dropped(tmp_path):
    _, lock = make_lock(tmp_path)
    rows = lock_failures(entries(("a:1", "dev"), ("a:2", "test")), lock)
    assert rows == [{"file": "bench/sets/splits.lock", "line": 4, "query_id": "a:3", "check": "split lock",
                     "value": "test entry dropped from bench/sets/a.jsonl without a recorded re-freeze"}]


def test_new_test_entry_refused_new_dev_entry_allowed(tmp_path):
    _, lock = make_lock(tmp_path)
    rows = lock_failures(entries(("a:1", "dev"), ("a:2", "test"), ("a:3", "test"), ("a:4", "dev"), ("a:5", "test")), lock)
    assert [(r["line"], r["query_id"]) for r in rows] == [(5, "a:5")]
    assert rows[0]["value"].startswith("test entry not in bench/sets/splits.lock: adding to test needs a recorded re-freeze")


def test_dropped_dev_entry_is_fine_and_other_sets_are_not_checked(tmp_path):
    _, lock = make_lock(tmp_path)
    # set b is not being validated: its rows in the lock say nothing about set a
    assert lock_failures(entries(("a:2", "test"), ("a:3", "test")), lock) == []


def test_empty_set_file_drops_its_test_entries(tmp_path):
    _, lock = make_lock(tmp_path)
    rows = lock_failures([(None, "bench/sets/a.jsonl", 0, "a")], lock)
    assert {r["query_id"] for r in rows} == {"a:2", "a:3"}


def test_hand_edited_lock_is_refused(tmp_path):
    path, _ = make_lock(tmp_path)
    text = path.read_text().replace('"query_id": "a:1", "split": "dev"', '"query_id": "a:1", "split": "test"')
    path.write_text(text)
    lock = load_lock(path, "bench/sets/splits.lock")
    rows = lock_failures(entries(("a:1", "test"), ("a:2", "test"), ("a:3", "test")), lock)
    assert len(rows) == 1 and rows[0]["file"] == "bench/sets/splits.lock"
    assert "the lock was edited by hand" in rows[0]["value"]


def test_refreeze_is_recorded_and_keeps_history(tmp_path):
    _, lock = make_lock(tmp_path)
    new_rows = [("a", "a:1", "test"), ("a", "a:2", "dev"), ("b", "b:1", "dev"), ("b", "b:2", "test")]
    new = freeze(lock, new_rows, utc="2025-02-01T00:00:00+00:00", git_commit="c1", reason="fix a grouping bug")
    assert [f["freeze"] for f in new.freezes] == [1, 2]
    assert new.freezes[0] == lock.freezes[0]
    assert new.freezes[1]["changes"] == {"added_to_test": 1, "removed_from_test": 1, "test_to_dev": 1, "dev_to_test": 1}
    assert new.freezes[1]["digest"] == entries_digest(new_rows) == new.digest()
    assert lock_failures(entries(("a:1", "test"), ("a:2", "dev")), new) == []


def test_refreeze_needs_a_reason_and_unique_ids(tmp_path):
    _, lock = make_lock(tmp_path)
    with pytest.raises(ValueError, match="needs a reason"):
        freeze(lock, triples(), utc="t", git_commit=None, reason="  ")
    with pytest.raises(ValueError, match="appears twice"):
        freeze(lock, [*triples(), ("b", "a:1", "dev")], utc="t", git_commit=None, reason="x")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"set": "a", "query_id": "a:1", "split": "dev"}\n', "no freeze record"),
        ("not json\n", "invalid JSON"),
        ('{"freeze": 1}\n', "missing freeze field"),
        ('FREEZE\n{"set": "a", "query_id": "a:1", "split": "train"}\n', "split: must be dev or test"),
        ('FREEZE\n{"set": "a", "query_id": "a:1", "split": "dev"}\n{"set": "a", "query_id": "a:1", "split": "dev"}\n', "listed twice"),
        ('FREEZE\n{"set": "a", "query_id": "a:1", "split": "dev", "x": 1}\n', "exactly the fields"),
    ],
)
def test_malformed_lock_names_line(tmp_path, text, message):
    record = json.dumps({"freeze": 1, "utc": "", "git_commit": None, "reason": "r", "entries": 0, "test": 0, "digest": "", "changes": {}})
    path = tmp_path / "splits.lock"
    path.write_text(text.replace("FREEZE", record))
    with pytest.raises(LineError, match=message) as err:
        load_lock(path, "bench/sets/splits.lock")
    assert str(err.value).startswith("bench/sets/splits.lock")


def test_committed_lock_matches_committed_sets():
    lock = load_lock(LOCK, "bench/sets/splits.lock")
    assert lock.digest() == lock.freezes[-1]["digest"], "splits.lock edited by hand"
    current = set_triples(sorted((ROOT / "bench" / "sets").glob("*.jsonl")))
    assert sorted(current) == sorted((e.set, e.query_id, e.split) for e in lock.entries), (
        "bench/sets changed splits or entries since the last freeze; re-freeze with `bench splits freeze --reason ...`"
    )


# --------------------------------------------------------------------------- with the validator


def _dev(key: str) -> dict:
    rows = [json.loads(x) for x in (ROOT / "bench" / "sets" / f"{key}.jsonl").read_text().splitlines() if x.strip()]
    return next(r for r in rows if r["split"] == "dev" and not r["unanswerable"])  # never a test entry


def test_validator_reports_a_split_change_with_file_line_and_query_id(tmp_path, real_corpus):
    dev = _dev("locomo")
    moved = copy.deepcopy(dev)
    moved["split"] = "test"
    path = write_set(tmp_path / "locomo.jsonl", [moved])
    lock = load_lock(LOCK, "bench/sets/splits.lock")
    result = validate([path], real_corpus["manifest"], real_corpus["segments"], root=tmp_path, lock=lock)
    assert not result.ok and result.entries == []
    rows = result.errors[result.errors["query_id"] == dev["query_id"]].to_dict("records")
    assert rows and rows[0]["file"] == "locomo.jsonl" and rows[0]["line"] == 1 and rows[0]["check"] == "split lock"
    assert rows[0]["value"].startswith("split changed from dev (bench/sets/splits.lock:")
    # every locked test entry of the set is missing from this one-line file: each is named
    dropped = result.errors[result.errors["value"].str.startswith("test entry dropped from bench/sets/locomo.jsonl")]
    assert len(dropped) == len(lock.test_ids({"locomo"}))
    assert "split lock" in format_table(result.errors)


def test_validator_without_lock_ignores_splits(tmp_path, real_corpus):
    dev = _dev("locomo")
    moved = dict(dev, split="test")
    path = write_set(tmp_path / "mine.jsonl", [moved])
    assert validate([path], real_corpus["manifest"], real_corpus["segments"], root=tmp_path).ok


def test_cli_freeze_requires_reason_and_records_it(tmp_path):
    (tmp_path / "bench" / "sets").mkdir(parents=True)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    write_set(tmp_path / "bench" / "sets" / "a.jsonl", [{"query_id": "a:1", "split": "test"}, {"query_id": "a:2", "split": "dev"}])
    env = {k: v for k, v in os.environ.items() if not k.startswith("DVC_EXP")}
    cmd = [sys.executable, "-c", "from bench.cli import main; main()", "splits", "freeze"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "--reason" in proc.stderr
    proc = subprocess.run([*cmd, "--reason", "first"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    lock = load_lock(tmp_path / "bench" / "sets" / "splits.lock")
    assert lock.freezes[-1]["reason"] == "first" and lock.test_ids() == {"a:1"}
    proc = subprocess.run([*cmd, "--reason", "tuning"], cwd=tmp_path, env={**env, "DVC_EXP_NAME": "x"}, capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "inside a DVC experiment" in proc.stderr


# -- the lock against the committed one (git HEAD) -----------------------------------


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def _real_lock_repo(tmp_path: Path) -> Path:
    """A git repository whose HEAD holds the real committed split lock."""
    repo = tmp_path / "repo"
    (repo / "bench" / "sets").mkdir(parents=True)
    shutil.copy(LOCK, repo / "bench" / "sets" / "splits.lock")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "lock")
    return repo


def _move_one_test_entry_to_dev(lock) -> list[tuple[str, str, str]]:
    moved = next(e for e in lock.entries if e.split == "test" and e.set == "locomo")
    return [(e.set, e.query_id, "dev" if e is moved else e.split) for e in lock.entries]


def test_hand_edit_with_recomputed_digest_is_refused(tmp_path):
    """A locomo test row flipped to dev by hand and freeze N's digest recomputed: the
    digest check alone passes it; against HEAD's lock it is refused."""
    from bench.annotations.splits import committed_lock, history_failures

    repo = _real_lock_repo(tmp_path)
    path = repo / "bench" / "sets" / "splits.lock"
    head = committed_lock(repo)
    assert head is not None and history_failures(load_lock(path), head) == []
    rows = _move_one_test_entry_to_dev(head)
    forged = type(head)((*head.freezes[:-1], {**head.freezes[-1], "digest": entries_digest(rows)}),
                        tuple(type(head.entries[0])(s, q, sp, 0) for s, q, sp in sorted(rows)), head.display)
    write_text(path, lock_text(forged))
    lock = load_lock(path, "bench/sets/splits.lock")
    assert lock_failures([], lock) == []  # the recomputed digest fools the digest check
    rows_out = history_failures(lock, committed_lock(repo))
    assert len(rows_out) == 1
    assert rows_out[0]["value"].startswith(f"freeze {head.freezes[-1]['freeze']} differs from the committed lock's (HEAD): committed freezes are never rewritten")


def test_hand_edit_with_a_forged_freeze_record_is_refused(tmp_path):
    from bench.annotations.splits import committed_lock, history_failures

    repo = _real_lock_repo(tmp_path)
    head = committed_lock(repo)
    rows = _move_one_test_entry_to_dev(head)
    honest = freeze(head, rows, utc="2026-01-01T00:00:00+00:00", git_commit="c", reason="regrouped one conversation")
    assert history_failures(honest, head) == []  # what `bench splits freeze` writes passes
    lying = type(honest)((*honest.freezes[:-1], {**honest.freezes[-1], "changes": {k: 0 for k in honest.freezes[-1]["changes"]}}),
                         honest.entries, honest.display)
    out = history_failures(lying, head)
    assert len(out) == 1 and "records changes" in out[0]["value"] and "'test_to_dev': 1" in out[0]["value"]
    # rows edited, no freeze since HEAD's, digest of the old freeze untouched: the digest check and history both refuse
    stale = type(head)(head.freezes, honest.entries, head.display)
    assert "no freeze was recorded since" in history_failures(stale, head)[0]["value"]
    # a committed freeze deleted (HEAD holds the honest re-freeze; the lock went back by hand)
    last = honest.freezes[-1]["freeze"]
    assert history_failures(head, honest)[0]["value"].startswith(f"freeze {last} of the committed lock (HEAD) is missing: committed freezes are never deleted")


def test_outside_git_only_the_digest_is_checked(tmp_path):
    from bench.annotations.splits import committed_lock

    make_lock(tmp_path)
    assert committed_lock(tmp_path) is None
