"""Progress of long steps, on stderr only (never in any output file).

    with progress.bar(total=len(files), label="extract mmlongbench", unit="files") as bar:
        for f in files:
            ...
            bar.advance()          # or bar.advance(failed=1) for a failed item

On a terminal a rich progress bar is redrawn in place (done/total, rate, time left).
When stderr is not a terminal (DVC logs, CI, pipes) one plain line is printed when
the step starts, then at most one every `interval_s` seconds, and one when it ends:

    extract mmlongbench: ocr pages: 120/631 pages (19%), 1.8 pages/s, ~4m44s left

`configure(interval_s=..., enabled=...)` is called by the stages (the core reads no
environment or params); `scope(name)` prefixes the labels of the bars opened inside
it (the extract stage names the data set that way).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

#: seconds between two plain lines when stderr is not a terminal
DEFAULT_INTERVAL_S = 5.0

_settings: dict[str, Any] = {"interval_s": DEFAULT_INTERVAL_S, "enabled": True, "stream": None, "terminal": None}
_scopes: list[str] = []
_rich_lock = threading.Lock()
_rich: dict[str, Any] = {"progress": None, "open": 0}


def configure(interval_s: float | None = None, enabled: bool | None = None, stream: IO[str] | None = None,
              terminal: bool | None = None) -> None:
    """Set the plain-line interval, switch progress off, or send it to another stream.

    `terminal` forces (True) or forbids (False) redrawn bars; None asks the stream.
    """
    if interval_s is not None:
        if interval_s < 0:
            raise ValueError(f"progress interval must be >= 0 seconds, got {interval_s}")
        _settings["interval_s"] = float(interval_s)
    if enabled is not None:
        _settings["enabled"] = bool(enabled)
    if stream is not None:
        _settings["stream"] = stream
    _settings["terminal"] = terminal


@contextlib.contextmanager
def scope(name: str) -> Iterator[None]:
    """Prefix every bar opened inside with `name` (e.g. the data set being extracted)."""
    _scopes.append(name)
    try:
        yield
    finally:
        _scopes.pop()


def duration(seconds: float) -> str:
    """12s, 4m05s, 1h02m."""
    s = round(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class Bar:
    """Counts done (and failed) items of one step and shows it; thread-safe."""

    def __init__(self, total: int, label: str, unit: str = "items", count_failed: bool = False,
                 clock: Any = time.monotonic) -> None:
        self.total = max(0, int(total))
        self.label = ": ".join([*_scopes, label])
        self.unit = unit
        self.count_failed = count_failed
        self.done = 0
        self.failed = 0
        self._clock = clock
        self._lock = threading.Lock()
        self._start = clock()
        self._last_line = self._start
        self._closed = False
        self._stream: IO[str] = _settings["stream"] or sys.stderr
        self._on = bool(_settings["enabled"]) and self.total > 0
        terminal = _settings["terminal"]
        if terminal is None:
            terminal = bool(getattr(self._stream, "isatty", lambda: False)())
        self._task: Any = None
        if self._on and terminal:
            self._open_rich()
        elif self._on:
            self._line(final=False)

    # -- rich (terminal) ----------------------------------------------------------------

    def _open_rich(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

        with _rich_lock:
            if _rich["progress"] is None:
                bar_view = Progress(
                    TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[unit]}"),
                    TaskProgressColumn(), TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
                    console=Console(file=self._stream), transient=False,
                )
                bar_view.start()
                _rich["progress"] = bar_view
            _rich["open"] += 1
            self._task = _rich["progress"].add_task(self.label, total=self.total, unit=self.unit, rate="")

    def _update_rich(self) -> None:
        elapsed = max(self._clock() - self._start, 1e-9)
        desc = self.label + (f" ({self.failed} failed)" if self.count_failed else "")
        _rich["progress"].update(self._task, completed=self.done, description=desc,
                                 rate=f"{self.done / elapsed:.2f} {self.unit}/s")

    def _close_rich(self) -> None:
        with _rich_lock:
            self._update_rich()
            _rich["open"] -= 1
            if _rich["open"] == 0:
                _rich["progress"].stop()
                _rich["progress"] = None

    # -- plain lines (not a terminal) -------------------------------------------------------

    def _line(self, final: bool) -> None:
        elapsed = self._clock() - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        pct = 100.0 * self.done / self.total if self.total else 100.0
        failed = f", {self.failed} failed" if self.count_failed else ""
        head = f"{self.label}: {self.done}/{self.total} {self.unit}"
        if final:
            # a rate over less than a second (e.g. everything from a cache) says nothing
            speed = f" ({rate:.2f} {self.unit}/s)" if elapsed >= 1.0 else ""
            text = f"{head} in {duration(elapsed)}{speed}{failed}"
        elif self.done == 0:
            text = f"{head} (started)"
        else:
            left = (self.total - self.done) / rate if rate > 0 else float("inf")
            eta = duration(left) if left != float("inf") else "?"
            text = f"{head} ({pct:.0f}%), {rate:.2f} {self.unit}/s, ~{eta} left{failed}"
        self._stream.write(text + "\n")
        self._stream.flush()

    # -- public -------------------------------------------------------------------------------

    def advance(self, n: int = 1, failed: int = 0) -> None:
        """`n` more items done, `failed` of them failed."""
        with self._lock:
            self.done += n
            self.failed += failed
            if not self._on or self._closed:
                return
            if self._task is not None:
                self._update_rich()
                return
            now = self._clock()
            if now - self._last_line >= _settings["interval_s"] and self.done < self.total:
                self._last_line = now
                self._line(final=False)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if not self._on:
                return
            if self._task is not None:
                self._close_rich()
            else:
                self._line(final=True)

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bar(total: int, label: str, unit: str = "items", count_failed: bool = False) -> Bar:
    """A progress bar for `total` items of one step (see the module docstring)."""
    return Bar(total, label, unit, count_failed)
