"""An MCP memory server that misbehaves on demand (tests/systems/test_mcp.py), written with the official SDK.

``python mcp_fake_server.py MARKER``: ``store`` keeps each text; ``search`` answers by its
query: ``not-json`` (text that is not JSON), ``no-text`` (objects without a text field),
``error`` (the tool raises), ``hang`` (never answers the first time: MARKER does not exist
yet, it is created), ``many`` (10^5 memories), anything else the stored texts sharing a
word with it (a JSON list of strings).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import MCPServer

app = MCPServer("fake-memory")
texts: list[str] = []


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
    if query == "hang" and not os.path.exists(sys.argv[1]):
        open(sys.argv[1], "w").close()
        time.sleep(3600)
    if query == "many":
        return '{"memories": [' + ",".join(f'{{"id": "m{i}", "text": "memory {i} about apples", "score": {1e6 - i}}}'
                                             for i in range(100_000)) + "]}"
    words = set(query.lower().split())
    return json.dumps([t for t in texts if words & set(t.lower().split())])


if __name__ == "__main__":
    app.run()
