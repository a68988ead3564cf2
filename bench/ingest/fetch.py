r"""Fetch: bring every registered corpus file into the local store and list it.

For each dataset, the annotation files are fetched first; the corpus file list then
comes from the annotations (`Dataset.corpus_files`), never from what a mirror
holds. Each file is looked for in the mirror roots first, then at its upstream URL
(only when downloads are allowed), and checked against its pinned sha256 where one
is known. A mirror file is not copied: mirror files are immutable and pinned, so it
is hard-linked into the store under a temp name, hashed once (the link shares the
mirror's bytes) and renamed into place; a copy is made only where a hard link is
impossible (e.g. across file systems). So a stored file must never be written in
place (it may be the mirror's own inode); fetch itself only renames. A copy whose hash differs
from the pin is quarantined (reported, never used, never written over a good file).
Files that cannot be had are listed with status "unavailable".

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
import tempfile
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


def link_hashed(src: Path, dest: Path) -> tuple[str, int, Path, bool]:
    """Hard-link src to a temp name beside dest and hash it; (sha256, bytes, temp path, linked).

    Falls back to `copy_hashed` where a hard link cannot be made. The bytes are read
    once (by the hash). A linked file keeps the mirror's mode: never chmod it (that
    would change the mirror's inode).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(dest)
    for _ in range(100):
        tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(6)}.part")
        try:
            os.link(src, tmp)
        except FileExistsError:
            continue
        except OSError:
            break
        try:
            sha, size = hash_file(tmp)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return sha, size, tmp, True
    sha, size, tmp = copy_hashed(src, dest)
    return sha, size, tmp, False


def remove_orphans(dest: Path) -> None:
    """Temp copies (files or tree folders) a killed run left beside `dest` (never the resumable '.download' part)."""
    prefix = f".{dest.name}."
    try:
        entries = [e for e in os.scandir(dest.parent) if e.name.startswith(prefix) and e.name.endswith(".part")
                   and len(e.name) > len(prefix) + len(".part")]
    except FileNotFoundError:
        return
    for orphan in entries:
        if orphan.is_dir(follow_symlinks=False):
            shutil.rmtree(orphan.path, ignore_errors=True)
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(orphan.path)


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


def hash_file(path: Path) -> tuple[str, int]:
    """(sha256, bytes) of a file, read once through one reused buffer."""
    h = hashlib.sha256()
    size = 0
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            h.update(view[:n])
            size += n
    return h.hexdigest(), size


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
) -> dict:
    """Fetch one file and return its manifest row.

    `outer_sha`: for an archive member, the sha256 of its stored outer archive when the
    caller has just fetched (and so hashed) it; otherwise the archive is hashed here.
    """
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
    if dest.is_file():
        sha, size = hash_file(dest)
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
    if tree_dest is not None and not dest.is_file() and tree_dest.is_dir():
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
        remove_orphans(dest)
        with atomic_writer(dest, "wb") as fh:
            fh.write(data)
        return accept(sha, len(data))

    # 3. mirror roots, in order
    for root in mirror_roots:
        candidate = root / ds.mirror_key / cf.path
        if not candidate.is_file():
            continue
        sha, size, tmp, linked = link_hashed(candidate, dest)
        if pin_sha and sha != pin_sha:
            tmp.unlink()
            log.quarantined.append(f"{ds.mirror_key}/{cf.path}: sha256 {sha} differs from pin {pin_sha}: not used")
            continue
        if not linked:
            make_readable(tmp)
        os.replace(tmp, dest)
        return accept(sha, size)

    # 3b. mirror roots holding the archive unpacked (see the module docstring)
    if folder is not None and tree_dest is not None:
        for root in mirror_roots:
            candidate = root / ds.mirror_key / folder
            if not candidate.is_dir():
                continue
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
            part = downloader(row["url"], dest)
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


def fetch_dataset(
    ds: Dataset,
    store: Path,
    mirror_roots: Sequence[Path],
    allow_download: bool,
    log: FetchLog,
    downloader: Callable[[str, Path], Path] = download,
) -> list[dict]:
    rows = [
        fetch_file(ds, CorpusFile(source_id=f"{ds.key}:annotations", path=p), store, mirror_roots, allow_download, log, downloader)
        for p in ds.annotation_files
    ]
    if any(r["status"] != "present" for r in rows):
        log.problems.append(f"{ds.key}: annotation files unavailable; its corpus file list is unknown")
        return rows
    seen = {r["path"] for r in rows}
    files: list[CorpusFile] = []
    for cf in ds.corpus_files(store / ds.key):
        if cf.path not in seen:
            seen.add(cf.path)
            files.append(cf)

    def one(cf: CorpusFile, outer_sha: str | None = None) -> dict:
        return fetch_file(ds, cf, store, mirror_roots, allow_download, log, downloader, outer_sha)

    # plain files in parallel (hashlib and file I/O release the GIL), then archive
    # members, whose outer archive must be in the store first
    plain = [cf for cf in files if "!/" not in cf.path]
    members = [cf for cf in files if "!/" in cf.path]
    with ThreadPoolExecutor(max_workers=max(1, min(FETCH_WORKERS, len(plain)))) as pool:
        rows.extend(pool.map(one, plain))
    # an outer archive fetched above was hashed once there: pass its hash on
    hashed = {r["path"]: r["sha256"] for r in rows if r["status"] == "present" and r.get("form") != "tree"}
    rows.extend(one(cf, hashed.get(cf.path.split("!/", 1)[0])) for cf in members)
    return rows


def sort_manifest(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["key"], r["path"]))
