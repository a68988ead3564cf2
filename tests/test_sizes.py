"""Size limits of the code (CONTRIBUTING.md): a module under bench/ holds at most 450 lines,
a stage script at most 90 (read the inputs, call bench, write the outputs). Cyclomatic
complexity (at most 12 per function) is ruff's C901, configured in pyproject.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT

MAX_MODULE_LINES = 450
MAX_STAGE_LINES = 90


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def over(paths: list[Path], limit: int) -> list[str]:
    return [f"{p.relative_to(ROOT).as_posix()}: {_lines(p)} lines > {limit}" for p in paths if _lines(p) > limit]


def test_the_check_sees_the_code():
    modules = sorted((ROOT / "bench").rglob("*.py"))
    assert len(modules) > 50 and len(sorted((ROOT / "stages").glob("*.py"))) >= 8
    assert over([max(modules, key=_lines)], 10)  # a limit below the largest module's size is reported


@pytest.mark.parametrize(("folder", "pattern", "limit"), [("bench", "**/*.py", MAX_MODULE_LINES), ("stages", "*.py", MAX_STAGE_LINES)])
def test_no_file_exceeds_its_limit(folder: str, pattern: str, limit: int):
    problems = over(sorted((ROOT / folder).glob(pattern)), limit)
    assert not problems, "\n".join(problems)
