"""Placing files in the store: hashing, hard links, copies and temp-file hygiene.

Split from bench.ingest.fetch (its module doc says why a stored file is only ever
linked or renamed, never written in place); fetch re-exports what its callers use.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from bench.ingest.store import tree_files
from bench.io import make_readable, make_readable_dir

CHUNK = 1 << 20


def copy_hashed(src: Path, dest: Path) -> tuple[str, int, Path]:
    """Copy src to a temp file beside dest; return (sha256, bytes, temp path).

    The caller renames the temp file over dest only once the hash is accepted.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(dest)
    h = hashlib.sha256()
    size = 0
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    try:
        with open(src, "rb") as fin, os.fdopen(fd, "wb") as fout:
            for block in iter(lambda: fin.read(CHUNK), b""):
                h.update(block)
                size += len(block)
                fout.write(block)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return h.hexdigest(), size, Path(tmp)


def _remove(entries: list[os.DirEntry]) -> None:
    """Delete temp copies (files, or tree folders) a killed run left behind."""
    for orphan in entries:
        if orphan.is_dir(follow_symlinks=False):
            shutil.rmtree(orphan.path, ignore_errors=True)
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(orphan.path)


def remove_orphans(dest: Path) -> None:
    """Temp copies (files or tree folders) a killed run left beside `dest` (never the resumable '.download' part)."""
    prefix = f".{dest.name}."
    try:
        entries = [e for e in os.scandir(dest.parent) if e.name.startswith(prefix) and e.name.endswith(".part")
                   and len(e.name) > len(prefix) + len(".part")]
    except FileNotFoundError:
        return
    _remove(entries)


def link_tree(src: Path, dest: Path) -> tuple[str, int, int, Path]:
    """Hard-link the regular files of `src` into a temp folder beside `dest`, hashing them.

    Returns (tree digest, bytes, files, temp folder); the caller renames the folder
    over `dest` once the digest is accepted. Falls back to a copy per file where a
    hard link cannot be made.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(dest)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent))
    try:
        make_readable_dir(tmp)  # mkdtemp makes 0700
        digest = hashlib.sha256()
        total = 0
        files = tree_files(src)
        for rel, full in files:
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(full, target)
            except OSError:
                shutil.copyfile(full, target)
            sha, size = hash_file(target)
            digest.update(f"{sha}  {rel}\n".encode())
            total += size
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return digest.hexdigest(), total, len(files), tmp


def replace_tree(tmp: Path, dest: Path) -> None:
    """Put a finished temp folder at `dest`, removing an earlier (rejected or stale) copy."""
    if dest.is_dir():
        old = dest.with_name(f".{dest.name}.old.part")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(dest, old)
        os.replace(tmp, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, dest)


#: read buffers not in use: `hash_file` takes one and gives it back, so a buffer outlives
#: the short-lived fetch threads (allocating and zeroing 1 MiB per file, or per thread,
#: costs more than hashing a small file)
_free_buffers: list[bytearray] = []


def _take_buffer() -> bytearray:
    try:
        return _free_buffers.pop()
    except IndexError:
        return bytearray(CHUNK)


class NotRegularFile(OSError):
    """The path exists but is not a regular file (a folder, a FIFO, a device ...)."""


#: what "no such regular file" looks like when a file is opened where it may be absent
NOT_A_FILE = (FileNotFoundError, NotADirectoryError, IsADirectoryError, NotRegularFile)


def hash_file(path: str | os.PathLike) -> tuple[str, int]:
    """(sha256, bytes) of a regular file, read once through a reused buffer.

    Opened without blocking (a FIFO must not hang the run) and checked to be a regular
    file on the open descriptor, so no separate stat is needed: a path that is absent
    raises FileNotFoundError, one that is not a regular file `NotRegularFile`. Read with
    plain ``read`` calls on the descriptor (a file object would stat it again).
    """
    h = hashlib.sha256()
    size = 0
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(f"not a regular file: {path}")
        buf = _take_buffer()
        try:
            with memoryview(buf) as view:
                while n := os.readv(fd, (buf,)):
                    h.update(view[:n])
                    size += n
        finally:
            _free_buffers.append(buf)
    finally:
        os.close(fd)
    return h.hexdigest(), size


class StoreFolders:
    """Store folders this run has made or swept: each is created at most once and
    cleared of a killed run's temp files at most once (a fresh folder has none)."""

    def __init__(self) -> None:
        self._ready: set[str] = set()
        self._lock = threading.Lock()

    def ready(self, folder: str) -> None:
        if folder in self._ready:
            return
        with self._lock:
            if folder in self._ready:
                return
            try:
                os.mkdir(folder)
            except FileExistsError:
                _sweep(folder)
            except FileNotFoundError:
                os.makedirs(folder, exist_ok=True)  # parents made here are new: nothing to sweep
            self._ready.add(folder)


def _sweep(folder: str) -> None:
    """Remove every temp copy (file or tree folder) a killed run left in `folder`
    (``.<name>.<random>.part``; never a resumable '.download' part)."""
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(".") and e.name.endswith(".part")]
    except FileNotFoundError:
        return
    _remove(entries)


def place_link(src: str, dest: str, dest_exists: bool, sha: str, folders: StoreFolders) -> bool:
    """Put the already hashed mirror file `src` at `dest` by a hard link; False (and
    nothing placed) when a copy, made where no link is possible, came out different.

    No stored file at `dest`: one ``link`` (atomic: the name appears whole or not at
    all). An older copy there: link under a temp name, then rename over it. Where no
    link can be made: copy with the hash taken again from the copy's bytes.
    """
    folder = os.path.dirname(dest)
    folders.ready(folder)
    if not dest_exists:
        try:
            os.link(src, dest)
            return True
        except FileExistsError:
            pass  # appeared meanwhile: replace it like an older copy
        except OSError:
            return _place_copy(src, dest, sha)
    for _ in range(100):
        tmp = os.path.join(folder, f".{os.path.basename(dest)}.{secrets.token_hex(6)}.part")
        try:
            os.link(src, tmp)
        except FileExistsError:
            continue
        except OSError:
            return _place_copy(src, dest, sha)
        os.replace(tmp, dest)
        return True
    return _place_copy(src, dest, sha)


def _place_copy(src: str, dest: str, sha: str) -> bool:
    got, _size, tmp = copy_hashed(Path(src), Path(dest))
    if got != sha:
        tmp.unlink()
        return False
    make_readable(tmp)
    os.replace(tmp, dest)
    return True
