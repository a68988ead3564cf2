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
provenance is attributed by the harness (bench.systems.attribution) to the units the
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
from bench.systems.inprocess import EventRefused, SystemCrash, SystemTimeout
from bench.systems.mcp_plan import (
    EVENT_FIELDS,
    INSTALL,
    OBSERVE_WORDS,
    SEARCH_WORDS,
    SHOWN_CHARS,
    McpPlan,
    check_env,
    default_arguments,
    fill,
    find_tool,
    json_value,
    mcp_plan,
    read_memories,
)

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


def _sdk() -> Any:
    try:
        import anyio.from_thread
        import mcp
        from mcp.client.stdio import StdioServerParameters
    except ImportError:
        raise MissingExtra(f"the mcp adapter needs the MCP Python SDK: {INSTALL}") from None
    return anyio, mcp, StdioServerParameters


class McpChannel:
    """One MCP client session on its own event loop thread; the harness's calls block on it."""

    def __init__(self, adapter: McpAdapter) -> None:
        self.adapter = adapter
        self.portal_cm: Any = None
        self.portal: Any = None
        self.owner: concurrent.futures.Future[Any] | None = None
        self.stop: Any = None
        self.client: Any = None
        self.tools: dict[str, Any] = {}
        self.events: list[dict[str, Any]] = []  # sent again to a restarted server
        self.elapsed_ms: float | None = None
        self.started = 0
        from bench.systems.attribution import Shown

        self.shown = Shown()
        self._attributed: dict[tuple[str, str | None], tuple[int, Any]] = {}

    # -- life cycle
    def start(self) -> None:
        anyio, mcp, params = _sdk()
        server = self.adapter.server
        target: Any = server.url if server.url is not None else params(
            command=server.argv[0], args=server.argv[1:], env=server.env, cwd=server.cwd)  # type: ignore[index]
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
            self.kill()
            raise SystemCrash(f"did not answer the MCP handshake within {timeout:g} s of starting") from None
        except Exception as exc:  # the SDK's own errors: the process could not start or spoke no MCP
            self.kill()
            raise SystemCrash(f"MCP session could not be opened (the server exited or spoke no MCP): {_one_line(exc)}"
                              f"{self.adapter.hint}") from None
        self.tools = {t.name: t for t in tools}
        self.started += 1
        self.adapter.resolve(self.tools)
        if self.adapter.reset is not None:
            reset = self.adapter.plan.reset
            self._tool(self.adapter.reset, (reset.arguments if reset is not None else None) or {}, timeout, "reset")

    def kill(self, graceful: bool = True) -> None:
        """End the session: the SDK terminates the server's process group; a cleanup that hangs is cancelled.
        Not `graceful` (a server that hangs): the session is cancelled at once."""
        if self.portal is None:
            return
        try:
            if not graceful and self.owner is not None:
                self.owner.cancel()
            if self.stop is not None:
                self.portal.call(self.stop.set)
            if self.owner is not None:
                try:
                    self.owner.result(timeout=10)
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

    def prepare(self) -> None:
        """Start the server again if it died, its folder emptied, and send it every event so far (untimed)."""
        if self.alive():
            return
        self.kill()
        scratch = self.adapter.server.scratch
        if self.started and scratch is not None and scratch.is_dir():
            for child in scratch.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        self.start()
        if self.started > 1:
            self.adapter.restarted()
        for event in self.events:
            try:
                self._observe(event, self.adapter.startup_timeout)
            except (SystemTimeout, SystemCrash, EventRefused) as exc:
                self.kill()
                raise SystemCrash(f"restarted, but replaying event {event['event']} to it failed: {exc}") from None

    def close(self) -> None:
        self.kill()

    # -- calls
    def _tool(self, name: str, arguments: Any, timeout: float, what: str) -> Any:
        anyio = _sdk()[0]
        client = self.client

        async def call() -> Any:
            with anyio.fail_after(timeout):
                return await client.call_tool(name, arguments)

        try:
            result = self.portal.call(call)
        except TimeoutError:
            self.kill(graceful=False)
            raise SystemTimeout(f"tool {name} ({what}) gave no answer within {timeout:g} s; the server was stopped and "
                                "will be restarted") from None
        except Exception as exc:  # the SDK raises its own errors for a broken session or a protocol error
            rpc = rpc_error(exc)
            if rpc is not None:  # the server answered the call with a JSON-RPC error: the session goes on
                raise SystemCrash(f"tool {name} ({what}) answered a JSON-RPC error: {rpc}") from None
            self.kill()
            raise SystemCrash(f"tool {name} ({what}) failed: {_one_line(exc)}") from None
        if getattr(result, "is_error", False):
            texts = " ".join(t for c in result.content or [] if isinstance(t := getattr(c, "text", None), str))
            raise SystemCrash(f"tool {name} ({what}) answered an error: {error_reason(texts)}")
        return result

    def _observe(self, event: dict[str, Any], timeout: float) -> None:
        tool, template = self.adapter.observe_call
        try:
            self._tool(tool, fill(template, {f: event.get(f) for f in EVENT_FIELDS}), timeout, f"event {event['event']}")
        except SystemCrash as exc:
            if self.alive():  # the tool answered an error: the event is refused
                raise EventRefused(str(exc)) from None
            raise

    def observe(self, event: dict[str, Any], timeout: float) -> None:
        self.prepare()
        self._observe(event, timeout)
        self.events.append(event)
        self.shown.add(event["source_id"], event["extent"], str(event.get("text") or ""), event.get("holder"))

    def call(self, request: dict[str, Any], timeout: float) -> Any:
        self.elapsed_ms = None
        self.prepare()
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
        """Each memory with its own provenance, else attributed (bench.systems.attribution)."""
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


def _messages(value: Any, found: list[str]) -> None:
    if isinstance(value, dict):
        for key, v in value.items():
            if key in ("message", "error", "detail", "reason") and isinstance(v, str) and v.strip() and v not in found:
                found.append(v.strip())
            else:
                _messages(v, found)
    elif isinstance(value, list):
        for v in value:
            _messages(v, found)


def error_reason(text: str) -> str:
    """A tool error's own reason on one line: the messages of the JSON it holds first (a validation
    error: ``Invalid value: Expected <=50 but received 100``), then its text (at most SHOWN_CHARS)."""
    text = " ".join(text.split())
    found: list[str] = []
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start >= 0:
        parsed = json_value(text[start:])
        if parsed is not None:
            _messages(parsed, found)
    head = text[:start].rstrip(" :") if found else text
    reason = "; ".join([*found, head] if found and head else found or [head])
    return reason[:SHOWN_CHARS] + ("…" if len(reason) > SHOWN_CHARS else "") or "(no text)"


def rpc_error(exc: BaseException) -> str | None:
    """A JSON-RPC error the server answered (the SDK's MCPError: code and message), on one line; None for any other."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    error = getattr(exc, "error", None)
    code, message = getattr(error, "code", None), getattr(error, "message", None)
    if not isinstance(code, int) or not isinstance(message, str):
        return None
    data = getattr(error, "data", None)
    return f"{code} {error_reason(message + ('' if data is None else ' ' + str(data)))}"


def _one_line(value: Any) -> str:
    while isinstance(value, BaseExceptionGroup) and value.exceptions:  # the SDK's task groups wrap the cause
        value = value.exceptions[0]
    text = f"{type(value).__name__}: {value}" if isinstance(value, BaseException) else str(value)
    return " ".join(text.split())[:200]


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
            channel.start()
        except ValueError:
            channel.kill()
            raise
        return channel

    def restarts(self) -> int:
        return self._restarts


def mcp_adapter(cfg: Any, launch: Any = None) -> McpAdapter:
    """The adapter of a checked `system` block (`launch`: a stdio server's, bench.systems.isolation.Launch)."""
    plan = mcp_plan(cfg.mcp)
    env = check_env(cfg.env)
    entry = str(cfg.entry)
    if entry.startswith(("http://", "https://")):
        from bench.systems.adapters import loopback_url

        loopback_url(entry)
        return McpAdapter(Server(url=entry), cfg.name, plan, cfg.startup_timeout_s, "none")
    if launch is None:
        raise ValueError("a stdio MCP server needs its launch (working folder and environment)")
    scratch = Path(launch.env.get("HOME", launch.cwd))
    filled = {k: v.replace("{workdir}", str(scratch)) for k, v in env.items()}
    server = Server(argv=list(launch.argv), env={**launch.env, **filled}, cwd=launch.cwd, scratch=scratch)
    adapter = McpAdapter(server, cfg.name, plan, cfg.startup_timeout_s, launch.isolation)
    adapter.hint = startup_hint(entry, cfg.code)
    return adapter


def startup_hint(entry: str, code: Any) -> str:
    """What to do when a stdio server exits before the handshake: a Python server in its own
    virtual environment needs that environment in system.code; one written for another major
    version of the `mcp` SDK than the harness's needs an environment of its own."""
    import shlex
    import sys
    from importlib.metadata import version

    args = shlex.split(entry)
    program = Path(args[0]) if args else Path()
    venv = next((p for p in program.absolute().parents[:2] if (p / "pyvenv.cfg").is_file()), None)
    if venv is not None and code is None:
        return (f"; its program {args[0]} is in the virtual environment {venv}, which is not shown to it (system.code: null "
                f"shows only the program file): set system.code: [{venv}]; its own error is on stderr above")
    if "{python}" in entry or (program.name.startswith("python") and venv is None) or (args and args[0] == sys.executable):
        return (f"; a Python server runs here under the harness's interpreter and its mcp {version('mcp')}: one written for "
                "another major version of the mcp SDK (FastMCP servers for mcp 1.x import mcp.server.fastmcp) stops at its "
                "import; install it with that mcp into a virtual environment of its own and run it from there (entry: "
                "\"<venv>/bin/python -m <module>\", system.code: [<venv>]); its own error is on stderr above")
    return "; its own error is on stderr above"


def is_url(entry: str | None) -> bool:
    return bool(entry) and str(entry).startswith(("http://", "https://"))

