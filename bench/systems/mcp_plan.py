"""The mcp adapter's plan: the params block (tool calls, placeholders, the results rule), tool
discovery by name, and reading a tool result as memories (docs/systems.md, section 12). No I/O;
the channel and the adapter that use it: bench.systems.mcp."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench.params import ParamsError
from bench.systems.protocol import MalformedResponse

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
