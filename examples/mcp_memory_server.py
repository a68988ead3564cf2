#!/usr/bin/env python3
"""The consolidating memory (examples/consolidating_memory.py) behind MCP tools, written with the official `mcp` SDK.

No harness import: a memory server as a team would run it, with two tools --
``remember`` (store one piece of what was said, with where it came from) and ``recall``
(the memories of a person that best match a question). Evaluated with params alone
(docs/systems.md, *MCP*)::

    system:
      name: consolidating-mcp
      adapter: mcp
      entry: "{python} examples/mcp_memory_server.py"          # add --no-citations: memories that cite nothing
      code: [examples]
      mcp:
        observe: {tool: remember, arguments: {text: "{text}", holder: "{holder}", source_id: "{source_id}",
                                              extent: "{extent}", observed_at: "{observed_at}"}}
        search: {tool: recall, arguments: {question: "{question}", holder: "{holder}", k: "{k}"}}

``--http PORT`` serves it over Streamable HTTP at ``http://127.0.0.1:PORT/mcp`` instead of
stdio (started by you: ``entry: http://127.0.0.1:PORT/mcp``, not sandboxed).

``recall`` answers ``{"memories": [{"id", "text", "score", "provenance"}, ...]}``; with
``--no-citations`` each memory has no ``provenance`` (as most memory products answer), and
the harness attributes it (bench/systems/credit/attribution.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from consolidating_memory import ConsolidatingMemory
from mcp.server.mcpserver import MCPServer


def server(citations: bool = True) -> MCPServer:
    memory = ConsolidatingMemory()
    app = MCPServer("consolidating-memory")
    seen = {"n": 0}

    @app.tool()
    def remember(text: str, holder: str, source_id: str, extent: dict[str, Any], observed_at: str) -> str:
        """Store what was said (one turn, page, cue ...), with the source and the place in it it came from."""
        seen["n"] += 1
        memory.observe({"event": f"u{seen['n']}", "source_id": source_id, "extent": extent, "text": text,
                        "observed_at": observed_at, "holder": holder})
        return "stored"

    @app.tool()
    def recall(question: str, holder: str, k: int = 10) -> dict[str, Any]:
        """The memories of `holder` that best match `question`, best first."""
        found = memory.search({"question": question, "scope": {"holder": holder}, "k": k})
        return {"memories": [{"id": m["memory_id"], "text": m["text"], "score": m["score"],
                              **({"provenance": m["provenance"]} if citations else {})} for m in found]}

    return app


if __name__ == "__main__":
    app = server(citations="--no-citations" not in sys.argv[1:])
    if "--http" in sys.argv:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        app.run()
