"""Run a command under Landlock (Linux >= 5.13): the launcher the `landlock` isolation starts.

    python -I landlock_exec.py [--status-fd FD] SPEC.json -- COMMAND...
    python -I landlock_exec.py --probe FORBIDDEN_FILE

SPEC is a JSON object: ``read`` (paths to read and execute beneath), ``write`` (paths to
read, write and create beneath: the scratch folder), ``devices`` (device files to read
and write, e.g. /dev/null) and ``env`` (the system's own variables, ``system.env``). The
launcher starts with the harness's scrubbed environment, restricts itself (the kernel then
enforces the rules on it and every child; it cannot be undone), reports on FD what it
holds (one JSON line: ``{"launcher": "landlock", "abi": 7, "capabilities": 0,
"no_new_privs": 1}``, read by bench/systems/adapters/channel.py), closes every descriptor but 0, 1
and 2, and only then execs the command with ``env`` added to its environment: a loader or
interpreter variable of the system (LD_PRELOAD, PYTHONPATH ...) acts in the system's own
process, inside the restrictions, never in the launcher:

* the file system: only the paths of SPEC; nothing else can be read, listed, written or
  executed (the project folder, the sets, data/, reports/, $HOME of the user, the mirror);
  ``/proc`` is readable for this process only (its own pid), so ``/proc/<ppid>/cwd`` and
  ``/proc/<ppid>/environ`` are out of reach (and ptrace of processes outside the domain is
  refused by Landlock itself);
* the network: TCP bind and connect are refused (Landlock ABI >= 4); signals to and
  abstract unix sockets of processes outside the domain are refused (ABI >= 6); named
  unix sockets outside scratch (ABI >= 9) and UDP (ABI >= 10) where the kernel has them;
* privileges: before it restricts itself the launcher sets no_new_privs and drops every
  capability (effective, permitted, inheritable, ambient and the bounding set), so a
  system started as root keeps uid 0 but no capability: no raw socket, no device node,
  no ``open_by_handle_at``, no reading past file modes; a set-uid program cannot give
  any back. It checks /proc/self/status before it goes on.

What Landlock does not restrict (the kernel's documented limits, :func:`unrestricted`
lists them for an ABI, and the isolation note repeats them): ``stat`` of a path (a
system can learn that a file exists, not read it or list its folder); the metadata of
files its user owns (chmod, chown to itself, utime, extended attributes: no Landlock
right covers them; as root that is every root-owned file it can name); UDP below ABI 10
and named unix sockets below ABI 9. Run with ``python -I`` (no environment, no user
site, not the script's folder on sys.path): it imports only the standard library and
landlockpy.

``--probe`` restricts itself to the runtime and checks that FORBIDDEN_FILE (made by the
caller) can no longer be read: exit 0 when Landlock holds (the ABI printed on stdout),
3 when it does not, 2 when it is not available (the reason on stderr).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from collections.abc import Iterable

READ_RIGHTS = ("EXECUTE", "READ_FILE", "READ_DIR")
DEVICE_RIGHTS = ("READ_FILE", "WRITE_FILE", "IOCTL_DEV")
PROBE_READ = ("/usr", "/lib", "/lib64", "/bin", "/etc")
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
CAPABILITY_VERSION_3 = 0x20080522
CAP_FIELDS = ("CapInh", "CapPrm", "CapEff", "CapAmb")


def unrestricted(abi: int) -> list[str]:
    """What a Landlock domain of this ABI does not restrict (for the isolation note)."""
    out = ["stat of paths", "chmod, chown, utime and extended attributes of files its user owns (no Landlock right covers metadata)"]
    if abi < 4:
        out.append("TCP")
    if abi < 6:
        out.append("abstract unix sockets and signals to processes outside it")
    if abi < 9:
        out.append("named unix sockets (ABI 9)")
    if abi < 10:
        out.append("UDP (ABI 10)")
    return out


def capabilities() -> dict[str, int]:
    """This process's capability sets and no_new_privs, from /proc/self/status."""
    with open("/proc/self/status", encoding="ascii") as fh:
        fields = dict(line.split(":", 1) for line in fh if ":" in line)
    out = {k: int(fields[k].strip(), 16) for k in (*CAP_FIELDS, "CapBnd") if k in fields}
    out["NoNewPrivs"] = int(fields.get("NoNewPrivs", "0").strip())
    return out


def drop_capabilities() -> None:
    """no_new_privs, then no capability left in any set (the bounding set too, where this process may drop it).

    Root keeps its uid; what makes root powerful beyond file modes is gone for good."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL on kernels without ambient sets: none to clear
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as fh:
            last = int(fh.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: then there was nothing to drop
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (x2 words): all empty
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    left = capabilities()
    if any(left.get(k, 0) for k in CAP_FIELDS) or not left["NoNewPrivs"] or (os.geteuid() == 0 and left.get("CapBnd", 0)):
        raise OSError(f"capabilities still held after dropping them: {left}")


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
        drop_capabilities()
        abi = restrict(PROBE_READ, [])
    except (OSError, ImportError, AttributeError) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    try:
        with open(forbidden, "rb"):
            pass
    except PermissionError:
        print(abi)
        return 0
    except OSError as exc:
        print(f"the probe file could not be opened for another reason: {exc}", file=sys.stderr)
        return 3
    print("Landlock is on but did not stop a read outside the rules", file=sys.stderr)
    return 3


def report(fd: int | None, abi: int) -> None:
    """What holds the system, on the report pipe `fd` (then closed), read from /proc/self/status after restricting."""
    if fd is None:
        return
    left = capabilities()
    line = {"launcher": "landlock", "abi": abi, "capabilities": sum(left.get(k, 0) for k in CAP_FIELDS),
            "no_new_privs": left["NoNewPrivs"]}  # the bounding set is empty for root (drop_capabilities checks it)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode("ascii"))
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"] and len(argv) == 2:
        return probe(argv[1])
    fd = None
    if argv[:1] == ["--status-fd"] and len(argv) > 1 and argv[1].isdigit():
        fd, argv = int(argv[1]), argv[2:]
    if len(argv) < 3 or argv[1] != "--":
        print("usage: landlock_exec.py [--status-fd FD] SPEC.json -- COMMAND... | --probe FILE", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as fh:
        spec = json.load(fh)
    try:
        drop_capabilities()
        abi = restrict(spec.get("read", []), spec.get("write", []), spec.get("devices", []))
        report(fd, abi)
    except (OSError, ImportError, AttributeError) as exc:
        print(f"landlock: cannot restrict: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 126
    os.closerange(3, 1 << 16)  # no descriptor of the harness's reaches the system (0, 1, 2 are its pipes)
    command = argv[2:]
    try:
        os.execvpe(command[0], command, {**os.environ, **spec.get("env", {})})
    except OSError as exc:
        print(f"landlock: cannot start {command[0]!r}: {exc}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
