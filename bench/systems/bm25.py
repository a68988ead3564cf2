"""Built-in BM25 over all atoms of all sources as one memory (bm25s).

`bm25` ranks every atom; `bm25-scoped` first drops the atoms the query's holder may
not see (another holder's) and the atoms observed after `as_of`. Atoms with score 0
share no term with the question and are not returned. Ties are broken by atom_id
ascending, so rankings are deterministic.
"""

from __future__ import annotations

import re

import bm25s
import numpy as np
import pandas as pd
from bm25s.stopwords import STOPWORDS_EN

from bench.systems import Hit, Query

TOKEN = re.compile(r"(?u)\b\w\w+\b")
STOP = frozenset(STOPWORDS_EN)


def tokenize(text: str) -> list[str]:
    return [t for t in TOKEN.findall(text.lower()) if t not in STOP]


def scope_mask(holders: np.ndarray, observed: np.ndarray, query: Query) -> np.ndarray:
    """Atoms a scoped system may see: the query's holder's, observed at or before as_of."""
    as_of = np.datetime64(pd.Timestamp(query.as_of).tz_convert("UTC").tz_localize(None), "ns")
    return (holders == query.holder) & (observed <= as_of)


def sorted_atoms(atoms: pd.DataFrame) -> pd.DataFrame:
    """Atoms in atom_id order, so ties in score fall to the smaller atom_id."""
    order = np.argsort(atoms["atom_id"].to_numpy(dtype=str), kind="stable")
    return atoms.iloc[order].reset_index(drop=True)


def top_k(scores: np.ndarray, k: int, positive_only: bool) -> np.ndarray:
    """Positions of the k best scores: score descending, then position (= atom_id) ascending."""
    candidates = np.flatnonzero(scores > 0) if positive_only else np.flatnonzero(np.isfinite(scores))
    if candidates.size == 0:
        return candidates
    return candidates[np.lexsort((candidates, -scores[candidates]))][:k]


class BM25System:
    def __init__(self, atoms: pd.DataFrame, scoped: bool, k1: float = 1.5, b: float = 0.75) -> None:
        self.name = "bm25-scoped" if scoped else "bm25"
        self.scoped = scoped
        atoms = sorted_atoms(atoms)
        self.atom_ids = atoms["atom_id"].to_numpy(dtype=object)
        self.holders = atoms["holder"].to_numpy(dtype=object)
        self.observed = pd.to_datetime(atoms["observed_at"], utc=True).to_numpy(dtype="datetime64[ns]")
        corpus = [tokenize(t) for t in atoms["text"].fillna("").tolist()]
        self.retriever = bm25s.BM25(k1=k1, b=b)
        self.retriever.index(corpus, show_progress=False)
        self.vocab = self.retriever.vocab_dict

    def mask(self, query: Query) -> np.ndarray | None:
        if not self.scoped:
            return None
        return scope_mask(self.holders, self.observed, query)

    def scores(self, query: Query) -> np.ndarray:
        """BM25 score of every atom (position order); 0 for atoms out of scope."""
        tokens = [t for t in tokenize(query.question) if t in self.vocab]
        if not tokens:
            return np.zeros(len(self.atom_ids))
        scores = self.retriever.get_scores(tokens).astype(np.float64)
        visible = self.mask(query)
        if visible is not None:
            scores = np.where(visible, scores, 0.0)
        return scores

    def search(self, query: Query) -> list[Hit]:
        scores = self.scores(query)
        return [Hit(str(self.atom_ids[i]), float(scores[i])) for i in top_k(scores, query.k, positive_only=True)]


def bm25(atoms: pd.DataFrame) -> BM25System:
    """Entry point of the built-in `bm25`: every atom of every source as one memory."""
    return BM25System(atoms, scoped=False)


def bm25_scoped(atoms: pd.DataFrame) -> BM25System:
    """Entry point of the built-in `bm25-scoped`: holder and as_of filtered."""
    return BM25System(atoms, scoped=True)
