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
                             "scope": {"holder": "locomo:conv-26"}}]
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
