"""bench.dvcignore.lifted: one .dvcignore line lifted for a block, the file restored byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.dvcignore import lifted


def test_line_lifted_and_restored_even_on_error(tmp_path: Path) -> None:
    original = b"__pycache__\n# the acceptance pipeline\n/bench/test/\n*.pyc\n"
    (tmp_path / ".dvcignore").write_bytes(original)
    with lifted(tmp_path, "/bench/test/"):
        assert (tmp_path / ".dvcignore").read_bytes() == b"__pycache__\n# the acceptance pipeline\n*.pyc\n"
    assert (tmp_path / ".dvcignore").read_bytes() == original
    with pytest.raises(RuntimeError), lifted(tmp_path, "/bench/test/"):
        raise RuntimeError("the stage failed")
    assert (tmp_path / ".dvcignore").read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == [".dvcignore"]  # no temp file left


def test_nothing_to_lift(tmp_path: Path) -> None:
    with lifted(tmp_path, "/bench/test/"):
        assert not (tmp_path / ".dvcignore").exists()
    (tmp_path / ".dvcignore").write_text("*.pyc\n")
    with lifted(tmp_path, "/bench/test/"):
        assert (tmp_path / ".dvcignore").read_text() == "*.pyc\n"
