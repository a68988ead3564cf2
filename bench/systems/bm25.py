"""Built-in BM25 over all atoms of all sources as one memory (bm25s).

`bm25` ranks every atom; `bm25-scoped` first drops the atoms the query's holder may
not see (another holder's) and the atoms observed after `as_of`. Atoms with score 0
share no term with the question and are not returned. Ties are broken by atom_id
ascending, so rankings are deterministic.

Abstention (the built-ins `bm25` and `bm25-scoped` declare it: ``abstains = True``)
-------------------------------------------------------------------------------
The system answers ``abstain: true`` (still returning its ranked hits, so ranking
metrics are unaffected) when its best score is below ``abstain_below``, a threshold
derived from the index alone -- never from gold, answers or the evaluation sets:

    abstain_below = 2 x median IDF / (1 + k1)

(the median over every token occurrence of the indexed text of the IDF of its term,
with BM25's own IDF, stop words excluded). In bm25s' BM25 (the Lucene variant) a term
that occurs once in an atom of average length adds IDF / (1 + k1) to the score, so
the threshold is what an atom of average length earns by containing two typical
words of this memory once each. Below that,
the best match shares at most about one ordinary word with the question (or a few
very common ones), which is not evidence the system stands behind. An empty result
abstains. The threshold moves with the memory (it is recomputed from each index)
and has no tuning knob; it was chosen before looking at any result.
"""

from __future__ import annotations

import re

import bm25s
import numpy as np
import pandas as pd
from bm25s.stopwords import STOPWORDS_EN

from bench.systems import Hit, Query, Response

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


def abstain_threshold(corpus: list[list[str]], idf_of: dict[str, float], k1: float) -> float:
    """2 x the median IDF over every token occurrence of the corpus / (1 + k1): the score
    of two typical words, once each, in an atom of average length (0.0 for an empty corpus)."""
    counts: dict[str, int] = {}
    for doc in corpus:
        for t in doc:
            counts[t] = counts.get(t, 0) + 1
    if not counts:
        return 0.0
    terms = sorted(counts, key=lambda t: (idf_of[t], t))
    idf = np.array([idf_of[t] for t in terms])
    cum = np.cumsum([counts[t] for t in terms])
    return float(2.0 * idf[int(np.searchsorted(cum, cum[-1] / 2.0))] / (1.0 + k1))


def bm25_idf(corpus: list[list[str]]) -> dict[str, float]:
    """BM25's IDF (the Lucene variant bm25s uses by default): ln(1 + (N - df + 0.5) / (df + 0.5))."""
    df: dict[str, int] = {}
    for doc in corpus:
        for t in set(doc):
            df[t] = df.get(t, 0) + 1
    n = len(corpus)
    return {t: float(np.log(1.0 + (n - d + 0.5) / (d + 0.5))) for t, d in df.items()}


class BM25System:
    def __init__(self, atoms: pd.DataFrame, scoped: bool, k1: float = 1.5, b: float = 0.75, abstain: bool = False) -> None:
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
        #: declared once: this system abstains below its own score threshold (module docstring)
        self.abstains = abstain
        self.abstain_below = abstain_threshold(corpus, bm25_idf(corpus), k1) if abstain else None

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

    def search(self, query: Query) -> list[Hit] | Response:
        scores = self.scores(query)
        hits = [Hit(str(self.atom_ids[i]), float(scores[i])) for i in top_k(scores, query.k, positive_only=True)]
        if self.abstain_below is None:
            return hits
        return Response(hits, abstain=not hits or hits[0].score < self.abstain_below)


def bm25(atoms: pd.DataFrame) -> BM25System:
    """Entry point of the built-in `bm25`: every atom of every source as one memory (abstains)."""
    return BM25System(atoms, scoped=False, abstain=True)


def bm25_scoped(atoms: pd.DataFrame) -> BM25System:
    """Entry point of the built-in `bm25-scoped`: holder and as_of filtered (abstains)."""
    return BM25System(atoms, scoped=True, abstain=True)
