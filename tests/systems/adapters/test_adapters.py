"""The adapters under failure: what a system is sent, timeouts, crashes, malformed answers, latency."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from bench.evaluation.cells import aggregate
from bench.evaluation.per_query import per_query
from bench.systems.adapters.external import CommandAdapter, HttpAdapter, PythonAdapter, wait_for_port
from bench.systems.adapters.protocol import REQUEST_KEYS, SCOPE_KEYS
from bench.systems.run import run_queries
from tests.systems.conftest import ROOT, entry, make_atoms, serve_argv
from tests.systems.fake import Fake

KNOWN = set(make_atoms()["atom_id"])
FORBIDDEN_KEYS = {"query_id", "gold", "answer", "answer_format", "split", "unanswerable", "origin", "modality", "source_id", "region"}


def entries(*questions: str) -> list[dict]:
    return [entry(f"locomo:conv-1:q{i}", q) for i, q in enumerate(questions)]


def python_adapter() -> tuple[PythonAdapter, Fake]:
    fake = Fake(make_atoms())
    return PythonAdapter(fake, "fake"), fake


def command_adapter(served: Path, *extra: str) -> CommandAdapter:
    """The fake behind `python -m bench.systems.serve` (the harness's own protocol server)."""
    return CommandAdapter(serve_argv(served, *extra), "fake", cwd=ROOT, startup_timeout=60)


def light_command(*extra: str) -> CommandAdapter:
    """A standard-library-only fake that starts fast (for the restart tests)."""
    script = Path(__file__).parents[1] / "fake_command.py"
    return CommandAdapter([sys.executable, str(script), ",".join(sorted(KNOWN)), *extra], "fake", startup_timeout=60)


def assert_nothing_secret(request: dict, e: dict) -> None:
    assert tuple(request) == REQUEST_KEYS and tuple(request["scope"]) == SCOPE_KEYS
    text = json.dumps(request)
    assert not FORBIDDEN_KEYS & set(request)
    for secret in (e["query_id"], e["answer"], e["gold"][0]["source_id"], '"dev"', "split"):
        assert secret not in text, secret


# --------------------------------------------------------------------------- what is sent


def test_command_system_receives_only_question_as_of_scope_k(served_dir, tmp_path):
    record = tmp_path / "requests.jsonl"
    es = entries("apples?", "pears?", "apples and pears?")
    result = run_queries(command_adapter(served_dir, "--record", str(record)), es, 5, timeout_s=30, warmup=1, known_atoms=KNOWN)
    sent = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(sent) == 1 + 3  # one warm-up, then every query once
    for request in sent:
        e = es[int(request["id"][1:]) - 1]
        assert_nothing_secret(request, e)
        assert request["question"] == e["question"] and request["k"] == 5
    assert result.failures.empty and result.run["query_id"].nunique() == 3


def test_python_system_gets_a_query_with_only_the_allowed_fields():
    adapter, fake = python_adapter()
    run_queries(adapter, entries("apples?"), 5, warmup=0, known_atoms=KNOWN)
    (query,) = fake.queries
    assert set(vars(query)) == {"question", "as_of", "holder", "session", "scenario", "k"}
    assert query.question == "apples?" and query.holder == "locomo:conv-1"


def test_real_entries_never_leak_gold_or_split(served_dir, tmp_path):
    """Every entry of the committed LoCoMo set, through the command adapter: what arrives is inspected."""
    from bench.io import iter_jsonl

    real = [e for _, e in iter_jsonl(ROOT / "bench" / "sets" / "locomo.jsonl")][:200]
    record = tmp_path / "requests.jsonl"
    run_queries(command_adapter(served_dir, "--record", str(record)), real, 10, warmup=0, known_atoms=KNOWN)
    sent = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(sent) == len(real)
    for request, e in zip(sent, real, strict=True):
        assert tuple(request) == REQUEST_KEYS
        assert request["question"] == e["question"] and request["scope"] == e["scope"]
        text = json.dumps(request)
        assert e["query_id"] not in text and f"\"{e['split']}\"" not in text and "split" not in request
        for g in e["gold"]:
            assert g["source_id"] not in text


# --------------------------------------------------------------------------- failures


def test_command_timeout_fails_the_query_kills_and_restarts(served_dir):
    adapter = light_command()
    es = entries("apples", "SLEEP now", "pears")
    result = run_queries(adapter, es, 5, timeout_s=0.5, warmup=0, known_atoms=KNOWN)
    assert result.failures[["query_id", "modality", "kind"]].values.tolist() == [["locomo:conv-1:q1", "conversation", "timeout"]]
    assert set(result.latency["query_id"]) == {"locomo:conv-1:q0", "locomo:conv-1:q2"}  # answered after the restart
    assert adapter.restarts() == 1 and result.info["restarts"] == 1


def test_command_crash_fails_the_query_and_restarts(served_dir):
    adapter = light_command()
    result = run_queries(adapter, entries("apples", "CRASH", "pears", "CRASH again", "more"), 5, timeout_s=30, warmup=0, known_atoms=KNOWN)
    assert result.failures["kind"].tolist() == ["crash", "crash"]
    assert "exited with code" in result.failures["message"].iloc[0]
    assert result.latency["query_id"].tolist() == ["locomo:conv-1:q0", "locomo:conv-1:q2", "locomo:conv-1:q4"]
    assert adapter.restarts() == 2


def test_python_timeout_and_crash():
    adapter, _ = python_adapter()
    result = run_queries(adapter, entries("SLEEP", "CRASH", "fine"), 5, timeout_s=0.3, warmup=0, known_atoms=KNOWN)
    assert dict(zip(result.failures["query_id"], result.failures["kind"], strict=True)) == {"locomo:conv-1:q0": "timeout", "locomo:conv-1:q1": "crash"}
    assert "RuntimeError" in result.failures["message"].iloc[1]
    assert result.latency["query_id"].tolist() == ["locomo:conv-1:q2"]


def test_failed_queries_stay_in_the_denominator(served_dir):
    adapter = light_command()
    es = entries("apples", "CRASH", "pears")
    result = run_queries(adapter, es, 5, timeout_s=30, warmup=0, known_atoms=KNOWN)
    ent = pd.DataFrame({
        "query_id": [e["query_id"] for e in es], "modality": "conversation", "unanswerable": False,
        "as_of": pd.Timestamp("2023-05-02", tz="UTC"), "holder": "locomo:conv-1", "n_regions": 1,
    })
    atoms = make_atoms()
    gold = pd.DataFrame({"query_id": [e["query_id"] for e in es], "gold_idx": 0, "atom_id": atoms["atom_id"].iloc[0]})
    pq = per_query(ent, result.run, gold, atoms, k=10, failed=result.failed)
    cell = aggregate(pq, result.latency, result.failed)["by_modality"]["conversation"]["recall@10"]
    assert (cell["n"], cell["denominator"], cell["value"]) == (2, 3, pytest.approx(2 / 3))


@pytest.mark.parametrize("word", ["NAN", "UNKNOWN", "DUP", "WRONGTYPE", "RISING"])
def test_malformed_answer_stops_the_run_naming_the_query(served_dir, word):
    es = entries("apples", f"please {word}")
    with pytest.raises(ValueError, match=r"query locomo:conv-1:q1: malformed response"):
        run_queries(light_command(), es, 5, timeout_s=30, warmup=0, known_atoms=KNOWN)
    adapter, _ = python_adapter()
    with pytest.raises(ValueError, match=r"query locomo:conv-1:q1: malformed response"):
        run_queries(adapter, es, 5, warmup=0, known_atoms=KNOWN)


def test_a_system_that_never_answers_is_an_error(served_dir):
    adapter, _ = python_adapter()
    with pytest.raises(RuntimeError, match="none of the 2 warm-up queries"):
        run_queries(adapter, entries("CRASH", "CRASH"), 5, warmup=2, known_atoms=KNOWN)
    bad = CommandAdapter([sys.executable, "-c", "print('hello')"], "bad", startup_timeout=30)
    with pytest.raises(Exception, match="ready"):
        run_queries(bad, entries("x"), 5, known_atoms=KNOWN)


def test_non_json_line_is_malformed(tmp_path):
    script = tmp_path / "noisy.py"
    script.write_text("import sys\nprint('{\"ready\": true}', flush=True)\nfor line in sys.stdin:\n    print('oops', flush=True)\n")
    with pytest.raises(ValueError, match=r"query locomo:conv-1:q0: malformed response: response line is not JSON"):
        run_queries(CommandAdapter([sys.executable, str(script)], "noisy"), entries("x"), 5, warmup=0, known_atoms=KNOWN)


# --------------------------------------------------------------------------- latency and concurrency


class Clock:
    """A fake clock the fake system advances: latency accounting without wall-clock assertions."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TimedSystem:
    name = "timed"

    def __init__(self, clock: Clock, costs: dict[str, float]) -> None:
        self.clock, self.costs, self.calls = clock, costs, 0

    def search(self, query):
        self.calls += 1
        cold = 5.0 if self.calls == 1 else 0.0  # the first call ever pays a 5 s cold start
        self.clock.now += cold + self.costs[query.question]
        if query.question == "CRASH":
            raise RuntimeError("down")
        return []


def test_latency_is_per_call_excludes_warmup_and_failures():
    clock = Clock()
    costs = {"a": 0.010, "b": 0.020, "c": 0.030, "d": 0.040, "CRASH": 1.0}
    system = TimedSystem(clock, costs)
    es = entries("a", "b", "c", "d", "CRASH")
    result = run_queries(PythonAdapter(system, "timed"), es, 5, warmup=1, clock=clock)
    assert system.calls == 1 + 5  # the warm-up absorbed the cold start
    assert result.latency["latency_ms"].tolist() == pytest.approx([10.0, 20.0, 30.0, 40.0])
    assert result.info["warm"] and result.info["warmup_queries"] == 1
    # without warm-up the cold start lands on the first timed query
    clock2 = Clock()
    cold = run_queries(PythonAdapter(TimedSystem(clock2, costs), "timed"), es, 5, warmup=0, clock=clock2)
    assert cold.latency["latency_ms"].iloc[0] == pytest.approx(5010.0) and not cold.info["warm"]
    # n counts the timed, non-failed queries; the failed one stays in the denominator
    ent = pd.DataFrame({"query_id": [e["query_id"] for e in es], "modality": "conversation", "unanswerable": False,
                        "as_of": pd.Timestamp("2023-05-02", tz="UTC"), "holder": "h", "n_regions": 1})
    pq = per_query(ent, result.run, pd.DataFrame(columns=["query_id", "gold_idx", "atom_id"]), make_atoms(), k=10, failed=result.failed)
    cell = aggregate(pq, result.latency, result.failed)["overall"]["latency_p50_ms"]
    assert (cell["value"], cell["n"], cell["denominator"]) == (pytest.approx(25.0), 4, 5)


def test_slow_system_latency_includes_the_wait(served_dir):
    result = run_queries(light_command(), entries("WAIT120 apples", "apples"), 5, warmup=1, known_atoms=KNOWN)
    slow = result.latency.set_index("query_id")["latency_ms"]
    assert slow["locomo:conv-1:q0"] >= 120.0  # a lower bound only: the harness timed the real wait


def test_concurrency_is_bounded_and_does_not_change_results():
    es = entries(*[f"WAIT20 apples {i}" for i in range(12)])
    adapter, fake = python_adapter()
    one = run_queries(adapter, es, 5, concurrency=1, warmup=0, known_atoms=KNOWN)
    assert fake.max_in_flight == 1
    adapter3, fake3 = python_adapter()
    three = run_queries(adapter3, es, 5, concurrency=3, warmup=3, known_atoms=KNOWN)
    assert fake3.max_in_flight <= 3
    pd.testing.assert_frame_equal(one.run, three.run)
    assert three.info["concurrency"] == 3


def test_abstain_and_confidence_are_recorded():
    adapter, _ = python_adapter()
    result = run_queries(adapter, entries("ABSTAIN", "apples"), 5, warmup=0, known_atoms=KNOWN)
    rows = result.latency.set_index("query_id")
    assert bool(rows.loc["locomo:conv-1:q0", "abstain"]) and rows.loc["locomo:conv-1:q0", "confidence"] == 0.1
    assert not bool(rows.loc["locomo:conv-1:q1", "abstain"])


# --------------------------------------------------------------------------- http


def test_http_system_gives_the_same_run_as_in_process(served_dir, tmp_path):
    record = tmp_path / "http.jsonl"
    proc = subprocess.Popen([*serve_argv(served_dir, "--http", "127.0.0.1:0", "--record", str(record))], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        assert ready["ready"] and ready["url"].startswith("http://127.0.0.1:")
        host_port = ready["url"].split("//")[1].rstrip("/")
        assert wait_for_port(host_port.split(":")[0], int(host_port.split(":")[1]), 30)
        es = entries("apples", "CRASH", "pears")
        over_http = run_queries(HttpAdapter(ready["url"], "fake"), es, 5, concurrency=2, warmup=1, known_atoms=KNOWN)
        adapter, _ = python_adapter()
        in_process = run_queries(adapter, es, 5, warmup=1, known_atoms=KNOWN)
        pd.testing.assert_frame_equal(over_http.run, in_process.run)
        assert over_http.failures["kind"].tolist() == ["crash"]  # HTTP 500 fails the query only
        assert "500" in over_http.failures["message"].iloc[0]
        hello, *lines = record.read_text().splitlines()
        assert json.loads(hello) == {"hello": True}  # the adapter's one hello (docs/systems.md, Replay): a plain server
        for line in lines:
            assert tuple(json.loads(line)) == REQUEST_KEYS
    finally:
        proc.terminate()
        proc.wait(timeout=10)
