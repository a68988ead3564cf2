"""bench.modalities.derived: the 15 % count, repeated questions, a deterministic subset."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from bench.modalities.derived import (
    derive_subset,
    is_derived,
    needed,
    question_key,
    repeated_questions,
)

T0 = datetime(2020, 1, 1, tzinfo=UTC)


def entry(i: int, question: str, source: str, split: str = "dev") -> dict:
    return {
        "query_id": f"k:{i}", "modality": "image", "question": question, "answer": None, "answer_format": "none",
        "gold": [{"source_id": source, "region": {}}], "scope": {"holder": "owner", "session": None, "scenario": "x"},
        "as_of": "2024-01-01T00:00:00+00:00", "unanswerable": False,
        "origin": {"dataset": "d", "revision": "r", "item": f"row:{i}", "license": "l"}, "split": split,
    }


def test_needed_is_the_least_count_reaching_15_percent():
    for n in range(1, 500):
        d = needed(n)
        assert d / (n + d) >= 0.15 and (d - 1) / (n + d - 1) < 0.15


def test_repeated_questions_fold_case_and_space():
    es = [entry(0, "Blur a layer ", "k:a"), entry(1, "blur  a LAYER", "k:b"), entry(2, "Crop", "k:a"), entry(3, "crop", "k:a")]
    assert repeated_questions(es) == {question_key("blur a layer")}


def test_subset_deterministic_order_free_and_traced():
    es = [entry(i, f"q{i}", f"k:s{i}", "test" if i % 3 == 0 else "dev") for i in range(60)]
    es.append(entry(60, "q1", "k:other"))  # q1 is now gold in two sources

    def moment(e: dict):
        i = int(e["query_id"].split(":")[1])
        return (None, "too early") if i == 5 else (T0 + timedelta(seconds=i), None)

    out, notes = derive_subset(es, moment, "before-x", "salt")
    shuffled = es[:]
    random.Random(1).shuffle(shuffled)
    again, _ = derive_subset(shuffled, moment, "before-x", "salt")
    assert sorted(d["query_id"] for d in again) == sorted(d["query_id"] for d in out)
    assert notes["not_eligible_by_reason"] == {"question text is gold in more than one source": 2, "too early": 1}
    assert {x["item"] for x in notes["not_eligible"]} == {"row:1|derived:before-x", "row:60|derived:before-x", "row:5|derived:before-x"}
    for split in ("dev", "test"):
        n = sum(e["split"] == split for e in es)
        assert sum(d["split"] == split for d in out) == needed(n)
    for d in out:
        assert is_derived(d) and d["gold"] == [] and d["unanswerable"] is True and d["answer"] is None
        src = es[int(d["query_id"].split(":")[1])]
        assert d["query_id"] == src["query_id"] + ":before-x" and d["split"] == src["split"]
        assert d["as_of"] == (T0 + timedelta(seconds=int(src["query_id"].split(":")[1]))).isoformat()
    assert not any(is_derived(e) for e in es)
