"""The wire format between the harness and a system (docs/systems.md).

Request (one JSON object; one line for the command adapter, the body for HTTP):

    {"id": "r17", "question": "...", "as_of": "2024-01-01T00:00:00+00:00",
     "scope": {"holder": "owner", "session": null, "scenario": "document-qa"}, "k": 100}

`id` is an opaque request number, never the query id (query ids can name the gold
document). Nothing else of the annotated entry is ever sent.

Response:

    {"id": "r17", "hits": [{"atom_id": "...", "score": 12.5}, ...],
     "abstain": false, "confidence": 0.8}

`hits` is ranked best first (at most k, distinct atom ids the harness knows, finite
scores that never increase down the list); `abstain` and `confidence` are optional.
A hit may instead name a memory the system wrote (docs/systems.md, *Memory hits*):

    {"memory_id": "m77", "score": 3.2, "text": "...",
     "provenance": [{"source_id": "locomo:conv-26:session-1", "extent": {"turn": 3}}, ...]}

Any other shape is malformed and stops the run with an error naming the query: so is a
line (or HTTP body) longer than MAX_RESPONSE_CHARS, one that is not JSON, nests deeper
than Python can parse or holds an integer of more digits than Python converts
(sys.get_int_max_str_digits(), 4300), and a score or confidence that is not a finite
number a 64-bit float can hold (NaN, Infinity, 1e400, a 400-digit integer). Whether
each citation's source exists and its extent lies in it is checked against the corpus
by the caller (bench.systems.credit.provenance.CitationCheck).

Replay (docs/systems.md, *Replay*): an event is sent as ``{"observe": {...}}`` and
answered by ``{"event": "<its id>", "ok": true}`` (:func:`event_reply_problem`).
"""

from __future__ import annotations

import json
import math
import numbers
import sys
from collections.abc import Collection
from typing import Any

import numpy as np
import pandas as pd

from bench.systems import Citation, Hit, MalformedResponse, MemoryHit, Query, Response

REQUEST_KEYS = ("id", "question", "as_of", "scope", "k")
SCOPE_KEYS = ("holder", "session", "scenario")
RESPONSE_KEYS = frozenset({"id", "hits", "abstain", "confidence"})
ATOM_HIT_KEYS = frozenset({"atom_id", "score"})
MEMORY_HIT_KEYS = frozenset({"memory_id", "score", "text", "provenance"})
CITATION_KEYS = frozenset({"source_id", "extent"})
#: bounds of one memory hit (docs/bad-input.md): citations, and characters of its text
MAX_CITATIONS = 1000
MAX_MEMORY_TEXT = 100_000
#: the longest response line (command, in characters) or body (HTTP, in bytes) read: 32 MiB
MAX_RESPONSE_CHARS = 32 * 1024 * 1024


def request_of(query: Query, request_id: str) -> dict[str, Any]:
    return {
        "id": request_id,
        "question": query.question,
        "as_of": pd.Timestamp(query.as_of).isoformat(),
        "scope": {"holder": query.holder, "session": query.session, "scenario": query.scenario},
        "k": int(query.k),
    }


def query_of_request(request: dict[str, Any]) -> Query:
    """The server side: a request back into a Query (used by bench.systems.serve)."""
    scope = request.get("scope") or {}
    return Query(
        question=str(request["question"]),
        as_of=pd.Timestamp(request["as_of"]),
        holder=scope.get("holder"),
        session=scope.get("session"),
        scenario=scope.get("scenario"),
        k=int(request["k"]),
    )


def hit_to_json(hit: Any) -> Any:
    """A Hit or MemoryHit as its wire dict; anything else (a plain dict) as it is."""
    if isinstance(hit, Hit):
        return {"atom_id": hit.atom_id, "score": hit.score}
    if isinstance(hit, MemoryHit):
        return {"memory_id": hit.memory_id, "score": hit.score, "text": hit.text,
                "provenance": [{"source_id": c.source_id, "extent": c.extent} for c in hit.provenance]}
    return hit


def response_to_json(result: Any, request_id: str | None = None) -> dict[str, Any]:
    """A Python system's answer (list of Hit / MemoryHit / wire dicts, Response or a response dict) as a wire response."""
    if isinstance(result, dict):
        out = dict(result)
    elif isinstance(result, Response):
        out = {"hits": [hit_to_json(h) for h in result.hits], "abstain": result.abstain}
        if result.confidence is not None:
            out["confidence"] = result.confidence
    elif isinstance(result, (list, tuple)):
        out = {"hits": [hit_to_json(h) for h in result]}
    else:
        out = {"hits": result}  # rejected by parse_response with a clear message
    if request_id is not None:
        out["id"] = request_id
    return out


def decode(text: str, what: str = "response line") -> Any:
    """One JSON value of a system's answer; MalformedResponse (one line) when it is none."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedResponse(f"{what} is not JSON ({exc.msg}): {text.strip()[:80]!r}") from None
    except ValueError:  # Python's limit on the digits of an integer
        raise MalformedResponse(f"{what} holds an integer of more than {sys.get_int_max_str_digits()} digits") from None
    except RecursionError:
        raise MalformedResponse(f"{what} nests its JSON too deeply to be read") from None


def _number(value: Any) -> bool:
    """A finite number that a 64-bit float holds (a 400-digit integer does not)."""
    if type(value) is float:  # the common case, without the abstract-class check
        return math.isfinite(value)
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
        return False
    try:
        return math.isfinite(float(value))
    except (OverflowError, ValueError):
        return False


def shown(value: Any) -> str:
    """A value for a one-line message: a huge integer by its size, anything else cut to 80 characters."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1024:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits, beyond a 64-bit float"
    return repr(value)[:80]


def _citations(where: str, provenance: Any) -> tuple[Citation, ...]:
    if not isinstance(provenance, list) or not provenance:
        raise MalformedResponse(f"{where}: provenance must be a non-empty list of citations, got {str(provenance)[:80]}")
    if len(provenance) > MAX_CITATIONS:
        raise MalformedResponse(f"{where}: {len(provenance)} citations; at most {MAX_CITATIONS}")
    out = []
    for i, cite in enumerate(provenance, start=1):
        if not isinstance(cite, dict) or set(cite) != CITATION_KEYS:
            raise MalformedResponse(f"{where}: citation {i} must be an object with exactly source_id and extent, got {str(cite)[:80]}")
        if not isinstance(cite["source_id"], str) or not cite["source_id"]:
            raise MalformedResponse(f"{where}: citation {i}: source_id must be a non-empty string, got {cite['source_id']!r}")
        if not isinstance(cite["extent"], dict):
            raise MalformedResponse(f"{where}: citation {i}: extent must be an object, got {str(cite['extent'])[:80]}")
        out.append(Citation(cite["source_id"], cite["extent"]))
    return tuple(out)


def _memory(where: str, hit: dict[str, Any], known_atoms: Collection[str] | None) -> MemoryHit:
    from bench.annotations.schema import id_problem  # here: it imports pandera (0.3 s), which an atom hit never needs

    memory_id, text = hit["memory_id"], hit["text"]
    if problem := id_problem(memory_id, "memory_id"):
        raise MalformedResponse(f"{where}: {problem}, got {str(memory_id)[:80]!r}")
    where = f"{where} (memory {memory_id})"
    if known_atoms is not None and memory_id in known_atoms:
        raise MalformedResponse(f"{where}: memory_id is also a served atom id; a memory needs an id of its own")
    if not isinstance(text, str) or not text.strip():
        raise MalformedResponse(f"{where}: text must be a non-empty string, got {str(text)[:80]!r}")
    if len(text) > MAX_MEMORY_TEXT:
        raise MalformedResponse(f"{where}: text of {len(text)} characters; at most {MAX_MEMORY_TEXT}")
    return MemoryHit(memory_id, 0.0, text, _citations(where, hit["provenance"]))


def _hits(hits: list[Any], known_atoms: Collection[str] | None) -> list[Hit | MemoryHit]:
    """The hits of a response, checked one by one (shape, ids, scores, order); a message is
    built only for the hit that fails, so a well-formed answer costs no string work."""
    out: list[Hit | MemoryHit] = []
    seen: set[str] = set()
    previous = math.inf
    for rank, hit in enumerate(hits, start=1):
        is_dict = type(hit) is dict or isinstance(hit, dict)
        if is_dict and len(hit) == 2 and "atom_id" in hit and "score" in hit:  # exactly ATOM_HIT_KEYS
            hit_id, memory = hit["atom_id"], None
            if not isinstance(hit_id, str) or not hit_id:
                raise MalformedResponse(f"hit {rank}: atom_id must be a non-empty string, got {hit_id!r}")
            if known_atoms is not None and hit_id not in known_atoms:
                raise MalformedResponse(f"hit {rank}: unknown atom id {hit_id!r} (not among the served atoms)")
        elif is_dict and hit.keys() == MEMORY_HIT_KEYS:
            memory = _memory(f"hit {rank}", hit, known_atoms)
            hit_id = memory.memory_id
        else:
            raise MalformedResponse(f"hit {rank} must be an object with exactly atom_id and score, or memory_id, score, text and "
                                    f"provenance, got {str(hit)[:80]}")
        score = hit["score"]
        if not (type(score) is float and math.isfinite(score)) and not _number(score):  # a finite float: the common case
            raise MalformedResponse(f"hit {rank} ({hit_id}): score must be a finite number, got {shown(score)}")
        if hit_id in seen:
            raise MalformedResponse(f"hit {rank}: {'memory' if memory else 'atom'} {hit_id} returned twice")
        value = float(score)
        if value > previous:
            raise MalformedResponse(f"hit {rank} ({hit_id}): score {value!r} is above the previous hit's {previous!r}; hits must be ranked best first")
        seen.add(hit_id)
        previous = value
        out.append(Hit(hit_id, value) if memory is None else MemoryHit(hit_id, value, memory.text, memory.provenance))
    return out


def parse_response(raw: Any, k: int, known_atoms: Collection[str] | None, expect_id: str | None = None) -> Response:
    """Validate a wire response; raise MalformedResponse saying what is wrong (no query named here)."""
    if not isinstance(raw, dict):
        raise MalformedResponse(f"response must be a JSON object, got {type(raw).__name__}")
    extra = sorted(set(raw) - RESPONSE_KEYS)
    if extra:
        raise MalformedResponse(f"unknown response field(s) {extra}; allowed: {sorted(RESPONSE_KEYS)}")
    if expect_id is not None and raw.get("id") != expect_id:
        raise MalformedResponse(f"response id {raw.get('id')!r} does not answer request {expect_id!r}")
    hits = raw.get("hits")
    if not isinstance(hits, list):
        raise MalformedResponse(f"hits must be a list, got {type(hits).__name__}")
    if len(hits) > k:
        raise MalformedResponse(f"{len(hits)} hits for depth k={k}")
    out = _hits(hits, known_atoms)
    abstain = raw.get("abstain", False)
    if not isinstance(abstain, bool):
        raise MalformedResponse(f"abstain must be true or false, got {abstain!r}")
    confidence = raw.get("confidence")
    if confidence is not None and not _number(confidence):
        raise MalformedResponse(f"confidence must be a finite number or null, got {shown(confidence)}")
    return Response(out, abstain, None if confidence is None else float(confidence))


def event_reply_problem(reply: Any, event_id: str) -> str | None:
    """What is wrong with a system's answer to an event (None: it is ``{"event": id, "ok": true}``)."""
    if not isinstance(reply, dict) or set(reply) != {"event", "ok"}:
        return f"the answer must be {{\"event\": \"{event_id}\", \"ok\": true}}, got {str(reply)[:80]}"
    if reply["event"] != event_id:
        return f"the answer names event {reply['event']!r}, not {event_id!r}"
    if reply["ok"] is not True:
        return f"the system answered ok: {reply['ok']!r}"
    return None
