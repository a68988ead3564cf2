"""Errors, channel and adapter types, and the in-process (python) adapter.

The command and HTTP adapters are bench/systems/adapters.py, which re-exports these names;
see its docstring for the rules every adapter follows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from bench.systems import System
from bench.systems.protocol import query_of_request, response_to_json


class SystemTimeout(Exception):
    """The system did not answer within the per-query timeout."""


class SystemCrash(Exception):
    """The system failed to answer: it exited, raised or returned an error status."""


class EventRefused(Exception):
    """A replayed system answered an event with something other than ``{"event": id, "ok": true}``."""


def _in_thread(call: Callable[[], Any], timeout: float) -> Any:
    """`call()` in a helper thread: SystemTimeout past `timeout`, SystemCrash when it raises."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=target, name="system-call", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise SystemTimeout(f"no answer within {timeout:g} s")
    if "error" in box:
        exc = box["error"]
        raise SystemCrash(f"raised {type(exc).__name__}: {exc}")
    return box.get("result")


class Channel(Protocol):
    def call(self, request: dict[str, Any], timeout: float) -> Any: ...

    def close(self) -> None: ...


class Adapter(Protocol):
    kind: str
    name: str
    abstains: bool  # the system declared that it abstains (ready line, attribute)
    isolation: str  # bwrap | process (command systems); none (in-process, the user's HTTP server)
    replay: bool  # the system opted in to replay (known once a channel is open)
    given_atoms: bool  # the system was handed the served atoms before its first event

    def open(self) -> Channel: ...

    def restarts(self) -> int: ...


# --------------------------------------------------------------------------- python


class PythonChannel:
    """Calls `system.search(Query)` in a helper thread so a slow call can time out.

    An in-process call that times out cannot be interrupted: its thread is left to
    finish in the background and its result is thrown away. Use the command adapter
    when a system must be killable.
    """

    def __init__(self, system: System) -> None:
        self.system = system

    def call(self, request: dict[str, Any], timeout: float) -> Any:
        query = query_of_request(request)
        return response_to_json(_in_thread(lambda: self.system.search(query), timeout), request["id"])

    def observe(self, event: dict[str, Any], timeout: float) -> None:
        _in_thread(lambda: self.system.observe(event), timeout)  # type: ignore[attr-defined]

    def close(self) -> None:
        return None


class PythonAdapter:
    kind = "python"

    def __init__(self, system: System, entry: str, replay: bool = False) -> None:
        self.system = system
        self.entry = entry
        self.name = str(getattr(system, "name", entry))
        self.abstains = getattr(system, "abstains", False) is True
        self.isolation = "none"
        self.replay = replay  # built with no atoms, shown the stream through observe()
        self.given_atoms = not replay

    def open(self) -> PythonChannel:
        return PythonChannel(self.system)

    def restarts(self) -> int:
        return 0
