"""The code a command system may see: declared (`system.code`), never guessed from its arguments.

`system.code` lists the system's own files and folders (relative to the project root,
or absolute). Without it the code is the one thing the entry names as its program:
the first argument that names an existing file or folder (the script), or the
package of `-m module`. Only the code is shown to the sandboxed system (read-only);
any other path on the command line is passed on as written and stays invisible.

Refused with one line, for the code and for every argument that names an existing path:

* the project folder itself, or a folder above it;
* anything inside a protected folder of the project (bench/sets, data, reports ...);
* anything inside (or above) a mirror root (`fetch.mirror_dirs`) or a local data
  set folder (`local_datasets`): they hold the gold;
* anything inside another checkout of this project (a folder with dvc.yaml and bench/sets);
* anything inside a repository's `.git` folder, anywhere (a git folder holds every
  committed set and run, packed), and a code folder that holds a `.git` below it;
* a code folder that holds set files (JSON lines with query_id and gold), a split
  lock, a checkout, a mirror root or a local data set folder anywhere below it
  (the project's own protected folders below it are hidden instead, so
  `-m bench.systems.serve` shows bench/ without bench/sets and bench/test).

Declared code (and guessed code outside the project) is also checked by content:
bench/systems/sandbox/code_content.py (query ids of any set, also inside .gz/.zip/.parquet;
hard links and byte-identical copies of protected files). A path of a runtime folder is
neither code nor checked, unless it lies in the project or a data root inside that
runtime folder (a checkout at /usr/src/app is checked as any other).

Nothing here reads params.yaml or the environment.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.systems.sandbox.code_content import IdFinder, ProtectedFiles, code_files, id_problem
from bench.systems.sandbox.workdir import SandboxError

SPLIT_LOCK_NAME = "splits.lock"
#: a repository's git folder (or the file naming it): never code, never inside code, anywhere
GIT = ".git"
#: a code folder is walked for set files up to this many entries; a larger one is refused
WALK_LIMIT = 20_000


@dataclass(frozen=True)
class Forbidden:
    """What a system's code may never be, or lie in (the stage fills it in)."""

    project: Path
    protected: Sequence[Path] = ()
    mirrors: Sequence[Path] = ()
    local_datasets: Sequence[Path] = ()
    query_ids: frozenset[str] = frozenset()  # of every set: a code file holding one is refused (code_content.py)

    def resolved(self) -> Forbidden:
        return Forbidden(self.project.resolve(), [p.resolve() for p in self.protected],
                         [p.resolve() for p in self.mirrors], [p.resolve() for p in self.local_datasets], self.query_ids)


@dataclass
class CodePlan:
    argv: list[str]
    visible: list[Path] = field(default_factory=list)  # the declared code, shown read-only
    pythonpath: list[Path] = field(default_factory=list)  # the folders above the packages of `-m`
    packages: list[Path] = field(default_factory=list)  # those packages


def within(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def is_checkout(folder: Path) -> bool:
    """A checkout of this project: dvc.yaml beside bench/sets."""
    return (folder / "dvc.yaml").is_file() and (folder / "bench" / "sets").is_dir()


def is_set_file(path: Path) -> bool:
    """A set file (its first line an entry with query_id and gold) or a split lock."""
    if path.name == SPLIT_LOCK_NAME:
        return True
    if path.suffix != ".jsonl":
        return False
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            first = next((line for line in fh if line.strip()), "")
        row = json.loads(first) if first else None
    except (OSError, ValueError):
        return False
    return isinstance(row, dict) and "query_id" in row and "gold" in row


def _problem(path: Path, fb: Forbidden) -> str | None:
    """Why `path` (resolved) may not be a system's code or argument, or None."""
    if within(fb.project, path):
        return "names the project folder (or above it); name the system's own files or folders"
    if GIT in path.parts:
        return f"is inside a repository's {GIT}/ ({Path(*path.parts[:path.parts.index(GIT) + 1])}), which a system under test may not see"
    for p in fb.protected:
        if within(path, p):
            return f"is inside {p.name}/, which a system under test may not see"
    for kind, roots in (("the mirror root", fb.mirrors), ("the local data set folder", fb.local_datasets)):
        for root in roots:
            if within(path, root) or within(root, path):
                return f"is inside (or holds) {kind} {root}, which holds gold a system under test may not see"
    for folder in (path, *path.parents):
        if folder != fb.project and not within(fb.project, folder) and is_checkout(folder):
            return f"is inside another checkout of this project ({folder}), whose sets a system under test may not see"
    return None


def _below_problem(folder: Path, fb: Forbidden) -> str | None:
    """A set file, split lock or checkout below a code folder (the project's protected folders are skipped: hidden)."""
    seen = 0
    hidden = set(fb.protected)
    for top, dirs, files in os.walk(folder):
        here = Path(top)
        dirs[:] = sorted(d for d in dirs if here / d not in hidden)
        seen += len(dirs) + len(files)
        if seen > WALK_LIMIT:
            return f"is a folder of more than {WALK_LIMIT} entries, too large to check for set files; name the system's own files"
        if here != folder and is_checkout(here):
            return f"holds another checkout of this project ({here})"
        if GIT in dirs or GIT in files:
            return f"holds a repository's {GIT} ({here / GIT}), which a system under test may not see"
        for name in files:
            if is_set_file(here / name):
                return f"holds a set file or split lock ({here / name}), which a system under test may not see"
    return None


def check_path(label: str, arg: str, path: Path, fb: Forbidden, *, code: bool) -> None:
    """Raise SandboxError (one line) when `path` may not be shown to or named for the system."""
    problem = _problem(path, fb)
    if problem is None and code and path.is_dir():
        problem = _below_problem(path, fb)
    if problem is not None:
        raise SandboxError(f"{label}: {arg!r} {problem}")


@dataclass
class ContentCheck:
    """`system.code` checked by content (bench/systems/sandbox/code_content.py): built once per plan, lazily."""

    fb: Forbidden
    _finder: IdFinder | None = None
    _files: ProtectedFiles | None = None

    def __call__(self, label: str, arg: str, path: Path) -> None:
        if self._finder is None:
            self._finder = IdFinder(frozenset(self.fb.query_ids))
            self._files = ProtectedFiles.of([*self.fb.protected, *self.fb.mirrors, *self.fb.local_datasets])
        assert self._files is not None
        for file in code_files(path, self.fb.protected):
            problem = self._files.problem(file) or id_problem(file, self._finder)
            if problem is not None:
                raise SandboxError(f"{label}: {arg!r}: {file} {problem}")


def _module_path(name: str, base: Path) -> Path | None:
    top = name.split(".")[0]
    saved = list(sys.path)
    try:
        sys.path.insert(0, str(base))
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    finally:
        sys.path[:] = saved
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    where = Path(spec.submodule_search_locations[0]) if spec.submodule_search_locations else Path(spec.origin)
    return where.resolve()


def _existing(arg: str, base: Path) -> Path | None:
    if not arg or arg.startswith("-") or "\n" in arg or "\0" in arg:
        return None
    candidate = Path(arg) if os.path.isabs(arg) else base / arg
    try:
        return candidate.resolve() if candidate.exists() else None
    except (OSError, RuntimeError):
        return None


def plan_code(argv: list[str], declared: Sequence[str] | None, base: Path, forbidden: Forbidden,
              runtime: Iterable[Path], own: Iterable[Path] = ()) -> CodePlan:
    """The command line (paths that exist made absolute) and the code to show.

    `declared` is `system.code` (None: the program the entry names, see the module
    docstring); `runtime` folders (the interpreter, /usr) and `own` folders (the
    working folder) are neither code nor checked."""
    fb = forbidden.resolved()
    guarded = [fb.project, *fb.protected, *fb.mirrors, *fb.local_datasets]
    skip = [p.resolve() for p in (*runtime, *own)]

    def skipped(path: Path) -> bool:
        """A path of a runtime folder is not code and not checked, unless it lies in the project, a protected
        path or a data root inside that runtime folder (a checkout under /usr/src is checked as any other)."""
        return any(within(path, r) and not any(g != r and within(g, r) and within(path, g) for g in guarded) for r in skip)

    plan = CodePlan([])
    content = ContentCheck(fb)
    guessed: Path | None = None
    module_next = False
    for i, arg in enumerate(argv):
        if module_next:
            module_next = False
            plan.argv.append(arg)
            where = _module_path(arg, base)
            if where is not None and not skipped(where):
                check_path("system.entry", arg, where, fb, code=declared is None and guessed is None)
                if guessed is None:
                    guessed = where
                plan.pythonpath.append(where.parent)
                plan.packages.append(where)
            continue
        if i > 0 and arg == "-m":
            module_next = True
            plan.argv.append(arg)
            continue
        path = _existing(arg, base)
        if path is None or skipped(path):  # a relative path into a runtime folder (a venv's python) made absolute, unresolved
            plan.argv.append(arg if path is None or os.path.isabs(arg) else os.path.abspath(base / arg))
            continue
        check_path("system.entry", arg, path, fb, code=declared is None and guessed is None)
        if guessed is None:
            guessed = path
        plan.argv.append(str(path))
    plan.visible = _shown_code(declared, guessed, base, fb, content)
    return plan


def _shown_code(declared: Sequence[str] | None, guessed: Path | None, base: Path, fb: Forbidden, content: ContentCheck) -> list[Path]:
    """The code shown: each `system.code` item checked by place and content, else the guessed program
    (by content too when it lies outside the project: the project's own code is the harness's, reviewed in git)."""
    if declared is None:
        if guessed is not None and not within(guessed, fb.project):
            content("system.entry", str(guessed), guessed)
        return [] if guessed is None else [guessed]
    out = []
    for item in declared:
        path = _existing(item, base)
        if path is None:
            raise SandboxError(f"system.code: {item!r} does not exist (relative paths are read from the project root)")
        check_path("system.code", item, path, fb, code=True)
        content("system.code", item, path)
        out.append(path)
    return out


def hidden_below(folder: Path, protected: Iterable[Path]) -> list[Path]:
    """The protected paths strictly below `folder` that exist (bwrap covers them; Landlock leaves them out)."""
    return [p for p in protected if p != folder and p.is_relative_to(folder) and p.exists()]


def allowed_parts(path: Path, protected: Sequence[Path]) -> list[Path]:
    """`path` as the files and folders that cover it except the protected paths below it
    (Landlock grants access to whole hierarchies; the folders above a hidden one get no rule)."""
    below = hidden_below(path, protected) if path.is_dir() else []
    if not below:
        return [path]
    out: list[Path] = []
    for child in sorted(path.iterdir()):
        if child not in below:
            out += allowed_parts(child, below) if any(p.is_relative_to(child) for p in below) else [child]
    return out
