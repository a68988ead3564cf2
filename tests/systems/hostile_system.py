"""A command system that fights back, for tests/systems/test_hostile.py (standard library only).

    python hostile_system.py [read=PATH ...] [survivor=MARKER] [chmod=PATH] [answer=LINE]

Before it says ready it finds out, and says in its ready line ``{"ready": true, "hostile": {...}}``:

* ``caps``: its effective capability set (/proc/self/status CapEff, hex);
* ``handle``: the ``open_by_handle_at`` escape: a handle of the file-system root
  (ext4 inode 2, generation 0) opened from a mount it can see (/usr); "listed N
  entries" means it escaped its mount namespace, otherwise the errno;
* ``mknod``: whether it could make a character device node in its scratch folder;
* ``raw``: whether it could open a raw socket (ICMP);
* ``read``: which of the `read=` paths it could open and read one byte of (files) or list (folders);
* ``chmod``: whether a chmod of the `chmod=` path (to its own mode) succeeded;
* ``signal_parent``: whether it may signal its parent (``kill(ppid, 0)``: "ok" or the errno);
* ``abstract``: with `abstract=NAME`, whether it reached a listener on the abstract unix socket NAME;
* ``survivor``: with `survivor=MARKER` it starts a grandchild that calls setsid,
  ignores SIGTERM, holds stdout and stderr open and sleeps for an hour, its command line
  carrying MARKER (so a test can look for it in /proc).

Then it answers every query with no hits, or with `answer=LINE` verbatim (a malformed answer;
`answer=@FILE`: the line in FILE), ID replaced by the request's id.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import stat
import subprocess
import sys


def caps() -> str:
    with open("/proc/self/status", encoding="ascii") as fh:
        return next((line.split(":", 1)[1].strip() for line in fh if line.startswith("CapEff")), "?")


class FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int), ("f_handle", ctypes.c_ubyte * 8)]


def handle_escape(mount: str = "/usr") -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    fh = FileHandle(8, 1)  # FILEID_INO32_GEN: inode 2 (the root of an ext2/3/4 file system), generation 0
    fh.f_handle[:] = list((2).to_bytes(4, "little") + (0).to_bytes(4, "little"))
    try:
        mfd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        return f"no mount to anchor on: {exc.strerror}"
    try:
        fd = libc.open_by_handle_at(mfd, ctypes.byref(fh), os.O_RDONLY | os.O_DIRECTORY)
        if fd < 0:
            return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
        try:
            return f"listed {len(os.listdir(fd))} entries"
        finally:
            os.close(fd)
    finally:
        os.close(mfd)


def mknod() -> bool:
    path = os.path.join(os.environ.get("HOME", "."), "null-device")
    try:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError:
        return False
    os.unlink(path)
    return True


def raw_socket() -> bool:
    import socket

    try:
        socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close()
        return True
    except OSError:
        return False


def readable(path: str) -> bool:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as fh:
                fh.read(1)
        return True
    except OSError:
        return False


def signal_parent() -> str:
    try:
        os.kill(os.getppid(), 0)
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno))


def abstract(name: str) -> str:
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            sock.connect("\0" + name)
        return "connected"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno))


def chmod(path: str) -> bool:
    try:
        os.chmod(path, stat.S_IMODE(os.stat(path).st_mode))
        return True
    except OSError:
        return False


SURVIVOR = ("import os, signal, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "if os.fork():\n    os._exit(0)\n"  # orphaned at once: reparented away from its parent
            "os.setsid()\n"
            "time.sleep(3600)\n")


def main(argv: list[str]) -> int:
    opts: dict[str, list[str]] = {}
    for arg in argv:
        key, _, value = arg.partition("=")
        opts.setdefault(key, []).append(value)
    report: dict[str, object] = {"caps": caps(), "handle": handle_escape(), "mknod": mknod(), "raw": raw_socket(),
                                 "read": [p for p in opts.get("read", []) if readable(p)]}
    if "chmod" in opts:
        report["chmod"] = chmod(opts["chmod"][0])
    report["signal_parent"] = signal_parent()
    if "abstract" in opts:
        report["abstract"] = abstract(opts["abstract"][0])
    if "survivor" in opts:
        subprocess.Popen([sys.executable, "-c", SURVIVOR, opts["survivor"][0]], start_new_session=True).wait()
    print(json.dumps({"ready": True, "hostile": report}), flush=True)
    answer = opts.get("answer", [None])[0]
    if answer and answer.startswith("@"):  # the answer in a file (longer than a command line may be)
        with open(answer[1:], encoding="utf-8") as fh:
            answer = fh.read().strip()
    for line in sys.stdin:
        request = json.loads(line)
        print(answer.replace("ID", request["id"]) if answer else json.dumps({"id": request["id"], "hits": []}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
