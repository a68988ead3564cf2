"""The project modules a DVC stage's command imports, found statically (tests/test_dvc_deps.py).

Why static and not sys.modules after a run: a run imports only what its code path
reached (retrieve imports bench.ingest.corpus only with `system.atoms` set; dense systems only
when chosen), so a run under-reports and a stage could be served stale after an edit
to code another configuration reaches. The static walk over-approximates instead:

* every ``import``/``from`` statement of a reached module counts, wherever it stands
  (module level, inside functions, under ``if``/``try``); importing ``a.b.c`` also runs
  ``a`` and ``a.b`` (package ``__init__`` files);
* dynamic imports are not guessed: every ``importlib.import_module``/``__import__``
  call in the project must be one of the sites modelled in ``DYNAMIC`` below, or the
  test fails naming it. The modality plug-in loader is modelled by name:
  ``bench.modalities.load(name)`` imports one modality sub-package, the one the
  command names (``python -m stages.extract pdf``) when a stage script calls it, and
  every modality when any other module does; ``modalities()``, ``datasets()`` and the
  other functions of ``bench/modalities/__init__.py`` that reach ``load`` import every
  modality, and so does a plain ``import bench.modalities``.

Python files are "project code" when they live under bench/ or stages/. A package
``__init__.py`` that holds nothing but a docstring (and ``from __future__``) is not
counted: it cannot change a result, and the day it gets code it is counted again.
"""

from __future__ import annotations

import ast
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bench", "stages")
MODALITIES_PKG = "bench.modalities"


def module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def is_project(name: str) -> bool:
    return name.split(".")[0] in PACKAGES and module_file(name) is not None


def modality_names() -> list[str]:
    folder = ROOT / "bench" / "modalities"
    return sorted(p.parent.name for p in folder.glob("*/__init__.py"))


def trivial(path: Path) -> bool:
    """A file with only a docstring and `from __future__` imports."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    rest = [n for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str))]
    return all(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in rest)


@dataclass
class ModuleInfo:
    imports: set[str] = field(default_factory=set)  # project modules imported
    names_from: set[tuple[str, str]] = field(default_factory=set)  # (package, name) from-imported, not a module
    dynamic: list[tuple[str, int]] = field(default_factory=list)  # (enclosing function, line) of dynamic imports
    calls: set[str] = field(default_factory=set)  # names called (for the modality loader's model)


def _prefixes(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _import_from_module(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def _add(info: ModuleInfo, mod: str) -> None:
    info.imports.update(p for p in _prefixes(mod) if is_project(p))


def _visit_import(node: ast.Import, info: ModuleInfo) -> None:
    for alias in node.names:
        _add(info, alias.name)
        if alias.name == MODALITIES_PKG or alias.name.startswith(MODALITIES_PKG + "."):
            info.names_from.add((MODALITIES_PKG, "*"))  # attribute access can reach the loaders


def _visit_import_from(node: ast.ImportFrom, package: str, info: ModuleInfo) -> None:
    mod = _import_from_module(node, package)
    _add(info, mod)
    for alias in node.names:
        if is_project(f"{mod}.{alias.name}"):
            _add(info, f"{mod}.{alias.name}")
        elif is_project(mod):
            info.names_from.add((mod, alias.name))


def _visit_call(node: ast.Call, func: str, info: ModuleInfo) -> None:
    f = node.func
    called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if called:
        info.calls.add(called)
    if called == "__import__" and node.args and isinstance(node.args[0], ast.Constant):
        _add(info, str(node.args[0].value))  # a literal name: an ordinary import
    elif called in ("import_module", "__import__"):
        info.dynamic.append((func, node.lineno))


def _visit(node: ast.AST, func: str, package: str, info: ModuleInfo) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        func = node.name if func == "<module>" else func
    if isinstance(node, ast.Import):
        _visit_import(node, info)
    elif isinstance(node, ast.ImportFrom):
        _visit_import_from(node, package, info)
    elif isinstance(node, ast.Call):
        _visit_call(node, func, info)
    for child in ast.iter_child_nodes(node):
        _visit(child, func, package, info)


def analyse(name: str) -> ModuleInfo:
    path = module_file(name)
    assert path is not None, name
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    info = ModuleInfo()
    _visit(tree, "<module>", name if path.name == "__init__.py" else name.rpartition(".")[0], info)
    return info


def all_loaders() -> set[str]:
    """Functions of bench/modalities/__init__.py that import every modality: those that
    call `load` or another such function (`load` itself imports one)."""
    tree = ast.parse(module_file(MODALITIES_PKG).read_text(encoding="utf-8"))  # type: ignore[union-attr]
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


def builtin_system_modules() -> set[str]:
    from bench.systems import BUILTINS

    return {entry.partition(":")[0] for entry in BUILTINS.values()}


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
    pass


def command_modules(cmd: str) -> tuple[str, list[str]]:
    """(entry module, arguments) of `python -m pkg.mod args...` or `python path/to/file.py args`."""
    argv = shlex.split(cmd)
    assert argv[0] in ("python", "python3"), f"stage command must start with python: {cmd}"
    if argv[1] == "-m":
        return argv[2], argv[3:]
    rel = Path(argv[1]).with_suffix("")
    return ".".join(rel.parts), argv[2:]


def _dynamic_targets(mod: str, info: ModuleInfo, named: list[str]) -> set[str]:
    """What the dynamic import sites of `mod` can import (by the DYNAMIC model)."""
    new: set[str] = set()
    for func, line in info.dynamic:
        kind = DYNAMIC.get((mod, func))
        if kind is None:
            raise UnmodelledImport(f"{module_file(mod).relative_to(ROOT)}:{line}: dynamic import in {func}() is not modelled in tests/dvc_deps.py DYNAMIC")  # type: ignore[union-attr]
        if kind == "builtin systems":
            new |= {p for m in builtin_system_modules() for p in _prefixes(m) if is_project(p)}
        elif kind == "every modality's .modality module":
            new |= {f"bench.modalities.{m}.modality" for m in modality_names()}
        elif kind == "the named modality's .local module":
            new |= {f"bench.modalities.{m}.local" for m in (named or modality_names())}
    return new


def _loader_targets(mod: str, info: ModuleInfo, named: list[str], loaders: set[str]) -> set[str]:
    """The modality packages `mod` reaches by the names it takes from bench.modalities."""
    new: set[str] = set()
    for pkg, name in info.names_from:
        if pkg != MODALITIES_PKG:
            continue
        if name in loaders:
            new |= {f"bench.modalities.{m}" for m in modality_names()}
        elif name == "load":
            chosen = named if mod.startswith("stages.") and named else modality_names()
            new |= {f"bench.modalities.{m}" for m in chosen}
    return new


def imported_modules(cmd: str) -> set[str]:
    """Every project module the command can import (see the module docstring)."""
    entry, args = command_modules(cmd)
    named = [a for a in args if a in modality_names()]
    loaders = all_loaders()
    seen: set[str] = set()
    todo = [p for p in _prefixes(entry) if is_project(p)]
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        info = analyse(mod)
        new = set(info.imports) | _dynamic_targets(mod, info, named) | _loader_targets(mod, info, named, loaders)
        for m in new:
            todo.extend(p for p in _prefixes(m) if is_project(p))
    return seen


def module_path(name: str) -> str:
    return module_file(name).relative_to(ROOT).as_posix()  # type: ignore[union-attr]


def code_files(cmd: str) -> set[str]:
    """Project .py files (relative posix paths) the command imports, trivial __init__ files left out."""
    return {module_path(m) for m in imported_modules(cmd) if not trivial(module_file(m))}  # type: ignore[arg-type]


@dataclass(frozen=True)
class Stage:
    name: str
    dvcfile: str
    cmd: str
    deps: tuple[str, ...]  # relative to ROOT, posix


def stages() -> list[Stage]:
    """Every stage of dvc.yaml and bench/test/dvc.yaml, foreach/matrix resolved by DVC itself."""
    import yaml
    from dvc.parsing import DataResolver
    from dvc.repo import Repo

    repo = Repo(str(ROOT), uninitialized=True)
    out = []
    for dvcfile in ("dvc.yaml", "bench/test/dvc.yaml"):
        folder = (ROOT / dvcfile).parent
        data = yaml.safe_load((ROOT / dvcfile).read_text(encoding="utf-8"))
        resolved = DataResolver(repo, str(folder.relative_to(ROOT)) if folder != ROOT else ".", data).resolve()
        for name, spec in resolved["stages"].items():
            wdir = (folder / spec.get("wdir", ".")).resolve()
            deps = []
            for dep in spec.get("deps", []):
                path = dep if isinstance(dep, str) else next(iter(dep))
                deps.append((wdir / path).resolve().relative_to(ROOT).as_posix())
            out.append(Stage(name, dvcfile, spec["cmd"], tuple(deps)))
    return out


def project_code() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts}


def check(stage: Stage) -> list[str]:
    """Problems with one stage's code deps: imported but not listed, listed but not imported."""
    imported = code_files(stage.cmd)
    code = project_code()
    problems = []
    listed_files = {d for d in stage.deps if d.endswith(".py")}
    listed_dirs = {d for d in stage.deps if (ROOT / d).is_dir() and any(f.startswith(d + "/") for f in code)}
    for f in sorted(imported):
        if f not in listed_files and not any(f.startswith(d + "/") for d in listed_dirs):
            problems.append(f"{stage.dvcfile}:{stage.name}: `{stage.cmd}` imports {f}, which its deps do not list")
    for f in sorted(listed_files):
        if f not in imported:
            problems.append(f"{stage.dvcfile}:{stage.name}: deps list {f}, which `{stage.cmd}` does not import")
    for d in sorted(listed_dirs):
        unused = sorted(f for f in code if f.startswith(d + "/") and f not in imported and not trivial(ROOT / f))
        if unused:
            problems.append(f"{stage.dvcfile}:{stage.name}: deps list {d}/, but `{stage.cmd}` does not import {', '.join(unused)}")
    return problems
