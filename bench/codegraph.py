"""The project modules a piece of code imports, found statically (the DVC deps test and bench.memo).

Why static and not sys.modules after a run: a run imports only what its code path
reached (retrieve imports bench.ingest.corpus only with `system.atoms` set; dense systems only
when chosen), so a run under-reports, and a result (a DVC stage's output, a memo entry) could
be served stale after an edit to code another configuration reaches. The static walk
over-approximates instead:

* every ``import``/``from`` statement of a reached module counts, wherever it stands
  (module level, inside functions, under ``if``/``try``); importing ``a.b.c`` also runs
  ``a`` and ``a.b`` (package ``__init__`` files);
* dynamic imports are not guessed: every ``importlib.import_module``/``__import__``
  call in the project must be one of the sites modelled in ``DYNAMIC`` below
  (:class:`UnmodelledImport` names any other). The modality plug-in loader is modelled by
  name: ``bench.modalities.load(name)`` imports one modality sub-package, the one a stage
  command names (``python -m stages.extract pdf``) when a stage script calls it, and
  every modality when any other module does; ``modalities()``, ``datasets()`` and the
  other functions of ``bench/modalities/__init__.py`` that reach ``load`` import every
  modality, and so does a plain ``import bench.modalities``.

Python files are "project code" when they live under bench/ or stages/. A package
``__init__.py`` that holds nothing but a docstring (and ``from __future__``) is not
counted: it cannot change a result, and the day it gets code it is counted again.
Nothing here imports the code it reads: the built-in systems' modules are read from the
``BUILTINS`` literal of bench/systems/__init__.py.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DYNAMIC", "MODALITIES_PKG", "PACKAGES", "ROOT", "CodeGraph", "ModuleInfo", "UnmodelledImport", "prefixes"]

#: the project root (the folder holding bench/ and stages/)
ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bench", "stages")
MODALITIES_PKG = "bench.modalities"

#: every dynamic import site of the project: (module, function) -> what it imports
#: ("modalities": modality sub-packages per the loader model above)
DYNAMIC: dict[tuple[str, str], str] = {
    ("bench.modalities", "load"): "modalities",
    ("bench.systems", "load_entry_point"): "builtin systems",  # BUILTINS; other entry points are the user's code (params)
    ("bench.systems.atoms", "atom_columns"): "every modality's .modality module",
    # a local data set's parser: the named modality's for `stages.extract <modality>`
    # (it extracts only local data sets of that modality), every modality's otherwise
    ("bench.modalities.local", "parser_of"): "the named modality's .local module",
}


class UnmodelledImport(AssertionError):
    """A dynamic import site the model above does not name."""


@dataclass
class ModuleInfo:
    imports: set[str] = field(default_factory=set)  # project modules imported
    names_from: set[tuple[str, str]] = field(default_factory=set)  # (package, name) from-imported, not a module
    dynamic: list[tuple[str, int]] = field(default_factory=list)  # (enclosing function, line) of dynamic imports


def prefixes(name: str) -> list[str]:
    """`a`, `a.b`, `a.b.c` of `a.b.c` (importing it runs each)."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _import_from_module(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


class CodeGraph:
    """The import graph of the project at `root`; `source(path)` gives a file's text (default: read it),
    `dynamic` the model of dynamic import sites (default: DYNAMIC)."""

    def __init__(self, root: Path = ROOT, source: Callable[[Path], str] | None = None,
                 dynamic: dict[tuple[str, str], str] | None = None) -> None:
        self.root = Path(root)
        self.source = source or (lambda p: p.read_text(encoding="utf-8"))
        self.dynamic = DYNAMIC if dynamic is None else dynamic
        self._infos: dict[str, ModuleInfo] = {}
        self._trees: dict[str, ast.Module] = {}
        self._files: dict[str, Path | None] = {}

    def module_file(self, name: str) -> Path | None:
        if name not in self._files:
            base = self.root.joinpath(*name.split("."))
            found = None
            if (base / "__init__.py").is_file():
                found = base / "__init__.py"
            elif base.with_suffix(".py").is_file():
                found = base.with_suffix(".py")
            self._files[name] = found
        return self._files[name]

    def is_project(self, name: str) -> bool:
        return name.split(".")[0] in PACKAGES and self.module_file(name) is not None

    def modality_names(self) -> list[str]:
        return sorted(p.parent.name for p in (self.root / "bench" / "modalities").glob("*/__init__.py"))

    def trivial(self, path: Path) -> bool:
        """A file with only a docstring and `from __future__` imports."""
        body = self._parsed(path).body
        rest = [n for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str))]
        return all(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in rest)

    def _add(self, info: ModuleInfo, mod: str) -> None:
        info.imports.update(p for p in prefixes(mod) if self.is_project(p))

    def _visit_import_from(self, node: ast.ImportFrom, package: str, info: ModuleInfo) -> None:
        mod = _import_from_module(node, package)
        self._add(info, mod)
        for alias in node.names:
            if self.is_project(f"{mod}.{alias.name}"):
                self._add(info, f"{mod}.{alias.name}")
            elif self.is_project(mod):
                info.names_from.add((mod, alias.name))

    def _visit_call(self, node: ast.Call, func: str, info: ModuleInfo) -> None:
        f = node.func
        called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if called == "__import__" and node.args and isinstance(node.args[0], ast.Constant):
            self._add(info, str(node.args[0].value))  # a literal name: an ordinary import
        elif called in ("import_module", "__import__"):
            info.dynamic.append((func, node.lineno))

    def _visit_one(self, n: ast.AST, func: str, package: str, info: ModuleInfo) -> None:
        if isinstance(n, ast.Import):
            for alias in n.names:
                self._add(info, alias.name)
                if alias.name == MODALITIES_PKG or alias.name.startswith(MODALITIES_PKG + "."):
                    info.names_from.add((MODALITIES_PKG, "*"))  # attribute access can reach the loaders
        elif isinstance(n, ast.ImportFrom):
            self._visit_import_from(n, package, info)
        elif isinstance(n, ast.Call):
            self._visit_call(n, func, info)

    def _parsed(self, path: Path) -> ast.Module:
        key = str(path)
        if key not in self._trees:
            self._trees[key] = ast.parse(self.source(path), filename=key)
        return self._trees[key]

    def analyse(self, name: str) -> ModuleInfo:
        if name not in self._infos:
            path = self.module_file(name)
            assert path is not None, name
            info = ModuleInfo()
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            text = self.source(path)
            dynamic = "import_module" in text or "__import__" in text  # else only import statements matter
            todo: list[ast.AST] = [self._parsed(path)]
            while todo:  # module level; everything inside a function is that (outermost) function's
                node = todo.pop()
                self._visit_one(node, "<module>", package, info)
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and dynamic:
                        for n in ast.walk(child):
                            self._visit_one(n, child.name, package, info)
                    elif dynamic or isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                        todo.append(child)
            self._infos[name] = info
        return self._infos[name]

    def all_loaders(self) -> set[str]:
        """Functions of bench/modalities/__init__.py that import every modality: those that
        call `load` or another such function (`load` itself imports one)."""
        tree = ast.parse(self.source(self.module_file(MODALITIES_PKG)))  # type: ignore[arg-type]
        calls: dict[str, set[str]] = {}
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                calls[node.name] = {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
        loaders = {"load"}
        changed = True
        while changed:
            changed = False
            for fn, called in calls.items():
                if fn not in loaders and called & loaders:
                    loaders.add(fn)
                    changed = True
        return (loaders - {"load"}) | {"*"}

    def builtin_system_modules(self) -> set[str]:
        """The modules of bench.systems.BUILTINS' entry points, read from its literal."""
        tree = ast.parse(self.source(self.module_file("bench.systems")))  # type: ignore[arg-type]
        for node in tree.body:
            target: ast.expr
            value: ast.expr | None
            if isinstance(node, ast.AnnAssign):
                target, value = node.target, node.value
            elif isinstance(node, ast.Assign):
                target, value = node.targets[0], node.value
            else:
                continue
            if isinstance(target, ast.Name) and target.id == "BUILTINS" and isinstance(value, ast.Dict):
                return {str(v.value).partition(":")[0] for v in value.values if isinstance(v, ast.Constant)}
        raise UnmodelledImport("bench/systems/__init__.py: BUILTINS is not a literal dict of 'module:callable' strings")

    def _dynamic_targets(self, mod: str, info: ModuleInfo, named: Sequence[str]) -> set[str]:
        """What the dynamic import sites of `mod` can import (by the DYNAMIC model)."""
        new: set[str] = set()
        for func, line in info.dynamic:
            kind = self.dynamic.get((mod, func))
            if kind is None:
                where = self.module_file(mod).relative_to(self.root)  # type: ignore[union-attr]
                raise UnmodelledImport(f"{where}:{line}: dynamic import in {func}() is not modelled in bench/codegraph.py DYNAMIC")
            if kind == "builtin systems":
                new |= {p for m in self.builtin_system_modules() for p in prefixes(m) if self.is_project(p)}
            elif kind == "every modality's .modality module":
                new |= {f"bench.modalities.{m}.modality" for m in self.modality_names()}
            elif kind == "the named modality's .local module":
                new |= {f"bench.modalities.{m}.local" for m in (named or self.modality_names())}
        return new

    def _loader_targets(self, mod: str, info: ModuleInfo, named: Sequence[str], loaders: set[str]) -> set[str]:
        """The modality packages `mod` reaches by the names it takes from bench.modalities."""
        new: set[str] = set()
        for pkg, name in info.names_from:
            if pkg != MODALITIES_PKG:
                continue
            if name in loaders:
                new |= {f"bench.modalities.{m}" for m in self.modality_names()}
            elif name == "load":
                chosen = named if mod.startswith("stages.") and named else self.modality_names()
                new |= {f"bench.modalities.{m}" for m in chosen}
        return new

    def imported(self, entries: Iterable[str], named: Sequence[str] = ()) -> set[str]:
        """Every project module that importing `entries` can import (`named`: the modalities a
        stage command names; see the module docstring)."""
        loaders = self.all_loaders()
        seen: set[str] = set()
        todo = [p for e in entries for p in prefixes(e) if self.is_project(p)]
        while todo:
            mod = todo.pop()
            if mod in seen:
                continue
            seen.add(mod)
            info = self.analyse(mod)
            new = set(info.imports) | self._dynamic_targets(mod, info, named) | self._loader_targets(mod, info, named, loaders)
            for m in new:
                todo.extend(p for p in prefixes(m) if self.is_project(p))
        return seen

    def code_files(self, entries: Iterable[str], named: Sequence[str] = ()) -> list[Path]:
        """The project files importing `entries` can run, trivial __init__ files left out, sorted."""
        return sorted(p for m in self.imported(entries, named) if (p := self.module_file(m)) is not None and not self.trivial(p))
