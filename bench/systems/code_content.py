"""`system.code` checked by content, not by name (bench/systems/declared.py calls it).

A declared code file, or any file in a declared code folder, is refused with one line
naming it when

* its bytes contain the query id of any set (bench/sets/*.jsonl, data/sets/*.jsonl), as a
  whole token: ``locomo:conv-26:q0`` counts in ``"locomo:conv-26:q0"`` or ``…q0.`` but not
  in ``locomo:conv-26:q01``; for ``.gz``, ``.zip`` (each member) and ``.parquet`` files
  their decompressed bytes (a parquet file's cells, as text) are searched too;
* it is a hard link of a protected file (same device and inode), or has the same bytes
  (sha256) as one: the protected paths of the project (bench/sets, data, reports, .dvc
  with its cache, ...), the mirror roots and the local data set folders. Empty files are
  never taken for copies.

Limits (docs/systems.md): ids are searched in ASCII/UTF-8 bytes (an id spelled in UTF-16,
base64 or any other encoding is not found); a file that is, or decompresses to, more than
MAX_CHECKED_BYTES is refused as too large to check. Nothing here reads params.yaml or the
environment.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: a code file that is (or decompresses to) more bytes than this is refused as too large to check
MAX_CHECKED_BYTES = 256 * 1024 * 1024
CHUNK = 8 * 1024 * 1024
OVERLAP = 4096  # longer than any query id: an id across two chunks is still found
ID_TAIL = rb"[A-Za-z0-9_.:#/@-]+"
SEPARATORS = ".:#/@-"


class TooLarge(Exception):
    """The file (or what it decompresses to) is over MAX_CHECKED_BYTES."""


def set_query_ids(folders: Iterable[Path]) -> frozenset[str]:
    """The query ids of every set file (*.jsonl, searched below each folder); unreadable lines are skipped."""
    ids: set[str] = set()
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*.jsonl")):
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        try:
                            row = json.loads(line)
                        except ValueError:
                            continue
                        if isinstance(row, dict) and isinstance(row.get("query_id"), str):
                            ids.add(row["query_id"])
            except OSError:
                continue
    return frozenset(ids)


@dataclass
class IdFinder:
    """Finds a query id (a whole token) in bytes."""

    ids: frozenset[str]
    pattern: re.Pattern[bytes] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        prefixes = sorted({i.split(":", 1)[0] for i in self.ids if ":" in i}, key=len, reverse=True)
        bare = [i for i in self.ids if ":" not in i]
        alts = [re.escape(p.encode()) + b":" + ID_TAIL for p in prefixes] + [re.escape(b.encode()) for b in bare]
        if alts:
            self.pattern = re.compile(rb"(?<![A-Za-z0-9_])(?:" + b"|".join(alts) + rb")")

    def find(self, data: bytes) -> str | None:
        if self.pattern is None:
            return None
        for match in self.pattern.finditer(data):
            token = match.group().decode("ascii", "replace")
            if token in self.ids:
                return token
            for i, ch in enumerate(token):  # the id followed by a separator: "coco:303." or ".../q0#extra"
                if ch in SEPARATORS and token[:i] in self.ids:
                    return token[:i]
        return None

    def in_stream(self, chunks: Iterable[bytes]) -> str | None:
        tail = b""
        for chunk in chunks:
            data = tail + chunk
            if found := self.find(data):
                return found
            tail = data[-OVERLAP:]
        return None


def _file_chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            yield chunk


def _capped(chunks: Iterable[bytes]) -> Iterator[bytes]:
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > MAX_CHECKED_BYTES:
            raise TooLarge
        yield chunk


def _stream_chunks(stream: object) -> Iterator[bytes]:
    read = stream.read  # type: ignore[attr-defined]
    while chunk := read(CHUNK):
        yield chunk


def _decompressed(path: Path) -> Iterator[tuple[str, Iterable[bytes]]]:
    """(what, byte chunks) of what a .gz, .zip or .parquet file holds."""
    name = path.name.lower()
    if name.endswith(".gz"):
        with gzip.open(path, "rb") as fh:
            yield "decompressed", _capped(_stream_chunks(fh))
    elif name.endswith(".zip"):
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if not info.is_dir():
                    with archive.open(info) as member:
                        yield f"member {info.filename}", _capped(_stream_chunks(member))
    elif name.endswith(".parquet"):
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        for column in table.column_names:
            values = table.column(column).to_pylist()
            yield f"column {column}", _capped([json.dumps(values, default=str, ensure_ascii=False).encode("utf-8")])


def id_problem(path: Path, finder: IdFinder) -> str | None:
    """Why `path` may not be shown: it holds a query id (in its bytes or decompressed), or it is too large to check."""
    try:
        if path.stat().st_size > MAX_CHECKED_BYTES:
            raise TooLarge
        if found := finder.in_stream(_file_chunks(path)):
            return f"holds the query id {found!r} of a set"
        for what, chunks in _decompressed(path):
            if found := finder.in_stream(chunks):
                return f"holds the query id {found!r} of a set ({what})"
    except TooLarge:
        return f"is (or decompresses to) more than {MAX_CHECKED_BYTES} bytes, too large to check for query ids"
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as exc:
        if path.name.lower().endswith((".gz", ".zip", ".parquet")):
            return f"cannot be read as {path.suffix} to check it for query ids ({type(exc).__name__}: {str(exc)[:80]})"
        return None
    except Exception as exc:  # pyarrow's own errors for a broken parquet file
        return f"cannot be read as {path.suffix} to check it for query ids ({type(exc).__name__}: {str(exc)[:80]})"
    return None


@dataclass
class ProtectedFiles:
    """The files a code file may be neither a hard link of nor a copy of: their inodes and sizes."""

    inodes: dict[tuple[int, int], Path] = field(default_factory=dict)
    by_size: dict[int, list[Path]] = field(default_factory=dict)
    digests: dict[Path, str] = field(default_factory=dict)

    @classmethod
    def of(cls, roots: Iterable[Path]) -> ProtectedFiles:
        out = cls()
        for root in roots:
            paths = [root] if root.is_file() else (Path(top) / n for top, _, names in os.walk(root) for n in names)
            for path in paths:
                try:
                    st = path.lstat()
                except OSError:
                    continue
                if not path.is_symlink() and path.is_file():
                    out.inodes.setdefault((st.st_dev, st.st_ino), path)
                    if st.st_size:
                        out.by_size.setdefault(st.st_size, []).append(path)
        return out

    def _digest(self, path: Path) -> str:
        if path not in self.digests:
            h = hashlib.sha256()
            for chunk in _file_chunks(path):
                h.update(chunk)
            self.digests[path] = h.hexdigest()
        return self.digests[path]

    def problem(self, path: Path) -> str | None:
        try:
            st = path.stat()
        except OSError:
            return None
        twin = self.inodes.get((st.st_dev, st.st_ino))
        if twin is not None:
            return f"is a hard link of {twin}, which a system under test may not see"
        if not st.st_size or st.st_size not in self.by_size:
            return None
        try:
            mine = self._digest(path)
            for other in self.by_size[st.st_size]:
                if self._digest(other) == mine:
                    return f"has the same bytes as {other}, which a system under test may not see"
        except OSError:
            return None
        return None


def code_files(path: Path, hidden: Iterable[Path]) -> Iterator[Path]:
    """`path` itself, or every file below it except the hidden paths (bench/sets, ...), symlinks not followed."""
    if not path.is_dir():
        yield path
        return
    skip = set(hidden)
    for top, dirs, names in os.walk(path):
        here = Path(top)
        dirs[:] = sorted(d for d in dirs if here / d not in skip)
        for name in sorted(names):
            if here / name not in skip and not (here / name).is_symlink():
                yield here / name
