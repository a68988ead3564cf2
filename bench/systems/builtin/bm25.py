"""Built-in BM25 over all atoms of all sources as one memory (bm25s); the scoped one: one memory per holder.

`bm25` ranks every atom; `bm25-scoped` first drops the atoms the query's holder may
not see (another holder's) and the atoms observed after `as_of`. Atoms with score 0
share no term with the question and are not returned. Ties are broken by atom_id
ascending, so rankings are deterministic.

`bm25` is one BM25 index over every atom (one IDF and one average length for the whole
corpus). `bm25-scoped` keeps one index per holder: a holder's memory is the atoms it may
see, so its IDF and average length are those of its own atoms, and a question is scored
in its holder's index only. So a scoped answer is computed from its holder's atoms and
nothing else: new conversation atoms (each LoCoMo conversation its own holder) move no
score of a question about the `owner`'s documents, which is what lets
bench.systems.partwise reuse such answers. What a query's answer is computed from, by
modality (the served atoms' folders, `PART`): `parts_read`.
Abstention (the built-ins `bm25` and `bm25-scoped` declare it: ``abstains = True``)
-------------------------------------------------------------------------------
The system answers with a ``confidence``: the share of the question's information
that its best atom contains, the IDF-weighted share of the question's distinct words
(stop words excluded) found in the rank-1 atom, with BM25's own IDF (that of the index the
question was scored in); a word no atom of it contains gets the IDF of document frequency 0 (it is information the question asks
for that the memory does not hold):

    confidence = sum(idf(t) for t in Q if t in top atom) / sum(idf(t) for t in Q)

It answers ``abstain: true`` (still returning its ranked hits, so ranking metrics are
unaffected) when that share is below ``abstain_below`` (params `system.abstain_below`,
default ABSTAIN_BELOW) -- the best atom holds less than that share of what
the question asks about -- or, for a threshold above 0, when nothing matched; 0 never
abstains. The confidence is derived from the index and the question, never from gold,
answers or the evaluation sets. The threshold is the one number chosen on dev results
(docs/systems.md, *The default system*: the procedure and its numbers). Being a share,
the confidence does not depend on BM25's score scale or on the question's length.
(History, for honesty: a first choice, a fixed index-wide score -- two typical words
once each in an atom of average length -- was replaced after one dev run because it
ignores question length and gives no confidence; a second version left words unknown to
the index out of the share, which inflated it; until issue 49 the threshold was a
constant one half, not tuned.)
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

import numpy as np
import pandas as pd

from bench.systems import Hit, Query, Response

TOKEN = re.compile(r"(?u)\b\w\w+\b")
#: abstain when the best atom holds less than this share of the question's IDF-weighted words (params
#: `system.abstain_below` overrides it); chosen on dev by scripts/choose_abstention.py: the highest objective
#: over 8,345 dev entries, 0.3222 (docs/systems.md, *The default system*)
ABSTAIN_BELOW = 0.5


@functools.cache
def stop_words() -> frozenset[str]:
    """bm25s's English stop words (bm25s, and numba with it, imported only when a system is built:
    a run whose answers are all reused never imports it)."""
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def tokenize(text: str) -> list[str]:
    stop = stop_words()
    return [t for t in TOKEN.findall(text.lower()) if t not in stop]


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
    if candidates.size > k > 0:  # only the candidates scoring at least the k-th best can be among the k
        kth = np.partition(scores[candidates], candidates.size - k)[candidates.size - k]
        candidates = candidates[scores[candidates] >= kth]
    if candidates.size == 0:
        return candidates
    return candidates[np.lexsort((candidates, -scores[candidates]))][:k]


def bm25_idf(corpus: list[list[str]]) -> dict[str, float]:
    """BM25's IDF (the Lucene variant bm25s uses by default): ln(1 + (N - df + 0.5) / (df + 0.5))."""
    df: dict[str, int] = {}
    for doc in corpus:
        for t in set(doc):
            df[t] = df.get(t, 0) + 1
    n = len(corpus)
    return {t: float(np.log(1.0 + (n - d + 0.5) / (d + 0.5))) for t, d in df.items()}


#: the atom column that names a part of the served atoms (a modality: data/served/<modality>/)
PART = "modality"


def part_positions(atoms: pd.DataFrame, column: str = PART) -> dict[str, np.ndarray]:
    """Value of `column` -> the positions of its atoms in `atoms` (ascending); one part "" without that column."""
    if column not in atoms.columns:
        return {"": np.arange(len(atoms))}
    codes, names = pd.factorize(atoms[column].astype(str), sort=True)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    return {str(name): order[bounds[i]:bounds[i + 1]] for i, name in enumerate(names)}


def part_holders(atoms: pd.DataFrame) -> dict[str, frozenset[str]]:
    """Part (modality) -> the holders of its atoms (what `parts_read` needs; no index is built)."""
    holders = atoms["holder"].astype(str).to_numpy(dtype=object)
    return {name: frozenset(holders[pos].tolist()) for name, pos in part_positions(atoms).items()}


def parts_read(holders: dict[str, frozenset[str]], query: Query, scoped: bool) -> list[str]:
    """The parts (modalities) a built-in system's answer to `query` is computed from: every
    part (unscoped: one index over all atoms), or the parts holding an atom of its holder
    (scoped: its holder's atoms are all it reads; bm25 and dense alike)."""
    return sorted(name for name, hs in holders.items() if not scoped or query.holder in hs)


class Part:
    """One part's BM25 index over its atoms (positions into the system's atom order)."""

    def __init__(self, positions: np.ndarray, corpus: list[list[str]], holders: frozenset[str], k1: float, b: float,
                 abstain: bool) -> None:
        self.positions = positions
        self.holders = holders
        self.retriever: Any = None  # a bm25s.BM25
        self.vocab: dict[str, int] = {}
        if any(corpus):  # bm25s cannot index a part without a single token: it scores 0 everywhere
            import bm25s

            self.retriever = bm25s.BM25(k1=k1, b=b)
            self.retriever.index(corpus, show_progress=False)
            self.vocab = self.retriever.vocab_dict
        self.idf = bm25_idf(corpus) if abstain else {}
        self.terms = [frozenset(doc) for doc in corpus] if abstain else []
        self.unseen_idf = float(np.log(1.0 + (len(corpus) + 0.5) / 0.5))  # BM25's IDF at document frequency 0

    def scores(self, tokens: list[str]) -> np.ndarray | None:
        known = [t for t in tokens if t in self.vocab]
        if not known or self.retriever is None:
            return None
        return np.asarray(self.retriever.get_scores(known), dtype=np.float64)


class BM25System:
    def __init__(self, atoms: pd.DataFrame, scoped: bool, k1: float = 1.5, b: float = 0.75, abstain: bool = False,
                 abstain_below: float = ABSTAIN_BELOW) -> None:
        self.name = "bm25-scoped" if scoped else "bm25"
        self.abstain_below = abstain_below
        self.description = describe(scoped, abstain_below if abstain else None)
        self.scoped = scoped
        atoms = sorted_atoms(atoms)
        self.atom_ids = atoms["atom_id"].to_numpy(dtype=object)
        self.holders = atoms["holder"].to_numpy(dtype=object)
        self.observed = pd.to_datetime(atoms["observed_at"], utc=True).to_numpy(dtype="datetime64[ns]")
        texts = atoms["text"].fillna("").tolist()
        self.parts: dict[str, Part] = {}  # one index (unscoped) or one per holder (scoped)
        self.part_of = np.zeros(len(atoms), dtype=np.int64)  # position -> its part's number (in self.parts' order)
        self.offset = np.zeros(len(atoms), dtype=np.int64)  # position -> its row in its part
        for i, (name, pos) in enumerate(part_positions(atoms, "holder" if scoped else "").items()):
            corpus = [tokenize(texts[p]) for p in pos.tolist()]
            self.parts[name] = Part(pos, corpus, frozenset(self.holders[pos].astype(str).tolist()), k1, b, abstain)
            self.part_of[pos], self.offset[pos] = i, np.arange(len(pos))
        self.part_list = list(self.parts.values())
        #: declared once: this system abstains when its best atom holds less than abstain_below
        #: of the question's IDF-weighted words (module docstring)
        self.abstains = abstain

    def mask(self, query: Query) -> np.ndarray | None:
        if not self.scoped:
            return None
        return scope_mask(self.holders, self.observed, query)

    def read(self, query: Query) -> list[Part]:
        """The indexes the query is scored in: the one index, or its holder's."""
        if not self.scoped:
            return self.part_list
        part = self.parts.get(str(query.holder))
        return [] if part is None else [part]

    def scores(self, query: Query) -> np.ndarray:
        """BM25 score of every atom (position order) in the index it is scored in; 0 for atoms out of scope."""
        tokens = tokenize(query.question)
        scores = np.zeros(len(self.atom_ids))
        for part in self.read(query):
            found = part.scores(tokens)
            if found is not None:
                if self.scoped:  # `mask` over this index's atoms only: every other atom scores 0 already
                    found = np.where(scope_mask(self.holders[part.positions], self.observed[part.positions], query), found, 0.0)
                scores[part.positions] = found
        return scores

    def search(self, query: Query) -> list[Hit] | Response:
        scores = self.scores(query)
        best = top_k(scores, query.k, positive_only=True)
        hits = [Hit(str(a), s) for a, s in zip(self.atom_ids[best].tolist(), scores[best].tolist(), strict=True)]
        if not self.abstains:
            return hits
        confidence = self.confidence(query, int(best[0]) if len(best) else None)
        return Response(hits, abstain=confidence < self.abstain_below, confidence=confidence)

    def confidence(self, query: Query, top: int | None) -> float:
        """IDF-weighted share of the question's distinct words in the rank-1 atom (position `top`;
        0 without hits), with the IDF of the index it was ranked in."""
        if top is None:
            return 0.0
        part = self.part_list[self.part_of[top]]
        words = set(tokenize(query.question))
        # math.fsum: the exactly rounded sum, whatever order the set gives the words in (a plain sum's
        # last bit followed the string hash seed, so two processes could write different confidences)
        total = math.fsum(part.idf.get(t, part.unseen_idf) for t in words)
        if total <= 0:
            return 0.0
        terms = part.terms[self.offset[top]]
        return float(math.fsum(part.idf[t] for t in words if t in terms) / total)


def describe(scoped: bool, abstain_below: float | None) -> str:
    """What the system does, in words (the report's line on the system, run.description)."""
    sees = ("BM25 over the atoms the question's holder may see, observed at or before its as_of" if scoped else
            "BM25 over every atom of every holder and moment as one memory (unscoped: it can hand over another "
            "holder's atoms and atoms observed after the question's as_of)")
    if abstain_below is None:
        return f"{sees}; it never abstains."
    if abstain_below <= 0:
        return f"{sees}; it never abstains (abstain_below 0), and reports a confidence."
    return (f"{sees}; it abstains (hands over nothing, still ranking) when its best atom holds less than "
            f"{abstain_below:g} of the question's IDF-weighted words, or nothing matches.")


def bm25(atoms: pd.DataFrame, abstain_below: float = ABSTAIN_BELOW) -> BM25System:
    """Entry point of the built-in `bm25`: every atom of every source as one memory (abstains)."""
    return BM25System(atoms, scoped=False, abstain=True, abstain_below=abstain_below)


def bm25_scoped(atoms: pd.DataFrame, abstain_below: float = ABSTAIN_BELOW) -> BM25System:
    """Entry point of the built-in `bm25-scoped`: holder and as_of filtered (abstains)."""
    return BM25System(atoms, scoped=True, abstain=True, abstain_below=abstain_below)
