"""An MCP memory server that answers in every common shape and misbehaves on demand
(tests/systems/adapters/test_mcp.py), written with the official SDK.

``python mcp_fake_server.py MARKER``: ``store`` keeps each text. ``search`` answers by its
query: ``not-json`` (text that is not JSON), ``no-text`` (objects without a text field),
``error`` (the tool raises), ``rpc-error`` (a JSON-RPC error), ``hang`` (never answers the
first time: MARKER does not exist yet, it is created), ``many`` (10^5 memories), anything
else the stored texts sharing a word with it (a JSON list of strings). The other search
tools answer the same texts in another shape:

* ``search_envelope`` -- a tool returning a str: the SDK's structured ``{"result": "<JSON text>"}``
  (what FastMCP servers such as agent-logbook send), the JSON ``{"memories": [{"content": ...}]}``;
* ``search_structured`` -- structured content ``{"hits": [{"text": ..., "score": ...}]}``;
* ``search_blocks`` -- one text block per memory;
* ``search_text`` -- plain text: ``No results found for: "<query>"``, or ``Found N results for:
  <query>`` then one numbered line per memory;
* ``search_limited`` -- takes ``limit`` at most 50 (a validation error beyond, as
  mcp-memory-libsql's valibot schema answers).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent
from pydantic import Field

app = MCPServer("fake-memory")
texts: list[str] = []


def matching(query: str) -> list[str]:
    words = set(query.lower().split())
    return [t for t in texts if words & set(t.lower().split())]


@app.tool()
def store(text: str) -> str:
    """Remember a text."""
    texts.append(text)
    return "ok"


@app.tool(structured_output=False)
def search(query: str) -> Any:
    """Search the texts."""
    if query == "not-json":
        return "I remember apples, I think"
    if query == "no-text":
        return '[{"id": 1, "body": "apples"}]'
    if query == "error":
        raise RuntimeError("the index is corrupt")
    if query == "rpc-error":
        raise MCPError(-32602, "query too long for this index")
    if query == "hang" and not os.path.exists(sys.argv[1]):
        open(sys.argv[1], "w").close()
        time.sleep(3600)
    if query == "many":
        return '{"memories": [' + ",".join(f'{{"id": "m{i}", "text": "memory {i} about apples", "score": {1e6 - i}}}'
                                             for i in range(100_000)) + "]}"
    return json.dumps(matching(query))


@app.tool()
def search_envelope(query: str) -> str:
    """A str answer: the SDK wraps it as structured {"result": "<text>"}."""
    return json.dumps({"memories": [{"id": i, "content": t} for i, t in enumerate(matching(query))]}, indent=2)


@app.tool()
def search_structured(query: str) -> dict[str, Any]:
    """Structured content of its own."""
    return {"hits": [{"text": t, "score": 1.0 / (i + 2)} for i, t in enumerate(matching(query))], "total": len(matching(query))}


@app.tool(structured_output=False)
def search_blocks(query: str) -> list[TextContent]:
    """One text block per memory."""
    return [TextContent(type="text", text=t) for t in matching(query)]


@app.tool(structured_output=False)
def search_text(query: str) -> str:
    """Plain text, as many servers answer."""
    found = matching(query)
    if not found:
        return f'No results found for: "{query}"'
    return f"Found {len(found)} results for: {query}\n" + "\n".join(f"{i}. {t}" for i, t in enumerate(found, start=1))


@app.tool()
def search_limited(query: str, limit: Annotated[int, Field(le=50)] = 10) -> str:
    """At most 50 results."""
    return json.dumps(matching(query)[:limit])


if __name__ == "__main__":
    app.run()
