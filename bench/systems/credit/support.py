"""Does a memory's text support a unit it cites? The harness's LLM-free rule (docs/systems.md, *Support*).

A memory names its provenance itself, so a citation counts only where the memory's text
is supported by the cited unit's own text (a turn, a page, a line, a cue, an OCR box).

* Content stems ``C(x)``: the words of ``x`` (``\\w\\w+``, lower-cased) that are not
  English stop words (bm25s' STOPWORDS_EN_PLUS, NLTK's list), Snowball-stemmed (PyStemmer).
* A unit is *judged by its text* when it has at least ``MIN_STEMS`` content stems.
  Such a unit supports the memory when they share at least ``MIN_STEMS`` stems and
  the shared stems are at least ``SHARE`` of the smaller of the two stem sets:

      |C(u) & C(m)| >= MIN_STEMS  and  |C(u) & C(m)| / min(|C(u)|, |C(m)|) >= SHARE

  The smaller side must be mostly inside the other: a memory that quotes or
  consolidates whole turns contains each of them; a short fact drawn from a long turn
  is contained in it. A turn of the same session merely on the same topic shares a
  few words, not most of the smaller side.
* A unit without such text (a photo, a text-less page or screenshot box, a turn of
  fewer than two content words) cannot be judged: it counts as supported only when it
  is the only unit the memory cites (the memory is then about that one thing, as an
  atom of it would be); among several units it is unsupported.
* Over-citation voids a memory: when fewer than half of a memory's units judged by
  their text are supported, none of its units is credited (``credited`` below). Citing a whole session,
  or every turn of it, for a fact taken from one turn is never worth more than citing
  that turn; it is worth nothing.

Why these constants (measured on LoCoMo, ``tests/systems/credit/test_support.py``):
see docs/systems.md, *Support*, for the pass rates of true evidence and of random
turns of the same session.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np

__all__ = ["MIN_STEMS", "SHARE", "content_stems", "credited", "stop_words", "support_mask"]

#: the shared share of the smaller stem set a supporting unit reaches
SHARE = 0.6
#: content stems a unit needs to be judged by its text, and the memory must share with it
MIN_STEMS = 2

_TOKEN = re.compile(r"(?u)\b\w\w+\b")


@functools.cache
def stop_words() -> frozenset[str]:
    """The English stop words content stems leave out (bm25s' STOPWORDS_EN_PLUS)."""
    from bm25s.stopwords import STOPWORDS_EN_PLUS  # imported when first needed: bm25s loads numba (0.4 s a process)

    return frozenset(STOPWORDS_EN_PLUS)


@functools.cache
def _stemmer() -> object:
    import Stemmer

    return Stemmer.Stemmer("english")


@functools.lru_cache(maxsize=65_536)
def content_stems(text: str) -> frozenset[str]:
    """The content stems of `text` (module docstring)."""
    stop = stop_words()
    words = [w for w in _TOKEN.findall(text.lower()) if w not in stop]
    return frozenset(_stemmer().stemWords(words)) if words else frozenset()  # type: ignore[attr-defined]


def support_mask(memory_text: str, unit_texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(supported, judged, share) per unit of one memory's citations, all citations together;
    share: the shared share of the smaller stem set (0 for a unit not judged by its text)."""
    mem = content_stems(memory_text)
    units = [content_stems(t) for t in unit_texts]
    judged = np.array([len(u) >= MIN_STEMS for u in units], dtype=bool)
    supported = np.zeros(len(units), dtype=bool)
    share = np.zeros(len(units), dtype=float)
    for i, u in enumerate(units):
        if not judged[i]:
            supported[i] = len(units) == 1
            continue
        shared = len(u & mem)
        share[i] = shared / min(len(u), len(mem)) if mem else 0.0
        supported[i] = shared >= MIN_STEMS and share[i] >= SHARE
    return supported, judged, share


def credited(supported: np.ndarray, judged: np.ndarray, share: np.ndarray) -> np.ndarray:
    """The units that resolve to gold: the supported ones; when fewer than half of the
    memory's units judged by their text are supported, its best-supported unit alone."""
    ok, seen = np.asarray(supported, dtype=bool), np.asarray(judged, dtype=bool)
    if 2 * int((ok & seen).sum()) >= int(seen.sum()):
        return ok
    out = np.zeros_like(ok)
    if ok.any():
        out[int(np.argmax(np.where(ok, share, -1.0)))] = True
    return out
