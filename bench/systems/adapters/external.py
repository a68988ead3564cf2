"""The three ways to reach a system under test: Python entry point, command, HTTP.

An adapter opens *channels*; each channel carries one request at a time, and the
harness opens as many channels as queries it keeps in flight (`concurrency`). Every
channel takes a request dict (bench/systems/adapters/protocol.py) and returns the raw
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
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.systems.adapters.channel import EventRefused, Restartable, SystemCrash, SystemProcess, SystemTimeout, accepted, confinement
from bench.systems.adapters.inprocess import Adapter, Channel, PythonAdapter, PythonChannel
from bench.systems.adapters.protocol import MAX_RESPONSE_CHARS, MalformedResponse, decode

__all__ = ["Adapter", "Channel", "CommandAdapter", "CommandChannel", "EventRefused", "HttpAdapter", "HttpChannel", "PythonAdapter",
           "PythonChannel", "SystemCrash", "SystemTimeout", "loopback_url", "wait_for_port"]


# --------------------------------------------------------------------------- command


class CommandChannel(Restartable):
    """One long-lived subprocess: a request line in, a response line out, under the channel
    rule (bench/systems/adapters/channel.py: every wait bounded, a failed process killed and started
    again before the next call, its warm-up and events sent again, untimed).

    The process must print one line ``{"ready": true}`` (optionally with
    ``"abstains": true``) once it has loaded (index building is not timed). It runs
    in its own process group (a new session): a timeout or a crash kills the whole
    group, so children of a wrapper such as ``sh -c`` die with it. Its launcher reports
    what confines it (bench/systems/adapters/channel.py `confinement`); a launch that expects an
    isolation (`expect`) and is not confined so is refused before the system is used.
    """

    def __init__(
        self, argv: list[str], cwd: Path | None, startup_timeout: float, counter: Callable[[], None],
        env: dict[str, str] | None = None, on_ready: Callable[[dict], None] | None = None, reaped: bool = False,
        expect: str | None = None, on_confined: Callable[[str, str], None] | None = None,
    ) -> None:
        super().__init__(startup_timeout)
        self.argv = argv
        self.reaped = reaped  # its leader is bench/systems/sandbox/reaper.py: SIGTERM to it ends the whole tree
        self.cwd = cwd
        self.env = env
        self.startup_timeout = startup_timeout
        self.on_restart = counter
        self.on_ready = on_ready
        self.expect = expect
        self.on_confined = on_confined
        self.process: SystemProcess | None = None

    @property
    def proc(self) -> Any:
        return None if self.process is None else self.process.proc

    def start(self) -> None:
        process = SystemProcess(self.argv, self.cwd, self.env, self.reaped)
        process.start()
        self.process = process
        try:
            line = process.receive(time.monotonic() + self.startup_timeout, self.startup_timeout, "ready line")
        except SystemTimeout:
            raise SystemCrash(f"did not print {{\"ready\": true}} within {self.startup_timeout:g} s of starting") from None
        except SystemCrash as exc:
            raise SystemCrash(f"{exc} before it was ready".replace(" while answering; it will be restarted", "")) from None
        except MalformedResponse as exc:
            raise SystemCrash(f"its first line: {exc}") from None
        try:
            ready = decode(line, "first line")
        except MalformedResponse:
            ready = None
        if not (isinstance(ready, dict) and ready.get("ready") is True):
            self.kill()
            raise SystemCrash(f"first line must be {{\"ready\": true}}, got {line.strip()[:80]!r}")
        self.confirm(process)
        if self.on_ready is not None:
            self.on_ready(ready)

    def confirm(self, process: SystemProcess) -> None:
        """The isolation its launcher reported (written before the system's first instruction) must be the one expected."""
        if self.expect is None:
            return
        kind, how = confinement(process.report())
        if kind != self.expect:
            self.kill()
            raise SystemCrash(f"expected to run under {self.expect}, but its launcher reported {how}; not used")
        if self.on_confined is not None:
            self.on_confined(kind, how)

    def restarted(self) -> None:
        self.on_restart()

    def kill(self) -> None:
        """End the process and everything it started (channel.SystemProcess.kill: bounded by GRACE_S)."""
        process, self.process = self.process, None
        if process is not None:
            process.kill()

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def exchange(self, request: dict[str, Any], timeout: float) -> Any:
        process = self.process
        assert process is not None
        deadline = time.monotonic() + timeout
        try:
            process.send((json.dumps(request, ensure_ascii=False) + "\n").encode("utf-8"), deadline, timeout)
            line = process.receive(deadline, timeout)
        except (SystemTimeout, SystemCrash, MalformedResponse):
            self.process = None  # killed by SystemProcess
            raise
        return decode(line)

    def close(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            process.close()


class CommandAdapter:
    kind = "command"

    def __init__(
        self, argv: list[str], name: str, cwd: Path | None = None, startup_timeout: float = 600.0,
        env: dict[str, str] | None = None, isolation: str = "process", given_atoms: bool = True, reaped: bool = False,
        expect: str | None = None,
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
        self.expect = expect  # the isolation its launcher must report (None: not checked, a launch made by hand)
        self.confined: Callable[[str, str], None] | None = None  # told what confined it (bench/systems/session.py)
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
        channel = CommandChannel(self.argv, self.cwd, self.startup_timeout, self._count, self.env, self._ready, self.reaped,
                                 self.expect, self.confined)
        channel.prepare()
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
