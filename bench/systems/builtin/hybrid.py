"""Built-in hybrid: BM25 and dense fused by reciprocal-rank fusion (Cormack et al., 2009).

fused(atom) = sum over the two rankings of 1 / (RRF_K + rank), with RRF_K = 60 and
each ranking cut at POOL atoms (BM25 lists only atoms sharing a term with the
question). `hybrid-scoped` applies the holder and as_of filter to both rankings
before fusion. Ties are broken by atom_id ascending. Needs the `dense` extra.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.systems import Hit, Query
from bench.systems.builtin.bm25 import BM25System, top_k
from bench.systems.builtin.dense import DenseSystem, Encoder

RRF_K = 60
POOL = 1000


class HybridSystem:
    def __init__(self, atoms: pd.DataFrame, scoped: bool, encoder: Encoder | None = None, embeddings: np.ndarray | None = None) -> None:
        self.name = "hybrid-scoped" if scoped else "hybrid"
        self.dense = DenseSystem(atoms, scoped=scoped, encoder=encoder, embeddings=embeddings)  # first: fails fast without the extra
        self.bm25 = BM25System(atoms, scoped=scoped)
        self.atom_ids = self.bm25.atom_ids  # both sort atoms by atom_id: same positions

    def search(self, query: Query) -> list[Hit]:
        pool = max(query.k, POOL)
        fused = np.zeros(len(self.atom_ids))
        for positions in (
            top_k(self.bm25.scores(query), pool, positive_only=True),
            top_k(self.dense.scores(query), pool, positive_only=False),
        ):
            fused[positions] += 1.0 / (RRF_K + np.arange(1, len(positions) + 1))
        return [Hit(str(self.atom_ids[i]), float(fused[i])) for i in top_k(fused, query.k, positive_only=True)]


def hybrid(atoms: pd.DataFrame) -> HybridSystem:
    return HybridSystem(atoms, scoped=False)


def hybrid_scoped(atoms: pd.DataFrame) -> HybridSystem:
    return HybridSystem(atoms, scoped=True)
