"""bench.io: atomic writes, permissions, JSONL round trip and strict line errors."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.io import (
    LineError,
    atomic_outputs,
    atomic_writer,
    digest_paths,
    iter_jsonl,
    sha256_bytes,
    sha256_file,
    write_json,
    write_jsonl,
    write_outputs,
    write_parquet,
    write_text,
)


def leftovers(folder) -> list[str]:
    """Temp files the writers leave behind (they are named '.<target>.*.tmp')."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def expected_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


# -- atomic_writer --------------------------------------------------------------


def test_atomic_writer_keeps_old_file_when_writer_raises(tmp_path):
    target = tmp_path / "out.jsonl"
    target.write_text("old content\n", encoding="utf-8")
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_writer(target) as fh:
            fh.write("half of the new ")
            fh.flush()  # the partial bytes really reached the temp file
            raise RuntimeError("boom")
    assert target.read_text(encoding="utf-8") == "old content\n"
    assert leftovers(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_atomic_writer_failure_without_old_file_creates_nothing(tmp_path):
    target = tmp_path / "sub" / "new.bin"
    with pytest.raises(KeyboardInterrupt):
        with atomic_writer(target, "wb") as fh:
            fh.write(b"\x00\x01")
            raise KeyboardInterrupt  # BaseException too: a kill mid-write
    assert not target.exists()
    assert list((tmp_path / "sub").iterdir()) == []


def test_atomic_writer_replaces_and_creates_parents(tmp_path):
    target = tmp_path / "a" / "b" / "out.txt"
    with atomic_writer(target) as fh:
        fh.write("first\n")
    with atomic_writer(target) as fh:
        fh.write("second\n")
    assert target.read_text(encoding="utf-8") == "second\n"
    assert leftovers(target.parent) == []


def test_text_mode_writes_utf8_with_unix_newlines(tmp_path):
    target = tmp_path / "t.txt"
    write_text(target, "ä\nb\n")
    assert target.read_bytes() == "ä\nb\n".encode()


@pytest.mark.parametrize(
    "write",
    [
        lambda p: write_text(p, "x\n"),
        lambda p: write_json(p, {"a": 1}),
        lambda p: write_jsonl(p, [{"a": 1}]),
        lambda p: write_parquet(p, pd.DataFrame({"a": [1, 2]})),
    ],
    ids=["text", "json", "jsonl", "parquet"],
)
def test_outputs_get_umask_permissions_not_0600(tmp_path, write):
    old = os.umask(0o022)
    try:
        target = tmp_path / "out"
        write(target)
        mode = stat.S_IMODE(target.stat().st_mode)
    finally:
        os.umask(old)
    assert mode == 0o644, oct(mode)
    assert mode & stat.S_IRGRP and mode & stat.S_IROTH


def test_permissions_follow_the_current_umask(tmp_path):
    old = os.umask(0o027)
    try:
        write_text(tmp_path / "x", "x")
        mode = stat.S_IMODE((tmp_path / "x").stat().st_mode)
        assert mode == expected_mode() == 0o640
    finally:
        os.umask(old)


def test_write_parquet_failure_leaves_old_file_and_no_temp(tmp_path):
    target = tmp_path / "t.parquet"
    write_parquet(target, pd.DataFrame({"a": [1]}))
    before = target.read_bytes()
    bad = pd.DataFrame({"a": [object()]})  # pyarrow cannot store a bare object
    with pytest.raises(Exception):  # noqa: B017 - whichever error pyarrow raises
        write_parquet(target, bad)
    assert target.read_bytes() == before
    assert leftovers(tmp_path) == []


# -- JSONL round trip -------------------------------------------------------------


ROWS = [
    {"query_id": "q:1", "question": "Wie geht's? 你好 — \"quoted\"\nnext line", "gold": [{"region": {"page": 5}}]},
    {"answer": None, "n": 3, "f": 1.5, "flag": False, "list": [1, "two", None]},
    [1, 2, 3],
    "a bare string",
    0,
]


def test_write_jsonl_iter_jsonl_round_trip(tmp_path):
    path = tmp_path / "rows.jsonl"
    write_jsonl(path, ROWS)
    got = list(iter_jsonl(path))
    assert [n for n, _ in got] == [1, 2, 3, 4, 5]
    assert [row for _, row in got] == ROWS
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == len(ROWS)  # one row per line, embedded newlines escaped
    assert "你好".encode() in raw  # ensure_ascii off: text stays readable


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(json_values, max_size=6))
def test_round_trip_property(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("rt") / "r.jsonl"
    write_jsonl(path, rows)
    assert [r for _, r in iter_jsonl(path)] == rows


def test_blank_lines_skipped_but_counted(tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_bytes(b'{"a": 1}\n\n   \n{"a": 2}\n')
    assert list(iter_jsonl(path)) == [(1, {"a": 1}), (4, {"a": 2})]


def test_write_jsonl_is_byte_deterministic(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", ROWS)
    write_jsonl(tmp_path / "b.jsonl", ROWS)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert sha256_file(tmp_path / "a.jsonl") == sha256_bytes((tmp_path / "b.jsonl").read_bytes())


# -- line errors ----------------------------------------------------------------


def test_invalid_json_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"ok": 1}\n\n{"ok": 2,}\n{"ok": 3}\n')
    seen = []
    with pytest.raises(LineError) as info:
        for lineno, _row in iter_jsonl(path, display="sets/bad.jsonl"):
            seen.append(lineno)
    err = info.value
    assert seen == [1]  # rows before the bad line were yielded
    assert (err.file, err.line) == ("sets/bad.jsonl", 3)
    assert str(err).startswith("sets/bad.jsonl:3: ")
    assert "invalid JSON" in str(err)


def test_invalid_json_default_display_is_the_path(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text("not json\n", encoding="utf-8")
    with pytest.raises(LineError) as info:
        list(iter_jsonl(path))
    assert info.value.file == str(path) and info.value.line == 1
    assert f"{path}:1:" in str(info.value)


def test_non_utf8_bytes_name_file_and_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"a": "ok"}\n{"a": "caf\xe9"}\n')
    with pytest.raises(LineError) as info:
        list(iter_jsonl(path, display="latin1.jsonl"))
    err = info.value
    assert (err.file, err.line) == ("latin1.jsonl", 2)
    assert "UTF-8" in str(err)
    assert "byte 10" in str(err)  # the offending byte's position in the line
    assert str(err).startswith("latin1.jsonl:2: ")


def test_truncated_last_line_is_an_error(tmp_path):
    # what a non-atomic writer killed mid-row would leave behind
    path = tmp_path / "t.jsonl"
    full = json.dumps({"a": 1}) + "\n" + json.dumps({"b": "long value"})
    path.write_text(full[:-5], encoding="utf-8")
    with pytest.raises(LineError) as info:
        list(iter_jsonl(path))
    assert info.value.line == 2


def test_line_error_message_format():
    err = LineError("f.jsonl", 7, "as_of", "not ISO 8601", "yesterday")
    assert str(err) == "f.jsonl:7: as_of: not ISO 8601 (value: yesterday)"
    assert str(LineError("f.jsonl", None, "<file>", "missing")) == "f.jsonl: <file>: missing"


# -- a stage's outputs change together or not at all; a full disk is one line (issue 25) ----


def _outputs(root: Path) -> dict[str, Path]:
    """The evaluate stage's output set, by kind."""
    return {"json": root / "reports/metrics/dev.json", "md": root / "reports/dev.md", "table": root / "reports/per_query/dev.parquet",
            "plot": root / "reports/plots/recall_at_k.csv", "html": root / "reports/dev.html"}


def _write_set(out: dict[str, Path], version: int, html_bytes: int = 2000) -> None:
    import pandas as pd

    from bench.io import write_json, write_parquet, write_text

    write_json(out["json"], {"version": version, "overall": {"recall@10": {"value": 0.5, "n": 2, "denominator": 4}}})
    write_text(out["md"], f"# dev run {version}\n")
    write_parquet(out["table"], pd.DataFrame({"query_id": ["q1", "q2"], "recall@10": [0.0, version / 10]}))
    write_text(out["plot"], f"k,overall\n1,{version}\n")
    write_text(out["html"], f"<html>{version}" + "x" * html_bytes + "</html>\n")


def _snapshot(out: dict[str, Path]) -> dict[str, bytes]:
    return {k: p.read_bytes() for k, p in out.items()}


def _leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob(".*") if p.is_file())


def test_outputs_change_together_or_not_at_all_when_the_disk_fills_mid_set(tmp_path, monkeypatch):
    """The probe's failure: disk full in the middle of evaluate left a new dev.json and
    dev.md beside the old dev.html, table and plots. ENOSPC is raised here by fsync
    of the 4th file (where a full disk reports it on a delayed-allocation file system)."""
    import errno

    from bench.io import DiskFull, atomic_outputs

    out = _outputs(tmp_path)
    _write_set(out, 1)
    before = _snapshot(out)
    real_fsync, calls = os.fsync, []

    def fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 4:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    messages: list[str] = []
    with pytest.raises(DiskFull) as info, atomic_outputs(on_disk_full=messages.append):
        _write_set(out, 2)
    assert str(info.value) == (f"{out['plot']}: no space left on device (ENOSPC) while writing it; the file was left "
                               "as it was; none of this stage's outputs changed")
    assert messages == [str(info.value)] and "\n" not in messages[0]
    assert _snapshot(out) == before  # every old output intact, dev.json and dev.md included
    assert _leftovers(tmp_path) == []  # no temp file left behind
    monkeypatch.setattr(os, "fsync", real_fsync)
    with atomic_outputs():
        _write_set(out, 3)
    assert json.loads(out["json"].read_text())["version"] == 3 and out["plot"].read_text() == "k,overall\n1,3\n"
    assert _leftovers(tmp_path) == []


def test_a_failed_swap_puts_every_old_output_back(tmp_path, monkeypatch):
    """The swap itself failing on its 3rd rename (ENOSPC, EIO ...): the two targets renamed
    so far get their old files back."""
    import errno

    from bench.io import atomic_outputs

    out = _outputs(tmp_path)
    _write_set(out, 1)
    before = _snapshot(out)
    real_replace, calls = os.replace, []

    def replace(src, dst):
        if str(dst) in {str(p) for p in out.values()}:
            calls.append(dst)
            if len(calls) == 3:
                raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="Input/output error"), atomic_outputs():
        _write_set(out, 2)
    assert _snapshot(out) == before and _leftovers(tmp_path) == []


def test_a_new_output_of_a_failed_set_is_not_created(tmp_path):
    from bench.io import atomic_outputs, write_text

    with pytest.raises(RuntimeError), atomic_outputs():
        write_text(tmp_path / "a.txt", "new")
        raise RuntimeError("the stage failed after writing a.txt")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture()
def tiny_disk(tmp_path):
    """A real 64 KiB tmpfs (root only): writes on it meet a real ENOSPC."""
    import subprocess

    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.decode().strip() or proc.returncode}); the monkeypatched tests cover it")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_real_full_disk_mid_set_keeps_the_old_outputs(tiny_disk):
    from bench.io import DiskFull, atomic_outputs

    out = _outputs(tiny_disk)
    _write_set(out, 1)
    before = _snapshot(out)
    with pytest.raises(DiskFull) as info, atomic_outputs():
        _write_set(out, 2, html_bytes=200_000)  # dev.html, the last one, does not fit
    assert str(info.value) == (f"{out['html']}: no space left on device (ENOSPC) while writing it; the file was left as it was; "
                               "none of this stage's outputs changed")
    assert _snapshot(out) == before and _leftovers(tiny_disk) == []


def test_zero_bytes_free_is_one_line_from_a_stage(tiny_disk):
    """0 bytes free: a click stage writing through bench.io ends with one line naming the
    file and exit 1 (it was an ENOSPC traceback)."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    with contextlib.suppress(OSError), open(tiny_disk / "filler", "wb", buffering=0) as fh:
        while True:
            fh.write(b"\0" * 4096)
    assert os.statvfs(tiny_disk).f_bavail == 0
    stage = ("import click\nfrom bench.io import write_json\n@click.command()\ndef main():\n"
             "    write_json('reports/metrics/dev.json', {'recall': 1.0})\nmain()\n")
    (tiny_disk / "reports/metrics").mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-c", stage], cwd=tiny_disk, capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == "error: reports/metrics/dev.json: no space left on device (ENOSPC) while writing it; the file was left as it was"


FULL_AT_HTML = '''
import errno, os
_real = os.fsync
def _fsync(fd):
    if ".dev.html." in os.readlink(f"/proc/self/fd/{fd}"):  # the evaluate stage's last output: the disk is full there
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    _real(fd)
os.fsync = _fsync
'''


@pytest.mark.e2e
def test_disk_full_in_the_middle_of_the_evaluate_stage_changes_no_output(tmp_path, reproduced):
    """The probe, on the evaluate stage of a reproduced project: the disk fills while it
    writes dev.html (after dev.json, dev.md, the per-query tables and the plots). Every
    output stays as the previous run wrote it, and stderr is one line. The new run differs
    (another bootstrap seed), so an output written anyway would show."""
    import sys

    import yaml

    from tests.project_copy import clone_project, project_env, run

    work = clone_project(reproduced, tmp_path / "full")
    outputs = ["reports/metrics/dev.json", "reports/dev.md", "reports/per_query/dev.parquet", "reports/dev.html",
               "data/eval/per_query.parquet", *(p.relative_to(work).as_posix() for p in sorted((work / "reports/plots").glob("*.csv")))]
    before = {f: (work / f).read_bytes() for f in outputs}
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["metrics"]["bootstrap_seed"] = int(params["metrics"].get("bootstrap_seed", 0)) + 1
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(FULL_AT_HTML)
    env = project_env(tmp_path / "site-cache")
    proc = run([sys.executable, "-m", "stages.evaluate"], work, {**env, "PYTHONPATH": str(hook)}, ok=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == ("error: reports/dev.html: no space left on device (ENOSPC) while writing it; "
                                                    "the file was left as it was; none of this stage's outputs changed")
    assert {f: (work / f).read_bytes() for f in outputs} == before
    assert [p.name for p in (work / "reports").rglob(".*") if p.suffix in (".tmp", ".old")] == []  # no staged file left
    # the control: with room on the disk, the same run replaces them (dev.json's intervals move with the seed)
    run([sys.executable, "-m", "stages.evaluate"], work, env)
    assert (work / "reports/metrics/dev.json").read_bytes() != before["reports/metrics/dev.json"]


# -- digest_paths, write_outputs ---------------------------------------------------


def test_digest_paths_changes_with_any_file_its_name_or_a_missing_one(tmp_path):
    (tmp_path / "runs" / "sub").mkdir(parents=True)
    (tmp_path / "runs" / "a.parquet").write_bytes(b"rows")
    (tmp_path / "runs" / "sub" / "b.json").write_text("{}")
    (tmp_path / "stats.json").write_text("{}")
    paths = [tmp_path / "runs", tmp_path / "stats.json"]
    base = digest_paths(paths, tmp_path)
    assert digest_paths(paths, tmp_path) == base and len(base) == 64
    (tmp_path / "runs" / "sub" / "b.json").write_text("{ }")
    changed = digest_paths(paths, tmp_path)
    (tmp_path / "runs" / "sub" / "b.json").rename(tmp_path / "runs" / "sub" / "c.json")
    renamed = digest_paths(paths, tmp_path)
    (tmp_path / "stats.json").unlink()
    missing = digest_paths(paths, tmp_path)
    assert len({base, changed, renamed, missing}) == 4


def test_write_outputs_writes_each_kind_as_its_writer_does(tmp_path):
    frame = pd.DataFrame({"query_id": ["q1", "q2"], "recall": [0.5, 1.0]})
    with atomic_outputs():
        write_outputs(tmp_path, {"a/t.parquet": frame, "a/d.json": {"x": 1}, "a/r.md": "# r\n", "a/b.bin": b"\x00\x01"})
    write_parquet(tmp_path / "ref.parquet", frame)
    write_json(tmp_path / "ref.json", {"x": 1})
    assert (tmp_path / "a/t.parquet").read_bytes() == (tmp_path / "ref.parquet").read_bytes()
    assert (tmp_path / "a/d.json").read_bytes() == (tmp_path / "ref.json").read_bytes()
    assert (tmp_path / "a/r.md").read_text() == "# r\n" and (tmp_path / "a/b.bin").read_bytes() == b"\x00\x01"
