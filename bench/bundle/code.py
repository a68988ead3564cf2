"""The digests of code: the harness's own (``harness.json``) and the system's declared code (``system.json``).

The harness's code is every file under ``bench/`` and ``stages/`` with a code suffix (the data
under bench/sets and bench/corpus is not code; its digests are the run's ``sha256`` block),
the two pipeline files and pyproject.toml. Its digest is the sha256 of the lines
``"<file sha256>  <path>\\n"`` sorted by path (sha256sum's format, as a tree digest:
bench.ingest.store), so ``sha256sum`` run over the same files gives the same lines.

A system's declared code (params ``system.code``: files or folders) is named by the sha256 of
each file and the tree digest of each folder; a built-in system's code is the harness's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.ingest.store import hash_tree
from bench.io import sha256_file

__all__ = ["CODE_SUFFIXES", "code_digest", "declared_code", "harness_files", "harness_record"]

CODE_SUFFIXES = (".py", ".yaml", ".css", ".js")
CODE_FOLDERS = ("bench", "stages")
#: folders of bench/ that hold data, not code
DATA_FOLDERS = ("bench/sets", "bench/corpus")
TOP_FILES = ("dvc.yaml", "pyproject.toml")


def harness_files(root: Path) -> dict[str, str]:
    """Path (relative to `root`, posix) -> sha256 of every code file of the harness at `root`."""
    paths = [root / name for name in TOP_FILES if (root / name).is_file()]
    for folder in CODE_FOLDERS:
        for path in (root / folder).rglob("*"):
            rel = path.relative_to(root).as_posix()
            if path.suffix in CODE_SUFFIXES and path.is_file() and "__pycache__" not in path.parts \
                    and not any(rel.startswith(d + "/") for d in DATA_FOLDERS):
                paths.append(path)
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(paths, key=lambda p: p.relative_to(root).as_posix())}


def code_digest(files: Mapping[str, str]) -> str:
    """The digest of a file listing (module docstring)."""
    return hashlib.sha256("".join(f"{files[p]}  {p}\n" for p in sorted(files)).encode("utf-8")).hexdigest()


def harness_record(root: Path) -> dict[str, Any]:
    """``harness.json``: name and version (pyproject.toml's), the code digest and every code file's sha256."""
    import tomllib

    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        project = {}
    files = harness_files(root)
    return {"name": project.get("name", "bench"), "version": project.get("version"), "code_sha256": code_digest(files), "files": files}


def declared_code(code: Sequence[str] | None, root: Path) -> dict[str, str]:
    """Each declared path (as written) -> the sha256 of its file or the tree digest of its folder; a path
    that is no longer there -> "missing" (the bundle says so rather than guessing)."""
    out: dict[str, str] = {}
    for written in code or ():
        path = Path(written) if Path(written).is_absolute() else root / written
        if path.is_file():
            out[written] = sha256_file(path)
        else:
            out[written] = f"tree:{hash_tree(path)[0]}" if path.is_dir() else "missing"
    return out
