"""The mcp adapter (bench/systems/adapters/mcp.py and mcp_plan.py, docs/systems.md *MCP*): params, results, and real servers over stdio.

Real servers: MCP's reference memory server from the npm registry (installed by .ci/run into
.ci/node), the example consolidating memory behind MCP tools (examples/mcp_memory_server.py),
and a misbehaving server written with the official SDK (tests/systems/mcp_fake_server.py).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from bench.params import ParamsError
from bench.systems.adapters.mcp_plan import fill, mcp_plan, read_memories, results_path
from bench.systems.adapters.protocol import MalformedResponse
from bench.systems.config import check_system
from bench.systems.replay import event_stream
from bench.systems.run import run_queries
from tests.conftest import ROOT
from tests.extras import need

NODE_DIR = ROOT / ".ci" / "node"
REFERENCE = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
NPM_INSTALL = "npm install --prefix .ci/node @modelcontextprotocol/server-memory@2026.8.31 (what .ci/run does)"
REFERENCE_MCP = {
    "observe": {"tool": "create_entities", "arguments": {"entities": [{"name": "{event}", "entityType": "{holder}", "observations": ["{text}"]}]}},
    "search": {"tool": "search_nodes", "arguments": {"query": "{question}"}},
    "results": "entities[].observations[]",
}
FAKE = ROOT / "tests" / "systems" / "mcp_fake_server.py"


def need_sdk() -> None:
    need("pip install -e '.[mcp]'", "mcp", "mcp.server.mcpserver")


def need_reference() -> None:
    need_sdk()
    if shutil.which("node") is None or not REFERENCE.is_file():
        message = f"MCP's reference memory server is not installed (needs Node): {NPM_INSTALL}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must install it; {message}", pytrace=False)
        pytest.skip(message)


# --------------------------------------------------------------------------- params and templates


def test_placeholders_are_json_values():
    template = {"q": "{question}", "k": "{k}", "who": "{holder}", "line": "{holder} asks: {question} (top {k})", "list": ["{k}"]}
    out = fill(template, {"question": "apples?", "k": 5, "holder": None})
    assert out == {"q": "apples?", "k": 5, "who": None, "line": " asks: apples? (top 5)", "list": [5]}
    assert fill({"extent": "{extent}"}, {"extent": {"turn": 3}}) == {"extent": {"turn": 3}}


@pytest.mark.parametrize("block, key", [
    ({"observe": {"tool": "x", "arguments": {"a": "{question}"}}}, "system.mcp.observe.arguments.a"),
    ({"search": {"tool": "x", "arguments": {"a": ["{text}"]}}}, "system.mcp.search.arguments.a[0]"),
    ({"serach": {"tool": "x"}}, "system.mcp.serach"),
    ({"search": {"tool": "x", "args": {}}}, "system.mcp.search"),
    ({"results": "entities[].[x]"}, "system.mcp.results"),
])
def test_plan_refusals_name_the_key(block, key):
    with pytest.raises(ParamsError) as err:
        mcp_plan(block)
    assert str(err.value).startswith(f"params.yaml {key}") or key in str(err.value)


def test_system_block_refusals():
    base = {"name": "m", "adapter": "mcp"}
    for block, needle in (
        ({}, "system.entry"),
        ({"entry": "node server.js --data {atoms}"}, "cannot name {atoms}"),
        ({"entry": "http://example.org/mcp"}, "not on this machine"),
        ({"entry": "node s.js", "env": {"F": "{home}/m.jsonl"}}, "system.env.F"),
        ({"entry": "node s.js", "env": {"F": 3}}, "system.env.F"),
        ({"entry": "http://127.0.0.1:9/mcp", "sandbox": "required"}, "cannot be sandboxed"),
        ({"entry": "node s.js", "concurrency": 2}, "system.concurrency: 2, but an MCP server is replayed over one session"),
    ):
        with pytest.raises(ValueError, match=None) as err:
            check_system({**base, **block})
        assert needle in str(err.value), (block, str(err.value))
    with pytest.raises(ValueError, match="only for the mcp adapter"):
        check_system({"name": "c", "adapter": "command", "entry": "x", "mcp": {}})
    assert check_system({**base, "entry": "node s.js", "env": {"F": "{workdir}/m.jsonl"}, "mcp": REFERENCE_MCP}).adapter == "mcp"


def test_tool_discovery_by_name():
    from bench.systems.adapters.mcp_plan import ToolCall, default_arguments, find_tool

    tools = {"search_nodes": None, "query_graph": None, "addMemory": None, "read_graph": None}
    assert find_tool(ToolCall(None, None), tools, ("store", "add", "remember", "ingest"), "observe") == "addMemory"
    with pytest.raises(ValueError) as err:
        find_tool(ToolCall(None, None), tools, ("search", "query", "recall"), "search")
    assert str(err.value) == ("system.mcp.search: 2 tools (query_graph, search_nodes) named like search/query/recall; name one in "
                              "system.mcp.search.tool; the server's tools: addMemory, query_graph, read_graph, search_nodes")
    with pytest.raises(ValueError, match="system.mcp.observe: no tool named like store"):
        find_tool(ToolCall(None, None), {"read_graph": None}, ("store",), "observe")
    schema = {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}
    assert default_arguments("search_nodes", schema, "{question}", "search") == {"query": "{question}"}


def result(structured=None, text=None):
    content = [] if text is None else [SimpleNamespace(type="text", text=t) for t in ([text] if isinstance(text, str) else text)]
    return SimpleNamespace(structured_content=structured, content=content, is_error=False)


def texts(out) -> list[str]:
    return [m["text"] for m in out]


def test_results_rule():
    graph = {"entities": [{"name": "e1", "observations": ["a about apples", "b"]}, {"name": "e2", "observations": ["c"]}], "relations": []}
    out = read_memories(result(graph), results_path("entities[].observations[]"), 10)
    assert texts(out) == ["a about apples", "b", "c"] and [m["score"] for m in out] == [1.0, 0.5, 1 / 3] and not out.own
    assert all(m["memory_id"].startswith("m") and len(m["memory_id"]) == 17 and m["provenance"] is None for m in out)
    # objects: text/content/memory/observation, own ids and non-increasing scores kept, a repeated id once, cut at k
    items = [{"id": 7, "memory": "x", "score": 0.9}, {"id": "7", "text": "again"}, {"content": "y", "score": 0.5,
             "provenance": [{"source_id": "s", "extent": {"turn": 1}}]}, {"observation": "z", "score": 0.1}]
    out = read_memories(result(text=json.dumps({"memories": items})), None, 2)
    assert [(m["memory_id"], m["text"], m["score"]) for m in out] == [("7", "x", 0.9), (out[1]["memory_id"], "y", 0.5)] and out.own
    assert out[1]["provenance"] == [{"source_id": "s", "extent": {"turn": 1}}]
    # scores that rise down the list are not the server's ranking: its order is, scored 1/rank
    out = read_memories(result({"result": [{"text": "p", "score": 1}, {"text": "q", "score": 2}]}), None, 5)
    assert [m["score"] for m in out] == [1.0, 0.5] and not out.own


def test_every_common_shape_is_read_with_params_only():
    """FastMCP's {"result": "<JSON text>"} (structured or as text), the envelope around an object,
    structuredContent of its own, several blocks, a text field holding JSON: the same memories."""
    memories = {"memories": [{"id": 1, "content": "Alice: apples"}, {"id": 2, "content": "Bob: pears"}]}
    text = json.dumps(memories, indent=2)
    for shape in (result({"result": text}, text), result(text=text), result({"result": memories}), result(memories),
                  result(text=json.dumps({"result": text}))):
        assert texts(read_memories(shape, None, 10)) == ["Alice: apples", "Bob: pears"], shape
    # agent-logbook as the issue tried it: results "memories[]" on the envelope's string reads it too
    assert texts(read_memories(result({"result": text}, text), results_path("memories[]"), 10)) == ["Alice: apples", "Bob: pears"]
    assert texts(read_memories(result(text=["Alice: apples", '{"text": "Bob: pears"}', '["x", "y"]']), None, 10)) == [
        "Alice: apples", "Bob: pears", "x", "y"]
    assert texts(read_memories(result({"hits": [{"text": "a"}], "total": 1}), results_path("hits[]"), 10)) == ["a"]
    assert read_memories(result(), None, 10) == []  # no content block at all: nothing found


@pytest.mark.parametrize("rule, text, expected", [
    ("whole", "Alice said she planted apples.\nThen pears.", ["Alice said she planted apples.\nThen pears."]),
    ("lines", "one\n\n two  words \nthree", ["one", "two words", "three"]),
    ("paragraphs", "first para\nstill first\n\n\nsecond", ["first para still first", "second"]),
    ("numbered", "Found 3 results for: apples\n1. Alice: apples\nin the garden\n2) Bob: pears\n[3] Carol: jam", [
        "Alice: apples in the garden", "Bob: pears", "Carol: jam"]),
    ({"split": "lines", "none": "^No results found", "skip": "^Found \\d+ results"}, 'No results found for: "apples"', []),
    ({"split": "lines", "none": "^No results found", "skip": "^Found \\d+ results"}, "Found 2 results for: x\na\nb", ["a", "b"]),
])
def test_plain_text_rules(rule, text, expected):
    from bench.systems.adapters.mcp_plan import text_rule

    plan = mcp_plan({"text": rule})
    assert plan.text == text_rule(rule)
    assert texts(read_memories(result(text=text), None, 10, plan.text)) == expected
    assert texts(read_memories(result({"result": text}), None, 10, plan.text)) == expected  # FastMCP's str answer
    with pytest.raises(ParamsError, match="system.mcp.text"):
        mcp_plan({"text": "sentences"})
    with pytest.raises(ParamsError, match="system.mcp.text.none"):
        mcp_plan({"text": {"split": "lines", "none": "("}})


@pytest.mark.parametrize("payload, needle", [
    (result(text="I remember apples " * 30), "text is not JSON: 'I remember apples"),
    (result({"entities": []}), "no list of memories"),
    (result({"hits": [{"text": "a"}], "total": 1}), "system.mcp.results: 'hits[]' would read it"),
    (result({"memories": [{"body": "x"}]}), "system.mcp.results ending in '[].body' would read its 'body'"),
    (result({"memories": [3]}), "must be a string or an object"),
    (result({"memories": ["  "]}), "its text is empty"),
    (SimpleNamespace(structured_content=None, content=[SimpleNamespace(type="image", data="...")]), "neither structured content nor text"),
])
def test_unreadable_results_show_what_came_back_and_the_rule_that_reads_it(payload, needle):
    with pytest.raises(MalformedResponse) as err:
        read_memories(payload, None, 10)
    assert needle in str(err.value) and "\n" not in str(err.value)
    if "not JSON" in needle:  # the first 300 characters of what came back, and the rule that reads it
        assert ("I remember apples " * 30)[:300].strip() in str(err.value) and "system.mcp.text: whole" in str(err.value)
    graph = {"entities": [{"name": "e", "observations": ["o"]}]}
    with pytest.raises(MalformedResponse, match=r"no key 'memories'.*'entities\[\]\.observations\[\]' would read it"):
        read_memories(result(graph), results_path("memories[]"), 10)


def test_a_tool_error_in_its_own_words():
    from bench.systems.adapters.mcp_errors import error_reason

    libsql = ('Invalid arguments for tool search_nodes: [{"kind":"validation","type":"max_value","input":100,"expected":"<=50",'
              '"received":"100","message":"Invalid value: Expected <=50 but received 100","requirement":50,"path":[{"type":'
              '"object","origin":"value","input":{"query":"apples","limit":100},"key":"limit","value":100}]}]')
    assert error_reason(libsql) == "Invalid value: Expected <=50 but received 100; Invalid arguments for tool search_nodes"
    assert error_reason('{"error": "internal_error", "message": "SQLITE_BUSY"}') == "internal_error; SQLITE_BUSY"
    assert error_reason("Error executing tool x: the index\n is corrupt") == "Error executing tool x: the index is corrupt"
    assert len(error_reason("x" * 1000)) == 301


# --------------------------------------------------------------------------- real servers


def open_mcp(block: dict, tmp_path: Path, segments: pd.DataFrame | None = None):
    from bench.systems.sandbox.workdir import protected_paths
    from bench.systems.session import open_system

    cfg = check_system({"name": "mcp-probe", "adapter": "mcp", "timeout_s": 30, **block})
    return open_system(cfg, {}, pd.DataFrame(), segments=segments, manifest_rows=[], store=tmp_path / "store", root=ROOT,
                       temp_root=tmp_path / "systems", protected=protected_paths(ROOT), host_env=dict(os.environ))


def locomo_pieces(real_corpus) -> tuple[pd.DataFrame, list[str]]:
    seg = real_corpus["segments"]
    sessions = sorted(seg.loc[seg["dataset"] == "locomo", "source_id"].unique())[:2]
    return seg.loc[seg["source_id"].isin(sessions)], sessions


def entry(qid: str, question: str, holder: str, as_of: str) -> dict:
    return {"query_id": qid, "modality": "conversation", "question": question, "as_of": as_of, "gold": [],
            "scope": {"holder": holder, "session": None, "scenario": "conversation-qa"}, "unanswerable": False}


def test_reference_server_replayed_on_locomo_with_attributed_memories(real_corpus, tmp_path):
    """The npm server, sandboxed, over two real LoCoMo sessions: its search_nodes matches the whole
    question as a substring, so a question is answered only where it is a piece of a turn; what it
    returns cites nothing and is attributed to the turn it is."""
    need_reference()
    seg, sessions = locomo_pieces(real_corpus)
    events = event_stream(seg, sessions)
    holder = str(events["holder"].iloc[0])
    last = pd.Timestamp(events["observed_at"].max()).isoformat()
    turn = events.iloc[5]
    piece = " ".join(str(turn["text"]).split(": ", 1)[1].split()[:4])  # four words of a turn, without the speaker
    entries = [entry("q-piece", piece, holder, last), entry("q-natural", f"What did {piece}?", holder, last),
               entry("q-early", piece, holder, pd.Timestamp(turn["observed_at"]).isoformat())]
    block = {"entry": f"node {REFERENCE}", "code": [str(NODE_DIR)], "env": {"MEMORY_FILE_PATH": "{workdir}/memory.jsonl"}, "mcp": REFERENCE_MCP}
    with open_mcp(block, tmp_path, seg) as opened:
        assert opened.info["isolation"] in ("bwrap", "landlock")
        ran = run_queries(opened.adapter, entries, 10, events=lambda: events, timeout_s=30)
    assert ran.info["replay"] and not ran.info["given_atoms"] and len(ran.ingest) == len(events)
    assert set(ran.failures["query_id"]) == set()
    mem = ran.memories.set_index(["query_id", "rank"])
    piece_hits = mem.loc["q-piece"]
    assert (piece_hits["text"].str.contains(piece, regex=False)).all() and str(turn["text"]) in piece_hits["text"].tolist()
    assert piece_hits["memory_id"].str.startswith("attributed:m").all()
    own = piece_hits.loc[piece_hits["text"] == str(turn["text"]), "provenance"].iloc[0]
    assert json.loads(own) == [{"source_id": turn["source_id"], "extent": turn["extent"]}]  # a verbatim turn: its own turn
    assert "q-natural" not in set(ran.memories["query_id"])  # the whole question is no substring of any turn
    assert ran.latency.set_index("query_id").loc["q-early", "n_returned"] >= 1  # the turn was sent before that question


def test_tools_found_by_name_or_one_line_listing_them(tmp_path):
    need_reference()
    block = {"entry": f"node {REFERENCE}", "code": [str(NODE_DIR)], "env": {"MEMORY_FILE_PATH": "{workdir}/memory.jsonl"}}
    with open_mcp({**block, "mcp": {**REFERENCE_MCP, "observe": {"tool": "remember"}}}, tmp_path) as opened:
        with pytest.raises(ValueError) as err:
            opened.adapter.open()
    assert str(err.value).startswith("system.mcp.observe.tool: the server has no tool 'remember'; its tools: add_observations, ")
    assert "search_nodes" in str(err.value) and "\n" not in str(err.value)
    with open_mcp(block, tmp_path) as opened:  # add_observations is found by name, but takes no one string argument
        with pytest.raises(ValueError, match=r"system.mcp.observe.arguments: cannot tell which argument of tool 'add_observations'"):
            opened.adapter.open()


def fake(tmp_path: Path) -> dict:
    return {"entry": f"{{python}} {FAKE} {tmp_path / 'hung'}", "sandbox": "off"}


TINY = [("t:a:s1", "t:a", 1, "Alice: I planted apples in the garden"), ("t:a:s1", "t:a", 1, "Bob: pears are better for jam"),
        ("t:b:s1", "t:b", 2, "Carol: apples again, from the market")]


def tiny_events() -> pd.DataFrame:
    rows = [{"source_id": s, "dataset": "t", "modality": "conversation", "turn": i + 1, "seq": i, "holder": h,
             "observed_at": pd.Timestamp(f"2023-05-0{d}T10:00:00Z"), "text": t} for i, (s, h, d, t) in enumerate(TINY)]
    seg = pd.DataFrame(rows)
    return event_stream(seg, sorted(seg["source_id"].unique()))


def tiny_entries() -> list[dict]:
    return [entry("q1", "apples", "t:a", "2023-05-01T12:00:00+00:00"), entry("q2", "apples", "t:b", "2023-05-03T00:00:00+00:00")]


def test_the_sdk_server_tools_by_name_errors_hangs_and_attribution_per_holder(tmp_path):
    """No mcp block: store/search found by name, their one string argument inferred. A tool that
    raises fails its question; one that hangs times out, and the server is started again with
    every event so far before the next question."""
    need_sdk()
    entries = [entry("q1", "apples", "t:a", "2023-05-01T12:00:00+00:00"), entry("q-error", "error", "t:a", "2023-05-02T00:00:00+00:00"),
               entry("q-hang", "hang", "t:a", "2023-05-02T00:00:01+00:00"), entry("q2", "apples", "t:b", "2023-05-03T00:00:00+00:00")]
    start = time.perf_counter()
    with open_mcp(fake(tmp_path), tmp_path) as opened:
        ran = run_queries(opened.adapter, entries, 10, events=tiny_events, timeout_s=3)
    assert time.perf_counter() - start < 45  # the hang costs its timeout, not an hour
    failures = ran.failures.set_index("query_id")
    assert failures.loc["q-error", "kind"] == "crash" and failures.loc["q-hang", "kind"] == "timeout" and len(failures) == 2
    assert failures.loc["q-error", "message"].startswith("tool search (search) answered an error: Error executing tool search")
    assert failures.loc["q-hang", "message"].startswith("tool search (search) gave no answer within 3 s")
    assert ran.info["restarts"] == 1 and len(ran.ingest) == 3
    mem = ran.memories
    assert mem.loc[mem["query_id"] == "q1", "text"].tolist() == ["Alice: I planted apples in the garden"]  # b's turn not yet sent
    q2 = mem.loc[mem["query_id"] == "q2"]
    assert set(q2["text"]) == {TINY[0][3], TINY[2][3]}  # the restarted server was sent a's turns again
    cites = {t: json.loads(p) for t, p in zip(q2["text"], q2["provenance"], strict=True)}
    assert cites[TINY[2][3]] == [{"source_id": "t:b:s1", "extent": {"turn": 3}}]
    # a's turn answered to b: it supports no turn of b, so it is attributed to a's own turn (a leak, counted as one)
    assert cites[TINY[0][3]] == [{"source_id": "t:a:s1", "extent": {"turn": 1}}]
    assert ran.latency["latency_ms"].gt(0).all()


def test_malformed_results_and_100000_memories(tmp_path):
    """Unreadable answers stop the run naming the question; 10^5 memories are cut at k."""
    need_sdk()
    from bench.systems.adapters.protocol import request_of
    from bench.systems.run import query_of

    with open_mcp(fake(tmp_path), tmp_path) as opened:
        with pytest.raises(ValueError) as err:
            run_queries(opened.adapter, [entry("q-bad", "not-json", "t:a", "2023-05-02T00:00:00+00:00")], 10, events=tiny_events)
        assert str(err.value) == ("query q-bad: malformed response: the tool's text is not JSON: 'I remember apples, I think'; "
                                  "declare how its text is read: system.mcp.text: whole (one memory), lines, paragraphs or numbered")
        channel = opened.adapter.open()  # the same server, called directly
        try:
            channel.observe(tiny_events().iloc[0].to_dict() | {"observed_at": "2023-05-01T10:00:00+00:00"}, 30)
            with pytest.raises(MalformedResponse, match="memory 1: an object without a text field"):
                channel.call(request_of(query_of(entry("q", "no-text", "t:a", "2023-05-02T00:00:00+00:00"), 10), "r1"), 30)
            start = time.perf_counter()
            answer = channel.call(request_of(query_of(entry("q", "many", "t:a", "2023-05-02T00:00:00+00:00"), 25), "r2"), 60)
            assert time.perf_counter() - start < 20
        finally:
            channel.close()
    hits = answer["hits"]
    assert len(hits) == 25 and [h["memory_id"] for h in hits[:2]] == ["attributed:m0", "attributed:m1"]
    assert [h["score"] for h in hits[:2]] == [1e6, 1e6 - 1]  # its own scores: they never rise
    assert hits[0]["provenance"] == [{"source_id": "t:a:s1", "extent": {"turn": 1}}]  # the one turn sent: no support, cited


def test_example_server_with_and_without_citations(real_corpus, tmp_path):
    """examples/mcp_memory_server.py over stdio, sandboxed: with citations its memories are its
    own; without, they are attributed, and every cited turn supports the memory."""
    need_sdk()
    from bench.systems.credit.support import support_mask

    seg, sessions = locomo_pieces(real_corpus)
    events = event_stream(seg, sessions)
    holder = str(events["holder"].iloc[0])
    last = pd.Timestamp(events["observed_at"].max()).isoformat()
    entries = [entry(f"q{i}", q, holder, last) for i, q in enumerate(("support group", "painting with the kids", "adoption agencies"))]
    mcp = {"observe": {"tool": "remember", "arguments": {"text": "{text}", "holder": "{holder}", "source_id": "{source_id}",
                                                         "extent": "{extent}", "observed_at": "{observed_at}"}},
           "search": {"tool": "recall", "arguments": {"question": "{question}", "holder": "{holder}", "k": "{k}"}}}
    runs = {}
    for flag in ("", " --no-citations"):
        block = {"entry": "{python} examples/mcp_memory_server.py" + flag, "code": ["examples"], "mcp": mcp}
        with open_mcp(block, tmp_path, seg) as opened:
            runs[flag] = run_queries(opened.adapter, entries, 5, events=lambda: events, timeout_s=30).memories
    cited, bare = runs[""], runs[" --no-citations"]
    assert len(cited) == len(bare) > 0 and cited["text"].tolist() == bare["text"].tolist()
    assert not cited["memory_id"].str.startswith("attributed:").any() and bare["memory_id"].str.startswith("attributed:").all()
    text_of = {(r.source_id, json.dumps(r.extent, sort_keys=True)): r.text for r in events.itertuples()}
    for text, prov in zip(bare["text"], bare["provenance"], strict=True):
        units = [text_of[(c["source_id"], json.dumps(c["extent"], sort_keys=True))] for c in json.loads(prov)]
        assert support_mask(text, units)[0].all()


def test_example_server_over_http(tmp_path):
    """The same example served over Streamable HTTP (your own process: not sandboxed)."""
    need_sdk()
    import socket
    import subprocess
    import sys

    from bench.systems.adapters.external import wait_for_port

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(ROOT / "examples" / "mcp_memory_server.py"), "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for_port("127.0.0.1", port, 30)
        mcp = {"observe": {"tool": "remember", "arguments": {"text": "{text}", "holder": "{holder}", "source_id": "{source_id}",
                                                             "extent": "{extent}", "observed_at": "{observed_at}"}},
               "search": {"tool": "recall", "arguments": {"question": "{question}", "holder": "{holder}", "k": "{k}"}}}
        with open_mcp({"entry": f"http://127.0.0.1:{port}/mcp", "mcp": mcp}, tmp_path) as opened:
            assert opened.info["isolation"] == "none"
            ran = run_queries(opened.adapter, tiny_entries(), 10, events=tiny_events, timeout_s=30)
    finally:
        proc.kill()
        proc.wait()
    mem = ran.memories
    assert mem.loc[mem["query_id"] == "q2", "text"].str.contains("Carol: apples again").any()
    assert not mem["memory_id"].str.startswith("attributed:").any()  # its own citations
    assert json.loads(mem.loc[mem["query_id"] == "q1", "provenance"].iloc[0]) == [{"source_id": "t:a:s1", "extent": {"turn_start": 1, "turn_end": 2}}]


@pytest.mark.parametrize("search, extra", [
    ("search_envelope", {}),  # FastMCP's {"result": "<JSON text>"}, read with no rule
    ("search_structured", {"results": "hits[]"}),  # structured content of its own, with scores
    ("search_blocks", {"text": "whole"}),  # one text block per memory
    ("search_text", {"text": {"split": "numbered", "none": "^No results found"}}),  # plain text, "No results found for: ..."
])
def test_every_shape_from_a_real_server(tmp_path, search, extra):
    """The SDK server answering in each shape: the same memories, with params only."""
    need_sdk()
    entries = [*tiny_entries(), entry("q-none", "quinces", "t:b", "2023-05-03T00:00:00+00:00")]
    block = {**fake(tmp_path), "mcp": {"observe": "store", "search": {"tool": search, "arguments": {"query": "{question}"}}, **extra}}
    with open_mcp(block, tmp_path) as opened:
        ran = run_queries(opened.adapter, entries, 10, events=tiny_events, timeout_s=30)
    assert ran.failures.empty
    got = ran.memories.groupby("query_id")["text"].apply(set).to_dict()
    assert got == {"q1": {TINY[0][3]}, "q2": {TINY[0][3], TINY[2][3]}}  # q-none: an answer holding nothing
    facts = ran.info["replay_facts"]
    assert facts["scores"] == ("own" if search == "search_structured" else "rank")
    assert facts["memories"] == {"returned": 3, "cited": 0, "attributed": 3, "unattributed": 0, "left_out": 0, "tied": 0, "tied_holders": 0}
    assert facts["start_empty"] == {"checked": True, "question": facts["start_empty"]["question"], "returned": 0, "empty": True}


def test_tool_errors_in_their_own_words(tmp_path):
    """A JSON-RPC error fails its question with the server's message (the session goes on); a
    limit beyond the server's maximum stops the run saying why, once."""
    need_sdk()
    from bench.systems.run import ConsecutiveFailures

    entries = [entry("q-rpc", "rpc-error", "t:a", "2023-05-02T00:00:00+00:00"), entry("q2", "apples", "t:b", "2023-05-03T00:00:00+00:00")]
    with open_mcp({**fake(tmp_path), "mcp": {"observe": "store", "search": "search"}}, tmp_path) as opened:
        ran = run_queries(opened.adapter, entries, 10, events=tiny_events, timeout_s=30)
    assert ran.failures["message"].tolist() == ["tool search (search) answered a JSON-RPC error: -32602 query too long for this index"]
    assert ran.info["restarts"] == 0 and len(ran.memories) == 2
    limited = {"observe": "store", "search": {"tool": "search_limited", "arguments": {"query": "{question}", "limit": "{k}"}}}
    many = [entry(f"q{i}", "apples", "t:a", f"2023-05-02T00:00:0{i}+00:00") for i in range(6)]
    with open_mcp({**fake(tmp_path), "mcp": limited}, tmp_path) as opened:
        with pytest.raises(ConsecutiveFailures) as err:
            run_queries(opened.adapter, many, 100, events=tiny_events, timeout_s=30)
    message = str(err.value)
    assert message.count("Input should be less than or equal to 50") == 1 and "why: 5x tool search_limited (search) answered an error: " in message


def test_a_server_for_another_mcp_major_says_what_to_do(tmp_path):
    """A FastMCP server for mcp 1.x (agent-logbook) under the harness's interpreter, or from its own
    venv not named in system.code: the line says what to do, not only "Connection closed"."""
    need_sdk()
    from bench.systems.adapters.mcp_errors import startup_hint

    venv = ROOT / ".ci" / "venv-logbook"
    assert "another major version of the mcp SDK" in startup_hint("{python} -m agent_logbook.server", None)
    if (venv / "pyvenv.cfg").is_file():
        assert f"set system.code: [{venv}]" in startup_hint(f"{venv}/bin/python -m agent_logbook.server", None)
    server = tmp_path / "v1_server.py"
    server.write_text("from mcp.server.fastmcp import FastMCP\nFastMCP('x').run()\n")
    with open_mcp({"entry": f"{{python}} {server}", "sandbox": "off", "mcp": {"observe": "store", "search": "search"}}, tmp_path) as opened:
        with pytest.raises(Exception) as err:
            opened.adapter.open()
    assert "MCP session could not be opened" in str(err.value) and "virtual environment of its own" in str(err.value)
