"""File helpers shared by every stage: hashing, atomic writes, strict JSONL reading.

Every output of the harness goes through `atomic_writer`, so a crash or a kill -9
leaves either the old file or the new one, never a truncated file. Inside
`atomic_outputs`, a stage's files change together or not at all: each is written
whole beside its target, and all are swapped in only when the block succeeds. A full
disk (ENOSPC, EDQUOT) is a :class:`DiskFull`, one line naming the file.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import gc
import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click
import pandas as pd

HASH_CHUNK = 1 << 20


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_readable(path: str | os.PathLike) -> None:
    """mkstemp creates 0600 files; give outputs the usual umask-based mode instead."""
    os.chmod(path, 0o666 & ~_umask())


def make_readable_dir(path: str | os.PathLike) -> None:
    """mkdtemp creates 0700 folders; give output folders the usual umask-based mode instead."""
    os.chmod(path, 0o777 & ~_umask())


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(HASH_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def digest_paths(paths: Iterable[Path], root: Path) -> str:
    """sha256 over every file under `paths` (files or folders, walked in sorted order):
    each file's path relative to `root` and its sha256; a missing path counts as such."""
    h = hashlib.sha256()
    for path in paths:
        files = sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
        for f in files:
            digest = sha256_file(f) if f.is_file() else "missing"
            h.update(f"{f.relative_to(root).as_posix()}\0{digest}\n".encode())
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: errors of a full disk or an exhausted quota
FULL = (errno.ENOSPC, errno.EDQUOT)


class DiskFull(OSError, click.ClickException):
    """No space left while writing an output; str() is one line naming the file.

    Also a click exception: a stage (a click command) that does not catch it ends with
    that one line on stderr and exit 1, never a traceback."""

    exit_code = 1

    def __init__(self, target: Path, cause: OSError) -> None:
        OSError.__init__(self, cause.errno, cause.strerror)
        self.target = target
        self.note = ""

    def __str__(self) -> str:
        try:
            shown = os.path.relpath(self.target)
        except ValueError:
            shown = str(self.target)
        shown = str(self.target) if shown.startswith("..") else shown
        code = errno.errorcode.get(self.errno or 0, str(self.errno))
        return f"{shown}: no space left on device ({code}) while writing it; the file was left as it was{self.note}"

    def format_message(self) -> str:
        return str(self)

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self}", err=True, file=file)


#: the (temp file, target) pairs of the enclosing atomic_outputs block, None outside one
_STAGED: contextvars.ContextVar[list[tuple[Path, Path]] | None] = contextvars.ContextVar("bench_io_staged", default=None)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building large lists of new objects.

    Each 700 new containers would otherwise start a collection, and every tenth of those
    walks every tracked object (a million atom rows, a run's 800k hits); the collector
    runs again as usual afterwards.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """A temp file beside `path` to fill; on success it is fsynced, given the umask's mode
    and renamed over `path` (inside `atomic_outputs`: when that block succeeds); on any
    failure it is removed and `path` stays as it was. The one atomic-write rule: every
    writer of an output goes through it. A full disk raises DiskFull naming `path`."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    except OSError as exc:
        raise (DiskFull(target, exc) if exc.errno in FULL else exc) from exc
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        make_readable(tmp)
        staged = _STAGED.get()
        if staged is not None:
            staged.append((tmp, target))
        else:
            os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, DiskFull) and exc.errno in FULL:
            raise DiskFull(target, exc) from exc
        raise


def _swap_in(staged: list[tuple[Path, Path]]) -> None:
    """Rename every staged file over its target; if one rename fails, the targets done so
    far get their old files back (hard-linked aside first) and the error is raised."""
    last: dict[Path, Path] = {}
    for tmp, target in staged:  # a target written twice: its last version
        if target in last:
            os.unlink(last[target])
        last[target] = tmp
    done: list[tuple[Path, Path | None]] = []
    try:
        for target, tmp in last.items():
            old = None
            if target.exists():
                old = target.with_name(f".{target.name}.{os.getpid()}.old")
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(old)
                os.link(target, old)
            done.append((target, old))
            os.replace(tmp, target)
    except BaseException:
        for target, old in reversed(done):
            with contextlib.suppress(OSError):
                if old is None:
                    os.unlink(target)
                elif os.path.samefile(old, target):  # not swapped yet: rename() of two links of one file does nothing
                    os.unlink(old)
                else:
                    os.replace(old, target)
        raise
    for _, old in done:
        if old is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(old)


@contextlib.contextmanager
def atomic_outputs(on_disk_full: Callable[[str], Any] | None = None) -> Iterator[None]:
    """Every output written through atomic_path in this block (write_json, write_text,
    write_parquet, ...) changes together or not at all: each is filled beside its
    target (same file system), and all are renamed in only when the block ends without
    an error. On any error the new files are removed and every old output is left as it
    was; a full disk then calls `on_disk_full` with one line (a stage passes `fail`).
    Within the block an output is not visible at its path yet. Nested blocks join the
    outermost one."""
    if _STAGED.get() is not None:
        yield
        return
    staged: list[tuple[Path, Path]] = []
    token = _STAGED.set(staged)
    try:
        try:
            yield
        finally:
            _STAGED.reset(token)
        _swap_in(staged)
    except BaseException as exc:
        for tmp, _ in staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno in FULL:
            full = exc if isinstance(exc, DiskFull) else DiskFull(Path(getattr(exc, "filename", None) or "<output>"), exc)
            full.note = "; none of this stage's outputs changed"
            if on_disk_full is not None:
                on_disk_full(str(full))
            if full is not exc:
                raise full from exc
        raise


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, mode: str = "w") -> Iterator[IO[Any]]:
    """An open file whose contents replace `path` whole when the block ends (atomic_path)."""
    kwargs: dict[str, Any] = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as fh:
        yield fh


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Fill a temp folder beside `path`; on success it replaces `path` whole (the old
    folder is removed only then); on any failure the old folder stays as it was."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        make_readable_dir(tmp)
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
            os.replace(target, old / target.name)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_writer(path) as fh:
        fh.write(text)


class NonFiniteError(ValueError):
    """A NaN or infinity where strict JSON has no number; str() names file and key."""


def non_finite_key(obj: Any, key: str = "") -> str | None:
    """Dotted path of the first NaN/inf float inside `obj`, or None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return key or "<value>"
    if isinstance(obj, dict):
        for k, v in obj.items():
            found = non_finite_key(v, f"{key}.{k}" if key else str(k))
            if found:
                return found
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            found = non_finite_key(v, f"{key}[{i}]")
            if found:
                return found
    return None


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Strict JSON (no NaN/Infinity tokens): a non-finite number is refused, naming its key,
    and nothing is written."""
    try:
        text = json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False, allow_nan=False)
    except ValueError as exc:
        where = non_finite_key(obj)
        if where is None:
            raise
        raise NonFiniteError(f"{Path(path).name}: {where}: not a finite number; strict JSON has no NaN/Infinity, nothing written") from exc
    write_text(path, text + "\n")


def dumps_line(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


def write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> None:
    with atomic_writer(path) as fh:
        for row in rows:
            fh.write(dumps_line(row) + "\n")


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_writer(path, "wb") as fh:
        fh.write(data)


def write_parquet(path: str | os.PathLike, df: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def write_outputs(root: Path, outputs: dict[str, Any]) -> None:
    """Each output (path relative to `root` -> a frame: Parquet, a dict: strict JSON, text, bytes) written atomically."""
    for name, value in outputs.items():
        if isinstance(value, pd.DataFrame):
            write_parquet(root / name, value)
        elif isinstance(value, dict):
            write_json(root / name, value)
        elif isinstance(value, bytes):
            write_bytes(root / name, value)
        else:
            write_text(root / name, value)


@dataclass(frozen=True)
class LineError(Exception):
    """A problem at one line of an input file; str() is the one-line message users see."""

    file: str
    line: int | None
    field: str
    message: str
    value: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        tail = f" (value: {self.value})" if self.value else ""
        return f"{where}: {self.field}: {self.message}{tail}"


def short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def iter_jsonl(path: str | os.PathLike, display: str | None = None) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed object) and raise LineError on bad bytes or bad JSON.

    Blank lines are skipped (a trailing newline is normal); they still count for numbering.
    """
    name = display or str(path)
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise LineError(name, lineno, "<line>", "not valid UTF-8", f"byte {exc.start}") from None
            if not text.strip():
                continue
            try:
                yield lineno, json.loads(text)
            except json.JSONDecodeError as exc:
                raise LineError(name, lineno, "<line>", f"invalid JSON: {exc.msg} at column {exc.colno}") from None

