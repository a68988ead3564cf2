"""bench.executor: ordered, identical results on every executor; worker death handled.

Real work on the real mirror: the PDF text layer of MMLongBench-Doc documents
(bench.modalities.pdf.mmlongbench's per-source task). The Dask clusters are
LocalClusters of worker processes on loopback, started here.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from bench.executor import ExecutorError, SerialExecutor, active, current, open_executor, using
from tests.conftest import MIRROR, need_mirror

DOCS = MIRROR / "mmlongbench-doc" / "data" / "documents"


def _jobs(n: int) -> list[tuple[str, str]]:
    need_mirror("mmlongbench-doc")
    paths = sorted(DOCS.glob("*.pdf"))[:n]
    return [(str(p), f"mmlongbench:{p.name}") for p in paths]


def _text_layer(job: tuple[str, str]) -> list[dict]:
    from bench.modalities.pdf.mmlongbench import extract_job

    return extract_job(job)


def _die_on(job: tuple[str, str]) -> list[dict]:
    """The text layer, except that the process running the task dies on a `.poison` job."""
    if job[1].endswith(".poison"):
        os.kill(os.getpid(), signal.SIGKILL)
    return _text_layer(job)


def _fail_on(job: tuple[str, str]) -> list[dict]:
    if job[1].endswith(".bad"):
        raise ValueError(f"cannot read {job[1]}")
    return _text_layer(job)


@pytest.fixture(scope="module")
def serial_result() -> tuple[list[tuple[str, str]], list[list[dict]]]:
    jobs = _jobs(12)
    return jobs, SerialExecutor().map(_text_layer, jobs)


def test_local_pool_equals_serial_in_input_order(serial_result) -> None:
    jobs, expected = serial_result
    seen: list[int] = []
    with open_executor("local", None, 2) as ex:
        assert ex.kind == "local" and ex.workers == 2
        got = ex.map(_text_layer, jobs, done=lambda i, _r: seen.append(i))
    assert got == expected
    assert sorted(seen) == list(range(len(jobs)))
    assert [doc[0]["source_id"] for doc in got] == [j[1] for j in jobs]


def test_task_error_is_raised_unchanged(serial_result) -> None:
    jobs, _ = serial_result
    bad = [*jobs[:3], (jobs[0][0], "mmlongbench:x.bad"), *jobs[3:5]]
    with open_executor("local", None, 2) as ex, pytest.raises(ValueError, match=r"cannot read mmlongbench:x\.bad"):
        ex.map(_fail_on, bad)


def test_local_worker_death_fails_naming_the_source(serial_result) -> None:
    jobs, _ = serial_result
    poisoned = [*jobs[:3], (jobs[0][0], "mmlongbench:victim.poison"), *jobs[3:6]]
    with open_executor("local", None, 2) as ex:
        with pytest.raises(ExecutorError) as info:
            ex.map(_die_on, poisoned, label="pdf text layer", describe=lambda job: job[1])
        # the pool is replaced: the next map works
        assert ex.map(_text_layer, jobs[:3]) == SerialExecutor().map(_text_layer, jobs[:3])
    message = str(info.value)
    assert "\n" not in message and message.startswith("pdf text layer: ") and "died" in message
    # every pending task of a broken pool fails; the first in input order is named, and
    # it is at or before the poisoned one
    assert any(j[1] in message for j in poisoned[:4])


def test_active_and_using() -> None:
    assert current() is None
    with active(1) as ex:
        assert ex.workers == 1  # outside a stage: a local pool of the given size
    serial = SerialExecutor()
    with using(serial):
        assert current() is serial
        with active() as ex:
            assert ex is serial
        with active(2) as ex:
            assert ex is not serial and ex.workers == 2  # an explicit size wins
    assert current() is None


def test_bad_kind_and_size() -> None:
    with pytest.raises(ExecutorError, match="kind"), open_executor("spark"):
        pass
    with pytest.raises(ExecutorError, match="workers"), open_executor("local", None, 0):
        pass


@pytest.mark.e2e
def test_dask_equals_serial_and_survives_a_killed_worker(serial_result) -> None:
    """A worker process killed in the middle of the map: Dask re-runs its tasks on the
    other worker (the nanny restarts the dead one) and the results are identical."""
    jobs, expected = serial_result
    jobs = jobs * 3  # long enough to kill a worker mid-way
    expected = expected * 3
    with open_executor("dask", None, 2) as ex:
        assert ex.kind == "dask" and ex.workers == 2
        assert ex.map(_text_layer, jobs[:12]) == expected[:12]
        ex.window = 3  # type: ignore[attr-defined]  # at most 3 tasks on the cluster: order still kept
        assert ex.map(_text_layer, jobs[:12]) == expected[:12]
        ex.window = 4096  # type: ignore[attr-defined]
        pids = ex.client.run(os.getpid)  # type: ignore[attr-defined]
        assert len(pids) == 2
        victim = min(pids.values())
        done: list[int] = []
        killed = threading.Event()

        def on_done(i: int, _rows: list[dict]) -> None:
            done.append(i)
            if len(done) == 3 and not killed.is_set():
                os.kill(victim, signal.SIGKILL)
                killed.set()

        got = ex.map(_text_layer, jobs, done=on_done)
        assert killed.is_set() and len(done) == len(jobs)
        assert got == expected
        deadline = time.monotonic() + 60
        while len(ex.client.run(os.getpid)) < 2 and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.5)
        after = ex.client.run(os.getpid)  # type: ignore[attr-defined]
        assert victim not in after.values() and len(after) == 2  # replaced


@pytest.mark.e2e
def test_dask_task_that_kills_every_worker_fails_naming_the_source(serial_result) -> None:
    import dask

    jobs, _ = serial_result
    poisoned = [*jobs[:2], (jobs[0][0], "mmlongbench:victim.poison")]
    with (dask.config.set({"distributed.scheduler.allowed-failures": 1}), open_executor("dask", None, 2) as ex,
          pytest.raises(ExecutorError) as info):
        ex.map(_die_on, poisoned, label="pdf text layer", describe=lambda job: job[1])
    message = str(info.value)
    assert "\n" not in message and "mmlongbench:victim.poison" in message and message.startswith("pdf text layer: ")


def test_dask_unreachable_scheduler_is_one_line() -> None:
    import dask

    with (dask.config.set({"distributed.comm.timeouts.connect": "2s"}),
          pytest.raises(ExecutorError, match=r"tcp://127\.0\.0\.1:9: cannot reach the dask scheduler"),
          open_executor("dask", "tcp://127.0.0.1:9", None)):
        pass


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("tcp://127.0.0.1:notaport", "port 'notaport' is not a number in 1..65535"),
        ("tcp://127.0.0.1:70000", "port '70000' is not a number in 1..65535"),
        ("127.0.0.1:8786", "must be tcp:// or tls://host:port (e.g. tcp://127.0.0.1:8786)"),
        ("tcp://:8786", "has no host:port after the scheme (e.g. tcp://127.0.0.1:8786)"),
    ],
)
def test_bad_dask_address_names_executor_address(address: str, problem: str) -> None:
    """The probe `executor.address: tcp://127.0.0.1:notaport` used to end in chunk's
    "params.yaml chunking: invalid literal for int()": the message now names the field,
    before any cluster is reached."""
    with pytest.raises(ExecutorError) as info, open_executor("dask", address, None):
        pass
    assert str(info.value) == f"params.yaml executor.address {address!r}: {problem}"

