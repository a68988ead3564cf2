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
provenance is attributed by the harness (bench.evaluation.attribution) to the units the
server was sent at or before the question, and named ``attributed:<id>``.

Latency: the search tool call alone (``elapsed_ms``); each event's tool call is its ingest
time. The `mcp` Python SDK is the optional extra ``mcp`` (pyproject.toml).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import math
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.params import ParamsError
from bench.systems import MissingExtra
from bench.systems.inprocess import EventRefused, SystemCrash, SystemTimeout
from bench.systems.protocol import MalformedResponse

__all__ = ["EVENT_FIELDS", "QUESTION_FIELDS", "McpAdapter", "McpPlan", "ToolCall", "fill", "mcp_plan", "read_memories"]

EVENT_FIELDS = ("event", "text", "holder", "source_id", "observed_at", "modality", "extent")
QUESTION_FIELDS = ("question", "as_of", "holder", "session", "k")
#: the fields a memory object's text is read from, in this order
TEXT_FIELDS = ("text", "content", "memory", "observation")
#: where a list of memories is looked for in an object, without a `results` rule
LIST_FIELDS = ("memories", "results", "result", "items")
#: tool names found by name when mcp.observe / mcp.search do not name one
OBSERVE_WORDS = ("store", "add", "remember", "ingest")
SEARCH_WORDS = ("search", "query", "recall")
PLAN_KEYS = frozenset({"observe", "search", "reset", "results"})
CALL_KEYS = frozenset({"tool", "arguments"})
INSTALL = "pip install -e '.[mcp]'"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_]+)\}")
_PATH_STEP = re.compile(r"^([^.\[\]]*)(\[\])?$")


# --------------------------------------------------------------------------- the plan (params)


@dataclass(frozen=True)
class ToolCall:
    tool: str | None  # None: found by name on the server
    arguments: Any  # the argument template (None: inferred from the tool's input schema)


@dataclass(frozen=True)
class McpPlan:
    observe: ToolCall
    search: ToolCall
    reset: ToolCall | None
    results: tuple[tuple[str, bool], ...] | None  # (key, each element) steps; None: the default rule


def _placeholders(template: Any, allowed: tuple[str, ...], key: str) -> None:
    if isinstance(template, str):
        for name in _PLACEHOLDER.findall(template):
            if name not in allowed:
                raise ParamsError(key, f"unknown placeholder {{{name}}}; allowed here: {', '.join('{' + a + '}' for a in allowed)}")
    elif isinstance(template, list):
        for i, item in enumerate(template):
            _placeholders(item, allowed, f"{key}[{i}]")
    elif isinstance(template, dict):
        for name, item in template.items():
            _placeholders(item, allowed, f"{key}.{name}")


def _call(block: Any, key: str, allowed: tuple[str, ...]) -> ToolCall:
    if block is None:
        return ToolCall(None, None)
    if isinstance(block, str):
        return ToolCall(block, None)
    if not isinstance(block, dict) or set(block) - CALL_KEYS:
        raise ParamsError(key, f"must be a tool name or an object with tool and arguments, got {str(block)[:80]}")
    tool = block.get("tool")
    if tool is not None and (not isinstance(tool, str) or not tool.strip()):
        raise ParamsError(f"{key}.tool", f"must be a tool name, got {tool!r}")
    args = block.get("arguments")
    if args is not None and not isinstance(args, dict):
        raise ParamsError(f"{key}.arguments", f"must be an object (the tool's arguments), got {str(args)[:80]}")
    _placeholders(args, allowed, f"{key}.arguments")
    return ToolCall(tool, args)


def results_path(rule: Any) -> tuple[tuple[str, bool], ...]:
    """``"entities[].observations[]"`` -> ((entities, True), (observations, True)); ParamsError otherwise."""
    if not isinstance(rule, str) or not rule.strip():
        raise ParamsError("system.mcp.results", f"must be a path such as \"entities[].observations[]\", got {rule!r}")
    steps = []
    for part in rule.strip().split("."):
        m = _PATH_STEP.match(part)
        if m is None or not (m.group(1) or m.group(2)):
            raise ParamsError("system.mcp.results", f"{rule!r}: step {part!r} must be a key, key[] or []")
        steps.append((m.group(1), bool(m.group(2))))
    return tuple(steps)


def mcp_plan(block: Mapping[str, Any] | None) -> McpPlan:
    """The `system.mcp` block checked; ParamsError naming the key."""
    block = dict(block or {})
    extra = sorted(set(block) - PLAN_KEYS)
    if extra:
        raise ParamsError(f"system.mcp.{extra[0]}", f"unknown key; allowed: {', '.join(sorted(PLAN_KEYS))}")
    reset = block.get("reset")
    return McpPlan(
        _call(block.get("observe"), "system.mcp.observe", EVENT_FIELDS),
        _call(block.get("search"), "system.mcp.search", QUESTION_FIELDS),
        None if reset is None else _call(reset, "system.mcp.reset", ()),
        None if block.get("results") is None else results_path(block["results"]),
    )


def check_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """`system.env`: only {workdir} may be substituted."""
    for name, value in (env or {}).items():
        for p in _PLACEHOLDER.findall(value):
            if p != "workdir":
                raise ParamsError(f"system.env.{name}", f"unknown placeholder {{{p}}}; only {{workdir}} (the server's writable folder)")
    return dict(env or {})


def fill(template: Any, values: Mapping[str, Any]) -> Any:
    """The template with its placeholders substituted as JSON values (module docstring)."""
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole and whole.group(1) in values:
            return values[whole.group(1)]
        return _PLACEHOLDER.sub(lambda m: "" if values.get(m.group(1)) is None else str(values[m.group(1)])
                                if m.group(1) in values else m.group(0), template)
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    return template


# --------------------------------------------------------------------------- tools


def _words(name: str) -> set[str]:
    return set(re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower())) - {""}


def tool_listing(tools: Mapping[str, Any]) -> str:
    return ", ".join(sorted(tools)) or "(none)"


def find_tool(call: ToolCall, tools: Mapping[str, Any], words: tuple[str, ...], what: str) -> str:
    """The tool `call` names, or the one tool whose name has one of `words`; ValueError otherwise (one line)."""
    if call.tool is not None:
        if call.tool not in tools:
            raise ValueError(f"system.mcp.{what}.tool: the server has no tool {call.tool!r}; its tools: {tool_listing(tools)}")
        return call.tool
    found = [name for name in sorted(tools) if _words(name) & set(words)]
    if len(found) != 1:
        why = "no tool" if not found else f"{len(found)} tools ({', '.join(found)})"
        raise ValueError(f"system.mcp.{what}: {why} named like {'/'.join(words)}; name one in system.mcp.{what}.tool; "
                         f"the server's tools: {tool_listing(tools)}")
    return found[0]


def default_arguments(tool: str, schema: Any, placeholder: str, what: str) -> dict[str, Any]:
    """Without an argument template: the tool's one string argument gets `placeholder`."""
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    strings = [k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "string"]
    required = [k for k in (schema.get("required", []) if isinstance(schema, dict) else []) if k in props]
    if required and set(required) <= set(strings) and len(required) == 1:
        return {required[0]: placeholder}
    if not required and len(strings) == 1:
        return {strings[0]: placeholder}
    raise ValueError(f"system.mcp.{what}.arguments: cannot tell which argument of tool {tool!r} takes {placeholder} "
                     f"(its arguments: {', '.join(props) or 'none'}); write the argument template")


# --------------------------------------------------------------------------- results


def _payload(result: Any) -> Any:
    """A tool result's structured content, else its text content parsed as JSON; MalformedResponse otherwise."""
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        if isinstance(structured, dict) and set(structured) == {"result"}:
            return structured["result"]  # the SDK's wrapping of a tool that returns a list or a scalar
        return structured
    texts: list[str] = [t for c in getattr(result, "content", None) or [] if isinstance(t := getattr(c, "text", None), str)]
    if not texts:
        raise MalformedResponse("the tool answered neither structured content nor text")
    if len(texts) > 1:  # one memory per text block, each a JSON value
        try:
            return [json.loads(t) for t in texts]
        except json.JSONDecodeError:
            return texts
    try:
        return json.loads(texts[0])
    except json.JSONDecodeError as exc:
        raise MalformedResponse(f"the tool's text is not JSON ({exc.msg}): {texts[0][:80]!r}") from None


def _walk(value: Any, steps: tuple[tuple[str, bool], ...]) -> list[Any]:
    values = [value]
    for key, each in steps:
        nxt = []
        for v in values:
            if key:
                if not isinstance(v, dict) or key not in v:
                    raise MalformedResponse(f"results rule: no key {key!r} in {str(v)[:80]}")
                v = v[key]
            if each:
                if not isinstance(v, list):
                    raise MalformedResponse(f"results rule: {key or 'the value'} is not a list: {str(v)[:80]}")
                nxt.extend(v)
            else:
                nxt.append(v)
        values = nxt
    return values


def _items(payload: Any, steps: tuple[tuple[str, bool], ...] | None) -> list[Any]:
    if steps is not None:
        return _walk(payload, steps)
    if isinstance(payload, list):
        return payload
    if isinstance(payload, dict):
        for key in LIST_FIELDS:
            if isinstance(payload.get(key), list):
                return payload[key]
    raise MalformedResponse(f"no list of memories in {str(payload)[:80]} (a list, or an object with one of "
                            f"{', '.join(LIST_FIELDS)}; else declare system.mcp.results)")


def _memory(i: int, item: Any) -> tuple[str | None, str, Any, Any]:
    """(id, text, score, provenance) of one memory."""
    if isinstance(item, str):
        text, mid, score, prov = item, None, None, None
    elif isinstance(item, dict):
        field = next((f for f in TEXT_FIELDS if isinstance(item.get(f), str)), None)
        if field is None:
            raise MalformedResponse(f"memory {i}: an object without a text field ({', '.join(TEXT_FIELDS)}): {str(item)[:80]}")
        text, mid, score, prov = item[field], item.get("id"), item.get("score"), item.get("provenance")
        if mid is not None and not isinstance(mid, (str, int)):
            raise MalformedResponse(f"memory {i}: id must be a string or a number, got {str(mid)[:80]}")
    else:
        raise MalformedResponse(f"memory {i}: must be a string or an object, got {str(item)[:80]}")
    if not text.strip():
        raise MalformedResponse(f"memory {i}: its text is empty")
    return (None if mid is None else str(mid)), text, score, prov


def read_memories(result: Any, steps: tuple[tuple[str, bool], ...] | None, k: int) -> list[dict[str, Any]]:
    """The first `k` memories of a tool result as wire dicts (id, score, text, provenance or None).

    Ids: the memory's own (``id``) or ``m`` + 16 hex digits of its text's SHA-1; a repeated id
    is kept once (the first). Scores: the memories' own when every one has a finite score and
    they never increase down the list; otherwise the server's order, scored k, k-1, ..."""
    items = _items(_payload(result), steps)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(items, start=1):
        mid, text, score, prov = _memory(i, item)
        mid = mid or "m" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]
        if mid in seen:
            continue
        seen.add(mid)
        out.append({"memory_id": mid, "score": score, "text": text, "provenance": prov})
        if len(out) == k:
            break
    scores = [m["score"] for m in out]
    own = all(isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) for s in scores) and all(
        a >= b for a, b in zip(scores, scores[1:], strict=False))
    for rank, m in enumerate(out):
        m["score"] = float(m["score"]) if own else float(len(out) - rank)
    return out


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
        from bench.evaluation.attribution import Shown

        self.shown = Shown()
        self._attributed: dict[tuple[str, str | None], tuple[int, list[dict[str, Any]]]] = {}

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
            raise SystemCrash(f"MCP session could not be opened (the server exited or spoke no MCP): {_one_line(exc)}") from None
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
            self.kill()
            raise SystemCrash(f"tool {name} ({what}) failed: {_one_line(exc)}") from None
        if getattr(result, "is_error", False):
            texts = " ".join(getattr(c, "text", "") for c in result.content or [])
            raise SystemCrash(f"tool {name} ({what}) answered an error: {_one_line(texts)}")
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
        memories = read_memories(result, self.adapter.results, int(request["k"]))
        return {"id": request["id"], "hits": self._provenanced(memories, scope.get("holder"))}

    def _provenanced(self, memories: list[dict[str, Any]], holder: str | None) -> list[dict[str, Any]]:
        """Each memory with its own provenance, else attributed (bench.evaluation.attribution)."""
        out = []
        for m in memories:
            if m["provenance"] not in (None, []):  # its own citations, checked by the wire's rules
                out.append(m)
                continue
            key = (m["text"], holder)
            cached = self._attributed.get(key)
            if cached is None or cached[0] != len(self.shown):
                cached = (len(self.shown), self.shown.attribute(m["text"], holder))
                self._attributed[key] = cached
            if cached[1]:  # nothing judged by its text shown yet: nothing to cite, the memory is left out
                out.append({**m, "memory_id": f"attributed:{m['memory_id']}", "provenance": cached[1]})
        return out


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
        self._restarts = 0
        _sdk()  # the extra is checked before anything starts

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
    return McpAdapter(server, cfg.name, plan, cfg.startup_timeout_s, launch.isolation)


def is_url(entry: str | None) -> bool:
    return bool(entry) and str(entry).startswith(("http://", "https://"))

