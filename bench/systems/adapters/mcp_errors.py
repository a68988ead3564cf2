"""Why an MCP server could not be started or a call of it failed, in words (bench.systems.adapters.mcp):
a tool error's own reason read out of the JSON it holds, a JSON-RPC error the server answered, an
exception on one line, and what to do when a stdio server exits before the handshake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.systems.adapters.mcp_plan import SHOWN_CHARS, json_value

__all__ = ["error_reason", "one_line", "rpc_error", "startup_hint"]

#: what the SDK raises for a call whose session closed (its CONNECTION_CLOSED outcome): a broken session, never an answer
CLOSED = (-32000, "Connection closed")


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
    if (code, message) == CLOSED:  # the SDK's own word for a session that ended, not the server's answer
        return None
    data = getattr(error, "data", None)
    return f"{code} {error_reason(message + ('' if data is None else ' ' + str(data)))}"


def one_line(value: Any) -> str:
    while isinstance(value, BaseExceptionGroup) and value.exceptions:  # the SDK's task groups wrap the cause
        value = value.exceptions[0]
    text = f"{type(value).__name__}: {value}" if isinstance(value, BaseException) else str(value)
    return " ".join(text.split())[:200]


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
