"""Run a command under Landlock (Linux >= 5.13): the launcher the `landlock` isolation starts.

    python -I landlock_exec.py SPEC.json -- COMMAND...
    python -I landlock_exec.py --probe FORBIDDEN_FILE

SPEC is a JSON object: ``read`` (paths to read and execute beneath), ``write`` (paths to
read, write and create beneath: the scratch folder) and ``devices`` (device files to read
and write, e.g. /dev/null). The launcher restricts itself (the kernel then enforces the
rules on it and every child; it cannot be undone) and execs the command:

* the file system: only the paths of SPEC; nothing else can be read, listed, written or
  executed (the project folder, the sets, data/, reports/, $HOME of the user, the mirror);
  ``/proc`` is readable for this process only (its own pid), so ``/proc/<ppid>/cwd`` and
  ``/proc/<ppid>/environ`` are out of reach (and ptrace of processes outside the domain is
  refused by Landlock itself);
* the network: TCP bind and connect are refused (Landlock ABI >= 4); signals to and
  abstract unix sockets of processes outside the domain are refused (ABI >= 6).

What Landlock does not restrict (the kernel's documented limits): ``stat`` of a path
(a system can learn that a file exists, not read it or list its folder), UDP and unix
sockets below ABI 6/8. Run with ``python -I`` (no environment, no user site, not the
script's folder on sys.path): it imports only the standard library and landlockpy.

``--probe`` restricts itself to the runtime and checks that FORBIDDEN_FILE (made by the
caller) can no longer be read: exit 0 when Landlock holds, 3 when it does not, 2 when it
is not available (the reason on stderr).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable

READ_RIGHTS = ("EXECUTE", "READ_FILE", "READ_DIR")
DEVICE_RIGHTS = ("READ_FILE", "WRITE_FILE", "IOCTL_DEV")
PROBE_READ = ("/usr", "/lib", "/lib64", "/bin", "/etc")


def _rights(access: object, names: Iterable[str]) -> object:
    out = None
    for name in names:
        flag = getattr(access, name, None)
        if flag is not None:
            out = flag if out is None else out | flag
    return out


def restrict(read: Iterable[str], write: Iterable[str], devices: Iterable[str] = ()) -> int:
    """Restrict this process (and its future children) to the given paths; the ABI version."""
    import landlockpy as ll

    abi = ll.abi_version()
    if abi < 1:
        raise OSError("the kernel has no Landlock (Linux >= 5.13 with landlock in the LSM list)")
    ruleset = ll.Ruleset(handled_net=ll.net_for_abi(abi), scoped=ll.scope_for_abi(abi))
    with ruleset:
        handled = ruleset.handled_fs
        for path in read:
            if os.path.exists(path):
                # a file rule takes file rights only; READ_DIR on a file is refused by the kernel
                rights = _rights(ll.AccessFS, READ_RIGHTS if os.path.isdir(path) else READ_RIGHTS[:2])
                ruleset.allow_path(path, rights)  # type: ignore[arg-type]
        for path in write:
            if os.path.exists(path):
                ruleset.allow_path(path, handled)
        for path in devices:
            if os.path.exists(path):
                ruleset.allow_path(path, _rights(ll.AccessFS, DEVICE_RIGHTS))  # type: ignore[arg-type]
        own = f"/proc/{os.getpid()}"
        if os.path.isdir(own):
            ruleset.allow_path(own, _rights(ll.AccessFS, READ_RIGHTS[1:]))  # type: ignore[arg-type]
        ruleset.restrict()
    return abi


def probe(forbidden: str) -> int:
    try:
        restrict(PROBE_READ, [])
    except (OSError, ImportError, AttributeError) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    try:
        with open(forbidden, "rb"):
            pass
    except PermissionError:
        return 0
    except OSError as exc:
        print(f"the probe file could not be opened for another reason: {exc}", file=sys.stderr)
        return 3
    print("Landlock is on but did not stop a read outside the rules", file=sys.stderr)
    return 3


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"] and len(argv) == 2:
        return probe(argv[1])
    if len(argv) < 3 or argv[1] != "--":
        print("usage: landlock_exec.py SPEC.json -- COMMAND... | --probe FILE", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as fh:
        spec = json.load(fh)
    try:
        restrict(spec.get("read", []), spec.get("write", []), spec.get("devices", []))
    except (OSError, ImportError, AttributeError) as exc:
        print(f"landlock: cannot restrict: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 126
    command = argv[2:]
    try:
        os.execvpe(command[0], command, dict(os.environ))
    except OSError as exc:
        print(f"landlock: cannot start {command[0]!r}: {exc}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
