"""Replay (docs/systems.md, *Replay*): the order of events and queries, every adapter, every refusal."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from bench.systems.adapters.external import CommandAdapter, HttpAdapter
from bench.systems.config import check_system, make_adapter
from bench.systems.replay import ReplayFiles, event_stream, schedule
from bench.systems.run import ReplayError, run_queries
from tests.conftest import ROOT

DAY = "2023-05-0{}T10:00:00+00:00"


def segments() -> pd.DataFrame:
    """Two holders' sessions: b's first session shares a's observed_at (a tie broken by source id)."""
    rows = []
    for sid, holder, day, turns in (("t:a:s2", "t:a", 3, 2), ("t:a:s1", "t:a", 1, 3), ("t:b:s1", "t:b", 1, 2)):
        rows += [{"source_id": sid, "dataset": "t", "modality": "conversation", "turn": n, "seq": n - 1, "holder": holder,
                  "observed_at": pd.Timestamp(DAY.format(day)), "text": f"{sid} turn {n} about apples"} for n in range(1, turns + 1)]
    return pd.DataFrame(rows)


def entry(qid: str, holder: str, as_of: str, question: str = "apples?") -> dict:
    return {"query_id": qid, "modality": "conversation", "question": question, "scope": {"holder": holder, "session": None, "scenario": "x"},
            "as_of": as_of, "gold": [], "unanswerable": False}


ENTRIES = [entry("q3", "t:a", DAY.format(4)), entry("q1", "t:a", DAY.format(1)), entry("q2", "t:b", DAY.format(2)),
           entry("q0", "t:b", "2023-05-01T09:00:00+00:00")]


def test_events_in_observed_at_then_source_then_position_order():
    events = event_stream(segments(), ["t:a:s1", "t:a:s2", "t:b:s1"])
    assert events["event"].tolist() == [f"e{i}" for i in range(1, 8)]
    assert list(zip(events["source_id"], [e["turn"] for e in events["extent"]])) == [
        ("t:a:s1", 1), ("t:a:s1", 2), ("t:a:s1", 3), ("t:b:s1", 1), ("t:b:s1", 2), ("t:a:s2", 1), ("t:a:s2", 2)]
    assert event_stream(segments(), ["t:b:s1"])["source_id"].unique().tolist() == ["t:b:s1"]  # only the served sources


def test_each_query_after_every_event_at_or_before_its_as_of():
    plan = schedule(event_stream(segments(), ["t:a:s1", "t:a:s2", "t:b:s1"]), ENTRIES)
    # q0 before everything; q1 at the first day's moment: after the 5 events observed then (a tie goes to the event)
    assert [ENTRIES[i]["query_id"] for i in plan.order] == ["q0", "q1", "q2", "q3"]
    assert plan.events_before.tolist() == [0, 5, 5, 7]


def build_python(entry_point: str = "tests.systems.replay_fake:build"):
    return make_adapter(check_system({"name": "r", "adapter": "python", "entry": entry_point}), pd.DataFrame({"atom_id": ["x"]}))


def test_python_replay_sends_the_stream_and_records_ingest():
    adapter = build_python()
    seg = segments()
    result = run_queries(adapter, ENTRIES, 5, warmup=3, events=lambda: event_stream(seg, sorted(seg["source_id"].unique())))
    record = adapter.system.record
    kinds = [r[0] if r[0] == "event" else r[1] for r in record]
    start = "apples turn"  # the start-empty search: the stream's most common content words, before any event
    assert kinds == [start, "apples?"] + ["event"] * 5 + ["apples?", "apples?", "event", "event", "apples?"]  # no warm-up under replay
    assert result.info["replay_facts"]["start_empty"] == {"checked": True, "question": start, "returned": 0, "empty": True}
    assert result.info["replay_facts"]["searchable"] == {"every": 0, "not_measured": "system.probe_every is 0"}
    assert result.info["replay"] and not result.info["given_atoms"] and result.info["warmup_queries"] == 0
    assert result.ingest["event"].tolist() == [f"e{i}" for i in range(1, 8)] and (result.ingest["ingest_ms"] >= 0).all()
    assert result.memories["memory_id"].tolist() == ["m-e7", "m-e3", "m-e5"]  # q3: a's last of all, q1: a's last at day 1, q2: b's last
    assert set(result.run["query_id"]) == {"q1", "q2", "q3"}


def test_a_failed_event_stops_the_run_naming_event_and_source():
    adapter = build_python()
    seg = segments()
    bad = [entry("q1", "t:a", DAY.format(1), "FAILEVENT"), entry("q2", "t:a", DAY.format(4))]
    with pytest.raises(ReplayError, match=r"^event e6 \(t:a:s2, conversation \{'turn': 1\}\) failed: raised RuntimeError: cannot digest"):
        run_queries(adapter, bad, 5, events=lambda: event_stream(seg, sorted(seg["source_id"].unique())))


def test_replay_declared_on_the_system_only_is_refused(monkeypatch):
    import tests.systems.replay_fake as fake

    monkeypatch.setattr(fake.build, "replay", False)
    with pytest.raises(ValueError, match="has replay = True but its factory does not"):
        build_python()


def test_a_replayed_factory_needs_observe(monkeypatch):
    import tests.systems.replay_fake as fake

    monkeypatch.delattr(fake.Recorder, "observe")
    with pytest.raises(ValueError, match="declares replay = True, but the system has no observe"):
        build_python()


def test_replay_refusals():
    seg = segments()
    events = lambda: event_stream(seg, sorted(seg["source_id"].unique()))  # noqa: E731
    with pytest.raises(ReplayError, match="system.concurrency is 2"):
        run_queries(build_python(), ENTRIES, 5, concurrency=2, events=events)
    with pytest.raises(ReplayError, match="this run has no event stream"):
        run_queries(build_python(), ENTRIES, 5)


def command(*args: str, given_atoms: bool = False) -> CommandAdapter:
    return CommandAdapter([sys.executable, *args], "r", cwd=ROOT, startup_timeout=60, given_atoms=given_atoms)


def test_command_replay_over_the_harness_server_and_a_refused_atoms_line(tmp_path):
    seg = segments()
    events = lambda: event_stream(seg, sorted(seg["source_id"].unique()))  # noqa: E731
    served = command("-m", "bench.systems.serve", "tests.systems.replay_fake:build")
    result = run_queries(served, ENTRIES, 5, events=events)
    assert result.info["replay"] and result.memories["memory_id"].tolist() == ["m-e7", "m-e3", "m-e5"]
    with pytest.raises(ReplayError, match=r"its command line names \{atoms\}: it was handed every atom before its first event"):
        run_queries(command("-m", "bench.systems.serve", "tests.systems.replay_fake:build", given_atoms=True), ENTRIES, 5, events=events)
    refused = subprocess.run([sys.executable, "-m", "bench.systems.serve", "tests.systems.replay_fake:build", "--atoms", str(tmp_path)],
                             cwd=ROOT, capture_output=True, text=True, input="")
    assert refused.returncode == 1 and "a replayed system (replay = True on its factory) takes no --atoms" in refused.stderr


def test_an_event_answered_otherwise_stops_the_run():
    seg = segments()
    seg.loc[4, "text"] = "REFUSE this one"  # t:a:s1 turn 3: the third event
    with pytest.raises(ReplayError, match=r"^event e3 \(t:a:s1, conversation \{'turn': 3\}\) failed: the system answered ok: False"):
        run_queries(command("tests/systems/replay_fake.py"), ENTRIES, 5, events=lambda: event_stream(seg, sorted(seg["source_id"].unique())))


def test_http_replay_is_declared_in_the_answer_to_the_hello():
    proc = subprocess.Popen([sys.executable, "-m", "bench.systems.serve", "tests.systems.replay_fake:build", "--http", "127.0.0.1:0"],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        assert ready == {"ready": True, "url": ready["url"], "replay": True}
        seg = segments()
        result = run_queries(HttpAdapter(ready["url"], "r"), ENTRIES, 5, events=lambda: event_stream(seg, sorted(seg["source_id"].unique())))
        assert result.info["replay"] and len(result.ingest) == 7 and result.memories["memory_id"].tolist() == ["m-e7", "m-e3", "m-e5"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_replay_files_grow_with_the_events(tmp_path):
    raw = tmp_path / "photo.jpg"
    raw.write_bytes(b"jpeg")
    (tmp_path / "run" / "corpus").mkdir(parents=True)
    files = ReplayFiles(tmp_path / "run", {"img:1": ("val/photo.jpg", raw)})
    ev = {"event": "e1", "source_id": "t:a:s1", "text": "hi"}
    rel = files.place(ev, "t")
    files.place({**ev, "event": "e2"}, "t")
    lines = [json.loads(x) for x in (tmp_path / "run" / rel).read_text().splitlines()]
    assert rel == "corpus/t/t_a_s1.jsonl" and [x["event"] for x in lines] == ["e1", "e2"] and lines[0]["source_file"] == rel
    assert files.place({"event": "e3", "source_id": "img:1"}, "coco") == "corpus/coco/val/photo.jpg"
    assert (tmp_path / "run" / "corpus/coco/val/photo.jpg").read_bytes() == b"jpeg"


class Lagged:
    """A replayed memory whose writes become searchable `lag` seconds after they were observed
    (an index refreshed in the background); `preloaded`: it holds a memory before any event."""

    replay = True
    lag, preloaded = 0.15, False

    def __init__(self, atoms: object = None) -> None:
        import time

        self.clock = time.monotonic
        self.memories: list[tuple[float, dict]] = []
        if self.preloaded:
            self.memories.append((0.0, {"event": "old", "text": "apples orchard", "source_id": "t:a:s1", "extent": {"turn": 1}}))

    def observe(self, event: dict) -> None:
        self.memories.append((self.clock(), event))

    def search(self, query) -> list[dict]:
        words = set(query.question.lower().split())
        ready = [e for t, e in self.memories if self.clock() - t >= self.lag and words & set(e["text"].lower().split())]
        return [{"memory_id": f"m-{e['event']}", "score": 1.0 / (i + 1), "text": e["text"],
                 "provenance": [{"source_id": e["source_id"], "extent": e["extent"]}]} for i, e in enumerate(ready[::-1][:query.k])]


class Preloaded(Lagged):
    preloaded = True


class Never(Lagged):
    lag = 3600.0


def test_start_empty_and_the_time_until_an_event_is_searchable():
    """A system holding a memory before its first event is marked not empty at start; probes after
    every 2nd event find a lagged index's writes after its lag, and say what they never found."""
    from bench.reporting.memories import facts_lines

    words = ["apples orchard", "pears jam", "plums tart", "cherries pie", "grapes wine", "melons summer", "figs honey"]
    seg = segments().assign(text=lambda f: [f"{w} {i}" for i, w in enumerate(words)])  # each turn its own words
    stream = lambda: event_stream(seg, sorted(seg["source_id"].unique()))  # noqa: E731
    facts = {}
    for name, system in (("lagged", Lagged), ("preloaded", Preloaded), ("never", Never)):
        adapter = make_adapter(check_system({"name": name, "adapter": "python", "entry": f"tests.systems.test_replay:{system.__name__}"}),
                               pd.DataFrame({"atom_id": ["x"]}))
        result = run_queries(adapter, ENTRIES, 5, events=stream, probe_every=2, probe_wait_s=0.6)
        facts[name] = result.info["replay_facts"]
    lagged = facts["lagged"]["searchable"]
    assert lagged["probes"] == 3 and lagged["found"] == 3 and lagged["not_found"] == 0  # events 2, 4, 6 of 7
    assert 150 <= lagged["p50_ms"] < 600 and facts["lagged"]["start_empty"]["empty"]
    assert facts["never"]["searchable"]["found"] == 0 and facts["never"]["searchable"]["not_found"] == 3
    assert facts["preloaded"]["start_empty"]["returned"] == 1 and not facts["preloaded"]["start_empty"]["empty"]
    lines = facts_lines({"start_empty": facts["preloaded"]["start_empty"], "searchable": lagged})
    assert lines[0].startswith("**NOT EMPTY AT START**") and "over 3 of 3 probes (one every 2 events" in lines[2]
    assert "**not measured**" in facts_lines({"searchable": {"every": 0}})[0]
