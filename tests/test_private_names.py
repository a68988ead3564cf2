"""No private name crosses a module: a project module (bench/, stages/, benchmarks/) never imports
another module's ``_name`` nor reads ``module._name`` of a project module it imported. What another
module needs is public (no underscore) in the module that owns it. Dunder names (``__version__``)
are not private. Found with the same AST walk as tests/test_imports.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_imports import is_project, modules


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _absolute(node: ast.ImportFrom, package: str) -> str:
    base = node.module or ""
    if node.level:
        head = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
        base = f"{head}.{base}" if node.module else head
    return base


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The project module an expression such as ``ocr`` or ``bench.io`` names, if any."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value, aliases)
        return f"{head}.{node.attr}" if head is not None and is_project(f"{head}.{node.attr}") else None
    return None


def crossings(name: str, path: Path, source: str | None = None) -> list[str]:
    """Every use in module `name` of another project module's private name, as 'line N: module._name'."""
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    aliases: dict[str, str] = {}
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if is_project(a.name):
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            for a in node.names:
                if is_project(f"{base}.{a.name}"):
                    aliases[a.asname or a.name] = f"{base}.{a.name}"
                elif is_project(base) and base != name and _private(a.name):
                    found.append(f"line {node.lineno}: {base}.{a.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = _dotted(node.value, aliases)
            if owner is not None and owner != name:
                found.append(f"line {node.lineno}: {owner}.{node.attr}")
    return found


MODULES = modules()


def test_no_module_uses_another_modules_private_name() -> None:
    bad = [f"{name} {hit}" for name, path in MODULES.items() for hit in crossings(name, path)]
    assert not bad, "private names used across modules (make them public where they live): " + "; ".join(bad)


@pytest.mark.parametrize(("module", "planted", "expected"), [
    ("bench.ingest.place", "from bench.io import _umask", "bench.io._umask"),
    ("bench.reporting.leaderboard_page", "from bench.reporting import plots\nplots._figure()", "bench.reporting.plots._figure"),
    ("benchmarks.case_ocr", "import bench.modalities.ocr\nbench.modalities.ocr._engine_of(1)", "bench.modalities.ocr._engine_of"),
    ("bench.gold.memories", "from ..systems.credit.provenance import _x", "bench.systems.credit.provenance._x"),
])
def test_a_planted_crossing_is_found(module: str, planted: str, expected: str) -> None:
    path = MODULES[module]
    assert not crossings(module, path)
    text = path.read_text(encoding="utf-8") + "\n\ndef _planted():\n    " + planted.replace("\n", "\n    ") + "\n"
    assert [hit.split(": ")[1] for hit in crossings(module, path, text)] == [expected]


def test_a_module_may_use_its_own_private_names() -> None:
    path = MODULES["bench.io"]
    assert crossings("bench.io", path, path.read_text(encoding="utf-8") + "\nimport bench.io\nbench.io._umask()\n") == []
