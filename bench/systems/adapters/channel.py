"""One rule for every channel to a system under test, and the process a command or MCP system runs as.

The harness reaches a system through *channels*: a worker thread for an in-process system or a
framework's retriever (bench/systems/adapters/inprocess.py, frameworks.py), a process for a command
system (external.py), an MCP session over stdio or HTTP (mcp.py, through mcp_stdio.py). Each is a
:class:`Restartable` (an HTTP server, which the harness cannot start, only times out), so they
follow one rule (docs/systems.md, section 6):

1. **Every wait has a deadline.** A call waits at most its timeout (`timeout_s`) for the
   answer, sending included: a system that stops reading its input, writes half a line,
   or never answers is a *timeout*.
2. **A call the system cannot answer is a crash**: it exited, closed its output while it
   lives on, wrote a line that is not UTF-8, raised. A timeout or a crash fails that
   query (kind `timeout` or `crash`, one line in data/runs/failures.parquet naming it);
   the run goes on, or stops by the failure rule (bench/systems/run.py).
3. **The failed helper is ended** within :data:`GRACE_S`: a process tree is sent SIGTERM
   (its reaper, bench/systems/sandbox/reaper.py, ends every descendant; bwrap's PID namespace does
   the same) and its process group SIGKILLed at most :data:`KILL_WAIT_S` later; a worker
   thread is abandoned (an in-process call cannot be interrupted). So a failed call
   returns within ``timeout_s + GRACE_S``.
4. **It is started again before the next call**, untimed, and sent again what the one
   before it was sent (the warm-up requests, the replayed events) when it starts from
   nothing (a process); an in-process system keeps its state, so nothing is re-sent.

:class:`Restartable` is the rule; :class:`SystemProcess` is a system's process as the
harness holds it: stdin, stdout and stderr are pipes (stderr relayed to the harness's
own, so no descriptor of a host file ever reaches the system), its launcher reports on a
pipe of its own what confines the system (:func:`confinement`), and every wait on it is
bounded.
"""

from __future__ import annotations

import codecs
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench.systems.adapters.protocol import MAX_RESPONSE_CHARS, MalformedResponse, event_reply_problem

#: a process that closed its output is given this long to exit by itself (for its exit code), in seconds
EXIT_WAIT_S = 1.0
#: a reaped process (bench/systems/sandbox/reaper.py) is given this long after SIGTERM to end its tree, then its group is SIGKILLed
KILL_WAIT_S = 3.0
#: the stated grace: a failed call returns within timeout_s + GRACE_S (an exit wait, the kill, the last wait for the process)
GRACE_S = 5.0
#: at the end of a run a system is given this long to exit after its input closes, then it is killed
CLOSE_WAIT_S = 5.0
#: the placeholder of a launch's command line replaced by the report pipe's descriptor (bench/systems/sandbox/isolation.py)
STATUS_FD = "{status_fd}"


class SystemTimeout(Exception):
    """The system did not answer within the per-query timeout."""


class SystemCrash(Exception):
    """The system failed to answer: it exited, raised or returned an error status."""


class EventRefused(Exception):
    """A replayed system answered an event with something other than ``{"event": id, "ok": true}``."""


def accepted(send: Callable[[], Any], event: dict[str, Any]) -> None:
    """Send one event (`send` returns the system's reply) and check the reply acknowledges it:
    EventRefused naming the problem otherwise (a malformed reply or another event's id)."""
    try:
        reply = send()
    except MalformedResponse as exc:
        raise EventRefused(str(exc)) from None
    if problem := event_reply_problem(reply, event["event"]):
        raise EventRefused(problem)


# --------------------------------------------------------------------------- the rule


class Restartable:
    """A channel under the rule of the module docstring. A subclass supplies `start`, `kill`,
    `alive` and `exchange` (one request, answered within `timeout`; SystemTimeout or SystemCrash
    after it has ended its helper, MalformedResponse for an answer that is no answer)."""

    #: a restarted helper starts from nothing: the warm-up and the events so far are sent again
    fresh_on_restart = True

    def __init__(self, startup_timeout: float) -> None:
        self.started = 0
        self.warmup: list[dict[str, Any]] = []  # warm-up requests (ids "w..."), sent again after a restart
        self.events: list[dict[str, Any]] = []  # replay: the events sent so far, sent again after a restart
        self.timed = False  # a timed request was sent: the warm-up is over
        self.last_timeout = startup_timeout

    # -- what a subclass supplies
    def start(self) -> None:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError

    def alive(self) -> bool:
        raise NotImplementedError

    def exchange(self, request: dict[str, Any], timeout: float) -> Any:
        raise NotImplementedError

    def restarted(self) -> None:
        """Called when a helper is started again (counted by the adapter)."""

    def send_event(self, event: dict[str, Any], timeout: float) -> None:
        accepted(lambda: self.exchange({"observe": event}, timeout), event)

    # -- the rule
    def prepare(self) -> None:
        """Start the helper again if it was ended, and re-send what it was sent (never timed)."""
        if self.alive():
            return
        self.kill()
        again = self.started > 0
        self.start()
        self.started += 1
        if not again:
            return
        self.restarted()
        if not self.fresh_on_restart:
            return
        for request in self.warmup:
            try:
                self.exchange(request, self.last_timeout)
            except (SystemTimeout, SystemCrash, MalformedResponse) as exc:
                self.kill()
                raise SystemCrash(f"restarted, but its warm-up failed: {exc}") from None
        for event in self.events:
            try:
                self.send_event(event, self.last_timeout)
            except (SystemTimeout, SystemCrash, EventRefused, MalformedResponse) as exc:
                self.kill()
                raise SystemCrash(f"restarted, but replaying event {event['event']} to it failed: {exc}") from None

    def call(self, request: dict[str, Any], timeout: float) -> Any:
        self.last_timeout = timeout
        if str(request.get("id", "")).startswith("w") and not self.timed:
            if self.fresh_on_restart:
                self.warmup.append(request)
        else:
            self.timed = True
        self.prepare()
        return self.exchange(request, timeout)

    def observe(self, event: dict[str, Any], timeout: float) -> None:
        """Send one event; it is sent again to a restarted helper before its next call."""
        self.last_timeout = timeout
        self.timed = True
        self.prepare()
        if self.fresh_on_restart:
            self.events.append(event)
        self.send_event(event, timeout)

    def close(self) -> None:
        self.kill()


# --------------------------------------------------------------------------- a system's process

#: put by the reader: the end of the system's output; a line longer than MAX_RESPONSE_CHARS bytes
EOF = object()
OVERLONG = object()


def _read_lines(stream: Any, lines: queue.Queue[Any], limit: int) -> None:
    """The system's stdout as lines of bytes; OVERLONG for a line over `limit` bytes (the reading ends), EOF at the end.
    A last line without its newline (half a line, then the output closed) is dropped: end of output."""
    try:
        while line := stream.readline(limit + 1):
            if len(line) > limit:
                lines.put(OVERLONG)
                break
            if not line.endswith(b"\n"):
                break
            if line.strip():
                lines.put(line)
    except (OSError, ValueError):
        pass
    lines.put(EOF)


def _relay(fd: int) -> None:
    """The system's stderr copied to the harness's (decoded as UTF-8, bad bytes replaced), until it closes."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    try:
        while chunk := os.read(fd, 65536):
            text = decoder.decode(chunk)
            if text:
                try:
                    sys.stderr.write(text)
                    sys.stderr.flush()
                except (OSError, ValueError):
                    pass
    except OSError:
        pass
    finally:
        os.close(fd)


def confinement(report: bytes) -> tuple[str | None, str]:
    """(isolation, what confined it) from a launcher's report (bench/systems/sandbox/isolation.py): bwrap's
    ``--info-fd`` JSON (the namespaces it made), the Landlock launcher's or the reaper's line."""
    try:
        doc = json.loads(report.decode("utf-8")) if report.strip() else None
    except (UnicodeDecodeError, ValueError):
        return None, f"an unreadable report: {report[:80]!r}"
    if not isinstance(doc, dict):
        return None, "no report"
    if "child-pid" in doc:
        spaces = sorted(k.removesuffix("-namespace") for k in doc if k.endswith("-namespace"))
        ok = {"mnt", "net", "pid"} <= set(spaces)
        return ("bwrap" if ok else None), f"bwrap made the {', '.join(spaces)} namespaces"
    if doc.get("launcher") == "landlock":
        held = doc.get("abi", 0) >= 1 and doc.get("capabilities") == 0 and doc.get("no_new_privs") == 1
        return ("landlock" if held else None), (f"Landlock ABI {doc.get('abi')} restricted it, capabilities "
                                                f"{doc.get('capabilities')}, no_new_privs {doc.get('no_new_privs')}")
    if doc.get("launcher") == "process":
        return "process", "nothing (a plain process under the reaper)"
    return None, f"an unknown report: {str(doc)[:80]}"


class SystemProcess:
    """A system's process: stdin, stdout and stderr pipes, a report pipe for its launcher, bounded waits.

    Started in a session of its own (its process group: a timeout kills the whole group);
    `reaped`: its leader is bench/systems/sandbox/reaper.py, sent SIGTERM first so it ends the tree."""

    def __init__(self, argv: list[str], cwd: Path | None, env: Mapping[str, str] | None, reaped: bool = False) -> None:
        self.argv = argv
        self.cwd = cwd
        self.env = None if env is None else dict(env)
        self.reaped = reaped
        self.proc: subprocess.Popen[bytes] | None = None
        self.lines: queue.Queue[Any] = queue.Queue()
        self.report_fd: int | None = None
        self._report = b""
        self.ended = False  # its output ended (EOF, an overlong line): it is killed at the next wait

    def start(self) -> None:
        read, write = os.pipe()
        argv = [a.replace(STATUS_FD, str(write)) for a in self.argv]
        try:
            self.proc = subprocess.Popen(argv, cwd=self.cwd, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, bufsize=0, start_new_session=True, pass_fds=(write,))
        except OSError as exc:
            os.close(read)
            raise SystemCrash(f"cannot start {' '.join(argv)[:200]}: {exc}") from None
        finally:
            os.close(write)
        self.report_fd = read
        os.set_blocking(read, False)
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        os.set_blocking(self.proc.stdin.fileno(), False)
        stdout = os.fdopen(os.dup(self.proc.stdout.fileno()), "rb")  # buffered, for readline; the Popen's own is closed below
        self.proc.stdout.close()
        err = os.dup(self.proc.stderr.fileno())
        self.proc.stderr.close()
        threading.Thread(target=_read_lines, args=(stdout, self.lines, MAX_RESPONSE_CHARS), daemon=True, name="system-stdout").start()
        threading.Thread(target=_relay, args=(err,), daemon=True, name="system-stderr").start()

    def report(self) -> bytes:
        """What the launcher reported so far (it writes before it starts the system: complete once the system spoke)."""
        fd = self.report_fd
        while fd is not None:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                os.close(fd)
                self.report_fd = fd = None
                break
            self._report += chunk
        return self._report

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and not self.ended

    def send(self, data: bytes, deadline: float, timeout: float) -> None:
        """Write `data` to its input by `deadline`: SystemTimeout (killed) when it stops reading, SystemCrash when its input is closed."""
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        fd = proc.stdin.fileno()
        view = memoryview(data)
        poller: select.poll | None = None
        while view:
            try:  # the pipe has room, mostly: written at once, no wait
                view = view[os.write(fd, view):]
                continue
            except BlockingIOError:
                pass
            except OSError:
                code = self.exit_code()
                self.kill()
                raise SystemCrash(f"exited with code {code} (its input closed); it will be restarted") from None
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise SystemTimeout(f"it read no input for {timeout:g} s (the request could not be sent); its process group "
                                    "was killed and it will be restarted")
            if poller is None:
                poller = select.poll()
                poller.register(fd, select.POLLOUT)
            poller.poll(max(1, int(left * 1000)))

    def receive(self, deadline: float, timeout: float, what: str = "answer") -> str:
        """Its next line by `deadline`, decoded: SystemTimeout when none came, SystemCrash when its output
        ended or the line is not UTF-8, MalformedResponse for a line over MAX_RESPONSE_CHARS bytes (each: killed)."""
        line = self.take(max(0.0, deadline - time.monotonic()))
        if line is None:
            self.kill()
            raise SystemTimeout(f"no {what} within {timeout:g} s; its process group was killed and it will be restarted")
        return line

    def take(self, wait: float) -> str | None:
        """Its next line within `wait` seconds, decoded, or None (nothing came; the process is left as it is).
        Its output's end, a line that is not UTF-8 (SystemCrash) or one too long (MalformedResponse) kill it."""
        try:
            line = self.lines.get(timeout=wait)
        except queue.Empty:
            return None
        if line is EOF:
            self.ended = True
            code = self.exit_code()
            self.kill()
            if code is None:
                raise SystemCrash(f"closed its output but did not exit within {EXIT_WAIT_S:g} s; killed, it will be restarted")
            raise SystemCrash(f"exited with code {code} while answering; it will be restarted")
        if line is OVERLONG:
            self.ended = True
            self.kill()
            raise MalformedResponse(f"response line longer than {MAX_RESPONSE_CHARS} bytes (the limit, docs/systems.md)")
        try:
            return str(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            self.kill()
            raise SystemCrash(f"wrote a line that is not UTF-8 (byte {line[exc.start]:#04x} at offset {exc.start}); killed, "
                              "it will be restarted") from None

    def exit_code(self) -> int | None:
        """Its exit code once it exits within EXIT_WAIT_S, else None."""
        proc = self.proc
        if proc is None:
            return None
        try:
            return proc.wait(timeout=EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """End the process and everything it started, within KILL_WAIT_S + 1 s.

        A reaped launch's leader is sent SIGTERM first and given KILL_WAIT_S to kill every
        descendant (setsid daemons included); then the process group is killed."""
        proc, self.proc = self.proc, None
        self.ended = True
        if proc is None:
            return
        if self.reaped and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=KILL_WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # pgid == pid: it leads its own session
        except (ProcessLookupError, PermissionError):
            pass
        if proc.poll() is None:
            try:
                proc.kill()
            except OSError:
                pass
        try:
            proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process in uninterruptible sleep: left to the kernel
            pass
        for stream in (proc.stdin,):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if self.report_fd is not None:
            os.close(self.report_fd)
            self.report_fd = None

    def close(self) -> None:
        """End of input: the system should exit by itself within CLOSE_WAIT_S; then it is killed."""
        proc = self.proc
        if proc is not None and proc.poll() is None and proc.stdin is not None:
            try:
                proc.stdin.close()
                proc.wait(timeout=CLOSE_WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()


__all__ = ["CLOSE_WAIT_S", "EOF", "EXIT_WAIT_S", "EventRefused", "GRACE_S", "KILL_WAIT_S", "OVERLONG", "Restartable", "STATUS_FD",
           "SystemCrash", "SystemProcess", "SystemTimeout", "accepted", "confinement"]
