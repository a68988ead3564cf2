"""`bench verify --mirror`: the digests a bundle records, checked against the verifier's own files.

* The set files and the split lock (the run's ``sha256`` block) against the files of the
  verifier's project (paths relative to its root).
* Every present file of the manifest (the bundled ``manifest.jsonl``, whose own sha256 is the
  run's) of each data set the system was served, against the mirror root: a file's sha256, an
  archive member's (read from the mirrored archive), an unpacked tree's digest (bench.ingest.store).

Each function returns (the first problem or None, how many files it checked).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bench.archive import ArchiveError, read_member
from bench.bundle.statement import strict_json
from bench.ingest.store import hash_tree, tree_path
from bench.io import sha256_file

__all__ = ["corpus_problem", "manifest_rows", "set_problem"]


def set_problem(sha256: Mapping[str, Any], project: Path, split_lock: str) -> tuple[str | None, int]:
    """The set files and the split lock of the `sha256` block against the files under `project`."""
    wanted = dict(sha256.get("sets") or {})
    if "split_lock" in sha256:
        wanted[split_lock] = sha256["split_lock"]
    if not wanted:
        return "the bundle records no set file digests (sha256.sets): nothing to check them against", 0
    for rel, digest in sorted(wanted.items()):
        path = project / rel
        if not path.is_file():
            return f"{rel}: no such file in {project.name} (the bundle records sha256 {digest})", 0
        found = sha256_file(path)
        if found != digest:
            return f"{rel}: sha256 {found} in {project.name}, the bundle records {digest}", 0
    return None, len(wanted)


def manifest_rows(data: bytes) -> list[dict[str, Any]]:
    """The bundled manifest's rows (strict JSON lines)."""
    return [strict_json(line, f"manifest.jsonl line {i}") for i, line in enumerate(data.splitlines(), 1) if line.strip()]


def _digest(row: Mapping[str, Any], base: Path) -> str | None:
    """The digest of a manifest row's file under `base` (the data set's mirror folder); None when absent."""
    path = str(row["path"])
    if row.get("form") == "tree":
        folder = base / str(tree_path(path) or path).rstrip("/")
        return hash_tree(folder)[0] if folder.is_dir() else None
    if "!/" in path:
        outer, member = path.split("!/", 1)
        if not (base / outer).is_file():
            return None
        try:
            return hashlib.sha256(read_member(base / outer, member)).hexdigest()
        except ArchiveError:
            return None
    return sha256_file(base / path) if (base / path).is_file() else None


def corpus_problem(rows: Iterable[Mapping[str, Any]], keys: Iterable[str], mirror: Path,
                   mirror_keys: Mapping[str, str]) -> tuple[str | None, int]:
    """Every present row of the data sets `keys` against the `mirror` root (`mirror_keys`: data set key ->
    its folder name there, bench.corpus_sources)."""
    checked = 0
    wanted = sorted(set(keys))
    for key in wanted:
        if key not in mirror_keys:
            return f"data set {key!r} is not registered here (a local data set?): its files are in no mirror to check", checked
    present = [r for r in rows if r.get("key") in wanted and r.get("status") == "present"]
    if not present:
        return f"the bundled manifest lists no present file of {', '.join(wanted) or 'any served data set'}", 0
    for row in present:
        found = _digest(row, mirror / mirror_keys[str(row["key"])])
        where = f"{mirror_keys[str(row['key'])]}/{row['path']}"
        if found is None:
            return f"{where}: not in the mirror {mirror}", checked
        if found != row["sha256"]:
            return f"{where}: sha256 {found} in the mirror, the bundled manifest says {row['sha256']}", checked
        checked += 1
    return None, checked
