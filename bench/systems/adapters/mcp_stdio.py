"""The mcp adapter's stdio transport: an MCP server's process under the channel rule (bench/systems/adapters/channel.py).

The SDK's own stdio client would start the server with the SDK's inherited variables
(HOME, LOGNAME, SHELL, USER ...) merged into its environment, hand it the harness's
stderr, log a multi-line traceback for every line it cannot parse and leave the tool call
waiting for its timeout. This transport gives the SDK's session two memory streams over a
:class:`bench.systems.adapters.channel.SystemProcess` (the same process, pipes, launcher report and
bounded waits as a command system):

* each line the server writes must be one JSON-RPC message; a line that is not (not JSON,
  not UTF-8, nested too deeply, over MAX_RESPONSE_CHARS bytes) or the end of its output
  ends the session at once, and :attr:`StdioTransport.broken` says why (the pending tool
  call fails as a crash naming it: one line);
* each message to the server is written by the channel's current deadline: a server that
  stops reading is stopped;
* at the end its input is closed, and it is killed if it has not exited within
  CLOSE_WAIT_S (at once when `hard`: a server that timed out).

The SDK's log records (its loggers under ``mcp``) never reach the terminal: they are kept,
the last one given with a failure that has no other reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from bench.systems.adapters.channel import SystemCrash, SystemProcess, SystemTimeout
from bench.systems.adapters.protocol import MalformedResponse


class SdkLog(logging.Handler):
    """The SDK's log, kept instead of printed (its records name no query): the last record's first line."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a record whose arguments do not format
            text = str(record.msg)
        if record.levelno >= logging.WARNING:
            self.last = " ".join(text.split())[:200]


#: installed once on the SDK's logger (`mcp`), which then no longer propagates to the root logger
SDK_LOG = SdkLog()


def quiet_sdk() -> SdkLog:
    sdk = logging.getLogger("mcp")
    if SDK_LOG not in sdk.handlers:
        sdk.addHandler(SDK_LOG)
        sdk.propagate = False
    return SDK_LOG


def parse_message(line: str) -> Any:
    """One JSON-RPC message of the SDK's types, or ValueError naming what is wrong with the line."""
    import mcp_types

    try:
        return mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except RecursionError:
        raise ValueError("nested too deeply to be read") from None
    except ValueError as exc:  # pydantic: "1 validation error for ...", then "<what> [type=..., input_value=...]"
        lines = str(exc).splitlines()
        what = (lines[1] if len(lines) > 1 else lines[0] if lines else type(exc).__name__).split(" [type=")[0]
        raise ValueError(" ".join(what.split())[:120]) from None


class StdioTransport:
    """One server process, for one SDK session (`stdio_transport` opens it)."""

    def __init__(self, process: SystemProcess, timeout: Callable[[], float]) -> None:
        self.process = process
        self.timeout = timeout  # the deadline of the call under way (the channel's timeout)
        self.broken: str | None = None  # why the session ended, when the server broke it
        self.hard = False  # end it without the graceful wait (it timed out)

    def fail(self, why: str) -> None:
        if self.broken is None:
            self.broken = why

    def next_message(self) -> Any:
        """The next message from the server (a thread's blocking call); None when the session must end."""
        while True:
            try:
                line = self.process.take(0.5)
            except (SystemCrash, MalformedResponse) as exc:
                self.fail(f"the server {str(exc).removesuffix('; it will be restarted').removesuffix(', it will be restarted')}")
                return None
            if line is None:
                if self.process.proc is None:
                    self.fail("the server was stopped")
                    return None
                continue
            if not line.strip():
                continue
            try:
                return parse_message(line)
            except ValueError as exc:
                self.process.kill()
                self.fail(f"the server wrote a line that is not a JSON-RPC message ({exc}): {line.strip()[:80]!r}")
                return None

    def send(self, data: bytes) -> None:
        timeout = self.timeout()
        try:
            self.process.send(data, time.monotonic() + timeout, timeout)
        except SystemTimeout:
            self.fail(f"the server read no input for {timeout:g} s (a message could not be sent); it was stopped")
        except SystemCrash as exc:
            self.fail(f"the server {exc}")


@asynccontextmanager
async def stdio_transport(transport: StdioTransport) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's (read stream, write stream) over `transport`'s process, started here."""
    import anyio
    import anyio.to_thread
    from mcp.shared.message import SessionMessage

    transport.process.start()
    read_in, read_out = anyio.create_memory_object_stream[Any](0)
    write_in, write_out = anyio.create_memory_object_stream[Any](0)

    async def reader() -> None:
        async with read_in:
            while (message := await anyio.to_thread.run_sync(transport.next_message, abandon_on_cancel=True)) is not None:
                try:
                    await read_in.send(SessionMessage(message))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def writer() -> None:
        async with write_out:
            async for item in write_out:
                data = (item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode("utf-8")
                await anyio.to_thread.run_sync(transport.send, data, abandon_on_cancel=True)
                if transport.broken is not None:
                    transport.process.kill()  # its output ends: the reader ends the session
                    return

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        tasks.start_soon(writer)
        try:
            yield read_out, write_in
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(transport.process.kill if transport.hard else transport.process.close)
                for stream in (read_out, write_in):
                    await stream.aclose()
            tasks.cancel_scope.cancel()


__all__ = ["SDK_LOG", "SdkLog", "StdioTransport", "parse_message", "quiet_sdk", "stdio_transport"]
