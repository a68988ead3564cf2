"""bench.modalities.derived: a moment fixed before gold, each entry asked at it, repeated questions, a hash order."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from bench.modalities.derived import (
    RULE,
    ask_at,
    is_derived,
    meets_target,
    moment_after,
    question_key,
    repeated_questions,
    request_order,
    status_at,
)

T0 = datetime(2020, 1, 1, tzinfo=UTC)


def entry(i: int, question: str, source: str, split: str = "dev", unanswerable: bool = False) -> dict:
    return {
        "query_id": f"k:{i}", "modality": "image", "question": question, "answer": None, "answer_format": "none",
        "gold": [] if unanswerable else [{"source_id": source, "region": {}}],
        "scope": {"holder": "owner", "session": None, "scenario": "x"},
        "as_of": None, "unanswerable": unanswerable,
        "origin": {"dataset": "d", "revision": "r", "item": f"row:{i}", "license": "l"}, "split": split,
    }


def test_repeated_questions_fold_case_and_space():
    es = [entry(0, "Blur a layer ", "k:a"), entry(1, "blur  a LAYER", "k:b"), entry(2, "Crop", "k:a"), entry(3, "crop", "k:a")]
    assert repeated_questions(es) == {question_key("blur a layer")}


def test_moment_after_two_thirds_of_the_sources_in_time_order():
    ends = [T0 + timedelta(days=d) for d in (5, 1, 3, 2, 4, 6)]  # any order
    assert moment_after(ends) == T0 + timedelta(days=4, seconds=1)  # 4 of 6 sources ended by then
    assert moment_after(ends, (1, 2)) == T0 + timedelta(days=3, seconds=1)
    assert moment_after([T0]) == T0 + timedelta(seconds=1)
    with pytest.raises(ValueError, match="no sources"):
        moment_after([])


def test_status_at_all_none_or_part_of_the_gold_observed():
    m = T0 + timedelta(days=1)
    assert status_at([T0, m], m) == "answerable"  # observed at the very moment counts as observed
    assert status_at([m + timedelta(seconds=1)], m) == "later"
    assert status_at([T0, m + timedelta(seconds=1)], m) == "partial"


def test_every_entry_asked_at_the_one_moment_answerable_later_or_dropped():
    moment = T0 + timedelta(days=10)
    seen = {f"k:s{i}": T0 + timedelta(days=i) for i in range(20)}  # sources 0..10 observed by the moment
    es = [entry(i, f"q{i}", f"k:s{i}", "test" if i % 3 == 0 else "dev") for i in range(20)]
    es.append(entry(20, "q15", "k:s1"))  # q15 is also gold in an early source: q15 may be answered from it
    es.append(entry(21, "none", "", unanswerable=True))  # a human unanswerable entry stays one
    es.append(entry(22, "both", "k:s3"))
    es[22]["gold"].append({"source_id": "k:s12", "region": {}})  # evidence before and after: dropped

    def gold_times(e: dict) -> list[datetime]:
        return [seen[g["source_id"]] for g in e["gold"]]

    out, notes = ask_at(es, gold_times, moment)
    assert {e["as_of"] for e in out} == {moment.isoformat()}  # one moment for every entry
    by_id = {e["query_id"]: e for e in out}
    for i in range(11):
        assert by_id[f"k:{i}"]["gold"] == es[i]["gold"] and not by_id[f"k:{i}"]["unanswerable"]
    for i in (11, 12, 13, 14, 16, 17, 18, 19):
        d = by_id[f"k:{i}:{RULE}"]
        assert is_derived(d) and d["gold"] == [] and d["unanswerable"] and d["answer"] is None
        assert d["origin"]["item"] == f"row:{i}|derived:{RULE}" and d["split"] == es[i]["split"] and d["question"] == f"q{i}"
    assert "k:15" not in by_id and f"k:15:{RULE}" not in by_id and "k:22" not in by_id
    assert by_id["k:21"]["unanswerable"] and not is_derived(by_id["k:21"])
    assert notes["dropped_by_reason"] == {
        "gold after the moment, but the question text is gold in more than one source": 1,
        "gold partly observed before the moment (some evidence before it, some after)": 1,
    }
    assert notes["unanswerable"] == {"dev": sum(e["unanswerable"] and e["split"] == "dev" for e in out),
                                     "test": sum(e["unanswerable"] and e["split"] == "test" for e in out)}
    assert not any(is_derived(e) for e in es)  # the input is not changed


def test_request_order_is_a_fixed_hash_order_of_the_ids():
    es = [entry(i, f"q{i}", f"k:s{i}") for i in range(50)]
    shuffled = es[:]
    random.Random(3).shuffle(shuffled)
    assert [e["query_id"] for e in request_order(shuffled)] == [e["query_id"] for e in request_order(es)]
    assert [e["query_id"] for e in request_order(es)] != [e["query_id"] for e in es]


def test_meets_target_is_exact():
    assert meets_target(3, 20) and not meets_target(2, 20) and meets_target(15, 100) and not meets_target(0, 0)
