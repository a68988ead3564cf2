"""bench/memo.py: content keys, reuse, misses on anything else, and where a project keeps its memo."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.memo import Memo, code_version
from bench.project.layout import MEMO_DIR, memo_dir


def test_same_key_reuses_other_key_computes(tmp_path: Path) -> None:
    memo = Memo(tmp_path)
    calls: list[int] = []

    def compute(x: int) -> dict:
        calls.append(x)
        return {"x": x, "third": x / 3}

    values = np.arange(10, dtype=np.float64)
    key = memo.key("t", values, 1, {"b": 2, "a": 1})
    assert memo.json("t", key, lambda: compute(1)) == {"x": 1, "third": 1 / 3}
    assert memo.json("t", key, lambda: compute(2)) == {"x": 1, "third": 1 / 3}  # reused, bit for bit
    assert calls == [1] and (memo.hits, memo.misses) == (1, 1)
    assert memo.key("t", values, 1, {"a": 1, "b": 2}) == key  # a dict's order is no part of it
    stale = [memo.key("t", values + 1e-12, 1, {"a": 1, "b": 2}), memo.key("t", values.astype(np.float32), 1, {"a": 1, "b": 2}),
             memo.key("t", values, 2, {"a": 1, "b": 2}), memo.key("u", values, 1, {"a": 1, "b": 2})]
    assert key not in stale and len(set(stale)) == 4
    assert memo.json("t", stale[0], lambda: compute(3)) == {"x": 3, "third": 1.0} and calls == [1, 3]


def test_truncated_or_missing_entry_is_a_miss_and_none_root_stores_nothing(tmp_path: Path) -> None:
    memo = Memo(tmp_path)
    key = memo.key("t", "a")
    memo.text("t", key, lambda: "picture")
    path = next(p for p in tmp_path.rglob("*") if p.is_file())
    path.write_bytes(path.read_bytes()[:-3])  # a run killed mid-write leaves no such file (atomic), but a damaged disk might
    assert memo.text("t", key, lambda: "again") == "again" and memo.misses == 2
    off = Memo(None)
    assert off.text("t", key, lambda: "x") == "x" and off.text("t", key, lambda: "y") == "y" and off.hits == 0


def test_code_version_is_stable_and_part_of_every_key(tmp_path: Path) -> None:
    assert code_version() == code_version() and len(code_version()) == 64
    memo = Memo(tmp_path)
    assert memo.key("t", 1) == memo.key("t", 1) != memo.key("t", 2)


def _project_copy(dest: Path, edit: str | None = None) -> Path:
    """bench/ and stages/ of this checkout copied to `dest`, one file (`edit`) given a new line."""
    import shutil

    from bench.codegraph import ROOT

    for pkg in ("bench", "stages"):
        shutil.copytree(ROOT / pkg, dest / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    if edit is not None:
        path = dest / edit
        path.write_text(path.read_text() + "\nEDITED = True\n")
    return dest


def test_a_key_holds_the_code_its_kind_imports_and_no_other(tmp_path: Path) -> None:
    """Issue 52: an edit of a module the computation does not import keeps the reuse; an
    edit of one it imports (directly or through another module) makes a new key."""
    from bench.codegraph import CodeGraph
    from bench.memo import KIND_CODE

    base = _project_copy(tmp_path / "base")
    unrelated = _project_copy(tmp_path / "unrelated", "bench/ingest/fetch.py")  # the fetch stage's code
    interval = _project_copy(tmp_path / "interval", "bench/evaluation/stats/uncertainty.py")  # what an interval runs
    ci_code = {p.relative_to(base).as_posix() for p in CodeGraph(base).code_files(KIND_CODE["ci"])}
    assert "bench/ingest/fetch.py" not in ci_code and "bench/modalities/boxes.py" in ci_code  # reached only through other modules
    values = np.arange(5, dtype=np.float64)

    def key(root: Path, kind: str) -> str:
        return Memo(tmp_path / "memo", code_root=root).key(kind, values, 1000, 0)

    assert key(unrelated, "ci") == key(base, "ci")  # reuse kept
    assert key(interval, "ci") != key(base, "ci")
    assert key(interval, "atoms") == key(base, "atoms")  # chunking does not run the interval code
    assert key(interval, "evaluate") != key(base, "evaluate")  # the evaluate stage does
    # a kind no table names is keyed by every module of bench: any edit is a new key
    assert key(unrelated, "unnamed") != key(base, "unnamed")
    # the import closure is kept in the memo folder by the files' content, and found again from there
    assert list((tmp_path / "memo" / "imports").rglob("*"))


def test_memo_dir_of_a_project_and_of_a_queued_experiment(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    assert memo_dir(project, {}) == project.resolve() / MEMO_DIR
    exp = project / ".dvc" / "tmp" / "exps" / "tmpabc123"
    assert memo_dir(exp, {}) == project.resolve() / MEMO_DIR  # a queued experiment shares its project's memo
    assert memo_dir(project, {"BENCH_MEMO_DIR": "off"}) is None
    assert memo_dir(project, {"BENCH_MEMO_DIR": str(tmp_path / "m")}) == tmp_path / "m"


def test_prune_deletes_the_least_recently_used_first(tmp_path: Path) -> None:
    import os

    memo = Memo(tmp_path)
    keys = [memo.key("t", i) for i in range(4)]
    for i, key in enumerate(keys):
        memo.put("t", key, b"x" * 100)
        path = next(tmp_path.glob(f"t/*/{key}"))
        os.utime(path, (1000 + i, 1000 + i))
    assert memo.get("t", keys[0]) == b"x" * 100  # used now: the most recent
    assert memo.prune(max_bytes=250) == 2
    assert memo.get("t", keys[0]) is not None and memo.get("t", keys[3]) is not None
    assert memo.get("t", keys[1]) is None and memo.get("t", keys[2]) is None


def test_stored_files_come_back_whole_or_not_at_all(tmp_path: Path) -> None:
    root, memo = tmp_path / "project", Memo(tmp_path / "memo")
    (root / "reports").mkdir(parents=True)
    (root / "reports" / "a.json").write_bytes(b'{"x": 1}\n')
    (root / "reports" / "empty.csv").write_bytes(b"")
    (root / "b.bin").write_bytes(bytes(range(256)) * 3)
    key = memo.key("files", "inputs")
    assert memo.files("files", key) is None
    memo.put_files("files", key, root, ["reports/a.json", "reports/empty.csv", "b.bin"])
    assert memo.files("files", key) == {"reports/a.json": b'{"x": 1}\n', "reports/empty.csv": b"", "b.bin": bytes(range(256)) * 3}
    assert list(memo.files("files", key) or {}) == ["reports/a.json", "reports/empty.csv", "b.bin"]  # in the order stored
    entry = next(p for p in (tmp_path / "memo").rglob("*") if p.is_file())
    data = entry.read_bytes()
    entry.write_bytes(data[:40] + data[41:])  # one byte lost inside, the end marker intact: the sizes no longer add up
    assert memo.files("files", key) is None
    Memo(None).put_files("files", key, root, ["b.bin"])  # reuse off: nothing stored, nothing read
    assert Memo(None).files("files", key) is None
