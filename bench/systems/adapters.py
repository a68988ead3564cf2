"""The three ways to reach a system under test: Python entry point, command, HTTP.

An adapter opens *channels*; each channel carries one request at a time, and the
harness opens as many channels as queries it keeps in flight (`concurrency`). Every
channel takes a request dict (bench/systems/protocol.py) and returns the raw
response (a decoded JSON value), or raises:

* ``SystemTimeout`` — no answer within the per-query timeout;
* ``SystemCrash`` — the system died, closed its output, raised, or answered HTTP
  with an error status. A command system is restarted before its next query.

Malformed answers are checked by the caller (protocol.parse_response).

Replay (docs/systems.md, *Replay*): an adapter whose system opted in has ``replay``
True once its first channel is open (a command system's ready line, the python factory's
``replay = True``, an HTTP server's answer to the hello), and each channel's
``observe(event, timeout)`` hands it one event, raising SystemTimeout, SystemCrash or
EventRefused (the answer was not ``{"event": id, "ok": true}``). ``given_atoms`` says
whether the system was handed the served atoms before its first event.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import queue
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.systems.inprocess import (
    Adapter,
    Channel,
    EventRefused,
    PythonAdapter,
    PythonChannel,
    SystemCrash,
    SystemTimeout,
)
from bench.systems.protocol import MAX_RESPONSE_CHARS, MalformedResponse, decode, event_reply_problem

__all__ = ["Adapter", "Channel", "CommandAdapter", "CommandChannel", "EventRefused", "HttpAdapter", "HttpChannel", "PythonAdapter",
           "PythonChannel", "SystemCrash", "SystemTimeout", "loopback_url", "wait_for_port"]


# --------------------------------------------------------------------------- command

#: put by the reader for a line longer than MAX_RESPONSE_CHARS (never a line a system can print: it holds a NUL)
OVERLONG = "\0overlong"
#: seconds a reaper (bench/systems/reaper.py) is given to end a system's tree before its group is killed
REAPER_GRACE_S = 10.0


def accepted(send: Callable[[], Any], event: dict[str, Any]) -> None:
    """Send one event (`send` returns the system's reply) and check the reply acknowledges it:
    EventRefused naming the problem otherwise (a malformed reply or another event's id)."""
    try:
        reply = send()
    except MalformedResponse as exc:
        raise EventRefused(str(exc)) from None
    if problem := event_reply_problem(reply, event["event"]):
        raise EventRefused(problem)

class CommandChannel:
    """One long-lived subprocess: a request line in, a response line out.

    The process must print one line ``{"ready": true}`` (optionally with
    ``"abstains": true``) once it has loaded (index building is not timed). It runs
    in its own process group (a new session): a timeout or a crash kills the whole
    group, so children of a wrapper such as ``sh -c`` die with it. A dead process is
    started again by `prepare()` (the harness calls it before starting the clock),
    and the warm-up requests this channel was sent are replayed, untimed, so a
    restart never lands in a query's latency.
    """

    def __init__(
        self, argv: list[str], cwd: Path | None, startup_timeout: float, counter: Callable[[], None],
        env: dict[str, str] | None = None, on_ready: Callable[[dict], None] | None = None, reaped: bool = False,
    ) -> None:
        self.argv = argv
        self.reaped = reaped  # its leader is bench/systems/reaper.py: SIGTERM to it ends the whole tree
        self.cwd = cwd
        self.env = env
        self.startup_timeout = startup_timeout
        self.on_restart = counter
        self.on_ready = on_ready
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.started = 0
        self.warmup: list[dict[str, Any]] = []  # warm-up requests (ids "w..."), replayed after a restart
        self.events: list[dict[str, Any]] = []  # replay: the events sent so far, sent again after a restart
        self.timed = False  # a timed request was sent: the warm-up is over
        self.last_timeout = startup_timeout

    @staticmethod
    def _reader(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        """Lines of the system's stdout; a line over MAX_RESPONSE_CHARS is put as OVERLONG and ends the reading."""
        stream = proc.stdout
        assert stream is not None
        try:
            while line := stream.readline(MAX_RESPONSE_CHARS + 1):
                if len(line) > MAX_RESPONSE_CHARS:
                    lines.put(OVERLONG)
                    break
                if line.strip():
                    lines.put(line)
        except (OSError, ValueError):
            pass
        lines.put(None)
        try:
            stream.close()  # closed here, at end of file: closing from another thread would block on a live reader
        except OSError:
            pass

    def start(self) -> None:
        try:
            self.proc = subprocess.Popen(
                self.argv, cwd=self.cwd, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
                text=True, encoding="utf-8", bufsize=1, start_new_session=True,
            )
        except OSError as exc:
            raise SystemCrash(f"cannot start {shlex.join(self.argv)}: {exc}") from None
        if self.started:
            self.on_restart()
        self.started += 1
        self.lines = queue.Queue()
        threading.Thread(target=self._reader, args=(self.proc, self.lines), daemon=True).start()
        try:
            line = self.lines.get(timeout=self.startup_timeout)
        except queue.Empty:
            self.kill()
            raise SystemCrash(f"did not print {{\"ready\": true}} within {self.startup_timeout:g} s of starting") from None
        if line is None:
            code = self.proc.wait()
            self.kill()
            raise SystemCrash(f"exited with code {code} before it was ready")
        try:
            ready = decode(line, "first line")
        except MalformedResponse:
            ready = None
        if not (isinstance(ready, dict) and ready.get("ready") is True):
            self.kill()
            raise SystemCrash(f"first line must be {{\"ready\": true}}, got {line.strip()[:80]!r}")
        if self.on_ready is not None:
            self.on_ready(ready)

    def kill(self) -> None:
        """End the process and everything it started; wait for it.

        A reaped launch's leader is sent SIGTERM first and given REAPER_GRACE_S to kill
        every descendant (setsid daemons included); then the process group is killed."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if self.reaped and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=REAPER_GRACE_S)
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
        proc.wait()
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def prepare(self) -> None:
        """Start the process again if it died, and replay the warm-up and the events sent so far (never timed)."""
        if self.alive():
            return
        self.kill()
        self.start()
        for request in self.warmup:
            try:
                self._exchange(request, self.last_timeout)
            except (SystemTimeout, SystemCrash, MalformedResponse) as exc:
                self.kill()
                raise SystemCrash(f"restarted, but its warm-up failed: {exc}") from None
        for event in self.events:
            try:
                problem = event_reply_problem(self._exchange({"observe": event}, self.last_timeout), event["event"])
            except (SystemTimeout, SystemCrash, MalformedResponse) as exc:
                problem = str(exc)
            if problem:
                self.kill()
                raise SystemCrash(f"restarted, but replaying event {event['event']} to it failed: {problem}")

    def observe(self, event: dict[str, Any], timeout: float) -> None:
        """Send one event; it is sent again to a restarted process before its next call."""
        self.last_timeout = timeout
        self.timed = True
        self.prepare()
        self.events.append(event)
        accepted(lambda: self._exchange({"observe": event}, timeout), event)

    def _exchange(self, request: dict[str, Any], timeout: float) -> Any:
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(request, ensure_ascii=False) + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            code = proc.wait()
            self.kill()
            raise SystemCrash(f"exited with code {code} (stdin closed)") from None
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise SystemTimeout(f"no answer within {timeout:g} s; its process group was killed and it will be restarted") from None
        if line is None:
            code = proc.wait()
            self.kill()
            raise SystemCrash(f"exited with code {code} while answering; it will be restarted")
        if line == OVERLONG:
            self.kill()
            raise MalformedResponse(f"response line longer than {MAX_RESPONSE_CHARS} characters (the limit, docs/systems.md)")
        return decode(line)

    def call(self, request: dict[str, Any], timeout: float) -> Any:
        self.last_timeout = timeout
        if str(request.get("id", "")).startswith("w") and not self.timed:
            self.warmup.append(request)
        else:
            self.timed = True
        self.prepare()
        return self._exchange(request, timeout)

    def close(self) -> None:
        if self.alive() and self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()  # end of input: the system should exit
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()


class CommandAdapter:
    kind = "command"

    def __init__(
        self, argv: list[str], name: str, cwd: Path | None = None, startup_timeout: float = 600.0,
        env: dict[str, str] | None = None, isolation: str = "process", given_atoms: bool = True, reaped: bool = False,
    ) -> None:
        if not argv:
            raise ValueError("system.entry: the command is empty")
        self.argv = argv
        self.name = name
        self.cwd = cwd
        self.env = env
        self.isolation = isolation
        self.startup_timeout = startup_timeout
        self.abstains = False  # set when a ready line says {"abstains": true}
        self.replay = False  # set when a ready line says {"replay": true}
        self.given_atoms = given_atoms  # its command line names {atoms}: atoms and media laid out before it starts
        self.reaped = reaped
        self.event_file: Callable[[dict[str, Any], str], str] | None = None  # replay: places an event's source file
        self._restarts = 0
        self._lock = threading.Lock()

    def _count(self) -> None:
        with self._lock:
            self._restarts += 1

    def _ready(self, line: dict) -> None:
        if line.get("abstains") is True:
            self.abstains = True
        if line.get("replay") is True:
            self.replay = True

    def open(self) -> CommandChannel:
        channel = CommandChannel(self.argv, self.cwd, self.startup_timeout, self._count, self.env, self._ready, self.reaped)
        channel.start()
        return channel

    def restarts(self) -> int:
        return self._restarts


# --------------------------------------------------------------------------- http


def loopback_url(url: str) -> tuple[str, int, str]:
    """(host, port, path) of an http:// URL on this machine; anything else is refused."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"system.entry: {url!r} must be an http:// URL")
    host = parts.hostname
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(f"system.entry: {url!r} is not on this machine; only loopback hosts (127.0.0.0/8, ::1, localhost) are allowed")
    return host, parts.port or 80, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


class HttpChannel:
    """POST each request as JSON to the URL over one kept-alive connection.

    An HTTP server cannot be restarted by the harness: a refused connection, a
    non-200 status or a dropped connection fails the query only.
    """

    def __init__(self, host: str, port: int, path: str) -> None:
        self.host, self.port, self.path = host, port, path
        self.conn: http.client.HTTPConnection | None = None

    def observe(self, event: dict[str, Any], timeout: float) -> None:
        """POST one event; the reply body must be {"event": id, "ok": true}."""
        accepted(lambda: self.call({"observe": event}, timeout), event)

    def call(self, request: dict[str, Any], timeout: float) -> Any:
        """One POST under a total deadline: a server that trickles bytes is cut off at `timeout`."""
        body = json.dumps(request, ensure_ascii=False).encode("utf-8")
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        conn = self.conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes the reading thread now
                except OSError:
                    pass

        timer = threading.Timer(timeout, expire)
        timer.daemon = True
        timer.start()
        try:
            conn.request("POST", self.path, body=body, headers={"Content-Type": "application/json"})
            reply = conn.getresponse()
            data = reply.read(MAX_RESPONSE_CHARS + 1)
        except TimeoutError:
            self.close()
            raise SystemTimeout(f"no answer within {timeout:g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            if expired.is_set():
                raise SystemTimeout(f"no complete answer within {timeout:g} s (deadline for the whole call)") from None
            raise SystemCrash(f"HTTP request failed: {type(exc).__name__}: {exc}") from None
        finally:
            timer.cancel()
        if expired.is_set():
            self.close()
            raise SystemTimeout(f"no complete answer within {timeout:g} s (deadline for the whole call)")
        if len(data) > MAX_RESPONSE_CHARS:
            self.close()
        return body_value(reply.status, data)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def body_value(status: int, data: bytes) -> Any:
    """The JSON value of an HTTP answer: SystemCrash for an error status, MalformedResponse for a body
    over MAX_RESPONSE_CHARS bytes or one that is not JSON."""
    if len(data) > MAX_RESPONSE_CHARS:
        raise MalformedResponse(f"HTTP body longer than {MAX_RESPONSE_CHARS} bytes (the limit, docs/systems.md)")
    if status != 200:
        raise SystemCrash(f"HTTP status {status}: {data[:80]!r}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedResponse(f"HTTP body is not JSON ({exc}): {data[:80]!r}") from None
    return decode(text, "HTTP body")


class HttpAdapter:
    kind = "http"

    def __init__(self, url: str, name: str, hello_timeout: float = 30.0) -> None:
        self.host, self.port, self.path = loopback_url(url)
        self.url = url
        self.name = name
        self.abstains = False  # declared per response, or in its answer to the hello
        self.isolation = "none"  # the user's own server: not sandboxed
        self.replay = False  # declared in its answer to the hello
        self.given_atoms = False  # the harness hands an HTTP server nothing: what it loaded is its own
        self.hello_timeout = hello_timeout
        self._greeted = False

    def _hello(self, channel: HttpChannel) -> None:
        """POST {"hello": true} once: an answer {"ready": true, ...} declares "replay" and "abstains";
        any other answer (an error status, a response, a timeout) means a plain query server."""
        try:
            reply = channel.call({"hello": True}, self.hello_timeout)
        except (SystemTimeout, SystemCrash, MalformedResponse):
            return
        finally:
            channel.close()  # its own connection: a server that mishandles it leaves the queries' connections alone
        if isinstance(reply, dict) and reply.get("ready") is True:
            self.replay = reply.get("replay") is True
            self.abstains = self.abstains or reply.get("abstains") is True

    def open(self) -> HttpChannel:
        if not self._greeted:
            self._greeted = True
            self._hello(HttpChannel(self.host, self.port, self.path))
        return HttpChannel(self.host, self.port, self.path)

    def restarts(self) -> int:
        return 0


def wait_for_port(host: str, port: int, timeout: float) -> bool:
    """True once something accepts connections on host:port (tests and examples use it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False
