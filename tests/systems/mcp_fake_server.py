"""An MCP memory server that misbehaves on demand (tests/systems/test_mcp.py), written with the official SDK.

``python mcp_fake_server.py MODE``: ``store`` keeps each text; ``search`` answers by MODE:
``plain`` (the stored texts containing a word of the query, as a JSON list of strings),
``not-json`` (text that is not JSON), ``no-text`` (objects without a text field),
``error`` (the tool raises), ``hang-once PATH`` (never answers, the first time: PATH does not
exist yet, it is created), ``many`` (10^5 memories).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import MCPServer

MODE = sys.argv[1] if len(sys.argv) > 1 else "plain"
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
    words = set(query.lower().split())
    if MODE == "not-json":
        return "I remember apples, I think"
    if MODE == "no-text":
        return '[{"id": 1, "body": "apples"}]'
    if MODE == "error":
        raise RuntimeError("the index is corrupt")
    if MODE == "hang-once" and not os.path.exists(sys.argv[2]):
        open(sys.argv[2], "w").close()
        time.sleep(3600)
    if MODE == "many":
        return '{"memories": [' + ",".join(f'{{"id": "m{i}", "text": "memory {i} about apples", "score": {1e6 - i}}}'
                                             for i in range(100_000)) + "]}"
    import json

    return json.dumps([t for t in texts if words & set(t.lower().split())])


if __name__ == "__main__":
    app.run()
