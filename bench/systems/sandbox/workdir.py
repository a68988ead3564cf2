"""Where a command system runs: a fresh working folder and a scrubbed environment.

A command system is started in its own working folder under a per-project temp root:

    <root>/run-<random>/
        atoms.jsonl      the served atoms, each naming its `source_file` (read-only)
        corpus/          the corpus files those atoms come from (read-only)
        scratch/         the system's HOME and TMPDIR (writable)
        .lock            held (flock) by the harness process for as long as it runs

A folder whose lock nobody holds belongs to a run that was killed: `sweep_stale`
removes it at the next start.

How the command is started inside that folder (bubblewrap, Landlock, or a plain
process with `system.sandbox: off`) is bench/systems/sandbox/isolation.py; which code it may
see is bench/systems/sandbox/declared.py.

Nothing here reads params.yaml or the environment: the stage passes the host
environment, paths and options in.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

#: host variables a system keeps (everything else, BENCH_* and DVC_* included, is dropped)
ENV_ALLOW = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
ENV_ALLOW_PREFIX = ("LC_",)
LOCK = ".lock"


class SandboxError(RuntimeError):
    """The sandbox cannot be set up as asked (one line, shown to the user)."""


# --------------------------------------------------------------------------- the temp root


def system_temp_root(project: Path) -> Path:
    """The root of systems' working folders for one checkout: in the system temp folder, outside the project."""
    digest = hashlib.sha256(str(project.resolve()).encode("utf-8")).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"bench-systems-{digest}"


#: a project's own protected paths, relative to it (besides a DVC cache configured outside .dvc/)
PROTECTED = ("bench/sets", "bench/test", "data", "reports", ".git", ".dvc", "dvc.lock")
#: where DVC makes the workspace of a queued or `--temp` experiment: <repository>/.dvc/tmp/exps/...
EXPERIMENTS = (".dvc", "tmp", "exps")


def protected_paths(project: Path) -> list[Path]:
    """What a system under test never sees, even inside a code folder it names: the project's
    sets, data, reports, git and DVC folders, and a DVC cache configured outside .dvc/; the git
    folders of every repository that encloses it (a `.git` file's git folder too); and, for an
    experiment's workspace, the project it was made from (`enclosing`)."""
    project = project.resolve()
    inside = [project / p for p in PROTECTED] + git_folders(project / ".git")
    own = inside + [c for c in dvc_cache_dirs(project) if not c.is_relative_to(project / ".dvc")]
    return list(dict.fromkeys(own + enclosing(project)))


def experiment_origin(project: Path) -> Path | None:
    """The project a DVC experiment's workspace was made from (<origin>/.dvc/tmp/exps/...), or None."""
    parts = project.resolve().parts
    for i in range(len(parts) - len(EXPERIMENTS), 0, -1):
        if parts[i:i + len(EXPERIMENTS)] == EXPERIMENTS:
            return Path(*parts[:i])
    return None


def git_folders(dot_git: Path) -> list[Path]:
    """`dot_git` (a repository's .git) and, when it is a file (a worktree, a submodule), the git folder
    it names and that folder's common folder (the main repository's .git)."""
    if not os.path.lexists(dot_git):
        return []
    out = [dot_git]
    if dot_git.is_file():
        try:
            text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return out
        if text.startswith("gitdir:"):
            target = (dot_git.parent / text.removeprefix("gitdir:").strip()).resolve()
            out.append(target)
            try:
                common = (target / "commondir").read_text(encoding="utf-8", errors="replace").strip()
                out.append((target / common).resolve())
            except OSError:
                pass
    return out


def enclosing(project: Path) -> list[Path]:
    """The protected paths above the project: every enclosing repository's git folders and, in an
    experiment's workspace, the originating project's protected paths (its .git, sets, data/,
    reports/, DVC caches) and everything under its .dvc/ but the folders down to this workspace
    (its other experiments' workspaces, its cache, its tmp)."""
    out: list[Path] = []
    for parent in project.parents:
        out += git_folders(parent / ".git")
    origin = experiment_origin(project)
    if origin is not None:
        out += [origin / p for p in PROTECTED if p != ".dvc"] + git_folders(origin / ".git")
        out += [c for c in dvc_cache_dirs(origin) if not c.is_relative_to(origin / ".dvc")]
        out += around(origin / ".dvc", project)
    return out


def around(top: Path, keep: Path) -> list[Path]:
    """Every entry below `top` that is neither `keep` nor a folder on the way down to it."""
    out: list[Path] = []
    folder = top
    for part in keep.relative_to(top).parts:
        try:
            out += [child for child in sorted(folder.iterdir()) if child.name != part]
        except OSError:
            break
        folder = folder / part
    return out


_SECTION = re.compile(r"^\s*\[(?P<name>[^\]]+)\]\s*$")
_CACHE_DIR = re.compile(r"^\s*dir\s*=\s*(?P<value>.+?)\s*$")


def dvc_cache_dirs(project: Path) -> list[Path]:
    """The `cache.dir` of the project's .dvc/config and .dvc/config.local (relative to .dvc/), resolved."""
    out: list[Path] = []
    for name in ("config", "config.local"):
        try:
            lines = (project / ".dvc" / name).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        section = ""
        for line in lines:
            if match := _SECTION.match(line):
                section = match["name"].strip().strip("'\"")
            elif section == "cache" and (match := _CACHE_DIR.match(line)):
                out.append((project / ".dvc" / match["value"].strip("'\"")).resolve())
    return out


def _try_lock(path: Path) -> int | None:
    """An fd holding an exclusive flock on `path`, or None when another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def sweep_stale(root: Path) -> list[Path]:
    """Remove working folders under `root` whose owner is gone (their lock is free)."""
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    try:
        private_folder(root, "the systems' temp folder")
    except SandboxError:
        return removed  # not ours to clean: new_workdir refuses it with one line
    for folder in sorted(root.glob("run-*")):
        if not folder.is_dir():
            continue
        lock = folder / LOCK
        if not lock.exists():
            try:
                young = time.time() - folder.stat().st_mtime < 60
            except OSError:
                continue
            if young:
                continue  # just made by a run that has not locked it yet
        fd = _try_lock(lock) if lock.exists() else None
        if lock.exists() and fd is None:
            continue  # a live run holds it
        try:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        finally:
            if fd is not None:
                os.close(fd)
    return removed


@dataclass
class Workdir:
    """One run's working folder; `close()` removes it (a killed run's is swept later)."""

    path: Path
    lock_fd: int | None = None

    @property
    def atoms(self) -> Path:
        return self.path / "atoms.jsonl"

    @property
    def corpus(self) -> Path:
        return self.path / "corpus"

    @property
    def scratch(self) -> Path:
        return self.path / "scratch"

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def private_folder(path: Path, what: str) -> None:
    """SandboxError (one line) unless `path` is a folder itself (not a link), owned by this user, closed to others."""
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise SandboxError(f"{what} {path} is not a folder (a link or a file took its place); remove it and run again")
    if st.st_uid != os.geteuid():
        raise SandboxError(f"{what} {path} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()}): someone else made "
                           "it; remove it and run again")
    if st.st_mode & 0o077:
        raise SandboxError(f"{what} {path} has mode {stat.S_IMODE(st.st_mode):04o}: others may enter it; it must be 0700 "
                           f"(chmod 700 {path})")


def new_workdir(root: Path) -> Workdir:
    """A fresh, locked working folder under `root`; both checked: folders of this user with mode 0700.

    `root` is made when missing and checked when found (never reused blindly: a folder
    another user made, a link, or one others may enter stops the stage with one line); the
    working folder is always new (a random name, created here)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    try:
        root.mkdir(mode=0o700)
    except FileExistsError:
        pass
    private_folder(root, "the systems' temp folder")
    path = root / f"run-{secrets.token_hex(6)}"
    path.mkdir(mode=0o700)
    private_folder(path, "the working folder")
    fd = _try_lock(path / LOCK)
    if fd is None:  # pragma: no cover - a fresh random name nobody else knows
        raise SandboxError(f"cannot lock the new working folder {path.name}")
    for sub in ("corpus", "scratch"):
        (path / sub).mkdir(mode=0o700)
    return Workdir(path, fd)


# --------------------------------------------------------------------------- the corpus a system may look at


@dataclass(frozen=True)
class SourceFile:
    """One source's file inside the working folder: a raw host file, or its parsed text."""

    source_id: str
    relpath: str  # relative to the working folder, e.g. corpus/mmlongbench/data/documents/x.pdf
    host: Path | None = None  # the raw file to show (pdf, image, screenshot)
    rows: tuple[dict[str, Any], ...] = ()  # the parsed text (segments), one JSON line each


_UNSAFE = re.compile(r"[^A-Za-z0-9._@-]+")


def safe_name(source_id: str) -> str:
    """A file name for a source id (`locomo:conv-26:session-3` -> `locomo_conv-26_session-3`)."""
    name = _UNSAFE.sub("_", source_id).strip("._") or "source"
    return name[:200]


def _json_value(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "item"):
        return value.item()
    return value


def source_files(
    sources: Iterable[tuple[str, str, str]],
    raw_file: Mapping[str, tuple[str, Path]],
    segments: Any = None,
) -> dict[str, SourceFile]:
    """source_id -> its file in the working folder.

    `sources` are (source_id, dataset key, modality) of the served atoms; `raw_file`
    maps a source whose upstream file is its medium alone (bench.systems.session.raw_files)
    to (its path in the store relative to the store's dataset folder, the host file).
    Other sources get their segments (`segments`, a frame with source_id) as JSON
    lines: the corpus text, never an annotation.
    """
    by_source: dict[str, Any] = {}
    if segments is not None and len(segments):
        for sid, grp in segments.groupby("source_id", sort=False):
            by_source[str(sid)] = grp
    out: dict[str, SourceFile] = {}
    for sid, key, _modality in sources:
        if sid in raw_file:
            rel, host = raw_file[sid]
            out[sid] = SourceFile(sid, f"corpus/{safe_name(key)}/{rel}", host=host)
            continue
        grp = by_source.get(sid)
        if grp is None:
            continue
        cols = [c for c in grp.columns if c not in ("dataset",)]
        rows = tuple({c: _json_value(v) for c, v in zip(cols, r, strict=True)} for r in grp[cols].itertuples(index=False))
        out[sid] = SourceFile(sid, f"corpus/{safe_name(key)}/{safe_name(sid)}.jsonl", rows=rows)
    return out


def lay_out(workdir: Workdir, files: Mapping[str, SourceFile], isolation: str) -> None:
    """Write parsed-text files; place raw files (bwrap: empty mount points; landlock, process: symlinks)."""
    for sf in files.values():
        target = workdir.path / sf.relpath
        if not target.resolve().is_relative_to(workdir.corpus.resolve()):
            raise SandboxError(f"source {sf.source_id}: its file {sf.relpath} would leave the corpus folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        if sf.host is None:
            with open(target, "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps(row, ensure_ascii=False, default=str) + "\n" for row in sf.rows)
        elif isolation == "bwrap":
            target.touch()  # bubblewrap mounts the real file over it, read-only
        else:
            target.symlink_to(sf.host)


# --------------------------------------------------------------------------- environment


def scrubbed_env(host_env: Mapping[str, str], scratch: Path, pythonpath: Iterable[Path] = ()) -> dict[str, str]:
    """The documented allow-list of the host environment, HOME and TMPDIR in scratch."""
    env = {k: v for k, v in host_env.items() if k in ENV_ALLOW or k.startswith(ENV_ALLOW_PREFIX)}
    env.setdefault("PATH", os.defpath)
    env["HOME"] = env["TMPDIR"] = str(scratch)
    paths = [str(p) for p in pythonpath]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # the code is read-only
    return env
