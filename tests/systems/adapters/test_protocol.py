"""The wire format and the params block: what is sent, what is accepted."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from bench.systems.adapters.external import loopback_url
from bench.systems.adapters.protocol import REQUEST_KEYS, MalformedResponse, parse_response, request_of
from bench.systems.config import check_system
from bench.systems.run import query_of
from tests.systems.conftest import entry

KNOWN = {"a", "b", "c"}


def test_request_carries_only_question_as_of_scope_and_k():
    e = entry("locomo:conv-1:q7", "When did she paint?")
    req = request_of(query_of(e, 100), "r1")
    assert tuple(req) == REQUEST_KEYS
    assert set(req["scope"]) == {"holder", "session", "scenario"}
    assert req == {
        "id": "r1", "question": "When did she paint?", "as_of": "2023-05-02T00:00:00+00:00",
        "scope": {"holder": "locomo:conv-1", "session": None, "scenario": "conversation-qa"}, "k": 100,
    }
    text = repr(req)
    for secret in ("locomo:conv-1:q7", "SECRET-ANSWER", "session-1", "split", "unanswerable", "answer_format", "gold"):
        assert secret not in text


def test_valid_response_with_abstain_and_confidence():
    resp = parse_response({"id": "r1", "hits": [{"atom_id": "b", "score": 2}, {"atom_id": "a", "score": 2.0}], "abstain": True, "confidence": 0.25}, 5, KNOWN, "r1")
    assert [h.atom_id for h in resp.hits] == ["b", "a"] and resp.abstain and resp.confidence == 0.25
    assert parse_response({"hits": []}, 5, KNOWN).hits == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "must be a JSON object"),
        ({"hits": {}}, "hits must be a list"),
        ({"hits": [], "extra": 1}, "unknown response field"),
        ({"hits": [{"atom_id": "a", "score": math.nan}]}, "finite number"),
        ({"hits": [{"atom_id": "a", "score": math.inf}]}, "finite number"),
        ({"hits": [{"atom_id": "a", "score": True}]}, "finite number"),
        ({"hits": [{"atom_id": "a", "score": "1"}]}, "finite number"),
        ({"hits": [{"atom_id": 3, "score": 1}]}, "non-empty string"),
        ({"hits": [{"atom_id": "a"}]}, "exactly atom_id and score"),
        ({"hits": [{"atom_id": "zz", "score": 1}]}, "unknown atom id 'zz'"),
        ({"hits": [{"atom_id": "a", "score": 2}, {"atom_id": "a", "score": 1}]}, "returned twice"),
        ({"hits": [{"atom_id": "a", "score": 1}, {"atom_id": "b", "score": 2}]}, "ranked best first"),
        ({"hits": [{"atom_id": x, "score": 1} for x in "abc"]}, "3 hits for depth k=2"),
        ({"hits": [], "abstain": "yes"}, "abstain must be true or false"),
        ({"hits": [], "confidence": math.nan}, "confidence must be"),
        ({"id": "r9", "hits": []}, "does not answer request 'r1'"),
    ],
)
def test_malformed_responses_are_refused(raw, message):
    if isinstance(raw, dict) and "id" not in raw:
        raw = {"id": "r1", **raw}
    with pytest.raises(MalformedResponse, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_response(raw, 2, KNOWN, "r1")


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/search", "http://localhost:1/", "http://[::1]:9/x", "http://127.8.0.1/"])
def test_loopback_urls_are_accepted(url):
    assert loopback_url(url)[1] > 0


@pytest.mark.parametrize("url", ["http://10.0.0.1/", "http://192.168.1.2:80/", "http://example.com/", "https://127.0.0.1/", "ftp://localhost/"])
def test_other_urls_are_refused(url):
    with pytest.raises(ValueError, match="system.entry"):
        loopback_url(url)


def test_config_defaults_and_errors():
    cfg = check_system({"name": "bm25", "depth": 100})
    assert (cfg.adapter, cfg.concurrency, cfg.warmup, cfg.atoms) == ("builtin", 1, 10, None)
    with pytest.raises(ValueError, match="system.adapter"):
        check_system({"name": "x", "adapter": "grpc"})
    with pytest.raises(ValueError, match="needs an entry"):
        check_system({"name": "x", "adapter": "command"})
    with pytest.raises(ValueError, match="not on this machine"):
        check_system({"name": "x", "adapter": "http", "entry": "http://10.1.2.3:80/"})
    with pytest.raises(ValueError, match="unknown built-in system 'bm26'"):
        check_system({"name": "bm26"})
    with pytest.raises(ValueError, match="system.concurrency"):
        check_system({"name": "bm25", "concurrency": 0})
    with pytest.raises(ValueError, match="unknown key"):
        check_system({"name": "bm25", "timeout": 3})
    assert pd.Timestamp(request_of(query_of(entry("q", "x"), 3), "r")["as_of"]).tzinfo is not None


# --------------------------------------------------------------------------- memory hits (docs/systems.md, Memory hits)

CITE = {"source_id": "locomo:conv-26:session-1", "extent": {"turn": 3}}


def memory(**over):
    return {"memory_id": "m1", "score": 2.0, "text": "Caroline went to a support group", "provenance": [CITE], **over}


def test_memory_hits_beside_atom_hits_round_trip():
    from bench.systems import Citation, Hit, MemoryHit
    from bench.systems.adapters.protocol import response_to_json

    raw = {"hits": [memory(), {"atom_id": "a", "score": 1.0}]}
    resp = parse_response(raw, 5, KNOWN)
    mem, atom = resp.hits
    assert isinstance(mem, MemoryHit) and mem.provenance == (Citation("locomo:conv-26:session-1", {"turn": 3}),)
    assert isinstance(atom, Hit) and atom.atom_id == "a"
    # a python system may answer with the dataclasses, or with wire dicts (the framework adapters do): the same response
    assert response_to_json(resp)["hits"] == raw["hits"] == response_to_json(raw["hits"])["hits"]


@pytest.mark.parametrize(
    ("hit", "message"),
    [
        ({"memory_id": "m1", "score": 1, "text": "x"}, "exactly atom_id and score, or memory_id, score, text and provenance"),
        (memory(memory_id="m 1"), "memory_id holds whitespace or a control character"),
        (memory(memory_id=""), "memory_id must be a non-empty string"),
        (memory(memory_id="a"), "memory_id is also a served atom id"),
        (memory(text="  "), "text must be a non-empty string"),
        (memory(text="x" * 100_001), "text of 100001 characters; at most 100000"),
        (memory(provenance=[]), "provenance must be a non-empty list"),
        (memory(provenance=CITE), "provenance must be a non-empty list"),
        (memory(provenance=[CITE] * 1001), "1001 citations; at most 1000"),
        (memory(provenance=[{"source_id": "s"}]), "citation 1 must be an object with exactly source_id and extent"),
        (memory(provenance=[{"source_id": "", "extent": {}}]), "citation 1: source_id must be a non-empty string"),
        (memory(provenance=[CITE, {"source_id": "s", "extent": [3]}]), "citation 2: extent must be an object"),
        (memory(score=math.nan), "score must be a finite number"),
    ],
)
def test_malformed_memory_hits_are_refused(hit, message):
    with pytest.raises(MalformedResponse, match="hit 1") as err:
        parse_response({"hits": [hit]}, 5, KNOWN)
    assert message in str(err.value)


def test_a_memory_named_twice_is_refused():
    with pytest.raises(MalformedResponse, match="hit 2: memory m1 returned twice"):
        parse_response({"hits": [memory(), memory(score=1.0)]}, 5, KNOWN)


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ({"event": "e1", "ok": True}, None),
        ({"event": "e2", "ok": True}, "names event 'e2', not 'e1'"),
        ({"event": "e1", "ok": False}, "answered ok: False"),
        ({"event": "e1"}, 'must be {"event": "e1", "ok": true}'),
        ([], 'must be {"event": "e1", "ok": true}'),
    ],
)
def test_event_replies(reply, problem):
    from bench.systems.adapters.protocol import event_reply_problem

    found = event_reply_problem(reply, "e1")
    assert found == problem if problem is None else problem in found


HOSTILE = str(Path(__file__).resolve().parents[1] / "hostile_system.py")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ('{"id": "ID", "hits": [{"atom_id": "a", "score": 1' + "0" * 399 + "}]}",
         "hit 1 (a): score must be a finite number, got an integer of about 400 digits, beyond a 64-bit float"),
        ('{"id": "ID", "hits": [{"atom_id": "a", "score": 1' + "0" * 4999 + "}]}",
         "response line holds an integer of more than 4300 digits"),
        ('{"id": "ID", "hits": [{"atom_id": "a", "score": 1e400}]}', "hit 1 (a): score must be a finite number, got inf"),
        ('{"id": "ID", "hits": [{"atom_id": "a", "score": NaN}]}', "hit 1 (a): score must be a finite number, got nan"),
        ('{"id": "ID", "hits": [{"atom_id": "a", "score": -Infinity}]}', "hit 1 (a): score must be a finite number, got -inf"),
        ('{"id": "ID", "hits": [], "confidence": 1' + "0" * 399 + "}",
         "confidence must be a finite number or null, got an integer of about 400 digits, beyond a 64-bit float"),
        ('{"id": "ID", "hits": ' + "[" * 100_000 + "]" * 100_000 + "}", "response line nests its JSON too deeply to be read"),
        ('{"id": "ID", "hits": [], "pad": "' + "x" * 300_000 + '"}', "response line longer than 250000 bytes (the limit, docs/systems.md)"),
    ],
    ids=["400-digit-int", "5000-digit-int", "1e400", "nan", "-inf", "400-digit-confidence", "deep", "overlong"],
)
def test_malformed_answers_are_one_line_naming_the_query(monkeypatch, tmp_path, answer, message):
    """Through a real command system and the run: never a traceback, always the query."""
    from bench.systems.adapters import channel
    from bench.systems.adapters.external import CommandAdapter
    from bench.systems.run import run_queries

    monkeypatch.setattr(channel, "MAX_RESPONSE_CHARS", 250_000)  # the real limit is 32 MiB; the rule is the same
    (tmp_path / "answer.json").write_text(answer)
    adapter = CommandAdapter([sys.executable, HOSTILE, f"answer=@{tmp_path / 'answer.json'}"], "hostile", startup_timeout=60)
    with pytest.raises(ValueError) as info:
        run_queries(adapter, [entry("locomo:conv-1:q7", "When?")], 5, warmup=0, known_atoms=KNOWN)
    assert str(info.value) == f"query locomo:conv-1:q7: malformed response: {message}"


def test_an_http_body_over_the_limit_or_not_json_is_malformed(monkeypatch):
    from bench.systems.adapters import external as adapters

    monkeypatch.setattr(adapters, "MAX_RESPONSE_CHARS", 10)
    with pytest.raises(MalformedResponse, match=r"^HTTP body longer than 10 bytes \(the limit, docs/systems.md\)$"):
        adapters.body_value(200, b'{"hits": [], "x": 1}')
    with pytest.raises(MalformedResponse, match=r"^HTTP body holds an integer of more than 4300 digits$"):
        monkeypatch.setattr(adapters, "MAX_RESPONSE_CHARS", 10_000)
        adapters.body_value(200, b"1" * 5000)
