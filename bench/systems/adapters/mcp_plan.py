"""The mcp adapter's plan: the params block (tool calls, placeholders, the results rule), tool
discovery by name, and reading a tool result as memories (docs/systems.md, section 12). No I/O;
the channel and the adapter that use it: bench.systems.adapters.mcp."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench.params import ParamsError
from bench.systems.adapters.protocol import MalformedResponse

EVENT_FIELDS = ("event", "text", "holder", "source_id", "observed_at", "modality", "extent")
QUESTION_FIELDS = ("question", "as_of", "holder", "session", "k")
#: the fields a memory object's text is read from, in this order
TEXT_FIELDS = ("text", "content", "memory", "observation")
#: where a list of memories is looked for in an object, without a `results` rule
LIST_FIELDS = ("memories", "results", "result", "items")
#: tool names found by name when mcp.observe / mcp.search do not name one
OBSERVE_WORDS = ("store", "add", "remember", "ingest")
SEARCH_WORDS = ("search", "query", "recall")
PLAN_KEYS = frozenset({"observe", "search", "reset", "results", "text"})
#: how a plain-text answer is cut into memories (system.mcp.text)
TEXT_SPLITS = ("whole", "lines", "paragraphs", "numbered")
TEXT_KEYS = frozenset({"split", "none", "skip"})
#: characters of an unreadable answer shown in its one line
SHOWN_CHARS = 300
CALL_KEYS = frozenset({"tool", "arguments"})
INSTALL = "pip install -e '.[mcp]'"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_]+)\}")
_PATH_STEP = re.compile(r"^([^.\[\]]*)(\[\])?$")
_NUMBERED = re.compile(r"(?m)^[ \t]*(?:\d+[.)]|\[\d+\]|#\d+)[ \t]+")


# --------------------------------------------------------------------------- the plan (params)


@dataclass(frozen=True)
class ToolCall:
    tool: str | None  # None: found by name on the server
    arguments: Any  # the argument template (None: inferred from the tool's input schema)


@dataclass(frozen=True)
class TextRule:
    """A plain-text answer read as memories (system.mcp.text): cut by `split`; a text matching
    `none` holds no memory; a piece matching `skip` (a header, a count) is not one."""

    split: str  # TEXT_SPLITS
    none: re.Pattern[str] | None = None
    skip: re.Pattern[str] | None = None

    def pieces(self, text: str) -> list[str]:
        if self.none is not None and self.none.search(text.strip()):
            return []
        if self.split == "whole":
            parts = [text]
        elif self.split == "lines":
            parts = text.splitlines()
        elif self.split == "paragraphs":
            parts = re.split(r"\n\s*\n", text)
        else:  # numbered: items that start a line with 1. 1) [1] or #1; what comes before the first is a preamble
            parts = _NUMBERED.split(text)[1:]
        out = [" ".join(p.split()) if self.split != "whole" else p.strip() for p in parts]
        return [p for p in out if p and (self.skip is None or not self.skip.search(p))]


@dataclass(frozen=True)
class McpPlan:
    observe: ToolCall
    search: ToolCall
    reset: ToolCall | None
    results: tuple[tuple[str, bool], ...] | None  # (key, each element) steps; None: the default rule
    text: TextRule | None = None  # a plain-text answer's rule; None: the answer must be JSON


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


def _regex(value: Any, key: str) -> re.Pattern[str] | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ParamsError(key, f"must be a regular expression, got {value!r}")
    try:
        return re.compile(value)
    except re.error as exc:
        raise ParamsError(key, f"{value!r} is not a regular expression: {exc}") from None


def text_rule(rule: Any) -> TextRule:
    """``whole``, ``lines``, ``paragraphs``, ``numbered``, or ``{split, none, skip}``; ParamsError otherwise."""
    block = {"split": rule} if isinstance(rule, str) else rule
    if not isinstance(block, dict) or set(block) - TEXT_KEYS or block.get("split") not in TEXT_SPLITS:
        raise ParamsError("system.mcp.text", f"must be one of {', '.join(TEXT_SPLITS)} or an object {{split, none, skip}} "
                          f"(none, skip: regular expressions), got {str(rule)[:80]}")
    return TextRule(block["split"], _regex(block.get("none"), "system.mcp.text.none"), _regex(block.get("skip"), "system.mcp.text.skip"))


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
        None if block.get("text") is None else text_rule(block["text"]),
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
    """The tool `call` names, or the one tool whose name has one of `words` (or, of several, the one
    named exactly like one); ValueError otherwise (one line)."""
    if call.tool is not None:
        if call.tool not in tools:
            raise ValueError(f"system.mcp.{what}.tool: the server has no tool {call.tool!r}; its tools: {tool_listing(tools)}")
        return call.tool
    found = [name for name in sorted(tools) if _words(name) & set(words)]
    exact = [name for name in found if name.lower() in words]  # a tool named `search` itself, beside search_*
    found = exact if len(exact) == 1 else found
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


def shown(value: Any) -> str:
    """The first SHOWN_CHARS characters of what came back, on one line (JSON for a parsed value)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return repr(text[:SHOWN_CHARS] + ("…" if len(text) > SHOWN_CHARS else ""))


TEXT_HINT = "declare how its text is read: system.mcp.text: whole (one memory), lines, paragraphs or numbered"


def json_value(text: str) -> Any:
    """A text holding a JSON object or list, parsed; None when it holds none (a bare scalar is text)."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) else None


def _unwrap(value: Any, rule: TextRule | None) -> Any:
    """FastMCP's ``{"result": ...}`` envelope taken off (its value a JSON text or the value itself); a
    text read by `rule`, else parsed as JSON (MalformedResponse naming what came back)."""
    while isinstance(value, dict) and set(value) == {"result"}:
        value = value["result"]
    if isinstance(value, str):
        if rule is not None:
            return rule.pieces(value)
        parsed = json_value(value)
        if parsed is None:
            raise MalformedResponse(f"the tool's text is not JSON: {shown(value)}; {TEXT_HINT}")
        return _unwrap(parsed, rule)
    return value


def _texts(result: Any) -> list[str]:
    """The text of each content block (a text block's, or an embedded text resource's)."""
    out = []
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        if not isinstance(text, str):
            text = getattr(getattr(block, "resource", None), "text", None)
        if isinstance(text, str):
            out.append(text)
    return out


def payload(result: Any, rule: TextRule | None = None) -> Any:
    """What a tool result says: its structured content, else its text content (several blocks:
    each block's JSON value or text, or, under `rule`, their pieces), the {"result": ...}
    envelope taken off; MalformedResponse when it says nothing readable."""
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        return _unwrap(structured, rule)
    texts = _texts(result)
    if not texts:
        if not getattr(result, "content", None):
            return []  # no block at all: nothing found
        raise MalformedResponse("the tool answered neither structured content nor text")
    if len(texts) == 1:
        return _unwrap(texts[0], rule)
    if rule is not None:
        return [piece for t in texts for piece in rule.pieces(t)]
    values: list[Any] = []
    for t in texts:  # several blocks: one memory each (its JSON value, or its text), a block holding a list: each element
        value = json_value(t)
        if value is None:
            values.append(t)
        else:
            value = _unwrap(value, None)
            values.extend(value if isinstance(value, list) else [value])
    return values


def _step(v: Any) -> Any:
    """A JSON text inside the answer parsed (FastMCP's envelope, a field holding JSON), the envelope taken off."""
    parsed = json_value(v) if isinstance(v, str) else v
    v = v if parsed is None else parsed
    while isinstance(v, dict) and set(v) == {"result"}:
        v = _step(v["result"])
    return v


def _walk(value: Any, steps: tuple[tuple[str, bool], ...]) -> list[Any]:
    values = [value]
    rule = ".".join(k + ("[]" if each else "") for k, each in steps)
    for key, each in steps:
        nxt = []
        for v in values:
            v = _step(v) if key != "result" else (json_value(v) or v) if isinstance(v, str) else v
            if key:
                if not isinstance(v, dict) or key not in v:
                    raise MalformedResponse(f"results rule {rule!r}: no key {key!r} in {shown(v)}{suggestion(value)}")
                v = _step(v[key])
            if each:
                if not isinstance(v, list):
                    raise MalformedResponse(f"results rule {rule!r}: {key or 'the value'} is not a list: {shown(v)}{suggestion(value)}")
                nxt.extend(v)
            else:
                nxt.append(v)
        values = nxt
    return values


def _readable(item: Any) -> bool:
    return isinstance(item, str) or (isinstance(item, dict) and any(isinstance(item.get(f), str) for f in TEXT_FIELDS))


def find_rule(value: Any, depth: int = 4) -> str | None:
    """A results path that reads `value` as memories (a list of strings, or of objects with a text
    field), the shortest first; None when none is found within `depth` keys."""
    value = _step(value)
    if isinstance(value, list) and value and all(_readable(v) for v in value):
        return "[]"
    frontier: list[tuple[str, Any]] = [("", value)]
    for _ in range(depth):
        nxt: list[tuple[str, Any]] = []
        for path, v in frontier:
            v = _step(v)
            items = v if isinstance(v, list) else [v]
            prefix = path + ("[]" if isinstance(v, list) and path else "")
            for item in items[:20]:
                for key, child in (item.items() if isinstance(item, dict) else ()):
                    child = _step(child)
                    here = f"{prefix}.{key}" if prefix else key
                    if isinstance(child, list) and child and all(_readable(c) for c in child):
                        return here + "[]"
                    if isinstance(child, (dict, list)):
                        nxt.append((here, child))
        frontier = nxt
    return None


def suggestion(value: Any) -> str:
    found = find_rule(value)
    return f"; system.mcp.results: {found!r} would read it" if found else ""


def _items(value: Any, steps: tuple[tuple[str, bool], ...] | None) -> list[Any]:
    if steps is not None:
        return _walk(value, steps)
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in LIST_FIELDS:
            found = _step(value.get(key))
            if isinstance(found, list):
                return found
    raise MalformedResponse(f"no list of memories in {shown(value)} (a list, or an object with one of "
                            f"{', '.join(LIST_FIELDS)}){suggestion(value) or '; declare system.mcp.results'}")


def _memory(i: int, item: Any) -> tuple[str | None, str, Any, Any]:
    """(id, text, score, provenance) of one memory."""
    if isinstance(item, str):
        text, mid, score, prov = item, None, None, None
    elif isinstance(item, dict):
        field = next((f for f in TEXT_FIELDS if isinstance(item.get(f), str)), None)
        if field is None:
            other = next((k for k, v in item.items() if isinstance(v, str) and v.strip()), None)
            hint = f"; system.mcp.results ending in '[].{other}' would read its {other!r}" if other else ""
            raise MalformedResponse(f"memory {i}: an object without a text field ({', '.join(TEXT_FIELDS)}): {shown(item)}{hint}")
        text, mid, score, prov = item[field], item.get("id"), item.get("score"), item.get("provenance")
        if mid is not None and not isinstance(mid, (str, int)):
            raise MalformedResponse(f"memory {i}: id must be a string or a number, got {shown(mid)}")
    else:
        raise MalformedResponse(f"memory {i}: must be a string or an object, got {shown(item)}")
    if not text.strip():
        raise MalformedResponse(f"memory {i}: its text is empty")
    return (None if mid is None else str(mid)), text, score, prov


def own_scores(scores: list[Any]) -> bool:
    """Every memory has a finite number as its score, never rising down the list."""
    return all(isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) for s in scores) and all(
        a >= b for a, b in zip(scores, scores[1:], strict=False))


class Memories(list[dict[str, Any]]):
    """The memories of one answer (wire dicts); `own`: their scores are the server's own."""

    own = False


def read_memories(result: Any, steps: tuple[tuple[str, bool], ...] | None, k: int, rule: TextRule | None = None) -> Memories:
    """The first `k` memories of a tool result as wire dicts (id, score, text, provenance or None).

    Ids: the memory's own (``id``) or ``m`` + 16 hex digits of its text's SHA-1; a repeated id
    is kept once (the first). Scores: the memories' own when every one has a finite score and
    they never increase down the list; otherwise the server's order, scored 1/rank (1, 1/2, ...:
    every answer's top memory scores 1, so no number reads a scale the server never sent)."""
    items = _items(payload(result, rule), steps)
    out = Memories()
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
    own = out.own = own_scores([m["score"] for m in out])
    for rank, m in enumerate(out, start=1):
        m["score"] = float(m["score"]) if own else 1.0 / rank
    return out
