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
Any other shape is malformed and stops the run with an error naming the query.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection
from typing import Any

import numpy as np
import pandas as pd

from bench.systems import Hit, Query, Response

REQUEST_KEYS = ("id", "question", "as_of", "scope", "k")
SCOPE_KEYS = ("holder", "session", "scenario")
RESPONSE_KEYS = frozenset({"id", "hits", "abstain", "confidence"})


class MalformedResponse(ValueError):
    """A system answered with something that is not a valid response."""


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


def response_to_json(result: Any, request_id: str | None = None) -> dict[str, Any]:
    """A Python system's answer (list of Hit, Response or a response dict) as a wire response."""
    if isinstance(result, dict):
        out = dict(result)
    elif isinstance(result, Response):
        out = {"hits": [{"atom_id": h.atom_id, "score": h.score} for h in result.hits], "abstain": result.abstain}
        if result.confidence is not None:
            out["confidence"] = result.confidence
    elif isinstance(result, (list, tuple)):
        out = {"hits": [{"atom_id": h.atom_id, "score": h.score} if isinstance(h, Hit) else h for h in result]}
    else:
        out = {"hits": result}  # rejected by parse_response with a clear message
    if request_id is not None:
        out["id"] = request_id
    return out


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and math.isfinite(value)


def _hits(hits: list[Any], known_atoms: Collection[str] | None) -> list[Hit]:
    """The hits of a response, checked one by one (shape, ids, scores, order)."""
    out: list[Hit] = []
    seen: set[str] = set()
    previous = math.inf
    for rank, hit in enumerate(hits, start=1):
        where = f"hit {rank}"
        if not isinstance(hit, dict) or set(hit) != {"atom_id", "score"}:
            raise MalformedResponse(f"{where} must be an object with exactly atom_id and score, got {str(hit)[:80]}")
        atom_id, score = hit["atom_id"], hit["score"]
        if not isinstance(atom_id, str) or not atom_id:
            raise MalformedResponse(f"{where}: atom_id must be a non-empty string, got {atom_id!r}")
        if not _number(score):
            raise MalformedResponse(f"{where} ({atom_id}): score must be a finite number, got {score!r}")
        if atom_id in seen:
            raise MalformedResponse(f"{where}: atom {atom_id} returned twice")
        if known_atoms is not None and atom_id not in known_atoms:
            raise MalformedResponse(f"{where}: unknown atom id {atom_id!r} (not among the served atoms)")
        if score > previous:
            raise MalformedResponse(f"{where} ({atom_id}): score {score!r} is above the previous hit's {previous!r}; hits must be ranked best first")
        seen.add(atom_id)
        previous = float(score)
        out.append(Hit(atom_id, float(score)))
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
        raise MalformedResponse(f"confidence must be a finite number or null, got {confidence!r}")
    return Response(out, abstain, None if confidence is None else float(confidence))
