"""A command system that fights back, for tests/systems/sandbox/test_hostile.py (standard library only).

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

* ``env``: with `env=NAME`, the value of NAME in its environment (None when unset);
* ``fds``: with `fds`, the descriptors of its own process, of /proc/1 (under bwrap: bwrap's
  init) and of its parent, each a readlink target, and ``reopened``: what opening each of
  them again through /proc gives (``file`` for a regular file: a host file reachable from
  inside; ``pipe``, ``socket``, ``chr``, or the errno).

Then it answers every query with no hits, or with `answer=LINE` verbatim (a malformed answer;
`answer=@FILE`: the line in FILE), ID replaced by the request's id. A question with a word
``BAD-UTF8``, ``BAD-HALF``, ``BAD-CLOSE`` or ``BAD-NOREAD`` misbehaves instead: an answer
holding a byte that is not UTF-8; half an answer line, then silence; its stdout closed,
alive; its stdin no longer read from the start of that request (a long question then fills the
pipe), silent.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import stat
import subprocess
import sys
import time


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


def descriptors() -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Where the descriptors of itself, /proc/1 and its parent point, and what reopening each through /proc gives."""
    links: dict[str, dict[str, str]] = {}
    reopened: dict[str, str] = {}
    for pid in ("self", "1", str(os.getppid())):
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError as exc:
            links[pid] = {"error": errno.errorcode.get(exc.errno or 0, str(exc.errno))}
            continue
        links[pid] = {}
        for fd in names:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                links[pid][fd] = os.readlink(path)
            except OSError:
                continue
            try:
                opened = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
            except OSError as exc:
                reopened[path] = errno.errorcode.get(exc.errno or 0, str(exc.errno))
                continue
            mode = os.fstat(opened).st_mode
            os.close(opened)
            reopened[path] = ("file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "pipe" if stat.S_ISFIFO(mode)
                              else "socket" if stat.S_ISSOCK(mode) else "chr" if stat.S_ISCHR(mode) else "other")
    return links, reopened


def misbehave(question: str, request_id: str) -> bool:
    """The BAD-* words of the module docstring; True when it answered (or will never answer) itself."""
    if "BAD-UTF8" in question:
        sys.stdout.buffer.write(b'{"id": "' + request_id.encode() + b'", "hits": [], "note": "caf\xe9"}\n')
        sys.stdout.flush()
        return True
    if "BAD-HALF" in question:
        sys.stdout.write('{"id": "' + request_id + '", "hi')
        sys.stdout.flush()
    elif "BAD-CLOSE" in question:
        sys.stdout.flush()
        os.close(1)
    else:
        return False
    time.sleep(3600)
    return True


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
    if "env" in opts:
        report["env"] = {name: os.environ.get(name) for name in opts["env"]}
    if "fds" in opts:
        report["fds"], report["reopened"] = descriptors()
    if "survivor" in opts:
        subprocess.Popen([sys.executable, "-c", SURVIVOR, opts["survivor"][0]], start_new_session=True).wait()
    print(json.dumps({"ready": True, "hostile": report}), flush=True)
    answer = opts.get("answer", [None])[0]
    if answer and answer.startswith("@"):  # the answer in a file (longer than a command line may be)
        with open(answer[1:], encoding="utf-8") as fh:
            answer = fh.read().strip()
    stdin = sys.stdin.buffer
    while True:
        if b"BAD-NOREAD" in stdin.peek(4096)[:4096]:  # seen at the start of a long request: never read the rest
            time.sleep(3600)
        line = stdin.readline()
        if not line:
            break
        request = json.loads(line)
        if misbehave(str(request.get("question", "")), request["id"]):
            continue
        print(answer.replace("ID", request["id"]) if answer else json.dumps({"id": request["id"], "hits": []}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
