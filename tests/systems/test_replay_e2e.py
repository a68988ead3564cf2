"""End to end: a replayed command system, sandboxed as always, records every event it receives.

Real LoCoMo sessions and MMLongBench-Doc documents (the `served` fixture), the committed
LoCoMo dev questions of that conversation: no event observed after a question's `as_of`
reaches the system before that question, every event at or before it does, its source
file holds only what was sent of it, and two runs send the same lines in the same order."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bench.io import iter_jsonl
from bench.systems.credit.provenance import CitationCheck
from bench.systems.replay import event_stream
from bench.systems.run import run_queries
from bench.systems.session import served_sources
from tests.conftest import ROOT
from tests.systems.conftest import open_for

pytestmark = pytest.mark.e2e


HOLDER = "locomo:conv-30"


@pytest.fixture(scope="module")
def stream(real_corpus) -> dict:
    """Three sessions of a conversation with dev questions, and two PDFs (media shown whole from their first page's event)."""
    from tests.ingest.chunks import chunk_all

    seg = real_corpus["segments"]
    pdfs = sorted(seg.loc[seg["modality"] == "pdf", "source_id"].unique())[:2]
    sessions = [f"{HOLDER}:session-{n}" for n in (1, 2, 3)]
    seg = seg.loc[seg["source_id"].isin([*sessions, *pdfs])].reset_index(drop=True)
    atoms = chunk_all(seg, {"pdf": {"strategy": "page"}, "conversation": {"strategy": "turn"}})
    return {"atoms": atoms, "segments": seg, "manifest": list(real_corpus["manifest"].rows), "store": real_corpus["store"]}


def replayed(served: dict, entries: list[dict], tmp_path, capfd) -> tuple[list[dict], dict, object]:
    seg = served["segments"]
    sources = [s for s, _, _ in served_sources(served["atoms"])]
    capfd.readouterr()
    with open_for({"entry": "{python} tests/systems/replay_fake.py"}, served, tmp_path / "systems") as opened:
        result = run_queries(opened.adapter, entries, 10, warmup=2, events=lambda: event_stream(seg, sources),
                             check_memory=CitationCheck(lambda: seg))
        info = opened.info
    lines = [json.loads(x[len("RECORD "):]) for x in capfd.readouterr().err.splitlines() if x.startswith("RECORD ")]
    return lines, info, result


def test_a_replayed_command_system_is_shown_the_past_only_in_a_fixed_order(stream, tmp_path, capfd):
    served = stream
    entries = [e for _, e in iter_jsonl(ROOT / "bench" / "sets" / "locomo.jsonl") if e["split"] == "dev" and e["scope"]["holder"] == HOLDER]
    first, info, result = replayed(served, entries, tmp_path / "a", capfd)
    assert info["isolation"] in ("bwrap", "landlock") and result.info["replay"] and not result.info["given_atoms"]
    events = event_stream(served["segments"], [s for s, _, _ in served_sources(served["atoms"])])
    seen_at = dict(zip(events["event"], pd.to_datetime(events["observed_at"], utc=True), strict=True))
    sent: list[str] = []
    per_source: dict[str, int] = {}
    asked = 0
    for line in first:
        if "event" in line:
            ev = line["event"]
            sent.append(ev["event"])
            per_source[ev["source_id"]] = per_source.get(ev["source_id"], 0) + 1
            if ev["source_file"].endswith(".jsonl"):  # parsed text: exactly the events of it sent so far
                assert line["file_lines"] == per_source[ev["source_id"]]
            continue
        as_of = pd.Timestamp(line["as_of"])
        assert not [e for e in sent if seen_at[e] > as_of]  # nothing observed after the question reached it before it ...
        assert {e for e, t in seen_at.items() if t <= as_of} <= set(sent)  # ... and everything at or before it did
        asked += 1
    assert asked == len(entries) + 1 and sent == events["event"].tolist()[: len(sent)]  # + the start-empty search, before any event
    assert "query" in first[0] and result.info["replay_facts"]["start_empty"]["empty"]
    assert result.failures.empty and len(result.memories) > 0
    second, _, _ = replayed(served, entries, tmp_path / "b", capfd)
    assert second == first  # the same lines, in the same order
