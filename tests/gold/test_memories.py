"""Memory hits, from the run to the gold: citations checked against the corpus, memories numbered
after the served atoms, support judged, gold resolved by provenance, holder and time of a memory."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.gold.memories import SEVERAL_HOLDERS, judge_units, memory_rows, with_memories
from bench.gold.resolve import resolve_frames
from bench.ingest.atom_codes import served_ids
from bench.systems import Citation, MemoryHit
from bench.systems.adapters.protocol import MalformedResponse
from bench.systems.credit.provenance import CitationCheck, coded_run
from bench.systems.run import MEMORY_COLUMNS
from tests.ingest.chunks import chunk_all

TURNS = {  # session -> turns (holder h1, except s9: holder h2)
    "c:h1:s1": ["Ann: I adopted a grey cat named Pixel yesterday", "Bob: That is lovely news", "Ann: Pixel sleeps on my keyboard all day",
                "Bob: I started learning the cello last month"],
    "c:h1:s2": ["Ann: Pixel broke a vase this morning", "Bob: My cello teacher says I improve"],
    "c:h2:s9": ["Cid: I am training for the Berlin marathon"],
}


def segments() -> pd.DataFrame:
    rows = []
    for sid, turns in TURNS.items():
        day = "2023-05-01" if sid.endswith("s1") else "2023-06-01" if sid.endswith("s2") else "2023-05-01"
        rows += [{"source_id": sid, "dataset": "c", "modality": "conversation", "turn": n + 1, "seq": n, "text": t,
                  "holder": sid.rsplit(":", 1)[0], "observed_at": pd.Timestamp(f"{day}T10:00:00Z")} for n, t in enumerate(turns)]
    return pd.DataFrame(rows)


def entry(qid: str, gold: list[tuple[str, int]], as_of: str = "2023-07-01T00:00:00+00:00") -> dict:
    return {"query_id": qid, "modality": "conversation", "question": "?", "scope": {"holder": "c:h1", "session": None, "scenario": "x"},
            "as_of": as_of, "unanswerable": False, "gold": [{"source_id": s, "region": {"turn": t}} for s, t in gold]}


def hit(qid: str, rank: int, memory_id: str, text: str, cites: list[tuple[str, dict]]) -> tuple:
    prov = json.dumps([{"source_id": s, "extent": e} for s, e in cites], sort_keys=True, separators=(",", ":"))
    return (qid, rank, memory_id, text, prov)


def resolved(hits: list[tuple], entries: list[dict], given_atoms: bool = True):
    seg = segments()
    served = chunk_all(seg, {"conversation": {"strategy": "turn"}})
    table = served_ids(served)
    memories = pd.DataFrame(hits, columns=MEMORY_COLUMNS)
    run = pd.DataFrame([(h[0], h[1], h[2], 1.0 / h[1]) for h in hits], columns=["query_id", "rank", "atom_id", "score"])
    coded, tables = coded_run(run, memories, table, CitationCheck(lambda: seg))
    found = resolve_frames(entries, served, seg)
    mine = coded.loc[coded["atom"] >= len(table), ["query_id", "rank", "atom"]].astype({"query_id": str})
    return coded, tables, with_memories(entries, found.gold, found.segments, tables.memories, tables.units, mine,
                                        given_atoms=given_atoms), len(table)


PIXEL = "Ann adopted Pixel, a grey cat, who sleeps on the keyboard and broke a vase"
CITES = [("c:h1:s1", {"turn": 1}), ("c:h1:s1", {"turn": 3}), ("c:h1:s2", {"turn": 1})]


def test_a_memory_across_sessions_finds_the_regions_its_supported_citations_overlap():
    entries = [entry("q1", [("c:h1:s1", 1), ("c:h1:s2", 1), ("c:h1:s1", 4)])]
    coded, tables, res, n_served = resolved([hit("q1", 1, "pixel", PIXEL, CITES)], entries)
    assert coded["atom"].tolist() == [n_served]  # the memory's code follows the served atoms'
    mem = res.gold.loc[res.gold["atom"] == n_served]
    assert sorted(mem["gold_idx"].tolist()) == [0, 1]  # turn 1 of s1 and turn 1 of s2; the cello turn (gold 2) is not cited
    assert res.ids == ["pixel"]  # the qrels' writer names the memory's code by its id
    row = res.memories.iloc[0]
    assert (row["citations"], row["citations_supported"], row["units"], row["units_credited"]) == (3, 3, 3, 3)
    assert row["holder"] == "c:h1" and row["observed_at"] == pd.Timestamp("2023-06-01T10:00:00Z")


def test_whole_session_citation_is_credited_with_the_supported_turn_alone():
    text = "Bob started learning the cello last month"
    entries = [entry("q1", [("c:h1:s1", 4), ("c:h1:s1", 2)])]
    _, _, res, n = resolved([hit("q1", 1, "cello", text, [("c:h1:s1", {"turn_start": 1, "turn_end": 4})])], entries)
    assert res.gold.loc[res.gold["atom"] == n, "gold_idx"].tolist() == [0]
    units = res.units
    assert units["supported"].tolist() == [False, False, False, True] and units["credited"].tolist() == [False, False, False, True]


def test_citing_the_future_resolves_nothing_and_is_a_temporal_violation():
    entries = [entry("q1", [("c:h1:s2", 1)], as_of="2023-05-15T00:00:00+00:00")]
    _, _, res, n = resolved([hit("q1", 1, "pixel", PIXEL, CITES)], entries)
    assert not (res.gold["atom"] == n).any()  # s2 is observed on 1 June, after the question
    assert res.memories["observed_at"].iloc[0] > pd.Timestamp("2023-05-15T00:00:00Z")  # temporal_ok reads this: a violation


def test_another_holders_source_makes_a_memory_of_several_holders():
    entries = [entry("q1", [("c:h1:s1", 1)])]
    _, _, res, _ = resolved([hit("q1", 1, "mix", PIXEL + " and Cid trains for the Berlin marathon", [*CITES, ("c:h2:s9", {"turn": 1})])],
                            entries)
    assert res.memories["holder"].tolist() == [SEVERAL_HOLDERS]


def test_only_a_querys_own_memory_hits_are_its_gold_and_versions_are_distinct():
    entries = [entry("q1", [("c:h1:s1", 1)]), entry("q2", [("c:h1:s1", 1)])]
    hits = [hit("q1", 1, "pixel", PIXEL, CITES), hit("q2", 1, "pixel", "Ann adopted a grey cat named Pixel", [("c:h1:s1", {"turn": 1})])]
    coded, tables, res, n = resolved(hits, entries)
    assert len(tables.memories) == 2 and coded["atom"].tolist() == [n, n + 1]  # same id, rewritten: two versions
    mem = res.gold.loc[res.gold["atom"] >= n]
    assert sorted(zip(mem["query_id"], mem["atom"])) == [("q1", n), ("q2", n + 1)]


def test_a_replayed_systems_gold_is_its_memories():
    entries = [entry("q1", [("c:h1:s1", 1)])]
    _, _, res, n = resolved([hit("q1", 1, "pixel", PIXEL, CITES)], entries, given_atoms=False)
    assert res.gold["atom"].tolist() == [n]


@pytest.mark.parametrize(("cite", "message"), [
    (Citation("c:h1:s7", {"turn": 1}), "citation 1: source c:h1:s7 is not a source of the corpus"),
    (Citation("c:h1:s1", {"turn": 9}), r"citation 1: extent \{\"turn\": 9\} is not a conversation extent of c:h1:s1: turn 9 is not a turn"),
    (Citation("c:h1:s1", {"page": 1}), "is not a conversation extent of c:h1:s1: extent must have keys"),
])
def test_citations_that_do_not_lie_in_the_corpus_are_malformed(cite, message):
    check = CitationCheck(segments)
    with pytest.raises(MalformedResponse, match=message):
        check(MemoryHit("m", 1.0, "text", (cite,)))


def test_memory_rows_count_citations_and_units():
    memories = pd.DataFrame({"atom": [7], "memory_id": ["m"], "text": ["Pixel sleeps on my keyboard"],
                             "provenance": [json.dumps([{"source_id": "c:h1:s1", "extent": {"turn_start": 1, "turn_end": 3}}])]})
    check = CitationCheck(segments)
    units = check.units("c:h1:s1", {"turn_start": 1, "turn_end": 3})
    table = pd.DataFrame({"atom": 7, "citation": 0, "unit": np.arange(3), "source_id": "c:h1:s1", "modality": "conversation",
                          "extent": [json.dumps(e) for e in units["extent"]], "observed_at": units["observed_at"], "holder": "c:h1",
                          "text": units["text"]})
    rows = memory_rows(memories, judge_units(memories, table))
    assert rows[["citations", "citations_supported", "units", "units_judged", "units_supported", "units_credited"]].iloc[0].tolist() == [
        1, 1, 3, 3, 1, 1]


def test_the_evaluation_reads_a_memory_as_an_atom_of_its_holder_and_time():
    """Through evaluate_entries (the acceptance's path): a memory citing a region observed after the question is a
    temporal violation, one citing another holder's source a holder leak, an honest one a gold hit."""
    from bench.acceptance.in_memory import evaluate_entries
    from bench.evaluation.evaluate import EvalOptions, RunDescription, no_failures
    from bench.systems.run import RunResult

    seg = segments()
    served = chunk_all(seg, {"conversation": {"strategy": "turn"}})
    entries = [entry("q1", [("c:h1:s1", 1)]), entry("q2", [("c:h1:s1", 1)], as_of="2023-05-15T00:00:00+00:00"),
               entry("q3", [("c:h1:s1", 1)])]
    hits = [hit("q1", 1, "pixel", "Ann: I adopted a grey cat named Pixel yesterday", [("c:h1:s1", {"turn": 1})]),
            hit("q2", 1, "pixel-all", PIXEL, CITES),  # cites s2, observed on 1 June: after q2's 15 May
            hit("q3", 1, "mix", PIXEL + " and Cid trains for the Berlin marathon", [*CITES, ("c:h2:s9", {"turn": 1})])]
    ran = RunResult(pd.DataFrame([(h[0], h[1], h[2], 1.0) for h in hits], columns=["query_id", "rank", "atom_id", "score"]),
                    pd.DataFrame({"query_id": ["q1", "q2", "q3"], "latency_ms": 1.0, "n_returned": 1, "abstain": False, "confidence": np.nan}),
                    no_failures(), {"given_atoms": True}, pd.DataFrame(hits, columns=MEMORY_COLUMNS))
    desc = RunDescription(system="m", depth=10, chunking={}, concurrency=1, warm=False, adapter="python", warmup_queries=0, timeout_s=1,
                          latency=None)
    result = evaluate_entries(entries, [], ran, ran.latency, no_failures(), served, seg, EvalOptions(k=10, bootstrap_resamples=10, bootstrap_seed=0, calibration_recall=0.9), desc,
                              in_core_rows=10**6, sha256={})
    table = result.per_query.set_index("query_id")
    assert table["recall@10"].tolist() == [1.0, 1.0, 1.0]  # q2: turn 1 of s1 (observed 1 May) is credited, s2 is not
    assert table["temporal_ok"].tolist() == [1.0, 0.0, 1.0] and table["holder_ok"].tolist() == [1.0, 1.0, 0.0]
    assert result.document["memories"]["overall"]["memory_hits"] == 3
