"""Content-addressed reuse of derived results across runs (docs/performance.md, *Reuse across runs*).

A result is stored under the sha256 of exactly what it depends on: the caller passes
every input (array bytes, parameters, labels) to :meth:`Memo.key`, and every key also
holds :func:`code_version` of the code that computes it -- the text of every project module
the computation of that kind imports (``KIND_CODE``; found statically by bench.codegraph,
as the DVC deps test finds a stage's code; a kind not listed there: every module of this
package) and the versions of the libraries whose output could differ (numpy's random
streams, pandas, pyarrow, Pillow, pypdfium2, bm25s). A changed input or changed code makes a
new key, so a stored result is never read for inputs it was not made from; nothing is ever
invalidated in place; an edit of a module the computation does not import keeps the reuse. Entries are written atomically (a temp file renamed into place), so two runs
filling the same folder at once (``dvc exp run --queue -j 2``) at worst write the same
bytes twice. A missing, unreadable or truncated entry is a miss.

A query's latency is stored only with its answer (kind ``answers``, bench.systems.partwise),
for a built-in system whose every input of that answer was byte-identical: the same
computation on the same inputs; the run records which run measured it.

Nothing here reads params.yaml or the environment; the stage passes the folder
(bench.project.layout.memo_dir) or None (no reuse: every lookup misses, nothing is written).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Callable
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from bench.io import atomic_writer

__all__ = ["KIND_CODE", "Memo", "code_version"]

T = TypeVar("T")

#: the folder's size kept by :meth:`Memo.prune` (the eight default data sets store about 17 MiB per chunking tried)
MAX_BYTES = 1 << 30
#: the last bytes of every complete entry (a truncated one lacks them)
END = b"\n#end\n"
#: libraries whose results (random streams, parsing, rendering, scoring) could change with their version
LIBRARIES = ("numpy", "pandas", "pyarrow", "pillow", "pypdfium2", "bm25s", "matplotlib")


#: what the computation of each kind of result is (the modules it runs; their imports found by
#: bench.codegraph): the code its key holds. A kind not listed: every module of this package.
KIND_CODE: dict[str, tuple[str, ...]] = {
    "atoms": ("bench.ingest.chunking",),  # a chunk partition (stages/chunk.py)
    "ci": ("bench.evaluation.stats.uncertainty",),  # a dev.json interval
    "pictures": ("bench.reporting.thumbnails",),  # a drill-down picture (each modality's hook)
    "svg": ("bench.reporting.outputs",),  # a report figure (bench.reporting.plots)
    "evaluate": ("stages.evaluate",),  # the evaluate stage's outputs whole (bench.project.reuse)
    "blocks": ("bench.evaluation.evaluate",),  # one modality's per-query columns of a block (bench.evaluation.reused)
    "answers": ("bench.systems.step",),  # a built-in system's answers and latency (bench.systems.partwise)
}


@cache
def _tree(root: Path) -> tuple[dict[str, bytes], bytes]:
    """Every .py file of the project's packages (relative posix path -> bytes), and the sha256
    of them all (read once per process)."""
    from bench.codegraph import PACKAGES

    files = {p.relative_to(root).as_posix(): p.read_bytes() for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))
             if "__pycache__" not in p.parts}
    tree = hashlib.sha256()
    for name in sorted(files):
        tree.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return files, tree.digest()


@cache
def _graph(root: Path) -> Any:
    """One bench.codegraph.CodeGraph per project per process (each module parsed once), over the files as `_tree` read them."""
    from bench.codegraph import CodeGraph

    files = _tree(root)[0]
    return CodeGraph(root, source=lambda p: files[p.relative_to(root).as_posix()].decode("utf-8"))


def _closure(root: Path, modules: tuple[str, ...]) -> list[str]:
    return [p.relative_to(root).as_posix() for p in _graph(root).code_files(modules)]


@cache
def code_version(modules: tuple[str, ...] | None = None, root: Path | None = None, store: Path | None = None) -> str:
    """sha256 of the project modules that importing `modules` can run (path and text; None:
    every module of this package) and the library versions. `root`: the project (default:
    this checkout); `store`: a memo folder where the import closure is kept by the sha256 of
    every project file (found again only after an edit: parsing the modules costs ~0.2 s)."""
    from bench.codegraph import ROOT

    root = ROOT if root is None else Path(root)
    files, tree = _tree(root)
    names: list[str] | None
    if modules is None:
        names = sorted(n for n in files if n.startswith("bench/"))
    else:
        digest = hashlib.sha256(tree + repr(modules).encode()).hexdigest()
        cache_file = None if store is None else Path(store) / "imports" / digest[:2] / digest
        found: Any = None
        if cache_file is not None:
            with contextlib.suppress(OSError, ValueError):
                found = json.loads(cache_file.read_text())
        names = found if isinstance(found, list) and all(n in files for n in found) else None
        if names is None:
            names = _closure(root, modules)
            if cache_file is not None:
                with contextlib.suppress(OSError):
                    cache_file.parent.mkdir(parents=True, exist_ok=True)
                    with atomic_writer(cache_file, "w") as fh:
                        fh.write(json.dumps(names))
    h = hashlib.sha256()
    for name in names or []:
        h.update(name.encode() + b"\0")
        h.update(files[name] + b"\0")
    h.update(sys.version.encode() + b"\0")
    for lib in LIBRARIES:
        try:
            h.update(f"{lib}={metadata.version(lib)}\0".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{lib}=none\0".encode())
    return h.hexdigest()


def _part(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if hasattr(value, "tobytes") and hasattr(value, "dtype"):  # a numpy array: its dtype, shape and bytes
        return f"{value.dtype.str}{value.shape}".encode() + value.tobytes()
    return json.dumps(value, sort_keys=True, default=str).encode()


class Memo:
    """Results stored under ``<root>/<kind>/<key[:2]>/<key>``; ``root`` None: no reuse."""

    def __init__(self, root: Path | None, code_root: Path | None = None) -> None:
        self.root = None if root is None else Path(root)
        self.code_root = code_root  # the project whose code computes the results (default: this checkout)
        self.hits = 0
        self.misses = 0

    def code(self, kind: str) -> str:
        """:func:`code_version` of the code that computes results of `kind` (KIND_CODE); no
        reuse (root None): nothing is looked up, so no code is read."""
        return "" if self.root is None else code_version(KIND_CODE.get(kind), self.code_root, self.root)

    def key(self, kind: str, *parts: Any) -> str:
        """sha256 of the kind, the code computing it (:meth:`code`) and every part (each length-prefixed)."""
        h = hashlib.sha256()
        for p in (kind, self.code(kind), *parts):
            data = _part(p)
            h.update(len(data).to_bytes(8, "big") + data)
        return h.hexdigest()

    def _path(self, kind: str, key: str) -> Path | None:
        return None if self.root is None else self.root / kind / key[:2] / key

    def _read(self, kind: str, key: str) -> bytes | None:
        """The entry under `key` as stored, its end mark included (None: missing, unreadable or truncated)."""
        path = self._path(kind, key)
        data = None
        if path is not None:
            try:
                data = path.read_bytes()
            except OSError:
                data = None
        if data is None or not data.endswith(END):  # a truncated entry is a miss
            self.misses += 1
            return None
        self.hits += 1
        with contextlib.suppress(OSError):  # its modification time is its last use (prune keeps the recent)
            os.utime(path)  # type: ignore[arg-type]  # not None: data was read from it
        return data

    def get(self, kind: str, key: str) -> bytes | None:
        data = self._read(kind, key)
        return None if data is None else data[: -len(END)]

    def put(self, kind: str, key: str, data: bytes) -> None:
        self._write(kind, key, [data])

    def _write(self, kind: str, key: str, chunks: list[bytes]) -> None:
        """Write the entry `chunks` make, one after another, and its end mark (no copy of them joined)."""
        path = self._path(kind, key)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_writer(path, "wb") as fh:
                fh.writelines([*chunks, END])
        except OSError:  # a full or read-only disk costs the reuse, never the run
            return

    def json(self, kind: str, key: str, compute: Callable[[], T]) -> T:
        """The stored JSON value under `key`, else `compute()` stored (it must be JSON; floats round-trip exactly)."""
        data = self.get(kind, key)
        if data is not None:
            try:
                found: T = json.loads(data)
                return found
            except ValueError:
                pass
        value = compute()
        self.put(kind, key, json.dumps(value, allow_nan=True).encode())
        return value

    def text(self, kind: str, key: str, compute: Callable[[], str]) -> str:
        """The stored text under `key`, else `compute()` stored."""
        data = self.get(kind, key)
        if data is not None:
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                pass
        value = compute()
        self.put(kind, key, value.encode("utf-8"))
        return value

    def files(self, kind: str, key: str) -> dict[str, bytes] | None:
        """The files stored under `key` (name -> bytes, in the order stored), else None
        (also when the entry's checksum, names or sizes do not hold)."""
        data = self._read(kind, key)
        if data is None:
            return None
        # read in place (offsets and a memoryview): an entry of ~100 MB is copied once, into its files
        rest = data.find(b"\n") + 1
        body = data.find(b"\n", rest) + 1
        end = len(data) - len(END)
        if not 0 < rest < body <= end:
            return None
        try:
            sizes = [(str(name), int(size)) for name, size in json.loads(data[rest:body - 1])]
        except (ValueError, TypeError):
            return None
        digest = data[:rest - 1].decode("ascii", "replace")
        if digest != hashlib.sha256(memoryview(data)[rest:end]).hexdigest() or sum(size for _, size in sizes) != end - body:
            return None
        out, at = {}, body
        for name, size in sizes:
            out[name] = data[at:at + size]
            at += size
        return out

    def put_files(self, kind: str, key: str, root: Path, names: list[str]) -> None:
        """Store the files `names` (paths relative to `root`) under `key`, as they are on disk."""
        if self.root is None:
            return
        self.put_blobs(kind, key, {name: (root / name).read_bytes() for name in names})

    def put_blobs(self, kind: str, key: str, blobs: dict[str, bytes]) -> None:
        """Store named byte strings under `key` (read back by :meth:`files`, in this order)."""
        if self.root is None:
            return
        chunks = [json.dumps([[name, len(blob)] for name, blob in blobs.items()]).encode() + b"\n", *blobs.values()]
        digest = hashlib.sha256()
        for chunk in chunks:
            digest.update(chunk)
        self._write(kind, key, [digest.hexdigest().encode() + b"\n", *chunks])

    def prune(self, max_bytes: int = MAX_BYTES) -> int:
        """Delete the least recently used entries until the folder holds at most
        `max_bytes` (a deleted entry is computed again when next needed); returns the
        entries deleted."""
        if self.root is None or not self.root.is_dir():
            return 0
        entries = []
        for path in self.root.glob("*/*/*"):
            with contextlib.suppress(OSError):
                st = path.stat()
                entries.append((st.st_mtime, st.st_size, path))
        total = sum(size for _, size, _ in entries)
        deleted = 0
        for _, size, path in sorted(entries, key=lambda e: e[0]):
            if total <= max_bytes:
                break
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
                deleted += 1
        return deleted

    def summary(self) -> str:
        return f"{self.hits} reused, {self.misses} computed" + ("" if self.root is None else f" ({os.fspath(self.root)})")
