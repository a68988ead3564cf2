"""The `mcp` adapter: a memory server speaking the Model Context Protocol, with no adapter code (docs/systems.md, *MCP*).

    system:
      name: reference-memory
      adapter: mcp
      entry: "node <folder>/dist/index.js"   # a stdio server (started sandboxed like a command system) or http://127.0.0.1:PORT/mcp
      code: [<folder>]
      env: {MEMORY_FILE_PATH: "{workdir}/memory.jsonl"}
      mcp:
        observe: {tool: create_entities, arguments: {entities: [{name: "{event}", entityType: "{holder}", observations: ["{text}"]}]}}
        search:  {tool: search_nodes, arguments: {query: "{question}"}}
        results: "entities[].observations[]"
        reset: null

The server is always replayed (docs/systems.md, *Replay*): one ``observe`` tool call per
event, the questions in time order. Placeholders are substituted as JSON values inside
the argument template: a string that is one placeholder alone becomes its value
(``"{k}"`` a number, ``"{holder}"`` a string or null), a placeholder inside a longer
string is replaced by its text. Event placeholders: :data:`EVENT_FIELDS`; question
placeholders: :data:`QUESTION_FIELDS`.

A tool's answer is read as a list of memories (:func:`read_memories`); a memory without
provenance is attributed by the harness (bench.systems.credit.attribution) to the units the
server was sent at or before the question, and named ``attributed:<id>``.

Latency: the search tool call alone (``elapsed_ms``); each event's tool call is its ingest
time. The `mcp` Python SDK is the optional extra ``mcp`` (pyproject.toml).
"""

from __future__ import annotations

import concurrent.futures
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.systems import MissingExtra
from bench.systems.adapters.channel import (
    CLOSE_WAIT_S,
    GRACE_S,
    EventRefused,
    Restartable,
    SystemCrash,
    SystemProcess,
    SystemTimeout,
    confinement,
)
from bench.systems.adapters.mcp_errors import error_reason, one_line, rpc_error, startup_hint
from bench.systems.adapters.mcp_plan import (
    EVENT_FIELDS,
    INSTALL,
    OBSERVE_WORDS,
    SEARCH_WORDS,
    McpPlan,
    check_env,
    default_arguments,
    fill,
    find_tool,
    mcp_plan,
    read_memories,
)
from bench.systems.adapters.mcp_stdio import StdioTransport, quiet_sdk, stdio_transport

__all__ = ["McpAdapter", "McpChannel", "Server", "is_url", "mcp_adapter"]

# --------------------------------------------------------------------------- the channel


@dataclass(frozen=True)
class Server:
    """How to reach the server: a launch (argv, env, cwd) or a URL."""

    argv: list[str] | None = None
    env: dict[str, str] | None = None
    cwd: Path | None = None
    url: str | None = None
    scratch: Path | None = None  # {workdir}: emptied before a restart
    reaped: bool = False  # its launcher is bench/systems/sandbox/reaper.py (channel.SystemProcess ends its tree)
    expect: str | None = None  # the isolation its launcher must report (channel.confinement)


def _sdk() -> Any:
    try:
        import anyio.from_thread
        import mcp
    except ImportError:
        raise MissingExtra(f"the mcp adapter needs the MCP Python SDK: {INSTALL}") from None
    return anyio, mcp, None


class McpChannel(Restartable):
    """One MCP client session on its own event loop thread; the harness's calls block on it. Its
    deadlines, restarts and what is sent again to a restarted server (the warm-up searches, the
    events so far) are the one channel rule (bench/systems/adapters/channel.py, Restartable)."""

    def __init__(self, adapter: McpAdapter) -> None:
        super().__init__(adapter.startup_timeout)
        self.adapter = adapter
        self.portal_cm: Any = None
        self.portal: Any = None
        self.owner: concurrent.futures.Future[Any] | None = None
        self.stop: Any = None
        self.client: Any = None
        self.tools: dict[str, Any] = {}
        self.elapsed_ms: float | None = None
        self.transport: StdioTransport | None = None  # a stdio server's process (bench/systems/adapters/mcp_stdio.py)
        self.deadline_s = adapter.startup_timeout  # the timeout of the call under way: a write to the server waits no longer
        from bench.systems.credit.attribution import Shown

        self.shown = Shown()
        self._attributed: dict[tuple[str, str | None], tuple[int, Any]] = {}

    # -- life cycle (Restartable.prepare starts it, again after a failure)
    def start(self) -> None:
        anyio, mcp, _ = _sdk()
        server = self.adapter.server
        if self.started and server.scratch is not None and server.scratch.is_dir():  # a restart: its folder emptied first
            for child in server.scratch.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        self.transport = None
        target: Any = server.url
        if server.url is None:  # a stdio server: its process under the channel rule (bench/systems/adapters/mcp_stdio.py)
            self.transport = StdioTransport(SystemProcess(list(server.argv or []), server.cwd, server.env, server.reaped),
                                            lambda: self.deadline_s)
            target = stdio_transport(self.transport)
        quiet_sdk()
        self.portal_cm = anyio.from_thread.start_blocking_portal()
        self.portal = self.portal_cm.__enter__()
        ready: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.stop = self.portal.call(anyio.Event)

        async def own() -> None:
            try:
                async with mcp.Client(target, mode="legacy") as client:
                    listed = await client.list_tools()
                    ready.set_result((client, listed.tools))
                    await self.stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                raise

        self.owner = self.portal.start_task_soon(own)
        timeout = self.adapter.startup_timeout
        try:
            self.client, tools = ready.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            self.kill(graceful=False)
            raise SystemCrash(f"did not answer the MCP handshake within {timeout:g} s of starting") from None
        except Exception as exc:  # the SDK's own errors: the process could not start or spoke no MCP
            why = self._why(exc)
            self.kill()
            raise SystemCrash(f"MCP session could not be opened (the server exited or spoke no MCP): {why}{self.adapter.hint}") from None
        self._confirm()
        self.tools = {t.name: t for t in tools}
        self.adapter.resolve(self.tools)
        if self.adapter.reset is not None:
            reset = self.adapter.plan.reset
            self._tool(self.adapter.reset, (reset.arguments if reset is not None else None) or {}, timeout, "reset")

    def _confirm(self) -> None:
        """A stdio server's launcher must report the isolation chosen (bench/systems/adapters/channel.py `confinement`)."""
        server = self.adapter.server
        if self.transport is None or server.expect is None:
            return
        kind, how = confinement(self.transport.process.report())
        if kind != server.expect:
            self.kill(graceful=False)
            raise SystemCrash(f"expected to run under {server.expect}, but its launcher reported {how}; not used")
        if self.adapter.confined is not None:
            self.adapter.confined(kind, how)

    def _why(self, exc: BaseException) -> str:
        """A failure in one line: what broke the server's session (mcp_stdio), else the SDK's error."""
        broken = None if self.transport is None else self.transport.broken
        return broken or one_line(exc)

    def kill(self, graceful: bool = True) -> None:
        """End the session and the server's process tree (within GRACE_S, bench/systems/adapters/channel.py; a
        graceful end first closes its input and waits CLOSE_WAIT_S). Not `graceful` (a server that
        hangs): the session is cancelled and the server killed at once."""
        if self.portal is None:
            return
        if self.transport is not None and not graceful:
            self.transport.hard = True
        try:
            if not graceful and self.owner is not None:
                self.owner.cancel()
            if self.stop is not None:
                self.portal.call(self.stop.set)
            if self.owner is not None:
                try:
                    self.owner.result(timeout=CLOSE_WAIT_S + GRACE_S)
                except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                    self.owner.cancel()
                except Exception:
                    pass
        finally:
            try:
                self.portal_cm.__exit__(None, None, None)
            except Exception:
                pass
            self.portal = self.portal_cm = self.owner = self.client = self.stop = None

    def alive(self) -> bool:
        return self.client is not None and self.owner is not None and not self.owner.done()

    def restarted(self) -> None:
        self.adapter.restarted()

    # -- calls
    def _tool(self, name: str, arguments: Any, timeout: float, what: str) -> Any:
        anyio = _sdk()[0]
        client = self.client

        async def call() -> Any:
            with anyio.fail_after(timeout):
                return await client.call_tool(name, arguments)

        self.deadline_s = timeout
        try:
            result = self.portal.call(call)
        except TimeoutError:
            self.kill(graceful=False)
            raise SystemTimeout(f"tool {name} ({what}) gave no answer within {timeout:g} s; the server was stopped and "
                                "will be restarted") from None
        except Exception as exc:  # the SDK raises its own errors for a broken session or a protocol error
            rpc = rpc_error(exc)
            if rpc is not None and (self.transport is None or self.transport.broken is None):  # the server answered with a JSON-RPC error: the session goes on
                raise SystemCrash(f"tool {name} ({what}) answered a JSON-RPC error: {rpc}") from None
            why = self._why(exc)
            self.kill(graceful=False)
            raise SystemCrash(f"tool {name} ({what}) failed: {why}") from None
        if getattr(result, "is_error", False):
            texts = " ".join(t for c in result.content or [] if isinstance(t := getattr(c, "text", None), str))
            raise SystemCrash(f"tool {name} ({what}) answered an error: {error_reason(texts)}")
        return result

    def send_event(self, event: dict[str, Any], timeout: float) -> None:
        tool, template = self.adapter.observe_call
        try:
            self._tool(tool, fill(template, {f: event.get(f) for f in EVENT_FIELDS}), timeout, f"event {event['event']}")
        except SystemCrash as exc:
            if self.alive():  # the tool answered an error: the event is refused
                raise EventRefused(str(exc)) from None
            raise

    def observe(self, event: dict[str, Any], timeout: float) -> None:
        super().observe(event, timeout)
        self.shown.add(event["source_id"], event["extent"], str(event.get("text") or ""), event.get("holder"))

    def call(self, request: dict[str, Any], timeout: float) -> Any:
        self.elapsed_ms = None
        return super().call(request, timeout)

    def exchange(self, request: dict[str, Any], timeout: float) -> Any:
        scope = request.get("scope") or {}
        values = {"question": request["question"], "as_of": request["as_of"], "holder": scope.get("holder"),
                  "session": scope.get("session"), "k": int(request["k"])}
        tool, template = self.adapter.search_call
        start = time.perf_counter()
        try:
            result = self._tool(tool, fill(template, values), timeout, "search")
        finally:
            self.elapsed_ms = (time.perf_counter() - start) * 1000.0
        memories = read_memories(result, self.adapter.results, int(request["k"]), self.adapter.plan.text)
        question = not str(request["id"]).startswith("probe")  # a probe's answer is counted nowhere (bench.systems.replayed)
        if memories and question:
            self.adapter.count("answers_own_scores" if memories.own else "answers_rank_scores")
        return {"id": request["id"], "hits": self._provenanced(memories, scope.get("holder"), question)}

    def _provenanced(self, memories: list[dict[str, Any]], holder: str | None, counted: bool = True) -> list[dict[str, Any]]:
        """Each memory with its own provenance, else attributed (bench.systems.credit.attribution)."""
        out = []
        count = self.adapter.count if counted else (lambda what, n=1: None)
        for m in memories:
            count("returned")
            if m["provenance"] not in (None, []):  # its own citations, checked by the wire's rules
                count("cited")
                out.append(m)
                continue
            key = (m["text"], holder)
            cached = self._attributed.get(key)
            if cached is None or cached[0] != len(self.shown):
                cached = (len(self.shown), self.shown.attribution(m["text"], holder))
                self._attributed[key] = cached
            found = cached[1]
            if not found.units:  # nothing judged by its text shown yet: nothing to cite, the memory is left out
                count("left_out")
                continue
            count("attributed" if found.supported else "unattributed")
            count("tied", found.tied)
            count("tied_holders", found.tied_holders)
            out.append({**m, "memory_id": f"attributed:{m['memory_id']}", "provenance": self.shown.citations(found.units)})
        return out


class McpAdapter:
    kind = "mcp"

    def __init__(self, server: Server, name: str, plan: McpPlan, startup_timeout: float = 600.0, isolation: str = "none") -> None:
        self.server = server
        self.name = name
        self.plan = plan
        self.startup_timeout = startup_timeout
        self.isolation = isolation
        self.abstains = False
        self.replay = True  # an MCP memory server is always replayed: one observe call per event
        self.given_atoms = False
        self.observe_call: tuple[str, Any] = ("", None)
        self.search_call: tuple[str, Any] = ("", None)
        self.reset: str | None = None
        self.results = plan.results
        self.hint = ""  # said when the server cannot be started (startup_hint)
        self.facts: dict[str, int] = {}  # what the run handed over: memories returned, cited, attributed ... (count)
        self.confined: Any = None  # told what confined a stdio server (bench/systems/session.py)
        self._restarts = 0
        _sdk()  # the extra is checked before anything starts

    def count(self, what: str, n: int | bool = 1) -> None:
        self.facts[what] = self.facts.get(what, 0) + int(n)

    def replay_facts(self) -> dict[str, Any]:
        """What system.json records of the run's memories (docs/systems.md, *MCP*): counts, and how they were scored."""
        own, rank = self.facts.get("answers_own_scores", 0), self.facts.get("answers_rank_scores", 0)
        scores = "none returned" if not own + rank else "own" if not rank else "rank" if not own else "own and rank"
        return {"memories": {k: self.facts.get(k, 0) for k in ("returned", "cited", "attributed", "unattributed", "left_out",
                                                               "tied", "tied_holders")},
                "scores": scores, "answers_own_scores": own, "answers_rank_scores": rank}

    def resolve(self, tools: Mapping[str, Any]) -> None:
        """Find the tools and argument templates on the server (module docstring); ValueError in one line."""
        found = []
        for call, words, placeholder, what in ((self.plan.observe, OBSERVE_WORDS, "{text}", "observe"),
                                               (self.plan.search, SEARCH_WORDS, "{question}", "search")):
            tool = find_tool(call, tools, words, what)
            args = call.arguments if call.arguments is not None else default_arguments(
                tool, getattr(tools[tool], "input_schema", None), placeholder, what)
            found.append((tool, args))
        self.observe_call, self.search_call = found
        if self.plan.reset is not None:
            self.reset = find_tool(self.plan.reset, tools, (), "reset")

    def restarted(self) -> None:
        self._restarts += 1

    def open(self) -> McpChannel:
        channel = McpChannel(self)
        try:
            channel.prepare()
        except ValueError:
            channel.kill()
            raise
        return channel

    def restarts(self) -> int:
        return self._restarts


def mcp_adapter(cfg: Any, launch: Any = None) -> McpAdapter:
    """The adapter of a checked `system` block (`launch`: a stdio server's, bench.systems.sandbox.isolation.Launch)."""
    plan = mcp_plan(cfg.mcp)
    check_env(cfg.env)
    entry = str(cfg.entry)
    if entry.startswith(("http://", "https://")):
        from bench.systems.adapters.external import loopback_url

        loopback_url(entry)
        return McpAdapter(Server(url=entry), cfg.name, plan, cfg.startup_timeout_s, "none")
    if launch is None:
        raise ValueError("a stdio MCP server needs its launch (working folder and environment)")
    scratch = Path(launch.env.get("HOME", launch.cwd))
    # `env` ({workdir} filled) is in the launch's command line, applied inside the sandbox (bench/systems/sandbox/isolation.py)
    server = Server(argv=list(launch.argv), env=dict(launch.env), cwd=launch.cwd, scratch=scratch, reaped=launch.reaped,
                    expect=launch.expect)
    adapter = McpAdapter(server, cfg.name, plan, cfg.startup_timeout_s, launch.isolation)
    adapter.hint = startup_hint(entry, cfg.code)
    return adapter


def is_url(entry: str | None) -> bool:
    return bool(entry) and str(entry).startswith(("http://", "https://"))

