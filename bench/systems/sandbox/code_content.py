"""`system.code` checked by content, not by name (bench/systems/sandbox/declared.py calls it).

A declared code file, or any file in a declared code folder, is refused with one line
naming it when

* its bytes contain the query id of any set (bench/sets/*.jsonl, data/sets/*.jsonl), as a
  whole token: ``locomo:conv-26:q0`` counts in ``"locomo:conv-26:q0"`` or ``…q0.`` but not
  in ``locomo:conv-26:q01``; also read as UTF-16 text (little or big endian) where every
  other byte is NUL, mostly;
* what it holds does, found by its first bytes whatever its name: a gzip, bz2, xz or zlib
  stream decompressed (a zlib-compressed pickle, a gzip file named ``.txt``), each member
  of a zip or tar archive, each column of a parquet file (its cells, as text), each
  compressed text chunk of a PNG image — and what *those* hold, nested up to MAX_DEPTH
  deep (a ``.gz`` inside a ``.zip``, a ``.tar.xz``);
* it is a hard link of a protected file (same device and inode), or has the same bytes
  (sha256) as one: the protected paths of the project (bench/sets, data, reports, .dvc
  with its cache, ...), the mirror roots and the local data set folders. Empty files are
  never taken for copies.

**What it cannot see** (docs/systems.md): gold transformed on purpose — base64 or any
other encoding it does not open, an id reversed, split across strings, hashed, or gold
keyed by the question's text instead of its id, a format it does not open (7z, rar, an
encrypted archive, a database file's pages). The check guards against accidents and folder
mistakes (a set file, a run, a cache copied into a code folder), not against a system built
to cheat: public test data cannot prevent that; the locked test split and its acceptance
record are the defence. A file that is, or whose contents are, more than MAX_CHECKED_BYTES
is refused as too large to check; archives nested deeper than MAX_DEPTH are refused too.
Nothing here reads params.yaml or the environment.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import json
import lzma
import os
import re
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

#: a code file that is (or decompresses to) more bytes than this is refused as too large to check
MAX_CHECKED_BYTES = 256 * 1024 * 1024
CHUNK = 8 * 1024 * 1024
OVERLAP = 4096  # longer than any query id: an id across two chunks is still found
ID_TAIL = rb"[A-Za-z0-9_.:#/@-]+"
SEPARATORS = ".:#/@-"
#: containers opened inside containers, at most this deep (a .gz in a .zip in a .tar.xz: 3)
MAX_DEPTH = 4
#: what one opened member or stream may hold in memory before it is spooled to the temp folder
SPOOL_IN_MEMORY = 8 * 1024 * 1024


class TooLarge(Exception):
    """The file (or what it decompresses to) is over MAX_CHECKED_BYTES."""


class TooDeep(Exception):
    """Archives or compressed streams nested more than MAX_DEPTH deep."""


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


class Budget:
    """Bytes read from one code file and everything opened inside it: over MAX_CHECKED_BYTES is TooLarge."""

    def __init__(self) -> None:
        self.left = MAX_CHECKED_BYTES

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise TooLarge


def _utf16(data: bytes) -> list[bytes]:
    """Bytes holding UTF-16 text (every other byte NUL, mostly) read as UTF-8 text, both alignments: little and big endian."""
    if data.count(0) * 4 < len(data):
        return []
    return [(data[i:] + b"\0" * i).decode("utf-16-le", "ignore").encode("utf-8", "ignore") for i in (0, 1)]


def _search(fh: IO[bytes], finder: IdFinder) -> str | None:
    """A query id in the bytes of `fh` (from its start), as they are or as UTF-16 text."""
    fh.seek(0)
    tails = [b"", b"", b""]
    while chunk := fh.read(CHUNK):
        for i, data in enumerate([chunk, *(_utf16(chunk) or [b"", b""])]):
            data = tails[i] + data
            if found := finder.find(data):
                return found
            tails[i] = data[-OVERLAP:]
    return None


def _spool(chunks: Iterable[bytes], budget: Budget) -> IO[bytes]:
    """What `chunks` hold, in a seekable file (memory, then the temp folder), counted against `budget`."""
    out = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
    for chunk in chunks:
        budget.take(len(chunk))
        out.write(chunk)
    out.seek(0)
    return out


def _decompressing(fh: IO[bytes], make: Callable[[], Any]) -> Iterator[bytes]:
    """The decompressed bytes of a stream (gzip, bz2, xz, zlib; several concatenated members too), up to where it breaks."""
    fh.seek(0)
    decomp = make()
    while chunk := fh.read(CHUNK):
        while chunk:
            try:
                yield decomp.decompress(chunk)
            except (OSError, EOFError, ValueError, zlib.error):
                return
            chunk = decomp.unused_data if decomp.eof else b""
            if chunk:
                decomp = make()


#: magic bytes of the compressed streams the check opens (gzip, bz2, xz), and their decompressors
STREAMS: tuple[tuple[bytes, Callable[[], Any]], ...] = (
    (b"\x1f\x8b", lambda: zlib.decompressobj(31)),
    (b"BZh", bz2.BZ2Decompressor),
    (b"\xfd7zXZ\x00", lzma.LZMADecompressor),
)


def _zlib_head(head: bytes) -> bool:
    return len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0


def _opened(fh: IO[bytes], budget: Budget) -> Iterator[tuple[str, IO[bytes]]]:
    """(what, seekable file) of what `fh` holds, found by its first bytes (its name does not matter):
    the stream a gzip, bz2, xz or zlib file decompresses to, or the parts of `_parts`."""
    fh.seek(0)
    head = fh.read(512)
    fh.seek(0)
    make = next((m for magic, m in STREAMS if head.startswith(magic)), zlib.decompressobj if _zlib_head(head) else None)
    if make is not None:
        yield "decompressed", _spool(_decompressing(fh, make), budget)
    else:
        yield from _parts(fh, head, budget)


def _member(read: Callable[[int], bytes], budget: Budget) -> IO[bytes]:
    return _spool(iter(lambda: read(CHUNK), b""), budget)


def _parts(fh: IO[bytes], head: bytes, budget: Budget) -> Iterator[tuple[str, IO[bytes]]]:
    """Each member of a zip or tar archive; each column of a parquet file (its cells as JSON); each
    compressed text chunk of a PNG image."""
    if head.startswith(b"PK\x03\x04"):
        with zipfile.ZipFile(fh) as archive:
            for entry in archive.infolist():
                if not entry.is_dir():
                    with archive.open(entry) as member:
                        yield f"member {entry.filename}", _member(member.read, budget)
    elif head[257:262] == b"ustar":
        with tarfile.open(fileobj=fh, mode="r:") as tar:
            for item in tar:
                extracted = tar.extractfile(item) if item.isfile() else None
                if extracted is not None:
                    yield f"member {item.name}", _member(extracted.read, budget)
    elif head.startswith(b"PAR1"):
        import pyarrow.parquet as pq

        table = pq.read_table(fh)
        for column in table.column_names:
            values = table.column(column).to_pylist()
            yield f"column {column}", _spool([json.dumps(values, default=str, ensure_ascii=False).encode("utf-8")], budget)
    elif head.startswith(PNG):
        yield from _png_texts(fh, budget)


PNG = b"\x89PNG\r\n\x1a\n"


def _png_texts(fh: IO[bytes], budget: Budget) -> Iterator[tuple[str, IO[bytes]]]:
    """The compressed text chunks (zTXt, iTXt) of a PNG image, decompressed (tEXt is plain: found in the bytes)."""
    fh.seek(len(PNG))
    while len(header := fh.read(8)) == 8:
        size, kind = int.from_bytes(header[:4], "big"), header[4:]
        data = fh.read(size)
        fh.read(4)  # its CRC
        budget.take(size)
        if kind in (b"zTXt", b"iTXt"):
            keyword, _, rest = data.partition(b"\0")
            packed = rest[1:] if kind == b"zTXt" else rest[2:].split(b"\0", 2)[-1] if rest[:1] == b"\1" else b""
            if packed:
                yield f"PNG {kind.decode()} chunk {keyword[:40].decode('latin-1')}", _spool(
                    _decompressing(io.BytesIO(packed), zlib.decompressobj), budget)
        if kind == b"IEND":
            return


def _scan(fh: IO[bytes], finder: IdFinder, budget: Budget, depth: int = 0) -> tuple[str, list[str]] | None:
    """(query id, where: the containers opened to find it) in `fh` or anything opened inside it, up to MAX_DEPTH deep."""
    if found := _search(fh, finder):
        return found, []
    for what, inner in _opened(fh, budget):
        with inner:
            if depth + 1 > MAX_DEPTH:
                raise TooDeep
            if hit := _scan(inner, finder, budget, depth + 1):
                return hit[0], [what, *hit[1]]
    return None


#: names whose contents the check must be able to open: a file so named that it cannot open is refused
NAMED_CONTAINERS = (".gz", ".zip", ".parquet", ".bz2", ".xz", ".tar", ".tgz", ".txz", ".zlib")


def id_problem(path: Path, finder: IdFinder) -> str | None:
    """Why `path` may not be shown: it holds a query id (in its bytes, as UTF-16 text, or in what it
    decompresses to, at any depth up to MAX_DEPTH), or it is too large or nested too deep to check."""
    try:
        if path.stat().st_size > MAX_CHECKED_BYTES:
            raise TooLarge
        with open(path, "rb") as fh:
            hit = _scan(fh, finder, Budget())
        if hit:
            where = " (" + ", ".join(hit[1]) + ")" if hit[1] else ""
            return f"holds the query id {hit[0]!r} of a set{where}"
    except TooLarge:
        return f"is (or decompresses to) more than {MAX_CHECKED_BYTES} bytes, too large to check for query ids"
    except TooDeep:
        return f"holds archives or compressed streams nested more than {MAX_DEPTH} deep, too deep to check for query ids"
    except Exception as exc:  # a broken archive (zipfile, tarfile, pyarrow, the decompressors raise their own errors)
        if path.name.lower().endswith(NAMED_CONTAINERS):
            return f"cannot be read as {path.suffix} to check it for query ids ({type(exc).__name__}: {str(exc)[:80]})"
        return None
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
