"""Where and how a command system runs: a fresh working folder, a scrubbed environment, bubblewrap.

A command system is started in its own working folder under a per-project temp root:

    <root>/run-<random>/
        atoms.jsonl      the served atoms, each naming its `source_file` (read-only)
        corpus/          the corpus files those atoms come from (read-only)
        scratch/         the system's HOME and TMPDIR (writable)
        .lock            held (flock) by the harness process for as long as it runs

A folder whose lock nobody holds belongs to a run that was killed: `sweep_stale`
removes it at the next start.

Isolation (`system.sandbox`: auto | required | off):

* ``bwrap`` — the command runs inside bubblewrap with a new PID, network, IPC and UTS
  namespace (`--unshare-net`: no network, `--die-with-parent`). It sees only the
  runtime (/usr, the libraries, a few /etc files, the Python prefix), the code its
  command names (read-only; protected project folders inside it are hidden) and
  the working folder. The project folder, the set files and the reports do not
  exist for it.
* ``process`` — no bwrap on this machine (or `sandbox: off`): the command still runs
  in the working folder, in its own process group, with the scrubbed environment;
  the file system is not hidden from it.

Nothing here reads params.yaml or the environment: the stage passes the host
environment, paths and options in.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

SANDBOX_MODES = ("auto", "required", "off")
ISOLATIONS = ("bwrap", "process")

#: host variables a system keeps (everything else, BENCH_* and DVC_* included, is dropped)
ENV_ALLOW = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
ENV_ALLOW_PREFIX = ("LC_",)
#: /etc entries made visible inside bwrap (the dynamic loader, locale, time zone, users, TLS roots)
ETC_VISIBLE = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "timezone", "passwd", "group",
    "nsswitch.conf", "hosts", "mime.types", "ssl", "ca-certificates", "fonts", "locale.alias",
)
#: the modalities whose upstream file is the medium itself (shown as is); other
#: sources are shown as their parsed text, because their upstream files also hold annotations
RAW_MODALITIES = frozenset({"pdf", "image", "ui_screenshot"})
LOCK = ".lock"


class SandboxError(RuntimeError):
    """The sandbox cannot be set up as asked (one line, shown to the user)."""


# --------------------------------------------------------------------------- the temp root


def system_temp_root(project: Path) -> Path:
    """The root of systems' working folders for one checkout: in the system temp folder, outside the project."""
    digest = hashlib.sha256(str(project.resolve()).encode("utf-8")).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"bench-systems-{digest}"


def protected_paths(project: Path) -> list[Path]:
    """What a system under test never sees, even inside a code folder it names."""
    return [project / "bench" / "sets", project / "bench" / "test", project / "data", project / "reports",
            project / ".git", project / ".dvc", project / "dvc.lock"]


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


def new_workdir(root: Path) -> Workdir:
    """A fresh, locked working folder under `root` (created with mode 0700)."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = root / f"run-{secrets.token_hex(6)}"
    path.mkdir(mode=0o700)
    fd = _try_lock(path / LOCK)
    if fd is None:  # pragma: no cover - a fresh random name nobody else knows
        raise SandboxError(f"cannot lock the new working folder {path.name}")
    for sub in ("corpus", "scratch"):
        (path / sub).mkdir()
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
    maps a source of a raw modality to (its path in the store relative to the store's
    dataset folder, the host file). Other sources get their segments (`segments`, a
    frame with source_id) as JSON lines: the corpus text, never an annotation.
    """
    by_source: dict[str, Any] = {}
    if segments is not None and len(segments):
        for sid, grp in segments.groupby("source_id", sort=False):
            by_source[str(sid)] = grp
    out: dict[str, SourceFile] = {}
    for sid, key, modality in sources:
        if modality in RAW_MODALITIES:
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
    """Write parsed-text files; place raw files (bwrap: empty mount points; process: symlinks)."""
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


# --------------------------------------------------------------------------- the command's own code


@dataclass
class CodePlan:
    argv: list[str]
    visible: list[Path] = field(default_factory=list)  # files and folders to show read-only
    pythonpath: list[Path] = field(default_factory=list)


def _within(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def plan_code(argv: list[str], base: Path, protected: Iterable[Path], runtime: Iterable[Path]) -> CodePlan:
    """Rewrite relative paths in `argv` to absolute ones and list the code the command names.

    An argument that names an existing file or folder (relative to `base`, the
    project root, or absolute) is the system's code; so is the package of a
    `-m module`. Code inside a protected folder (the sets, data, reports ...) is
    refused; protected folders inside a code folder are hidden by `bwrap_argv`.
    """
    protected = [p.resolve() for p in protected]
    runtime = [p.resolve() for p in runtime]
    out: list[str] = []
    plan = CodePlan(out)
    module_next = False
    for i, arg in enumerate(argv):
        if module_next:
            module_next = False
            out.append(arg)
            top = arg.split(".")[0]
            saved = list(sys.path)
            try:
                sys.path.insert(0, str(base))
                spec = importlib.util.find_spec(top)
            except (ImportError, ValueError):
                spec = None
            finally:
                sys.path[:] = saved
            if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
                continue
            where = Path(spec.submodule_search_locations[0]) if spec.submodule_search_locations else Path(spec.origin)
            where = where.resolve()
            if any(_within(where, r) for r in runtime):
                continue
            _check_code(arg, where, protected, base)
            plan.visible.append(where)
            plan.pythonpath.append(where.parent)
            continue
        if i > 0 and arg == "-m":
            module_next = True
            out.append(arg)
            continue
        if not arg or arg.startswith("-") or "\n" in arg:
            out.append(arg)
            continue
        candidate = Path(arg) if os.path.isabs(arg) else base / arg
        try:
            exists = candidate.exists()
        except OSError:
            exists = False
        if not exists:
            out.append(arg)
            continue
        resolved = candidate.resolve()
        if any(_within(resolved, r) for r in runtime):
            out.append(arg)
            continue
        _check_code(arg, resolved, protected, base)
        plan.visible.append(resolved)
        out.append(str(resolved))
    return plan


def _check_code(arg: str, path: Path, protected: list[Path], base: Path) -> None:
    root = base.resolve()
    if _within(root, path):
        raise SandboxError(f"system.entry: {arg!r} names the project folder (or above it); name the system's own files or folders")
    for p in protected:
        if _within(path, p):
            raise SandboxError(f"system.entry: {arg!r} is inside {p.name}/, which a system under test may not see")


# --------------------------------------------------------------------------- bubblewrap


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def bwrap_works(bwrap: str) -> tuple[bool, str]:
    """Whether bubblewrap can make the namespaces here (a probe run); (ok, reason)."""
    argv = [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-net", "--unshare-pid",
            "--die-with-parent", "true"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{type(exc).__name__}: {exc}"
    if proc.returncode != 0:
        return False, (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return True, ""


def choose_isolation(mode: str) -> tuple[str, str]:
    """(isolation, note) for `system.sandbox`; `required` without a working bwrap raises SandboxError."""
    if mode not in SANDBOX_MODES:
        raise SandboxError(f"system.sandbox: {mode!r} is not one of {list(SANDBOX_MODES)}")
    if mode == "off":
        return "process", "system.sandbox: off"
    bwrap = bwrap_path()
    if bwrap is None:
        reason = "bwrap (Debian package bubblewrap) is not installed"
    else:
        ok, reason = bwrap_works(bwrap)
        if ok:
            return "bwrap", ""
        reason = f"bwrap cannot run here: {reason}"
    if mode == "required":
        raise SandboxError(f"system.sandbox: required, but {reason}")
    return "process", reason


def runtime_dirs() -> list[Path]:
    """The interpreter's prefixes (shown read-only inside bwrap) plus /usr."""
    dirs = [Path("/usr")]
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, str(Path(sys.executable).resolve().parent.parent)):
        path = Path(p).resolve()
        if path != Path("/") and not any(_within(path, d) for d in dirs):
            dirs.append(path)
    return dirs


def bwrap_argv(
    bwrap: str,
    command: list[str],
    workdir: Workdir,
    files: Mapping[str, SourceFile],
    code: Iterable[Path],
    protected: Iterable[Path],
    runtime: Iterable[Path],
) -> list[str]:
    """The bubblewrap command line that runs `command` with only what it may see."""
    args = [bwrap, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
            "--hostname", "sandbox"]
    for d in runtime:
        args += ["--ro-bind", str(d), str(d)]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        top = Path("/") / name
        if top.is_symlink():
            args += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            args += ["--ro-bind", str(top), str(top)]
    for name in ETC_VISIBLE:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run"]
    protected = [p.resolve() for p in protected]
    for path in code:
        args += ["--ro-bind", str(path), str(path)]
        if path.is_dir():
            for p in protected:
                if p != path and p.is_relative_to(path) and p.exists():
                    args += (["--tmpfs", str(p)] if p.is_dir() else ["--ro-bind", "/dev/null", str(p)])
    wd = workdir.path
    args += ["--dir", str(wd), "--ro-bind", str(workdir.atoms), str(workdir.atoms),
             "--ro-bind", str(workdir.corpus), str(workdir.corpus), "--bind", str(workdir.scratch), str(workdir.scratch)]
    for sf in files.values():
        if sf.host is not None:
            args += ["--ro-bind", str(sf.host), str(wd / sf.relpath)]
    args += ["--chdir", str(wd), "--", *command]
    return args


# --------------------------------------------------------------------------- all together


@dataclass
class Launch:
    """What the command adapter starts: argv (maybe wrapped in bwrap), env, working folder."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    isolation: str


def prepare_launch(
    command: list[str],
    workdir: Workdir,
    files: Mapping[str, SourceFile],
    *,
    isolation: str,
    base: Path,
    protected: Iterable[Path],
    host_env: Mapping[str, str],
) -> Launch:
    """Lay out the working folder and build the launch for `isolation` (bwrap | process)."""
    if isolation not in ISOLATIONS:
        raise SandboxError(f"unknown isolation {isolation!r}")
    protected = list(protected)
    runtime = runtime_dirs()
    code = plan_code(command, base, protected, runtime)
    lay_out(workdir, files, isolation)
    env = scrubbed_env(host_env, workdir.scratch, code.pythonpath)
    argv = code.argv
    if isolation == "bwrap":
        bwrap = bwrap_path()
        if bwrap is None:
            raise SandboxError("bwrap disappeared from PATH")
        argv = bwrap_argv(bwrap, argv, workdir, files, code.visible, protected, runtime)
    return Launch(argv, env, workdir.path, isolation)
