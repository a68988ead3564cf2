"""One seam for running work in parallel: a local process pool or a Dask cluster.

    with open_executor("local", None, None) as ex:       # a process pool, one per core
        results = ex.map(fn, items, label="ocr", describe=str)
    with open_executor("dask", "tcp://sched:8786", None) as ex:   # an existing cluster
    with open_executor("dask", None, 2) as ex:            # a LocalCluster of 2 worker processes

`Executor.map(fn, items)` returns `[fn(x) for x in items]`, in input order whatever
the completion order, so results never depend on the executor or its size. `fn`
must be a module-level function (pickled by reference: a Dask worker imports it, so
workers need the project code and the same Python environment) and its items and
results picklable.

Failures:

* an exception raised by `fn` is re-raised in the caller unchanged (the first in input
  order among those seen), so callers that retry per item keep working;
* a worker *process* that dies: on Dask the scheduler re-runs its tasks on the other
  workers (a LocalCluster's nanny, or `dask worker`'s, also restarts it); a task that
  kills more than `distributed.scheduler.allowed-failures` (3) workers, or a local
  pool whose process died, stops the map with `ExecutorError`, one line naming the
  items (`describe(item)`) that were running. Callers write their outputs only after
  `map` returned, so nothing is half-written.

Tasks of one map run one at a time per worker *process* (a process-wide lock): pdfium
and the OCR engine are not thread-safe, so a Dask worker started with several threads
uses one of them (start workers with `--nthreads 1`; docs/scale.md, "Running on a cluster").

`current()` is the executor the running stage opened (`using(ex)`), or None; code
deep inside a data set's extraction (PDF text layers, OCR) maps through
`active(workers)`: that executor, or without one a local pool for the call, so the
executor need not be threaded through every plug-in's signature. This module
reads no params and no environment; stages pass kind, address and workers in.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")

KINDS = ("local", "dask")


class ExecutorError(RuntimeError):
    """A map could not complete (a worker died, the cluster is unreachable); str() is one line."""


class Executor(Protocol):
    kind: str

    @property
    def workers(self) -> int:
        """Processes tasks run in at once (1: serial in the caller)."""
        ...

    def map(self, fn: Callable[[T], R], items: Sequence[T], *, label: str = "tasks",
            describe: Callable[[T], str] = repr, done: Callable[[int, R], None] | None = None) -> list[R]:
        """[fn(x) for x in items], in input order (see the module docstring); `done(i, result)`
        is called in the caller as each item finishes (in completion order), e.g. to
        advance a progress bar or to store a result at once."""
        ...


_process_lock = threading.Lock()


def _serialized(fn: Callable[[T], R], item: T) -> R:
    """Run one task holding this process's lock (one task at a time per worker process)."""
    with _process_lock:
        return fn(item)


@dataclass
class SerialExecutor:
    """Every task in the calling process, in order (the default outside a stage)."""

    kind: str = "serial"

    @property
    def workers(self) -> int:
        return 1

    def map(self, fn: Callable[[T], R], items: Sequence[T], *, label: str = "tasks",
            describe: Callable[[T], str] = repr, done: Callable[[int, R], None] | None = None) -> list[R]:
        out: list[R] = []
        for i, item in enumerate(items):
            out.append(fn(item))
            if done is not None:
                done(i, out[-1])
        return out


@dataclass
class LocalExecutor:
    """A pool of `size` forked worker processes, started at the first map and reused.

    fork, not spawn: spawn re-runs the caller's __main__, which breaks scripts without
    a main guard. A map of fewer than two items, or a pool of one, runs in the caller.
    """

    size: int
    kind: str = "local"
    _pool: ProcessPoolExecutor | None = field(default=None, repr=False)

    @property
    def workers(self) -> int:
        return self.size

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            from multiprocessing import get_context

            self._pool = ProcessPoolExecutor(max_workers=self.size, mp_context=get_context("fork"))
        return self._pool

    def map(self, fn: Callable[[T], R], items: Sequence[T], *, label: str = "tasks",
            describe: Callable[[T], str] = repr, done: Callable[[int, R], None] | None = None) -> list[R]:
        if self.size <= 1 or len(items) <= 1:
            return SerialExecutor().map(fn, items, label=label, describe=describe, done=done)
        pool = self._get_pool()
        results: list[Any] = [None] * len(items)
        errors: dict[int, BaseException] = {}
        try:
            pending = {pool.submit(fn, item): i for i, item in enumerate(items)}
        except BrokenProcessPool:
            self.close()
            raise ExecutorError(f"{label}: the local worker pool is broken (a worker process died earlier)") from None
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                i = pending.pop(fut)
                exc = fut.exception()
                if exc is None:
                    results[i] = fut.result()
                    if done is not None:
                        done(i, results[i])
                else:
                    errors[i] = exc
        if errors:
            first = min(errors)
            exc = errors[first]
            if isinstance(exc, BrokenProcessPool):
                self.close()
                raise ExecutorError(f"{label}: a local worker process died while running {describe(items[first])}; nothing was written") from None
            raise exc
        return results

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


@dataclass
class DaskExecutor:
    """Tasks on a dask.distributed cluster through `client` (one task per item).

    At most `window` tasks are on the cluster at once; the next item is submitted as
    one finishes, so a map over millions of items keeps the scheduler's and this
    process's bookkeeping bounded (4096 keeps a thousand workers busy with tasks of a
    second). After the first failure nothing more is submitted; the tasks in flight
    finish, then the failure is raised.
    """

    client: Any
    kind: str = "dask"
    window: int = 4096

    @property
    def workers(self) -> int:
        return max(1, len(self.client.scheduler_info(n_workers=-1).get("workers", {})))

    def map(self, fn: Callable[[T], R], items: Sequence[T], *, label: str = "tasks",
            describe: Callable[[T], str] = repr, done: Callable[[int, R], None] | None = None) -> list[R]:
        if not items:
            return []
        from distributed import as_completed

        results: list[Any] = [None] * len(items)
        errors: dict[int, BaseException] = {}
        index: dict[Any, int] = {}
        live: dict[Any, Any] = {}
        queue = as_completed()
        upcoming = iter(range(len(items)))

        def submit_next() -> None:
            i = next(upcoming, None)
            if i is None:
                return
            # pure=False: every task runs (no reuse of results by key across maps or runs)
            fut = self.client.submit(_serialized, fn, items[i], pure=False)
            index[fut.key] = i
            live[fut.key] = fut
            queue.add(fut)

        for _ in range(max(1, self.window)):
            submit_next()
        for fut in queue:
            i = index[fut.key]
            live.pop(fut.key, None)
            if fut.status == "finished":
                results[i] = fut.result()
                if done is not None:
                    done(i, results[i])
                if not errors:
                    submit_next()
            else:
                errors[i] = fut.exception()
        if errors:
            for fut in live.values():
                fut.cancel()
            _raise_failures(errors, items, label, describe)
        return results


def _raise_failures(errors: Mapping[int, BaseException | None], items: Sequence[T], label: str, describe: Callable[[T], str]) -> None:
    """Raise the failure of a dask map: dead workers named, else the first task error unchanged."""
    from distributed.scheduler import KilledWorker

    # a future cancelled or lost while another failed carries no exception (None)
    raised = {i: e for i, e in errors.items() if isinstance(e, BaseException)}
    killed = [describe(items[i]) for i in sorted(raised) if isinstance(raised[i], KilledWorker)]
    if killed:
        # the tasks a dying worker held all count a death; the one that kills is among them
        shown = ", ".join(killed[:5]) + (f" and {len(killed) - 5} more" if len(killed) > 5 else "")
        raise ExecutorError(f"{label}: dask workers died while running {shown} (each task was retried "
                            "on other workers, which died too); nothing was written") from None
    if raised:
        raise raised[min(raised)]
    shown = ", ".join(describe(items[i]) for i in sorted(errors)[:5])
    raise ExecutorError(f"{label}: dask tasks for {shown} ended without a result; nothing was written")


#: the schemes of a dask scheduler address this harness connects to
SCHEMES = ("tcp", "tls")


def address_problem(address: str) -> str | None:
    """Why `address` is no dask scheduler address scheme://host:port (params executor.address), or None."""
    scheme, sep, rest = address.partition("://")
    if not sep or scheme not in SCHEMES:
        return f"must be {' or '.join(s + '://' for s in SCHEMES)}host:port (e.g. tcp://127.0.0.1:8786)"
    host, colon, port = rest.rpartition(":")
    if not colon or not host.strip("[]"):
        return "has no host:port after the scheme (e.g. tcp://127.0.0.1:8786)"
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        return f"port {port!r} is not a number in 1..65535"
    return None


def default_workers() -> int:
    """One worker per usable core."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def open_executor(kind: str = "local", address: str | None = None, workers: int | None = None) -> Iterator[Executor]:
    """An executor for the duration of the block (params.yaml `executor`).

    kind `local`: a process pool of `workers` (None: one per core). kind `dask`: a
    client of the scheduler at `address` (tcp://host:8786), or with address None a
    LocalCluster of `workers` single-threaded worker processes on loopback, closed at
    the end. Dask is imported only for kind `dask`.
    """
    if kind not in KINDS:
        raise ExecutorError(f"executor kind must be one of {list(KINDS)}, got {kind!r}")
    if workers is not None and workers < 1:
        raise ExecutorError(f"executor workers must be >= 1, got {workers}")
    problem = address_problem(address) if kind == "dask" and address is not None else None
    if problem:
        raise ExecutorError(f"params.yaml executor.address {address!r}: {problem}")
    if kind == "local":
        local = LocalExecutor(workers or default_workers())
        try:
            yield local
        finally:
            local.close()
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover - dask[distributed] is a dependency
        raise ExecutorError(f"executor kind dask needs dask[distributed] ({exc})") from None
    with contextlib.ExitStack() as stack:
        if address is None:
            cluster = stack.enter_context(LocalCluster(
                n_workers=workers or default_workers(), threads_per_worker=1, processes=True,
                host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=40,
            ))
            client = stack.enter_context(Client(cluster))
        else:
            try:
                client = stack.enter_context(Client(address))
            except (OSError, TimeoutError, ValueError) as exc:
                raise ExecutorError(f"params.yaml executor.address {address}: cannot reach the dask scheduler ({' '.join(str(exc).split())})") from None
        yield DaskExecutor(client)


_current: list[Executor] = []


def current() -> Executor | None:
    """The executor set by the innermost `using` block, or None."""
    return _current[-1] if _current else None


@contextlib.contextmanager
def active(workers: int | None = None) -> Iterator[Executor]:
    """The executor to map through: `current()` when a stage set one and `workers` is None,
    else a local pool of `workers` (None: one per core) for the block."""
    ex = current()
    if ex is not None and workers is None:
        yield ex
        return
    with open_executor("local", None, workers) as local:
        yield local


@contextlib.contextmanager
def using(executor: Executor) -> Iterator[Executor]:
    """Make `executor` what `current()` returns inside the block."""
    _current.append(executor)
    try:
        yield executor
    finally:
        _current.remove(executor)


__all__ = ["KINDS", "DaskExecutor", "Executor", "ExecutorError", "LocalExecutor", "SerialExecutor", "active", "current",
           "default_workers", "open_executor", "using"]
