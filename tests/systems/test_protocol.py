"""The wire format and the params block: what is sent, what is accepted."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bench.evaluation.retrieve import query_of
from bench.systems.adapters import loopback_url
from bench.systems.config import check_system
from bench.systems.protocol import REQUEST_KEYS, MalformedResponse, parse_response, request_of
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
