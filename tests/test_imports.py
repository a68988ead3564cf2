"""The import graph of the project's own code (bench/, stages/ and benchmarks/): no cycle, no
stage importing a stage, and every import running down the package order (`ORDER`): a package
imports only its own layer or a lower one, so the folders read in the order data flows.

Edges are the imports written in the code, module-level and function-level alike
(a function-level import is still a dependency; hiding a cycle in a function does not
remove it). Found statically with the same AST walk as the DVC deps test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.dvc_deps import ROOT, module_file

PACKAGES = ("bench", "stages", "benchmarks")

#: the package order, lowest first; a module belongs to the longest prefix named here. A module
#: may import its own layer and those below it, never one above (docs/architecture.md).
ORDER: tuple[tuple[str, ...], ...] = (
    ("bench.io", "bench.executor", "bench.progress", "bench.archive", "bench.numbers", "bench.memo", "bench.codegraph"),
    ("bench.modalities",),
    ("bench.params_checks", "bench.params", "bench.corpus_sources"),
    ("bench.ingest",),
    ("bench.annotations",),
    # bench/systems/ by concept (its folders' docstrings): the contract's types (its __init__), then what the adapters
    # may use, the adapters, the sandbox (it reads the launcher's report off the channel), and the run at the top
    ("bench.systems",),
    ("bench.systems.credit", "bench.systems.builtin"),
    ("bench.systems.adapters",),
    ("bench.systems.sandbox",),
    tuple(f"bench.systems.{name}" for name in ("atoms", "config", "partwise", "replay", "replayed", "run", "serve", "session", "step")),
    ("bench.gold",),
    ("bench.evaluation",),
    ("bench.bundle",),
    ("bench.trec", "bench.comparison"),
    ("bench.reporting",),
    ("bench.project", "bench.dvcignore"),
    ("bench.acceptance",),
    ("bench.cli", "bench.cli_validate", "bench.cli_bundle", "bench", "stages", "benchmarks"),
)
CORE = tuple(p for layer in ORDER[:next(i for i, layer in enumerate(ORDER) if 'bench.project' in layer)] for p in layer)
ENTRY_LAYER = ("bench.project", "bench.cli", "bench.cli_validate", "bench.cli_bundle", "stages")


def is_project(name: str) -> bool:
    return name.split(".")[0] in PACKAGES and module_file(name) is not None


def layer(name: str) -> int:
    """The layer of module `name` in ORDER (by its longest listed prefix)."""
    best, found = -1, -1
    for i, prefixes in enumerate(ORDER):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), i
    if found < 0:
        raise AssertionError(f"{name}: in no layer of tests/test_imports.py ORDER; place its package there")
    return found


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[".".join(parts)] = path
    return out


def edges(name: str, path: Path, source: str | None = None) -> dict[str, int]:
    """Project modules `name` imports -> the first line that does (`source`: the text to read
    instead of the file's)."""
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source)
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


def upward(graph: dict[str, dict[str, int]]) -> list[str]:
    """Every import that runs up the package order, as 'module line N imports target'."""
    return [f"{m} line {line} imports {t}" for m, deps in sorted(graph.items()) for t, line in sorted(deps.items())
            if layer(t) > layer(m)]


def test_every_module_has_a_layer() -> None:
    for name in GRAPH:
        layer(name)


def test_imports_run_down_the_package_order() -> None:
    bad = upward(GRAPH)
    assert not bad, "imports up the package order (tests/test_imports.py ORDER): " + "; ".join(bad)


@pytest.mark.parametrize(("module", "planted"), [
    ("bench.modalities.base", "from bench.reporting.report import markdown"),
    ("bench.systems.run", "from bench.gold import resolve"),
    ("bench.evaluation.evaluate", "from bench.reporting.report import metric_table"),
    ("bench.ingest.chunking", "import bench.annotations.schema"),
    # one in each folder of bench/systems/ (issue 52): each may not reach a folder above it
    ("bench.systems", "from bench.systems.adapters import protocol"),
    ("bench.systems.credit.attribution", "from bench.systems.adapters.mcp import McpAdapter"),
    ("bench.systems.builtin.bm25", "from bench.systems.sandbox.workdir import scrubbed_env"),
    ("bench.systems.adapters.mcp", "from bench.systems.sandbox.isolation import prepare_launch"),
    ("bench.systems.sandbox.isolation", "from bench.systems.session import confirmed"),
])
def test_a_planted_upward_import_fails(module: str, planted: str) -> None:
    """The order check sees an upward import written into a real module (module level or in a function)."""
    path = modules()[module]
    text = path.read_text(encoding="utf-8") + "\n\ndef _planted():\n    " + planted + "\n"
    graph = {**GRAPH, module: edges(module, path, text)}
    assert any(line.startswith(f"{module} line ") for line in upward(graph))
    assert not [line for line in upward(GRAPH) if line.startswith(f"{module} line ")]
