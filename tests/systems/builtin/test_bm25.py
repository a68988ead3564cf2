"""The built-in bm25's declared abstention: an IDF-weighted share of the question, scale-free."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bench.systems import Query, Response, build_system
from bench.systems.builtin.bm25 import ABSTAIN_BELOW, BM25System, bm25_idf, tokenize

T0 = pd.Timestamp("2024-01-01", tz="UTC")
TEXTS = ["Melanie painted a sunrise over the lake", "Caroline adopted a dog named Max", "the weather was nice",
         "Melanie went swimming", "Caroline painted a fence"]


def atoms() -> pd.DataFrame:
    return pd.DataFrame({"atom_id": [f"a{i}" for i in range(len(TEXTS))], "text": TEXTS, "holder": "h", "observed_at": T0})


def ask(question: str) -> Query:
    return Query(question=question, as_of=T0, holder="h", session=None, scenario=None, k=10)


def test_builtins_declare_abstention_and_send_a_confidence():
    system = build_system("bm25", atoms())
    assert system.abstains and build_system("bm25-scoped", atoms()).abstains
    answer = system.search(ask("Melanie painted the sunrise over the lake?"))
    assert isinstance(answer, Response) and answer.hits[0].atom_id == "a0"
    assert answer.confidence == 1.0 and not answer.abstain  # every indexed question word is in the best atom


def test_confidence_is_the_idf_weighted_share_of_the_question():
    system = build_system("bm25", atoms())
    answer = system.search(ask("Did Caroline adopt a dog named Rex at the lake?"))
    idf = bm25_idf([tokenize(t) for t in TEXTS])
    words = set(tokenize("Did Caroline adopt a dog named Rex at the lake?"))
    assert "rex" in words and "rex" not in idf  # unknown to the memory: weighs as a word of document frequency 0
    unseen = math.log(1 + (len(TEXTS) + 0.5) / 0.5)
    top = set(tokenize(TEXTS[int(answer.hits[0].atom_id[1:])]))
    assert answer.confidence == pytest.approx(sum(idf[w] for w in words & top) / sum(idf.get(w, unseen) for w in words))
    assert answer.abstain == (answer.confidence < ABSTAIN_BELOW)


def test_abstains_on_a_weak_or_empty_match_and_keeps_the_ranking():
    system = build_system("bm25", atoms())
    weak = system.search(ask("Was the weather nice when Melanie went swimming with the dog of Caroline?"))
    assert weak.hits and weak.confidence < ABSTAIN_BELOW and weak.abstain
    empty = system.search(ask("quantum chromodynamics"))
    assert empty.hits == [] and empty.abstain and empty.confidence == 0.0
    # the plain class (used by hybrid and the tie tests) answers a bare ranking, the same one
    plain = BM25System(atoms(), scoped=False).search(ask("Was the weather nice when Melanie went swimming with the dog of Caroline?"))
    assert plain == weak.hits and not math.isnan(weak.hits[0].score)


def test_the_threshold_is_a_parameter_and_0_never_abstains():
    from bench.systems.builtin.bm25 import bm25_scoped

    question = ask("Was the weather nice when Melanie went swimming with the dog of Caroline?")
    weak = build_system("bm25", atoms()).search(question)
    assert 0 < weak.confidence < ABSTAIN_BELOW and weak.abstain
    lenient = build_system("bm25", atoms(), abstain_below=weak.confidence)  # at the confidence: answers (abstains only below)
    assert not lenient.search(question).abstain and lenient.search(question).hits == weak.hits
    never = bm25_scoped(atoms(), abstain_below=0.0)
    empty = never.search(ask("quantum chromodynamics"))
    assert empty.hits == [] and not empty.abstain and empty.confidence == 0.0  # 0: never abstains, not even on nothing
    assert never.abstains  # it still declares abstention: the false-recall rule stays `abstention`


def test_the_system_says_what_it_does():
    scoped, plain = build_system("bm25-scoped", atoms(), abstain_below=0.35), build_system("bm25", atoms())
    assert "the question's holder may see, observed at or before its as_of" in scoped.description
    assert "less than 0.35 of the question's IDF-weighted words" in scoped.description
    assert "unscoped" in plain.description and f"less than {ABSTAIN_BELOW:g} " in plain.description
    assert "never abstains" in build_system("bm25", atoms(), abstain_below=0).description
    assert "never abstains" in BM25System(atoms(), scoped=False).description  # the plain class hybrid uses


def test_the_confidence_is_the_same_whatever_the_string_hash_seed():
    """The confidence sums IDFs over a set of words, whose order follows the string hash seed: two
    processes must still send the same confidence to the last bit (math.fsum: exactly rounded)."""
    import os
    import subprocess
    import sys

    script = ("import pandas as pd\n"
              "from tests.systems.builtin.test_bm25 import ask, atoms\n"
              "from bench.systems import build_system\n"
              "s = build_system('bm25', atoms())\n"
              "qs = ['Was the weather nice when Melanie went swimming with the dog of Caroline?',\n"
              "      'Did Caroline adopt a dog named Rex at the lake?', 'Melanie painted a fence over the nice lake weather']\n"
              "print([s.search(ask(q)).confidence.hex() for q in qs])\n")
    seen = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(6)}
    assert len(seen) == 1, seen
