r"""Fetch: bring every registered corpus file into the local store and list it.

For each dataset, the annotation files are fetched first; the corpus file list then
comes from the annotations (`Dataset.corpus_files`), never from what a mirror
holds. Each file is looked for in the mirror roots first, then at its upstream URL
(only when downloads are allowed), and checked against its pinned sha256 where one
is known. A mirror file is not copied: mirror files are immutable and pinned, so it
is read in place once (its hash checked against the pin) and then hard-linked into
the store (straight to its name when the store has no file there, which is atomic;
under a temp name renamed over an older, rejected copy otherwise); a copy is made
only where a hard link is impossible (e.g. across file systems), and the copy's own
hash is checked again. So a stored file must never be written in place (it may be
the mirror's own inode); fetch itself only links and renames. A copy whose hash
differs from the pin is quarantined (reported, never used, never written over a good
file). Files that cannot be had are listed with status "unavailable".

Per run, each store folder is created once and swept once for the temp files a
killed run left (``.<name>.<random>.part``); files are hashed through one reused
buffer per thread.

The manifest is one JSON row per file, sorted by (dataset key, path); the same
inputs give a byte-identical manifest (no times, no local paths in it).

Unpacked trees. A registered ``<name>.tar.gz`` (e.g. a SWE-bench base-commit tree)
may be mirrored unpacked, as the folder ``<name>/`` beside where the archive would
be. An archive file in any root is preferred to a folder. A folder is not copied: its
regular files are hard-linked into the store (mirror files are immutable; a copy is
made only where a hard link is impossible, e.g. across file systems) at
``<store>/<key>/<name>/`` (so a stored tree file must never be written in place;
fetch only renames). Its manifest row keeps the registered path and says
``"form": "tree"`` with ``"files"``: the count of regular files; ``sha256`` is the
tree digest and ``bytes`` the files' total size. The tree digest is the sha256 of
the lines ``"<file sha256>  <relative path>\n"`` (sha256sum's format) of every
regular file, sorted by path (code point order = UTF-8 byte order), so
``find . -type f | sed 's|^\./||' | LC_ALL=C sort | xargs -d '\n' sha256sum |
sha256sum`` run inside the folder gives the same digest. Symbolic links and empty
folders are not part of a tree (extract skips links too). A tree is pinned under its
folder path (``<name>/``) in the pins file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import socket
import stat
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench.ingest.archive import read_member
from bench.ingest.store import (  # the store layout, shared with extraction
    hash_tree,
    local_path,
    stored_path,  # noqa: F401 - re-exported: callers and tests import it from here
    tree_files,
    tree_path,
)
from bench.io import _umask, atomic_writer, make_readable
from bench.modalities.base import CorpusFile, Dataset

CHUNK = 1 << 20
FETCH_WORKERS = os.cpu_count() or 1


@dataclass
class FetchLog:
    quarantined: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


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
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700
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


_buffers = threading.local()


def _buffer() -> tuple[bytearray, memoryview]:
    """This thread's read buffer (allocating and zeroing 1 MiB per file cost more than hashing a small one)."""
    buf = getattr(_buffers, "buf", None)
    if buf is None:
        buf = bytearray(CHUNK)
        _buffers.buf = buf
        _buffers.view = memoryview(buf)
    return buf, _buffers.view


class NotRegularFile(OSError):
    """The path exists but is not a regular file (a folder, a FIFO, a device ...)."""


#: what "no such regular file" looks like when a file is opened where it may be absent
NOT_A_FILE = (FileNotFoundError, NotADirectoryError, IsADirectoryError, NotRegularFile)


def hash_file(path: str | os.PathLike) -> tuple[str, int]:
    """(sha256, bytes) of a regular file, read once through this thread's reused buffer.

    Opened without blocking (a FIFO must not hang the run) and checked to be a regular
    file on the open descriptor, so no separate stat is needed: a path that is absent
    raises FileNotFoundError, one that is not a regular file `NotRegularFile`.
    """
    h = hashlib.sha256()
    size = 0
    buf, view = _buffer()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(f"not a regular file: {path}")
    except BaseException:
        os.close(fd)
        raise
    with open(fd, "rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            h.update(view[:n])
            size += n
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


def place_link(src: str, dest: Path, dest_exists: bool, sha: str, folders: StoreFolders) -> bool:
    """Put the already hashed mirror file `src` at `dest` by a hard link; False (and
    nothing placed) when a copy, made where no link is possible, came out different.

    No stored file at `dest`: one ``link`` (atomic: the name appears whole or not at
    all). An older copy there: link under a temp name, then rename over it. Where no
    link can be made: copy with the hash taken again from the copy's bytes.
    """
    folders.ready(os.path.dirname(dest))
    if not dest_exists:
        try:
            os.link(src, dest)
            return True
        except FileExistsError:
            pass  # appeared meanwhile: replace it like an older copy
        except OSError:
            return _place_copy(src, dest, sha)
    for _ in range(100):
        tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(6)}.part")
        try:
            os.link(src, tmp)
        except FileExistsError:
            continue
        except OSError:
            return _place_copy(src, dest, sha)
        os.replace(tmp, dest)
        return True
    return _place_copy(src, dest, sha)


def _place_copy(src: str, dest: Path, sha: str) -> bool:
    got, _size, tmp = copy_hashed(Path(src), dest)
    if got != sha:
        tmp.unlink()
        return False
    make_readable(tmp)
    os.replace(tmp, dest)
    return True


def download(url: str, dest: Path, attempts: int = 3, timeout: float = 20.0, backoff: float = 1.0) -> Path:
    """Download to a '.download' part beside dest (resuming it if present); return the part path.

    A body shorter than its Content-Length (a dropped connection) is an error: the
    next attempt, after a backoff, resumes the part with a Range request. A whole part
    left by a run killed before the rename answers 416 and is returned as it is.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(f".{dest.name}.download")
    last: Exception | None = None
    for attempt in range(attempts):
        try:
            have = part.stat().st_size if part.exists() else 0
            req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                mode = "ab" if have and resp.status == 206 else "wb"
                expected = resp.headers.get("Content-Length")
                with open(part, mode) as fh:
                    before = fh.tell()
                    shutil.copyfileobj(resp, fh, CHUNK)
                    got = fh.tell() - before
                # a dropped connection ends the body early without an error: check the length
                if expected is not None and expected.isdigit() and got != int(expected):
                    raise OSError(f"connection closed after {got} of {expected} bytes")
            return part
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and have:  # the part is already whole (a run killed before the rename)
                return part
            last = exc
            time.sleep(backoff * (2**attempt))
        except Exception as exc:  # network errors of any kind: retry with backoff
            last = exc
            time.sleep(backoff * (2**attempt))
    raise OSError(f"download failed after {attempts} attempts: {url}: {last}")


def network_available(host: str = "raw.githubusercontent.com", port: int = 443, timeout: float = 3.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def fetch_file(
    ds: Dataset,
    cf: CorpusFile,
    store: Path,
    mirror_roots: Sequence[Path],
    allow_download: bool,
    log: FetchLog,
    downloader: Callable[[str, Path], Path] = download,
    outer_sha: str | None = None,
    folders: StoreFolders | None = None,
) -> dict:
    """Fetch one file and return its manifest row.

    `outer_sha`: for an archive member, the sha256 of its stored outer archive when the
    caller has just fetched (and so hashed) it; otherwise the archive is hashed here.
    `folders`: the run's record of store folders made and swept (one per call if None).
    """
    folders = folders if folders is not None else StoreFolders()
    pins = ds.pins()
    pin = pins.get(cf.path)
    pin_sha = cf.sha256 or (pin[0] if pin else None)
    dest = local_path(store, ds.key, cf.path)
    row = {
        "source_id": cf.source_id,
        "dataset": ds.name,
        "key": ds.key,
        "revision": ds.revision,
        "path": cf.path,
        "sha256": pin_sha,
        "bytes": cf.bytes if cf.bytes is not None else (pin[1] if pin else None),
        "url": ds.url(cf.path),
        "status": "unavailable",
    }

    def accept(sha: str, size: int) -> dict:
        row.update(sha256=sha, bytes=size, status="present")
        return row

    # 1. already in the store with the right hash: nothing to do (a rerun resumes here)
    try:
        sha, size = hash_file(dest)
        dest_exists = True
    except NOT_A_FILE:
        dest_exists = False
    if dest_exists:
        if pin_sha is None or sha == pin_sha:
            return accept(sha, size)
        log.problems.append(f"{ds.key}/{cf.path}: stored copy has sha256 {sha}, pin {pin_sha}: fetched again")

    folder = tree_path(cf.path)
    tree_dest = store / ds.key / folder.rstrip("/") if folder else None
    tree_pin = pins.get(folder) if folder else None

    def accept_tree(sha: str, size: int, count: int) -> dict:
        row.update(sha256=sha, bytes=size, status="present", form="tree", files=count)
        return row

    # 1b. the unpacked tree already in the store with the right digest
    if tree_dest is not None and not dest_exists and tree_dest.is_dir():
        sha, size, count = hash_tree(tree_dest)
        if tree_pin is None or sha == tree_pin[0]:
            return accept_tree(sha, size, count)
        log.problems.append(f"{ds.key}/{folder}: stored tree has digest {sha}, pin {tree_pin[0]}: fetched again")

    # 2. archive member: unpack from the fetched outer archive
    if "!/" in cf.path:
        outer, member = cf.path.split("!/", 1)
        outer_local = store / ds.key / outer
        if not outer_local.is_file():
            return row
        outer_pin = pins.get(outer)
        # the caller passes the outer archive's hash when it has just fetched it (hash each file once)
        outer_hash = outer_sha if outer_sha is not None else (hash_file(outer_local)[0] if outer_pin else None)
        if outer_pin and outer_hash != outer_pin[0]:
            # the stored archive was rejected (its row is unavailable): never read from it
            log.problems.append(f"{ds.key}/{cf.path}: archive {outer} differs from its pin: member not used")
            return row
        data = read_member(outer_local, member)
        sha = hashlib.sha256(data).hexdigest()
        if pin_sha and sha != pin_sha:
            log.quarantined.append(f"{cf.path}: member sha256 {sha} differs from pin {pin_sha}")
            return row
        folders.ready(os.path.dirname(dest))
        with atomic_writer(dest, "wb") as fh:
            fh.write(data)
        return accept(sha, len(data))

    # 3. mirror roots, in order: the mirror file is hashed in place, then linked
    for root in mirror_roots:
        mirror_file = os.path.join(root, ds.mirror_key, cf.path)
        try:
            sha, size = hash_file(mirror_file)
        except NOT_A_FILE:
            continue
        if pin_sha and sha != pin_sha:
            log.quarantined.append(f"{ds.mirror_key}/{cf.path}: sha256 {sha} differs from pin {pin_sha}: not used")
            continue
        if not place_link(mirror_file, dest, dest_exists, sha, folders):
            log.problems.append(f"{ds.mirror_key}/{cf.path}: changed while it was copied: not used")
            continue
        return accept(sha, size)

    # 3b. mirror roots holding the archive unpacked (see the module docstring)
    if folder is not None and tree_dest is not None:
        for root in mirror_roots:
            candidate = root / ds.mirror_key / folder
            if not candidate.is_dir():
                continue
            # the folder's first use in this run sweeps it: before link_tree puts its temp folder there
            folders.ready(os.path.dirname(tree_dest))
            sha, size, count, tmp_dir = link_tree(candidate, tree_dest)
            if tree_pin and sha != tree_pin[0]:
                shutil.rmtree(tmp_dir, ignore_errors=True)
                log.quarantined.append(f"{ds.mirror_key}/{folder}: tree digest {sha} differs from pin {tree_pin[0]}: not used")
                continue
            replace_tree(tmp_dir, tree_dest)
            return accept_tree(sha, size, count)

    # 4. upstream URL
    if allow_download:
        try:
            part = downloader(str(row["url"]), dest)
        except OSError as exc:
            log.problems.append(str(exc))
            return row
        sha, size = hash_file(part)
        if pin_sha and sha != pin_sha:
            qdir = store / ".quarantine" / ds.key
            qdir.mkdir(parents=True, exist_ok=True)
            os.replace(part, qdir / dest.name)
            log.quarantined.append(f"{row['url']}: sha256 {sha} differs from pin {pin_sha}: quarantined")
            return row
        os.replace(part, dest)
        return accept(sha, size)
    return row


#: threads for archive members: their work is mostly the fsync of each unpacked file,
#: which waits on the disk without the GIL (concurrent fsyncs share journal commits)
MEMBER_WORKERS = 8


def fetch_dataset(
    ds: Dataset,
    store: Path,
    mirror_roots: Sequence[Path],
    allow_download: bool,
    log: FetchLog,
    downloader: Callable[[str, Path], Path] = download,
) -> list[dict]:
    """Rows of the data set's annotation files (first, in their order), then of the
    corpus files they list (in listed order; archive members last)."""
    folders = StoreFolders()

    def one(cf: CorpusFile, outer_sha: str | None = None) -> dict:
        return fetch_file(ds, cf, store, mirror_roots, allow_download, log, downloader, outer_sha, folders)

    def many(files: list[CorpusFile], rows: list[dict]) -> list[dict]:
        """Plain files in parallel (hashlib and file I/O release the GIL), then archive
        members, whose outer archive must be in the store first: its row, hashed once
        there, passes its hash on."""
        plain = [cf for cf in files if "!/" not in cf.path]
        members = [cf for cf in files if "!/" in cf.path]
        out: list[dict] = []
        if len(plain) > 1:
            with ThreadPoolExecutor(max_workers=max(1, min(FETCH_WORKERS, len(plain)))) as pool:
                out.extend(pool.map(one, plain))
        else:
            out.extend(one(cf) for cf in plain)
        hashed = {r["path"]: r["sha256"] for r in (*rows, *out) if r["status"] == "present" and r.get("form") != "tree"}
        outer = [hashed.get(cf.path.split("!/", 1)[0]) for cf in members]
        if len(members) > 1:
            with ThreadPoolExecutor(max_workers=min(MEMBER_WORKERS, len(members))) as pool:
                out.extend(pool.map(one, members, outer))
        else:
            out.extend(one(cf, sha) for cf, sha in zip(members, outer, strict=True))
        return out

    annotations = [CorpusFile(source_id=f"{ds.key}:annotations", path=p) for p in ds.annotation_files]
    by_path = {r["path"]: r for r in many(annotations, [])}
    rows = [by_path[cf.path] for cf in annotations]
    if any(r["status"] != "present" for r in rows):
        log.problems.append(f"{ds.key}: annotation files unavailable; its corpus file list is unknown")
        return rows
    seen = {r["path"] for r in rows}
    files: list[CorpusFile] = []
    for cf in ds.corpus_files(store / ds.key):
        if cf.path not in seen:
            seen.add(cf.path)
            files.append(cf)
    return rows + many(files, rows)


def sort_manifest(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["key"], r["path"]))


@dataclass(frozen=True)
class FetchJob:
    """One data set to fetch and where from (a local data set's only root is its folder's parent)."""

    ds: Dataset
    mirror_roots: Sequence[Path]
    allow_download: bool


#: data sets fetched at once: one's listing, folder making and fsyncs (GIL-bound or
#: waiting on the disk) overlap another's hashing (which releases the GIL)
DATASET_WORKERS = FETCH_WORKERS


def fetch_datasets(
    jobs: Sequence[FetchJob],
    store: Path,
    log: FetchLog,
    downloader: Callable[[str, Path], Path] = download,
) -> list[dict]:
    """`fetch_dataset` of every job, data sets concurrently; rows in job order (the
    manifest is sorted anyway). An error of any data set (e.g. an unsafe archive) is
    raised once all have finished, the first in job order."""
    if len(jobs) <= 1:
        return [r for job in jobs for r in fetch_dataset(job.ds, store, job.mirror_roots, job.allow_download, log, downloader)]
    with ThreadPoolExecutor(max_workers=min(DATASET_WORKERS, len(jobs))) as pool:
        futures = [pool.submit(fetch_dataset, job.ds, store, job.mirror_roots, job.allow_download, log, downloader)
                   for job in jobs]
        return [r for f in futures for r in f.result()]
