"""Channel and adapter types, and the in-process (python) adapter.

The command and HTTP adapters are bench/systems/adapters/external.py, which re-exports these names;
see its docstring for the rules every adapter follows. The errors and the one channel rule
(deadlines, ending and restarting a failed helper) are bench/systems/adapters/channel.py.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

from bench.systems import System
from bench.systems.adapters.channel import EventRefused, Restartable, SystemCrash, SystemTimeout
from bench.systems.adapters.protocol import query_of_request, response_to_json


class _Worker:
    """One long-lived helper thread running a channel's calls one at a time: starting a
    thread per call cost more than a BM25 query. A call past its timeout is abandoned
    with its thread (which ends once that call returns); the channel starts a new one."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event] | None] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="system-call", daemon=True).start()

    def _loop(self) -> None:
        while (job := self.jobs.get()) is not None:
            call, box, done = job
            try:
                box["result"] = call()
            except BaseException as exc:
                box["error"] = exc
            done.set()

    def run(self, call: Callable[[], Any], timeout: float) -> dict[str, Any] | None:
        """`call()`'s box ({"result"} or {"error"}), or None when it did not return within `timeout`."""
        box: dict[str, Any] = {}
        done = threading.Event()
        self.jobs.put((call, box, done))
        return box if done.wait(timeout) else None

    def stop(self) -> None:
        self.jobs.put(None)


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


class PythonChannel(Restartable):
    """Calls `system.search(Query)` on a helper thread so a slow call can time out (the
    channel rule, bench/systems/adapters/channel.py).

    An in-process call that times out cannot be interrupted: its thread is abandoned to
    finish in the background, its result thrown away, and the next call gets a new
    thread; the system object keeps its state, so nothing is sent again. Use the command
    adapter when a system must be killable.
    """

    fresh_on_restart = False

    def __init__(self, system: System) -> None:
        super().__init__(0.0)
        self.system = system
        self._worker: _Worker | None = None

    def start(self) -> None:
        self._worker = _Worker()

    def kill(self) -> None:
        if self._worker is not None:
            self._worker.stop()
            self._worker = None

    def alive(self) -> bool:
        return self._worker is not None

    def _run(self, call: Callable[[], Any], timeout: float) -> Any:
        self.prepare()
        assert self._worker is not None
        box = self._worker.run(call, timeout)
        if box is None:  # the stuck call keeps its thread; the next call gets a new one
            self.kill()
            raise SystemTimeout(f"no answer within {timeout:g} s")
        if "error" in box:
            exc = box["error"]
            raise SystemCrash(f"raised {type(exc).__name__}: {exc}")
        return box.get("result")

    def exchange(self, request: dict[str, Any], timeout: float) -> Any:
        query = query_of_request(request)
        return response_to_json(self._run(lambda: self.system.search(query), timeout), request["id"])

    def send_event(self, event: dict[str, Any], timeout: float) -> None:
        self._run(lambda: self.system.observe(event), timeout)  # type: ignore[attr-defined]


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


__all__ = ["Adapter", "Channel", "EventRefused", "PythonAdapter", "PythonChannel", "SystemCrash", "SystemTimeout"]
