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
killed run left (``.<name>.<random>.part``); files are hashed through reused read
buffers, and a data set's files are spread over a few threads that each take the
next file when done (`in_threads`; no future per file).

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

import hashlib
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench.archive import read_member
from bench.ingest.download import download, network_available  # noqa: F401 - re-exported for callers
from bench.ingest.place import (  # noqa: F401 - re-exported: callers and tests import them from here
    CHUNK,
    NOT_A_FILE,
    NotRegularFile,
    StoreFolders,
    copy_hashed,
    hash_file,
    link_tree,
    place_link,
    remove_orphans,
    replace_tree,
)
from bench.ingest.store import (  # the store layout, shared with extraction
    hash_tree,
    local_path,
    stored_path,  # noqa: F401 - re-exported: callers and tests import it from here
    tree_path,
)
from bench.io import atomic_writer
from bench.modalities.base import CorpusFile, Dataset

FETCH_WORKERS = os.cpu_count() or 1


@dataclass
class FetchLog:
    quarantined: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class _Target:
    """One file being fetched: where it goes, what it must hash to, and its manifest row."""

    ds: Dataset
    cf: CorpusFile
    store: Path
    log: FetchLog
    folders: StoreFolders
    pins: dict
    pin_sha: str | None
    dest: str
    row: dict
    dest_exists: bool = False
    folder: str | None = None
    tree_dest: Path | None = None
    tree_pin: tuple | None = None

    def accept(self, sha: str, size: int) -> dict:
        self.row.update(sha256=sha, bytes=size, status="present")
        return self.row

    def accept_tree(self, sha: str, size: int, count: int) -> dict:
        self.row.update(sha256=sha, bytes=size, status="present", form="tree", files=count)
        return self.row


def _target(ds: Dataset, cf: CorpusFile, store: Path, log: FetchLog, folders: StoreFolders, pins: dict) -> _Target:
    pin = pins.get(cf.path)
    pin_sha = cf.sha256 or (pin[0] if pin else None)
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
    t = _Target(ds, cf, store, log, folders, pins, pin_sha, _dest(store, ds.key, cf.path), row)
    t.folder = tree_path(cf.path)
    if t.folder:
        t.tree_dest = store / ds.key / t.folder.rstrip("/")
        t.tree_pin = pins.get(t.folder)
    return t


def _dest(store: Path, key: str, path: str) -> str:
    """`local_path` as a string; a plain file's joined without pathlib (this runs once per file)."""
    return str(local_path(store, key, path)) if "!/" in path else os.path.join(store, key, path)


def _from_store(t: _Target) -> dict | None:
    """1. Already in the store with the right hash (a rerun resumes here), or its unpacked tree."""
    try:
        sha, size = hash_file(t.dest)
        t.dest_exists = True
    except NOT_A_FILE:
        t.dest_exists = False
    if t.dest_exists:
        if t.pin_sha is None or sha == t.pin_sha:
            return t.accept(sha, size)
        t.log.problems.append(f"{t.ds.key}/{t.cf.path}: stored copy has sha256 {sha}, pin {t.pin_sha}: fetched again")
    if t.tree_dest is not None and not t.dest_exists and t.tree_dest.is_dir():
        sha, size, count = hash_tree(t.tree_dest)
        if t.tree_pin is None or sha == t.tree_pin[0]:
            return t.accept_tree(sha, size, count)
        t.log.problems.append(f"{t.ds.key}/{t.folder}: stored tree has digest {sha}, pin {t.tree_pin[0]}: fetched again")
    return None


def _from_archive(t: _Target, outer_sha: str | None) -> dict:
    """2. An archive member: unpacked from the fetched outer archive (never from a rejected one)."""
    outer, member = t.cf.path.split("!/", 1)
    outer_local = t.store / t.ds.key / outer
    if not outer_local.is_file():
        return t.row
    outer_pin = t.pins.get(outer)
    # the caller passes the outer archive's hash when it has just fetched it (hash each file once)
    outer_hash = outer_sha if outer_sha is not None else (hash_file(outer_local)[0] if outer_pin else None)
    if outer_pin and outer_hash != outer_pin[0]:
        t.log.problems.append(f"{t.ds.key}/{t.cf.path}: archive {outer} differs from its pin: member not used")
        return t.row
    data = read_member(outer_local, member)
    sha = hashlib.sha256(data).hexdigest()
    if t.pin_sha and sha != t.pin_sha:
        t.log.quarantined.append(f"{t.cf.path}: member sha256 {sha} differs from pin {t.pin_sha}")
        return t.row
    t.folders.ready(os.path.dirname(t.dest))
    with atomic_writer(t.dest, "wb") as fh:
        fh.write(data)
    return t.accept(sha, len(data))


def _from_mirror(t: _Target, mirror_roots: Sequence[Path]) -> dict | None:
    """3. The mirror roots, in order: the mirror file is hashed in place, then linked."""
    for root in mirror_roots:
        mirror_file = os.path.join(root, t.ds.mirror_key, t.cf.path)
        try:
            sha, size = hash_file(mirror_file)
        except NOT_A_FILE:
            continue
        if t.pin_sha and sha != t.pin_sha:
            t.log.quarantined.append(f"{t.ds.mirror_key}/{t.cf.path}: sha256 {sha} differs from pin {t.pin_sha}: not used")
            continue
        if not place_link(mirror_file, t.dest, t.dest_exists, sha, t.folders):
            t.log.problems.append(f"{t.ds.mirror_key}/{t.cf.path}: changed while it was copied: not used")
            continue
        return t.accept(sha, size)
    return None


def _from_mirror_tree(t: _Target, mirror_roots: Sequence[Path]) -> dict | None:
    """3b. Mirror roots holding the archive unpacked (see the module docstring)."""
    if t.folder is None or t.tree_dest is None:
        return None
    for root in mirror_roots:
        candidate = root / t.ds.mirror_key / t.folder
        if not candidate.is_dir():
            continue
        # the folder's first use in this run sweeps it: before link_tree puts its temp folder there
        t.folders.ready(os.path.dirname(t.tree_dest))
        sha, size, count, tmp_dir = link_tree(candidate, t.tree_dest)
        if t.tree_pin and sha != t.tree_pin[0]:
            shutil.rmtree(tmp_dir, ignore_errors=True)
            t.log.quarantined.append(f"{t.ds.mirror_key}/{t.folder}: tree digest {sha} differs from pin {t.tree_pin[0]}: not used")
            continue
        replace_tree(tmp_dir, t.tree_dest)
        return t.accept_tree(sha, size, count)
    return None


def _from_url(t: _Target, downloader: Callable[[str, Path], Path]) -> dict:
    """4. The upstream URL; a download that differs from its pin is quarantined."""
    try:
        part = downloader(str(t.row["url"]), Path(t.dest))
    except OSError as exc:
        t.log.problems.append(str(exc))
        return t.row
    sha, size = hash_file(part)
    if t.pin_sha and sha != t.pin_sha:
        qdir = t.store / ".quarantine" / t.ds.key
        qdir.mkdir(parents=True, exist_ok=True)
        os.replace(part, qdir / os.path.basename(t.dest))
        t.log.quarantined.append(f"{t.row['url']}: sha256 {sha} differs from pin {t.pin_sha}: quarantined")
        return t.row
    os.replace(part, t.dest)
    return t.accept(sha, size)


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
    fresh: bool = False,
    pins: dict | None = None,
) -> dict:
    """Fetch one file and return its manifest row (the steps in order: the store, an
    archive member's outer archive, the mirror roots, their unpacked trees, the URL).

    `outer_sha`: for an archive member, the sha256 of its stored outer archive when the
    caller has just fetched (and so hashed) it; otherwise the archive is hashed here.
    `folders`: the run's record of store folders made and swept (one per call if None).
    `fresh`: the data set's store folder did not exist when this run began, so nothing is
    stored there yet but what this run placed (the probe of step 1 is skipped).
    `pins`: the data set's `pins()`, when the caller has them at hand (asked for here otherwise).
    """
    t = _target(ds, cf, store, log, folders if folders is not None else StoreFolders(), ds.pins() if pins is None else pins)
    found = None if fresh else _from_store(t)
    if found is not None:
        return found
    if "!/" in cf.path:
        return _from_archive(t, outer_sha)
    found = _from_mirror(t, mirror_roots)
    if found is None:
        found = _from_mirror_tree(t, mirror_roots)
    if found is not None:
        return found
    return _from_url(t, downloader) if allow_download else t.row


#: threads for archive members: their work is mostly the fsync of each unpacked file,
#: which waits on the disk without the GIL (concurrent fsyncs share journal commits)
MEMBER_WORKERS = 8


def in_threads(fn: Callable[[CorpusFile, str | None], dict], calls: Sequence[tuple[CorpusFile, str | None]], workers: int) -> list[dict]:
    """`fn(*call)` of every call, on up to `workers` threads (the calling one among them),
    each taking the next call when it has finished one; results in call order.

    No pool: a future per file, its queue and its wake-ups cost about as much GIL-bound
    work as a small file's fetch. An error stops the taking of calls; the first one (in
    call order) is raised once every thread has ended.
    """
    results: list[dict] = [{}] * len(calls)
    errors: list[tuple[int, BaseException]] = []
    todo = iter(enumerate(calls))
    lock = threading.Lock()

    def work() -> None:
        while not errors:
            with lock:
                i, call = next(todo, (-1, None))
            if call is None:
                return
            try:
                results[i] = fn(*call)
            except BaseException as exc:  # raised below, in the calling thread
                errors.append((i, exc))

    helpers = [threading.Thread(target=work) for _ in range(min(workers, len(calls)) - 1)]
    for thread in helpers:
        thread.start()
    work()
    for thread in helpers:
        thread.join()
    if errors:
        raise min(errors, key=lambda e: e[0])[1]
    return results


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
    fresh = not os.path.isdir(store / ds.key)  # a first fetch: no stored copy to probe for, file by file
    pins = ds.pins()

    def one(cf: CorpusFile, outer_sha: str | None = None) -> dict:
        return fetch_file(ds, cf, store, mirror_roots, allow_download, log, downloader, outer_sha, folders, fresh, pins)

    def many(files: list[CorpusFile], rows: list[dict]) -> list[dict]:
        """Plain files in parallel (hashlib and file I/O release the GIL), then archive
        members, whose outer archive must be in the store first: its row, hashed once
        there, passes its hash on."""
        plain = [(cf, None) for cf in files if "!/" not in cf.path]
        members = [cf for cf in files if "!/" in cf.path]
        out = in_threads(one, plain, FETCH_WORKERS)
        hashed = {r["path"]: r["sha256"] for r in (*rows, *out) if r["status"] == "present" and r.get("form") != "tree"}
        outer = [hashed.get(cf.path.split("!/", 1)[0]) for cf in members]
        return out + in_threads(one, list(zip(members, outer, strict=True)), MEMBER_WORKERS)

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
