"""A LlamaIndex BM25 retriever as the system under test, with no harness protocol code.

    system: {name: llamaindex-bm25, adapter: llamaindex, entry: "examples.llamaindex_bm25:build"}

Needs: pip install -e '.[example-llamaindex-bm25]'  (llama-index-core, llama-index-retrievers-bm25)

`build(atoms)` turns every served atom into a LlamaIndex `TextNode` whose metadata
carries its `atom_id` (what the llamaindex adapter reads, docs/systems.md) and its
`observed_at`, both kept out of the indexed text. It keeps one memory per holder: a
`BM25Retriever` (bm25s, English stemming and stop words) over that holder's nodes.
A question is answered from its holder's memory as it stood at `as_of`: the holder and
`as_of` come from `bench.systems.adapters.frameworks.current_query()`, and nodes observed later
are masked out with BM25Retriever's own weight mask (what its `filters` argument
builds), so they never reach the ranking. Scores are BM25's own. The mask hides later
nodes from the ranking, not from the index's statistics (IDF, average length), which
are the holder's whole memory's, as for the built-in `bm25-scoped`.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd

from bench.systems import MissingExtra
from bench.systems.adapters.frameworks import current_query

REQUIRES = "pip install -e '.[example-llamaindex-bm25]'  (llama-index-core, llama-index-retrievers-bm25)"

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.retrievers.bm25 import BM25Retriever
except ModuleNotFoundError as exc:  # one line naming the pip command, as for the harness's own extras
    raise MissingExtra(f"examples/llamaindex_bm25.py needs {exc.name}: {REQUIRES}") from None

#: metadata the adapter and the scope read, never indexed as text
HIDDEN = ["atom_id", "observed_at"]


class HolderMemory:
    """One holder's BM25 index and the moment each of its nodes was observed (epoch seconds)."""

    def __init__(self, nodes: list[TextNode]) -> None:
        self.observed = np.array([node.metadata["observed_at"] for node in nodes], dtype=np.float64)
        self.retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=len(nodes), language="en")


class ScopedBM25(BaseRetriever):
    """A question sees only its holder's nodes observed at or before its `as_of`."""

    def __init__(self, memories: dict[str, HolderMemory]) -> None:
        super().__init__()
        self.memories = memories

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = current_query()
        memory = self.memories.get(query.holder or "")
        if memory is None:
            return []  # nothing remembered of this holder
        as_of = query.as_of.timestamp()
        seen = memory.observed <= as_of
        if not seen.any():
            return []
        scoped = copy.copy(memory.retriever)  # a copy per question: concurrent questions keep their own mask
        scoped.corpus_weight_mask = seen.astype(int).tolist()
        scoped.similarity_top_k = min(query.k, len(seen))
        # a masked node scores 0 and can still fill the tail of the top k: drop it
        return [hit for hit in scoped.retrieve(query_bundle) if hit.node.metadata["observed_at"] <= as_of]


def node_of(row: Any) -> TextNode:
    observed = pd.Timestamp(row.observed_at).timestamp()
    return TextNode(text=str(row.text or ""), id_=str(row.atom_id), metadata={"atom_id": str(row.atom_id), "observed_at": observed},
                    excluded_embed_metadata_keys=HIDDEN, excluded_llm_metadata_keys=HIDDEN)


def build(atoms: pd.DataFrame) -> ScopedBM25:
    """The retriever over the served atoms (called once by the harness; not timed)."""
    memories = {}
    for holder, group in atoms.sort_values("atom_id").groupby("holder", sort=True):
        nodes = [node_of(row) for row in group.itertuples(index=False) if str(row.text or "").strip()]
        if nodes:
            memories[str(holder)] = HolderMemory(nodes)
    return ScopedBM25(memories)
