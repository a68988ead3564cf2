"""Nothing a command system starts outlives it: the reaper between the harness and the system.

    python -I reaper.py [--status-fd FD] [--setenv NAME VALUE]... -- COMMAND...

The Landlock and `sandbox: off` launches start the system through this script (bubblewrap
needs none: the system is PID 1's child in its own PID namespace, and the kernel kills
every process of a namespace whose first process ends; `--die-with-parent` ends that one
with bwrap). The reaper

* marks itself a child subreaper (``PR_SET_CHILD_SUBREAPER``), so every process of the
  system's tree that is orphaned — a daemon that double-forks and calls ``setsid`` —
  becomes its child instead of init's, and stays findable;
* forks and execs COMMAND (its stdin, stdout and stderr are the system's), then waits;
  the reaper itself keeps no descriptor but its stderr;
* starts with the harness's scrubbed environment and adds the `--setenv` variables (the
  system's own, ``system.env``) only to COMMAND's at that exec, so a loader variable of the
  system never acts in the reaper; with ``--status-fd FD`` the child reports on FD that
  nothing confines COMMAND (``{"launcher": "process"}``: `sandbox: off`) and closes it
  first (under Landlock the launcher it starts reports instead);
* when COMMAND exits, when it is sent SIGTERM, SIGINT or SIGHUP (the harness's kill),
  or when its parent (the harness) is gone, it sends SIGKILL to every process below it,
  found through /proc, pass after pass until none is left (a process that forks while
  it is being killed is caught by the next pass), and exits with COMMAND's status.

The reaper itself runs outside the Landlock domain: a Landlock ABI >= 6 domain cannot
signal it. Under `sandbox: off` the system runs as the same user and could kill the
reaper first (then only its process group is killed): `off` is not isolated.
Standard library only (it runs with ``python -I``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
#: how often the reaper looks whether its parent is gone, in seconds
POLL_S = 0.5
#: passes of SIGKILL over the remaining descendants before it gives up
MAX_PASSES = 2000
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def descendants(root: int) -> list[int]:
    """The live (non-zombie) processes below `root`, from /proc."""
    children: dict[int, list[int]] = {}
    live: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        if fields[0] != b"Z":
            live.add(pid)
    out: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return [p for p in out if p in live]


def reap() -> list[tuple[int, int]]:
    """(pid, status) of every child that has ended, without waiting."""
    out: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return out
        if pid == 0:
            return out
        out.append((pid, status))


def end_all(root: int) -> int:
    """SIGKILL every process below `root` until none is left; the number killed."""
    killed: set[int] = set()
    for _ in range(MAX_PASSES):
        left = descendants(root)
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        reap()
        time.sleep(0.002)
    reap()
    return len(killed)


def supervise(command: list[str], status_fd: int | None = None, setenv: dict[str, str] | None = None) -> int:
    """Run `command` as the only child, end its whole tree when it or the harness is done; its exit code."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"reaper: cannot become a child subreaper (errno {ctypes.get_errno()})", file=sys.stderr)
        return 126
    parent = os.getppid()
    watched = {signal.SIGCHLD, *STOP_SIGNALS}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    child = os.fork()
    if child == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        try:
            if status_fd is not None:
                os.write(status_fd, b'{"launcher": "process"}\n')
                os.close(status_fd)
            os.execvpe(command[0], command, {**os.environ, **(setenv or {})})
        except OSError as exc:
            print(f"reaper: cannot start {command[0]!r}: {exc}", file=sys.stderr)
        os._exit(127)
    for fd in (0, 1):  # the system's stdin and stdout are its own: the harness sees end of file when the tree is gone
        os.close(fd)
    os.closerange(3, 1 << 16)  # the report pipe is the child's: the harness sees its end once the child has exec'd
    status: int | None = None
    stop = False
    while status is None and not stop:
        info = signal.sigtimedwait(watched, POLL_S)
        status = next((st for pid, st in reap() if pid == child), None)
        stop = (info is not None and info.si_signo in STOP_SIGNALS) or os.getppid() != parent
    end_all(os.getpid())
    if status is None:
        return 128 + signal.SIGTERM
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def main(argv: list[str]) -> int:
    status_fd: int | None = None
    setenv: dict[str, str] = {}
    while argv[:1] in (["--status-fd"], ["--setenv"]):
        if argv[0] == "--status-fd" and len(argv) > 1 and argv[1].isdigit():
            status_fd, argv = int(argv[1]), argv[2:]
        elif argv[0] == "--setenv" and len(argv) > 2:
            setenv[argv[1]], argv = argv[2], argv[3:]
        else:
            break
    if len(argv) < 2 or argv[0] != "--":
        print("usage: reaper.py [--status-fd FD] [--setenv NAME VALUE]... -- COMMAND...", file=sys.stderr)
        return 2
    return supervise(argv[1:], status_fd, setenv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
