"""bench.io: atomic writes, permissions, JSONL round trip and strict line errors."""

from __future__ import annotations

import json
import os
import stat

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.io import (
    LineError,
    atomic_writer,
    iter_jsonl,
    read_jsonl,
    sha256_bytes,
    sha256_file,
    write_json,
    write_jsonl,
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
    assert read_jsonl(path) == got


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
        read_jsonl(path)
    assert info.value.file == str(path) and info.value.line == 1
    assert f"{path}:1:" in str(info.value)


def test_non_utf8_bytes_name_file_and_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"a": "ok"}\n{"a": "caf\xe9"}\n')
    with pytest.raises(LineError) as info:
        read_jsonl(path, display="latin1.jsonl")
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
        read_jsonl(path)
    assert info.value.line == 2


def test_line_error_message_format():
    err = LineError("f.jsonl", 7, "as_of", "not ISO 8601", "yesterday")
    assert str(err) == "f.jsonl:7: as_of: not ISO 8601 (value: yesterday)"
    assert str(LineError("f.jsonl", None, "<file>", "missing")) == "f.jsonl: <file>: missing"
