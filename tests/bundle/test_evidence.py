"""The evidence as bundle members (bench.bundle.evidence): what the evaluation reads goes in, read back the same;
the corpus's text and the entries' questions stay out; a member missing, unreadable or out of bounds is named."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bench.bundle.evidence import Evidence, evidence_members, read_evidence
from bench.bundle.signing import BundleError
from bench.evaluation.evaluate import EvalOptions, RunDescription, no_failures
from bench.evaluation.memory_report import MemoryInputs

ENTRY = {"query_id": "q1", "modality": "conversation", "unanswerable": False, "as_of": "2023-05-08T13:56:00Z", "split": "dev",
         "question": "What did Caroline say?", "answer": "Hey Mel!", "scope": {"holder": "locomo:conv-26", "sessions": [1]},
         "gold": [{"source_id": "locomo:conv-26:session-1", "region": {"turn": 1}}]}


def evidence(**options: object) -> Evidence:
    atoms = pd.DataFrame({"atom_id": ["a#t0", "a#t1"], "source_id": ["s", "s"], "text": ["Caroline: Hey Mel!", "Mel: Hi!"],
                          "holder": ["locomo:conv-26"] * 2, "observed_at": pd.to_datetime(["2023-05-08T13:56:00Z"] * 2, utc=True),
                          "char_start": [0, 19], "char_end": [18, 26]})
    memories = MemoryInputs(pd.DataFrame({"atom": pd.Series([], dtype="int64")}), pd.DataFrame({"atom": pd.Series([], dtype="int64")}),
                            pd.DataFrame({"query_id": pd.Series([], dtype=str)}))
    return Evidence(split="dev", entries=[ENTRY], invalid=[{"query_id": "q2", "file": "bench/sets/locomo.jsonl", "line": 2, "split": "dev",
                                                           "modality": "conversation", "reason": "unavailable: x"}],
                    run=pd.DataFrame({"query_id": ["q1", "q1"], "rank": [1, 2], "atom": [1, 0], "score": [2.5, 1.0]}),
                    gold=pd.DataFrame({"query_id": ["q1"], "gold_idx": [0], "atom": [1]}),
                    regions=pd.DataFrame({"query_id": ["q1"], "modality": ["conversation"], "gold_idx": [0], "n_atoms": [1]}),
                    responses=pd.DataFrame({"query_id": ["q1"], "latency_ms": [0.5], "abstain": [False], "confidence": [0.7]}),
                    failures=no_failures(), served={"conversation": atoms}, memories=memories,
                    sha256={"manifest": "ab" * 32, "sets": {"bench/sets/locomo.jsonl": "cd" * 32}, "split_lock": "ef" * 32},
                    options=EvalOptions(**{"k": 10, "bootstrap_resamples": 200, "bootstrap_seed": 0, "calibration_recall": 0.9,
                                           "budget": {"conversation": 1700.0, "image": None}, **options}),  # type: ignore[arg-type]
                    description=RunDescription(system="bm25", depth=100, chunking={"conversation": {"strategy": "turn"}}, concurrency=1,
                                               warm=True, adapter="builtin", warmup_queries=10, timeout_s=30.0,
                                               latency={"n": 1, "p50_ms": 0.5, "p95_ms": 0.5, "p99_ms": 0.5}))


def test_the_evidence_reads_back_as_it_went_in_without_text_or_questions():
    ev = evidence()
    members = evidence_members(ev)
    back = read_evidence(members)
    assert back.options == ev.options and back.description == ev.description and back.sha256 == ev.sha256
    assert back.invalid == ev.invalid and back.split == "dev"
    assert back.entries == [{"query_id": "q1", "modality": "conversation", "unanswerable": False, "as_of": "2023-05-08T13:56:00Z",
                             "scope": {"holder": "locomo:conv-26"},
                             # its cluster labels, read from the question it no longer carries (the intervals resample them)
                             "clusters": {"cluster": "q1", "source_cluster": "locomo:conv-26:session-1"}}]
    from bench.evaluation.stats.clusters import entry_clusters
    pd.testing.assert_frame_equal(entry_clusters(back.entries), entry_clusters(ev.entries))  # the same clusters either way
    for name in ("run", "gold", "regions", "responses"):
        pd.testing.assert_frame_equal(getattr(back, name), getattr(ev, name), check_dtype=False)
    assert list(back.served) == ["conversation"] and "text" not in back.served["conversation"].columns
    pd.testing.assert_frame_equal(back.served["conversation"], ev.served["conversation"].drop(columns="text"))
    text = b"".join(members.values())
    assert b"Caroline" not in text and b"What did" not in text and b"Hey Mel" not in text  # neither corpus text nor question nor answer
    assert json.loads(members["evaluation.json"])["options"]["bootstrap_resamples"] == 200


def test_a_missing_unreadable_or_unbounded_member_is_named():
    members = evidence_members(evidence())
    with pytest.raises(BundleError, match="member 'gold/regions.parquet' is missing: the evaluation cannot be recomputed without it"):
        read_evidence({k: v for k, v in members.items() if k != "gold/regions.parquet"})
    with pytest.raises(BundleError, match="member 'run/run.parquet': not a readable parquet table"):
        read_evidence({**members, "run/run.parquet": b"PAR1 not really"})
    with pytest.raises(BundleError, match="evaluation.json: options metrics.bootstrap_resamples: must be <= 1,000,000"):
        read_evidence(evidence_members(evidence(bootstrap_resamples=10**9)))
    doc = json.loads(members["evaluation.json"])
    doc["options"]["resamples_per_cell"] = 5
    with pytest.raises(BundleError, match="evaluation.json: options is not this harness's EvalOptions"):
        read_evidence({**members, "evaluation.json": json.dumps(doc).encode()})


def test_a_run_with_memory_hits_recomputes_from_its_members_alone():
    """The acceptance's path (in_memory.evaluated) on memory hits that credit, leak and arrive late: the
    evaluation recomputed from the members equals the one the stage made (tests/gold/test_memories.py's corpus)."""
    import numpy as np

    from bench.acceptance.in_memory import evaluated
    from bench.bundle.evidence import recompute
    from bench.systems.run import MEMORY_COLUMNS, RunResult
    from tests.gold.test_memories import CITES, PIXEL, entry, hit, segments
    from tests.ingest.chunks import chunk_all

    seg = segments()
    served = chunk_all(seg, {"conversation": {"strategy": "turn"}})
    entries = [entry("q1", [("c:h1:s1", 1)]), entry("q2", [("c:h1:s1", 1)], as_of="2023-05-15T00:00:00+00:00"),
               entry("q3", [("c:h1:s1", 1)])]
    hits = [hit("q1", 1, "pixel", "Ann: I adopted a grey cat named Pixel yesterday", [("c:h1:s1", {"turn": 1})]),
            hit("q2", 1, "pixel-all", PIXEL, CITES), hit("q3", 1, "mix", PIXEL + " and Cid trains", [*CITES, ("c:h2:s9", {"turn": 1})])]
    ran = RunResult(pd.DataFrame([(h[0], h[1], h[2], 1.0) for h in hits], columns=["query_id", "rank", "atom_id", "score"]),
                    pd.DataFrame({"query_id": ["q1", "q2", "q3"], "latency_ms": 1.0, "n_returned": 1, "abstain": False, "confidence": np.nan}),
                    no_failures(), {"given_atoms": True}, pd.DataFrame(hits, columns=MEMORY_COLUMNS))
    desc = RunDescription(system="m", depth=10, chunking={}, concurrency=1, warm=False, adapter="python", warmup_queries=0, timeout_s=1,
                          latency=None)
    result, ev = evaluated(entries, [], ran, ran.latency, no_failures(), served, seg,
                           EvalOptions(k=10, bootstrap_resamples=10, bootstrap_seed=0, calibration_recall=0.9), desc, in_core_rows=10**6,
                           sha256={"manifest": "ab" * 32})
    assert result.document["memories"]["overall"]["memory_hits"] == 3 and len(ev.memories.rows) == 3
    again = recompute(read_evidence(evidence_members(ev)))
    assert json.dumps(again.document) == json.dumps(result.document)
    pd.testing.assert_frame_equal(again.per_query, result.per_query)
