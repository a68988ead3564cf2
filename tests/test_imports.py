"""The import graph of the project's own code: no cycle, no stage importing a stage, and
the core packages free of the entry-point layer (bench.project, bench.cli, stages).

Edges are the imports written in the code, module-level and function-level alike
(a function-level import is still a dependency; hiding a cycle in a function does not
remove it). Found statically with the same AST walk as the DVC deps test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.dvc_deps import ROOT, is_project

CORE = ("bench.ingest", "bench.annotations", "bench.evaluation", "bench.reporting", "bench.modalities", "bench.systems")
ENTRY_LAYER = ("bench.project", "bench.cli", "stages")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in ("bench", "stages"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[".".join(parts)] = path
    return out


def edges(name: str, path: Path) -> dict[str, int]:
    """Project modules `name` imports -> the first line that does."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                head = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{head}.{base}" if node.module else head
            targets = [f"{base}.{a.name}" if is_project(f"{base}.{a.name}") else base for a in node.names]
        for t in targets:
            if is_project(t) and t != name:
                out.setdefault(t, node.lineno)
    return out


GRAPH = {name: edges(name, path) for name, path in modules().items()}


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    found = cycles(GRAPH)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("stage", sorted(n for n in GRAPH if n.startswith("stages.")))
def test_a_stage_imports_no_stage(stage: str) -> None:
    bad = [f"{GRAPH[stage][t]}: {t}" for t in GRAPH[stage] if t.startswith("stages")]
    assert not bad, f"{stage} imports another stage module (line {', '.join(bad)}); shared code belongs in bench/"


def test_core_does_not_import_the_entry_layer() -> None:
    bad = [f"{m} line {line} imports {t}" for m, deps in GRAPH.items() if m.startswith(CORE)
           for t, line in deps.items() if t.startswith(ENTRY_LAYER)]
    assert not bad, "the core takes values as arguments; it never imports the entry layer: " + "; ".join(bad)
