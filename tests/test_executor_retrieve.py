"""Queries of a Python system on Dask workers (bench.systems.run with an executor of kind dask):
the same run, failures and abstentions as in process; latency timed on the worker; a
system that cannot be pickled is answered in process. LocalCluster started here."""

from __future__ import annotations

import threading
from typing import Any

import pandas as pd
import pytest

from bench.executor import open_executor
from bench.systems.adapters.external import PythonAdapter
from bench.systems.run import run_queries
from tests.systems.conftest import entry, make_atoms
from tests.systems.fake import Fake

pytestmark = pytest.mark.e2e

KNOWN = set(make_atoms()["atom_id"])


class PicklableFake(Fake):
    """The robustness fake without its lock when pickled (a worker gets its own)."""

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lock = threading.Lock()


def _entries(*questions: str) -> list[dict]:
    return [entry(f"locomo:conv-1:q{i}", q) for i, q in enumerate(questions)]


@pytest.fixture(scope="module")
def dask_executor() -> Any:
    with open_executor("dask", None, 2) as ex:
        yield ex


def test_queries_on_dask_equal_in_process(dask_executor: Any) -> None:
    es = _entries("apples", "pears", "SLEEP", "CRASH", "WAIT150 pears", *[f"apples {i}" for i in range(8)])
    here = run_queries(PythonAdapter(PicklableFake(make_atoms()), "fake"), es, 5, timeout_s=1.0, warmup=2, known_atoms=KNOWN)
    there = run_queries(PythonAdapter(PicklableFake(make_atoms()), "fake"), es, 5, timeout_s=1.0, warmup=2, known_atoms=KNOWN,
                        executor=dask_executor)
    assert (here.info["answered_on"], there.info["answered_on"]) == ("here", "dask workers")
    assert there.info["in_flight"] == 2  # one query in flight per worker at least
    pd.testing.assert_frame_equal(here.run, there.run)
    pd.testing.assert_frame_equal(here.failures[["query_id", "kind"]], there.failures[["query_id", "kind"]])
    assert dict(zip(there.failures["query_id"], there.failures["kind"], strict=True)) == {"locomo:conv-1:q2": "timeout", "locomo:conv-1:q3": "crash"}
    cols = ["query_id", "n_returned", "abstain"]
    pd.testing.assert_frame_equal(here.latency[cols], there.latency[cols])
    slow = there.latency.set_index("query_id")["latency_ms"]
    assert slow["locomo:conv-1:q4"] >= 150.0  # timed on the worker around the real wait


def test_unpicklable_system_is_answered_in_process(dask_executor: Any) -> None:
    fake = Fake(make_atoms())  # holds a threading.Lock: cannot be sent
    result = run_queries(PythonAdapter(fake, "fake"), _entries("apples", "pears"), 5, warmup=0, known_atoms=KNOWN, executor=dask_executor)
    assert result.info["answered_on"].startswith("here (the system cannot be sent to the workers")
    assert len(fake.queries) == 2 and result.info["failed"] == 0
