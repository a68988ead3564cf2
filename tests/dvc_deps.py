"""The project modules a DVC stage's command imports, found statically (tests/test_dvc_deps.py).

How imports are found, and why statically, is bench/codegraph.py's docstring: the same walk
keys bench.memo's reuse by the code each result's computation imports. Here: a stage's
command line, its `dvc.yaml` entry, and the check that its deps list exactly that code.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from bench.codegraph import DYNAMIC, ROOT, CodeGraph, UnmodelledImport

__all__ = ["DYNAMIC", "ROOT", "Stage", "UnmodelledImport", "check", "code_files", "command_modules", "imported_modules", "module_file",
           "module_path", "project_code", "stages", "trivial"]

PACKAGES = ("bench", "stages")
_GRAPH = CodeGraph(ROOT)


def module_file(name: str) -> Path | None:
    return _GRAPH.module_file(name)


def trivial(path: Path) -> bool:
    """A file with only a docstring and `from __future__` imports."""
    return _GRAPH.trivial(path)


def command_modules(cmd: str) -> tuple[str, list[str]]:
    """(entry module, arguments) of `python -m pkg.mod args...` or `python path/to/file.py args`."""
    argv = shlex.split(cmd)
    assert argv[0] in ("python", "python3"), f"stage command must start with python: {cmd}"
    if argv[1] == "-m":
        return argv[2], argv[3:]
    rel = Path(argv[1]).with_suffix("")
    return ".".join(rel.parts), argv[2:]


def imported_modules(cmd: str) -> set[str]:
    """Every project module the command can import (bench/codegraph.py; DYNAMIC as this module holds it)."""
    entry, args = command_modules(cmd)
    graph = CodeGraph(ROOT, dynamic=DYNAMIC)
    return graph.imported([entry], [a for a in args if a in graph.modality_names()])


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
