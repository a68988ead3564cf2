"""A run and its resolved gold, handed to the evaluation one *query block* at a time.

A block is a run of consecutive entries in query_id order (positions ``start`` to
``stop`` of the sorted entry ids) with every run and gold row of those queries. The
evaluation (bench.evaluation.evaluate) computes the per-query columns block by block
and the cross-query steps once, on O(queries) per-query frames.

Two sources:

* :class:`FrameBlocks` -- run and gold already in memory (the in-core evaluation: one
  block; the acceptance run: blocks cut from its frames).
* :class:`DuckDBBlocks` -- run and gold as Parquet files too big to read into pandas.
  DuckDB (bounded by ``memory_limit``, spilling to ``temp_dir``) gives every row its
  query's block number in one pass and writes the rows partitioned by block under
  ``temp_dir``; each block is then read back alone, in (query, rank) order.

:func:`run_blocks` hands the run and its resolved gold (files or frames) to the evaluation as a
block source (the evaluate stage, the acceptance and the fixtures call it). Nothing is decoded here:
atom ids are named only by the writers (bench.reporting.outputs, the TREC files).

:func:`queries_per_block` sizes the blocks from the run's row count and the
``executor.in_core_rows`` threshold (the stage passes it; nothing here reads params).

A killed evaluation leaves its partitioned copy behind. Each copy is a folder
``eval-blocks-<pid>-<random>`` holding a lock file its process keeps locked (``flock``)
while it lives; every new DuckDBBlocks removes the copies in the same parent whose lock
nobody holds (the kernel drops a dead process's locks, so a reused pid changes nothing).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

#: DuckDB's memory bound when the run is read out of core (it spills to a temporary folder beyond it)
DUCKDB_MEMORY = "2GB"

__all__ = ["Block", "BlockSource", "DuckDBBlocks", "FrameBlocks", "block_bounds", "parquet_rows", "queries_per_block", "query_positions"]

#: the name under which a row's query position travels through DuckDB (dropped on reading)
_POS = "_bench_query_pos"
_BLOCK = "_bench_block"


@dataclass(frozen=True)
class Block:
    """Entries ``start`` to ``stop`` (positions in the sorted query ids) and their rows."""

    start: int
    stop: int
    run: pd.DataFrame
    gold: pd.DataFrame


class BlockSource(Protocol):
    """Where the evaluation reads a run and its gold from."""

    def blocks(self, queries: Sequence[str]) -> Iterator[Block]:
        """Blocks of `queries` (the entries' query ids, sorted), in order, covering them all."""
        ...

    def rows_of(self, queries: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(run rows, gold rows) of the given queries only (the drill-down's)."""
        ...

    @property
    def block_count(self) -> int:
        """Blocks handed out by the last :meth:`blocks` (0 before)."""
        ...


def queries_per_block(run_rows: int, n_queries: int, in_core_rows: int) -> int | None:
    """Queries per block so that a block holds about `in_core_rows` run rows; None (one
    block, in memory) when the whole run has no more than `in_core_rows` rows."""
    if in_core_rows < 1:
        raise ValueError("in_core_rows must be >= 1")
    if run_rows <= in_core_rows or n_queries <= 1:
        return None
    per_query = run_rows / n_queries
    return max(1, math.floor(in_core_rows / per_query))


def block_bounds(n_queries: int, per_block: int | None) -> list[tuple[int, int]]:
    """(start, stop) of every block; one block of all queries when `per_block` is None."""
    if per_block is None or n_queries == 0:
        return [(0, n_queries)]
    return [(s, min(s + per_block, n_queries)) for s in range(0, n_queries, per_block)]


def parquet_rows(path: Path) -> int:
    """Rows of a Parquet file, from its footer (nothing else is read)."""
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)


def query_positions(column: pd.Series, queries: Sequence[str]) -> np.ndarray:
    """Position of every row's query id among `queries`; -1 where absent (a categorical
    column is looked up by its categories only)."""
    index = pd.Index(list(queries))
    if isinstance(column.dtype, pd.CategoricalDtype):
        pos = index.get_indexer(column.cat.categories.astype(str))
        codes = column.cat.codes.to_numpy()
        return np.where(codes >= 0, pos[codes] if len(pos) else -1, -1)
    return index.get_indexer(column.astype(str))


class FrameBlocks:
    """Blocks cut from a run and gold held in memory (rows keep their order)."""

    def __init__(self, run: pd.DataFrame, gold: pd.DataFrame, per_block: int | None = None) -> None:
        self.run, self.gold, self.per_block = run, gold, per_block
        self._count = 0

    @property
    def block_count(self) -> int:
        return self._count

    def blocks(self, queries: Sequence[str]) -> Iterator[Block]:
        bounds = block_bounds(len(queries), self.per_block)
        self._count = 0
        if len(bounds) == 1:  # the in-core evaluation: the frames as they are
            self._count = 1
            yield Block(0, len(queries), self.run, self.gold)
            return
        run_block = query_positions(self.run["query_id"], queries) // int(self.per_block or 1)
        gold_block = query_positions(self.gold["query_id"], queries) // int(self.per_block or 1)
        run_rows = _group_rows(run_block, len(bounds))
        gold_rows = _group_rows(gold_block, len(bounds))
        for b, (start, stop) in enumerate(bounds):
            self._count += 1
            yield Block(start, stop, self.run.iloc[run_rows[b]], self.gold.iloc[gold_rows[b]])

    def rows_of(self, queries: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
        wanted = sorted(set(map(str, queries)))  # a categorical query id is looked up by its categories only
        return (self.run.loc[query_positions(self.run["query_id"], wanted) >= 0],
                self.gold.loc[query_positions(self.gold["query_id"], wanted) >= 0])


def _group_rows(block: np.ndarray, n_blocks: int) -> list[np.ndarray]:
    """Row numbers per block (in row order); rows of no block (-1: not an entry) dropped."""
    order = np.argsort(block, kind="stable")
    cuts = np.searchsorted(block[order], np.arange(n_blocks + 1))
    return [order[cuts[b]:cuts[b + 1]] for b in range(n_blocks)]


#: the partitioned copies' folder names (``eval-blocks-<pid>-<random>``) and their lock file
COPY_PREFIX = "eval-blocks-"
LOCK_FILE = ".owner.lock"
#: a copy without a lock file (killed before locking it, or left by an older version) is
#: removed once this old; younger, it may be a run between creating and locking its folder
UNLOCKED_STALE_S = 3600.0


def _hold_lock(path: Path) -> int:
    """An open descriptor holding an exclusive flock on `path` (released when closed or at death)."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def remove_stale_copies(parent: Path) -> list[str]:
    """Remove the copies under `parent` whose owner died (its lock is free, or it has none
    and is older than UNLOCKED_STALE_S); return their names."""
    import fcntl
    import time

    removed = []
    for folder in sorted(parent.glob(f"{COPY_PREFIX}*")):
        if not folder.is_dir() or folder.is_symlink():
            continue
        try:
            fd = os.open(folder / LOCK_FILE, os.O_RDWR)
        except FileNotFoundError:
            fd = None
            if time.time() - folder.stat().st_mtime < UNLOCKED_STALE_S:
                continue
        except OSError:
            continue
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # held: its evaluation is running
                os.close(fd)
                continue
        with contextlib.suppress(OSError):
            shutil.rmtree(folder)
            removed.append(folder.name)
        if fd is not None:
            os.close(fd)
    return removed


class DuckDBBlocks:
    """Blocks of a run and gold read out of core by DuckDB; a context manager (the
    partitioned copy under ``temp_dir`` is removed on exit).

    Run rows come in (query, rank) order, gold rows in query order."""

    def __init__(self, run_path: Path, gold_path: Path, per_block: int, *, temp_dir: Path | None = None,
                 memory_limit: str = DUCKDB_MEMORY, threads: int | None = None) -> None:
        if per_block < 1:
            raise ValueError("per_block must be >= 1")
        self.run_path, self.gold_path, self.per_block = Path(run_path), Path(gold_path), int(per_block)
        self.memory_limit, self.threads = memory_limit, threads
        self._parent = temp_dir
        self._dir: Path | None = None
        self._lock: int | None = None
        self._count = 0
        self.removed_stale: list[str] = []  # copies left by killed runs, removed on entering

    def __enter__(self) -> DuckDBBlocks:
        parent = Path(self._parent if self._parent is not None else tempfile.gettempdir())
        parent.mkdir(parents=True, exist_ok=True)
        self.removed_stale = remove_stale_copies(parent)
        self._dir = Path(tempfile.mkdtemp(prefix=f"{COPY_PREFIX}{os.getpid()}-", dir=parent))
        self._lock = _hold_lock(self._dir / LOCK_FILE)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    @property
    def block_count(self) -> int:
        return self._count

    def _connect(self) -> Any:
        import duckdb

        if self._dir is None:
            raise RuntimeError("DuckDBBlocks is used outside its `with` block")
        con = duckdb.connect(config={"memory_limit": self.memory_limit, "temp_directory": str(self._dir / "spill"),
                                     "preserve_insertion_order": False, **({"threads": self.threads} if self.threads else {})})
        return con

    def blocks(self, queries: Sequence[str]) -> Iterator[Block]:
        bounds = block_bounds(len(queries), self.per_block)
        self._count = 0
        con = self._connect()
        try:
            con.register("bench_queries", pd.DataFrame({"query_id": pd.Series(list(queries), dtype=object),
                                                        _POS: np.arange(len(queries), dtype=np.int64)}))
            parts = {}
            for name, path in (("run", self.run_path), ("gold", self.gold_path)):
                out = self._dir / name  # type: ignore[operator]
                # one pass: every row gets its query's position and block; rows of no entry are dropped
                con.execute(
                    f"COPY (SELECT r.*, q.{_POS}, q.{_POS} // {self.per_block} AS {_BLOCK} "
                    f"FROM read_parquet(?) r JOIN bench_queries q ON CAST(r.query_id AS VARCHAR) = q.query_id) "
                    f"TO '{_sql_path(out)}' (FORMAT parquet, PARTITION_BY ({_BLOCK}))", [str(path)])
                empty = con.execute("SELECT * FROM read_parquet(?) LIMIT 0", [str(path)]).df()
                parts[name] = (out, empty)
            for b, (start, stop) in enumerate(bounds):
                frames = [self._read(con, out, b, empty, queries[start:stop], order)
                          for (out, empty), order in ((parts["run"], ", rank"), (parts["gold"], ""))]
                self._count += 1
                yield Block(start, stop, frames[0], frames[1])
        finally:
            con.close()

    def _read(self, con: Any, out: Path, b: int, empty: pd.DataFrame, queries: Sequence[str], order: str) -> pd.DataFrame:
        folder = out / f"{_BLOCK}={b}"
        if folder.is_dir():
            frame = con.execute(f"SELECT * EXCLUDE ({_POS}) FROM read_parquet(?, hive_partitioning = false) "
                                f"ORDER BY {_POS}{order}", [str(folder / "*.parquet")]).df()
            if _BLOCK in frame.columns:
                frame = frame.drop(columns=_BLOCK)
        else:
            frame = empty
        return _like(frame, empty, queries)

    def rows_of(self, queries: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
        con = self._connect()
        try:
            wanted = sorted(set(map(str, queries)))
            con.register("bench_wanted", pd.DataFrame({"query_id": pd.Series(wanted, dtype=object)}))
            frames = []
            for path, order in ((self.run_path, ", rank"), (self.gold_path, "")):
                frame = con.execute("SELECT r.* FROM read_parquet(?) r SEMI JOIN bench_wanted w ON CAST(r.query_id AS VARCHAR) = w.query_id "
                                    f"ORDER BY CAST(r.query_id AS VARCHAR){order}", [str(path)]).df()
                empty = con.execute("SELECT * FROM read_parquet(?) LIMIT 0", [str(path)]).df()
                frames.append(_like(frame, empty, wanted))
            return frames[0], frames[1]
        finally:
            con.close()


def _like(frame: pd.DataFrame, empty: pd.DataFrame, queries: Sequence[str]) -> pd.DataFrame:
    """`frame` with the columns of the source file and query ids as a categorical over
    `queries` (as the stages write them)."""
    frame = frame[list(empty.columns)].reset_index(drop=True)
    frame["query_id"] = pd.Categorical(frame["query_id"].astype(str), categories=pd.Index(list(queries), dtype=str))
    return frame


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")



@dataclass(frozen=True)
class RunBlocks:
    """Where the evaluation reads the run from, and how it was cut."""

    source: BlockSource
    run_rows: int
    per_block: int | None  # queries per block; None: in core, one block

    def describe(self, in_core_rows: int) -> str | None:
        """The line the stage prints for an out-of-core evaluation (None in core)."""
        if self.per_block is None:
            return None
        return (f"out of core: {self.run_rows} run rows > executor.in_core_rows {in_core_rows}: "
                f"{self.source.block_count} query blocks of <= {self.per_block} queries")


@contextlib.contextmanager
def run_blocks(run: Path | pd.DataFrame, gold: Path | pd.DataFrame, n_queries: int, in_core_rows: int,
               memory_limit: str = DUCKDB_MEMORY) -> Iterator[RunBlocks]:
    """The run and gold (Parquet files as retrieve and resolve write them, or frames of the
    same columns) as a block source for the evaluation; a context manager (DuckDB's copy
    is removed on exit)."""
    rows = parquet_rows(run) if isinstance(run, Path) else len(run)
    per_block = queries_per_block(rows, n_queries, in_core_rows)
    if isinstance(run, Path) and isinstance(gold, Path):
        if per_block is None:
            yield RunBlocks(FrameBlocks(pd.read_parquet(run), pd.read_parquet(gold)), rows, None)
            return
        with DuckDBBlocks(run, gold, per_block, memory_limit=memory_limit) as source:
            yield RunBlocks(source, rows, per_block)
        return
    if isinstance(run, Path) or isinstance(gold, Path):
        raise ValueError("run and gold are both files or both frames")
    yield RunBlocks(FrameBlocks(run, gold, per_block), rows, per_block)
