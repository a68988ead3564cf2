"""Retrievers of LangChain and LlamaIndex as systems under test, with no code of the user's own.

    system: {name: my-rag, adapter: langchain, entry: "my_package.retrieval:build"}

`entry` names a factory. It is called once with what a python system's factory gets
(the served atoms, a pandas frame: atom_id, source_id, dataset, modality, text,
holder, observed_at) and returns the retriever: a `langchain_core.retrievers.BaseRetriever`
for `langchain`, a `llama_index.core.retrievers.BaseRetriever` for `llamaindex`. Per
query the adapter calls `retriever.invoke(question)` / `retriever.retrieve(question)`
and turns the documents / nodes, in the order returned, into wire hits
(bench/systems/adapters/protocol.py), which the caller checks like any other answer:

* metadata `atom_id` (a served atom) -> `{"atom_id", "score"}`;
* metadata `memory_id` and `provenance` (a list of `{"source_id", "extent"}`, or its
  JSON text for stores with flat metadata), the document's / node's text being the
  memory -> `{"memory_id", "score", "text", "provenance"}`.

Missing or invalid metadata is a malformed response: the run stops naming the query.

Scores, so that no number depends on a scale: a LlamaIndex node's score, or a LangChain
document's numeric metadata `score` (LangChain's interface has none of its own), is
used when every hit of the answer has one; when none has one, the hits get rank-derived
scores 1/rank (the retriever's order is the ranking). One run keeps one of the two: an
answer with scores on some hits only, or scored after rank-derived answers (or the
other way round), is malformed. More than k results are cut to the first k.

The question's scope reaches the retriever through `current_query()`: while the harness
waits for an answer it returns the `bench.systems.Query` asked (question, as_of, holder,
session, scenario, k). A retriever that ignores it is unscoped, like the built-in `bm25`.

The frameworks are optional extras, imported only when their adapter is used; without
one the stage stops with one line naming the pip command (MissingExtra). The retriever
runs in the harness's process (isolation `none`, not sandboxed) and stays there on a
Dask executor.
"""

from __future__ import annotations

import contextvars
import importlib.util
import json
import math
import numbers
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bench.systems import MissingExtra, Query, load_entry_point
from bench.systems.adapters.channel import SystemCrash
from bench.systems.adapters.inprocess import PythonChannel
from bench.systems.adapters.protocol import MalformedResponse, query_of_request, response_to_json

_CURRENT: contextvars.ContextVar[Query | None] = contextvars.ContextVar("bench_current_query", default=None)


def current_query() -> Query:
    """The query the harness is waiting on (inside a framework retriever's call only)."""
    query = _CURRENT.get()
    if query is None:
        raise RuntimeError("current_query() is set only while the harness waits for a framework retriever's answer")
    return query


@dataclass(frozen=True)
class Item:
    """One retrieved document or node, as the adapter reads it."""

    metadata: Mapping[str, Any]
    text: str
    score: Any  # None: the framework gave no score


def _langchain_items(retriever: Any, question: str) -> list[Item]:
    from langchain_core.documents import Document

    out = []
    for rank, doc in enumerate(_as_list(retriever.invoke(question), "documents"), start=1):
        if not isinstance(doc, Document):
            raise MalformedResponse(f"result {rank} is a {type(doc).__name__}, not a langchain_core Document")
        meta = doc.metadata if isinstance(doc.metadata, Mapping) else {}
        out.append(Item(meta, doc.page_content, meta.get("score")))
    return out


def _llamaindex_items(retriever: Any, question: str) -> list[Item]:
    from llama_index.core.schema import MetadataMode, NodeWithScore

    out = []
    for rank, hit in enumerate(_as_list(retriever.retrieve(question), "nodes"), start=1):
        if not isinstance(hit, NodeWithScore):
            raise MalformedResponse(f"result {rank} is a {type(hit).__name__}, not a llama_index NodeWithScore")
        node = hit.node
        out.append(Item(node.metadata or {}, node.get_content(metadata_mode=MetadataMode.NONE), hit.score))
    return out


def _langchain_base() -> type:
    from langchain_core.retrievers import BaseRetriever

    return BaseRetriever


def _llamaindex_base() -> type:
    from llama_index.core.retrievers import BaseRetriever

    return BaseRetriever


def _as_list(result: Any, what: str) -> list[Any]:
    if not isinstance(result, (list, tuple)):
        raise MalformedResponse(f"the retriever returned a {type(result).__name__}, not a list of {what}")
    return list(result)


@dataclass(frozen=True)
class Framework:
    adapter: str  # the value of system.adapter
    module: str  # what must be importable
    retriever_class: str  # what the factory must return (for messages)
    item: str  # what one result is called in messages
    pip: str  # the install command MissingExtra names
    items: Callable[[Any, str], list[Item]]  # (retriever, question) -> the results
    base: Callable[[], type]  # the retriever class


#: system.adapter -> its framework (registered in bench.systems.config.ADAPTERS)
FRAMEWORKS: dict[str, Framework] = {
    "langchain": Framework("langchain", "langchain_core", "langchain_core.retrievers.BaseRetriever", "document",
                           "pip install -e '.[langchain]'  (langchain-core)", _langchain_items, _langchain_base),
    "llamaindex": Framework("llamaindex", "llama_index.core", "llama_index.core.retrievers.BaseRetriever", "node",
                            "pip install -e '.[llamaindex]'  (llama-index-core)", _llamaindex_items, _llamaindex_base),
}


def missing(framework: Framework) -> str | None:
    """None when the framework is importable, else the one-line reason naming the pip command."""
    top = framework.module.partition(".")[0]
    if importlib.util.find_spec(top) is None or importlib.util.find_spec(framework.module) is None:
        return (f"the {framework.adapter} adapter needs the optional extra '{framework.adapter}' "
                f"({framework.module} is not installed): {framework.pip}")
    return None


# --------------------------------------------------------------------------- results -> wire hits


def _text(value: Any, where: str, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise MalformedResponse(f"{where}: {field} must be a non-empty string, got {str(value)[:80]!r}")
    return value


def _json_or(value: Any) -> Any:
    """A value, or the JSON it holds when it is text (stores with flat metadata keep JSON strings)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _citation(value: Any, where: str) -> dict[str, Any]:
    value = _json_or(value)
    if not isinstance(value, Mapping) or set(value) != {"source_id", "extent"}:
        raise MalformedResponse(f"{where} must be an object with exactly source_id and extent, got {str(value)[:80]}")
    extent = _json_or(value["extent"])
    if not isinstance(extent, Mapping):
        raise MalformedResponse(f"{where}: extent must be an object (or its JSON text), got {str(value['extent'])[:80]!r}")
    return {"source_id": _text(value["source_id"], where, "source_id"), "extent": dict(extent)}


def hit_of(item: Item, where: str) -> dict[str, Any]:
    """The wire hit of one document / node without its score; MalformedResponse on bad metadata."""
    meta = item.metadata
    atom_id, memory_id = meta.get("atom_id"), meta.get("memory_id")
    if atom_id is not None and memory_id is not None:
        raise MalformedResponse(f"{where}: its metadata names both atom_id {atom_id!r} and memory_id {memory_id!r}; a hit is one or the other")
    if atom_id is not None:
        return {"atom_id": _text(atom_id, where, "metadata atom_id")}
    if memory_id is None:
        raise MalformedResponse(f"{where}: its metadata has neither atom_id nor memory_id (keys: {sorted(map(str, meta))[:12]})")
    memory = _text(memory_id, where, "metadata memory_id")
    provenance = _json_or(meta.get("provenance"))
    if not isinstance(provenance, list) or not provenance:
        raise MalformedResponse(f"{where} (memory {memory}): metadata provenance must be a non-empty list of "
                                f"{{source_id, extent}} (or its JSON text), got {str(meta.get('provenance'))[:80]!r}")
    cites = [_citation(c, f"{where} (memory {memory}): provenance {i}") for i, c in enumerate(provenance, start=1)]
    return {"memory_id": memory, "text": _text(item.text, f"{where} (memory {memory})", "its text"), "provenance": cites}


def _score(value: Any, where: str) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)) or not math.isfinite(value):
        raise MalformedResponse(f"{where}: score must be a finite number, got {value!r}")
    return float(value)


class ScoreMode:
    """`native` or `rank`, fixed by a run's first non-empty answer (shared by its channels)."""

    def __init__(self) -> None:
        self.mode: str | None = None
        self.lock = threading.Lock()

    def scores(self, items: list[Item], noun: str) -> list[float]:
        if not items:
            return []
        given = [item.score is not None for item in items]
        if any(given) and not all(given):
            odd = given.index(not given[0]) + 1
            raise MalformedResponse(f"{noun} {odd} has {'no' if given[0] else 'a'} score but {noun} 1 has "
                                    f"{'one' if given[0] else 'none'}; score every {noun} of an answer or none")
        mode = "native" if given[0] else "rank"
        with self.lock:
            if self.mode is None:
                self.mode = mode
            elif self.mode != mode:
                raise MalformedResponse(f"this answer's {noun}s are {'scored' if mode == 'native' else 'not scored'}, "
                                        f"but earlier answers' were {'not ' if mode == 'native' else ''}scored; one run keeps one kind")
        if mode == "rank":
            return [1.0 / rank for rank in range(1, len(items) + 1)]
        return [_score(item.score, f"{noun} {rank}") for rank, item in enumerate(items, start=1)]


def wire_hits(items: list[Item], k: int, noun: str, mode: ScoreMode) -> list[dict[str, Any]]:
    """The first k results as wire hits, best first, with their scores (see the module docstring)."""
    items = items[:k]
    scores = mode.scores(items, noun)
    out = []
    for rank, (item, score) in enumerate(zip(items, scores), start=1):
        out.append({**hit_of(item, f"{noun} {rank}"), "score": score})
    return out


# --------------------------------------------------------------------------- adapter


class FrameworkChannel(PythonChannel):
    """The retriever called as an in-process system is (PythonChannel: one helper thread, a call
    past its timeout abandoned; the channel rule, bench/systems/adapters/channel.py), with the
    query visible to `current_query()`."""

    def __init__(self, adapter: FrameworkAdapter) -> None:
        super().__init__(adapter.retriever)
        self.adapter = adapter

    def exchange(self, request: dict[str, Any], timeout: float) -> Any:
        query = query_of_request(request)
        framework = self.adapter.framework

        def items() -> Any:
            token = _CURRENT.set(query)
            try:
                return framework.items(self.adapter.retriever, query.question)
            except MalformedResponse as exc:  # the retriever's items are no answer: not a crash of the system
                return exc
            finally:
                _CURRENT.reset(token)

        try:
            got = self._run(items, timeout)
        except SystemCrash as exc:
            raise SystemCrash(f"the {framework.adapter} retriever {exc}") from None
        if isinstance(got, MalformedResponse):
            raise got
        hits = wire_hits(got, query.k, framework.item, self.adapter.score_mode)
        return response_to_json({"hits": hits}, request["id"])


class FrameworkAdapter:
    """A LangChain or LlamaIndex retriever, in process (isolation none)."""

    def __init__(self, framework: Framework, retriever: Any, name: str, abstains: bool = False) -> None:
        self.framework = framework
        self.kind = framework.adapter
        self.retriever = retriever
        self.name = name
        self.abstains = abstains
        self.isolation = "none"
        self.replay = False  # a framework's retriever is built over the served atoms: never replayed
        self.given_atoms = True
        self.score_mode = ScoreMode()

    def open(self) -> FrameworkChannel:
        return FrameworkChannel(self)

    def restarts(self) -> int:
        return 0


def framework_adapter(adapter: str, entry: str, name: str, atoms: pd.DataFrame) -> FrameworkAdapter:
    """Check the extra, call the factory `entry` on the served atoms, check what it returned.

    Raises MissingExtra (the extra is not installed) or ValueError (one line)."""
    framework = FRAMEWORKS[adapter]
    reason = missing(framework)
    if reason:
        raise MissingExtra(reason)
    factory = load_entry_point(entry)
    retriever = factory(atoms)
    if not isinstance(retriever, framework.base()):
        raise ValueError(f"system.entry: {entry} returned a {type(retriever).__name__}, not a {framework.retriever_class} "
                         f"(the {adapter} adapter calls the retriever the factory returns)")
    declared = any(getattr(o, "abstains", False) is True for o in (retriever, factory))
    return FrameworkAdapter(framework, retriever, name, abstains=declared)
