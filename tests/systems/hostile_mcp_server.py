"""An MCP memory server over stdio that breaks the protocol on demand (standard library only, so `nobody`
can run it with /usr/bin/python3; tests/systems/sandbox/test_hostile_launch.py).

It speaks JSON-RPC by hand: `initialize`, `tools/list` (tools `store(text)` and `search(query)`)
and `tools/call`. `store` keeps each text; `search` answers the stored texts that share a word
with the query, as a JSON list in one text block, unless the query holds one of these words:

  GARBAGE      three lines that are not JSON-RPC (text, a broken object, HTML) instead of the answer
  DEEP         an answer whose JSON nests 100,000 levels deep
  BAD-UTF8     an answer line holding a byte that is not UTF-8
  STOP-READING answered, then it never reads its input again (the next request fills the pipe)
  HANG         never answered
"""

from __future__ import annotations

import json
import sys
import time

TOOLS = [
    {"name": "store", "description": "Remember a text.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "search", "description": "Search the texts.",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text_result(request_id: object, text: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}], "isError": False}}


def search(request_id: object, query: str, texts: list[str]) -> bool:
    """Answer one search (or break the protocol); False: stop reading the input from now on."""
    if "GARBAGE" in query:
        for line in ("this is not JSON-RPC", '{"jsonrpc": "2.0", "id": ', "<html><body>500</body></html>"):
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
    elif "DEEP" in query:
        sys.stdout.write('{"jsonrpc": "2.0", "id": ' + json.dumps(request_id) + ', "result": {"content": [], "x": '
                         + "[" * 100_000 + "]" * 100_000 + "}}\n")
        sys.stdout.flush()
    elif "BAD-UTF8" in query:
        sys.stdout.buffer.write(json.dumps(text_result(request_id, "[]")).encode()[:-2] + b', "note": "caf\xe9"}\n')
        sys.stdout.flush()
    elif "HANG" in query:
        time.sleep(3600)
    else:
        words = set(query.lower().split())
        send(text_result(request_id, json.dumps([t for t in texts if words & set(t.lower().split())])))
    return "STOP-READING" not in query


def main() -> int:
    texts: list[str] = []
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:  # a notification
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile-memory", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call" and message["params"]["name"] == "store":
            texts.append(str(message["params"]["arguments"]["text"]))
            send(text_result(request_id, "ok"))
        elif method == "tools/call" and message["params"]["name"] == "search":
            if not search(request_id, str(message["params"]["arguments"]["query"]), texts):
                time.sleep(3600)
        else:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
