"""Small real retrievers of LangChain and LlamaIndex for the adapter tests (imported only when
the framework is installed): a scripted answer per question, and factories for `system.entry`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever as LangChainRetriever
from llama_index.core.retrievers import BaseRetriever as LlamaIndexRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from bench.systems.adapters.frameworks import current_query

SEEN: list[Any] = []  # the Query each retriever call saw through current_query()


class ScriptedLangChain(LangChainRetriever):
    """Answers with answer(question) and records the query the harness asked."""

    answer: Callable[[str], Any]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        SEEN.append(current_query())
        return self.answer(query)


class ScriptedLlamaIndex(LlamaIndexRetriever):
    def __init__(self, answer: Callable[[str], Any]) -> None:
        super().__init__()
        self.answer = answer

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        SEEN.append(current_query())
        return self.answer(query_bundle.query_str)


def keyword_ranking(atoms: pd.DataFrame, question: str) -> list[tuple[str, str, int]]:
    """(atom_id, text, matched words) of the atoms sharing a word with the question, best first."""
    words = set(question.lower().strip("?").split())
    scored = [(str(a), str(t), len(words & set(str(t).lower().split()))) for a, t in zip(atoms["atom_id"], atoms["text"])]
    return sorted((s for s in scored if s[2] > 0), key=lambda s: (-s[2], s[0]))


def langchain_keyword(atoms: pd.DataFrame) -> ScriptedLangChain:
    """A factory (system.entry): documents with atom_id and no score."""
    return ScriptedLangChain(answer=lambda q: [Document(page_content=t, metadata={"atom_id": a}) for a, t, _ in keyword_ranking(atoms, q)])


def llamaindex_keyword(atoms: pd.DataFrame) -> ScriptedLlamaIndex:
    """A factory (system.entry): nodes with atom_id and their number of matched words as score."""
    return ScriptedLlamaIndex(lambda q: [NodeWithScore(node=TextNode(text=t, metadata={"atom_id": a}), score=float(n))
                                         for a, t, n in keyword_ranking(atoms, q)])


def not_a_retriever(atoms: pd.DataFrame) -> object:
    return {"atoms": len(atoms)}


#: a memory's facts about the conversation of tests/gold/test_memories.py: (memory_id, text, provenance)
MEMORIES = [
    ("pixel", "Ann adopted Pixel, a grey cat, who sleeps on the keyboard and broke a vase",
     [{"source_id": "c:h1:s1", "extent": {"turn": 1}}, {"source_id": "c:h1:s1", "extent": {"turn": 3}},
      {"source_id": "c:h1:s2", "extent": {"turn": 1}}]),
    # one broad citation for a fact of one turn (turn 4): credited with that turn alone
    ("cello", "Bob started learning the cello last month", [{"source_id": "c:h1:s1", "extent": {"turn_start": 1, "turn_end": 4}}]),
]


def memory_ranking(question: str) -> list[tuple[str, str, list[dict], int]]:
    """The memories whose id is a word of the question, with a score of 1."""
    words = set(question.lower().replace("?", " ").replace(",", " ").split())
    return [(m, t, p, 1) for m, t, p in MEMORIES if m in words]


def langchain_memory(atoms: pd.DataFrame) -> ScriptedLangChain:
    """A factory (system.entry): documents naming memories, provenance as a list, no score."""
    return ScriptedLangChain(answer=lambda q: [Document(page_content=t, metadata={"memory_id": m, "provenance": p})
                                              for m, t, p, _ in memory_ranking(q)])


def llamaindex_memory(atoms: pd.DataFrame) -> ScriptedLlamaIndex:
    """A factory (system.entry): nodes naming memories, provenance as JSON text (flat metadata), with a score."""
    import json

    return ScriptedLlamaIndex(lambda q: [NodeWithScore(node=TextNode(text=t, metadata={"memory_id": m, "provenance": json.dumps(p)}),
                                                       score=float(n)) for m, t, p, n in memory_ranking(q)])
