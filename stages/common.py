"""Paths and params shared by the stage scripts (the core never reads these).

The paths, params() and fail() live in stages/paths.py (no modality imported) and
are re-exported here; this module adds the data-set selection (which needs the
registry of every modality) and the mirror roots.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from stages.paths import (
    ATOMS,
    MANIFEST,
    OCR_CACHE,
    PARAMS,
    REPORTS,
    RESOLVED,
    ROOT,
    RUNS,
    SEGMENTS,
    SERVED,
    SETS_DIR,
    SPLIT_LOCK,
    STORE,
    VALID_DIR,
    fail,
    read_json,
)

__all__ = ["ATOMS", "MANIFEST", "OCR_CACHE", "PARAMS", "REPORTS", "RESOLVED", "ROOT", "RUNS", "SEGMENTS", "SERVED", "SETS_DIR",
           "SPLIT_LOCK", "STORE", "VALID_DIR", "LOCAL_FINGERPRINTS", "enabled_datasets", "fail", "local_datasets", "mirror_roots", "params", "read_json", "repo_root", "set_files"]
LOCAL_FINGERPRINTS = ROOT / "bench" / "corpus" / "local"  # written by the `local` stage, read by fetch

#: overrides params.yaml fetch.mirror_dirs: mirror roots separated by os.pathsep
MIRROR_ENV = "BENCH_MIRROR_DIRS"

def params() -> dict[str, Any]:
    """params.yaml, checked against bench/params.py's schema: a bad key or value stops
    the stage with one line naming it, before any output is touched."""
    from bench.modalities import datasets, modalities
    from bench.params import ParamsError, check_params

    try:
        with open(PARAMS, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as exc:
        fail(f"params.yaml: cannot be read as YAML ({' '.join(str(exc).split())})")
    try:
        return check_params(doc, {m: mod.strategies for m, mod in modalities().items()}, set(datasets()))
    except ParamsError as exc:
        fail(str(exc))
    raise AssertionError("unreachable")


def local_datasets() -> list[Any]:
    """The folders of params `local_datasets` as LocalDataset objects, registered (docs/local-data.md)."""
    from bench.modalities import datasets, register_local
    from bench.modalities.local import LocalDataError, load_all

    folders = params().get("local_datasets") or []
    register_local([])  # datasets() is then the registered ones
    try:
        found = load_all([ROOT / f for f in folders], [str(f) for f in folders], list(datasets().values()))
    except LocalDataError as exc:
        fail(str(exc))
    register_local(found)
    return found


def enabled_datasets() -> list[str]:
    """Keys of the data sets selected by params `datasets` ("all" or a list), plus every local one."""
    from bench.modalities import datasets

    local = [ds.key for ds in local_datasets()]
    chosen = params().get("datasets", "all")
    known = [k for k in datasets() if k not in local]
    if chosen == "all":
        return sorted([*known, *local])
    unknown = [k for k in chosen if k not in known and k not in local]
    if unknown:
        fail(f"params.yaml datasets: unknown data set {unknown[0]!r}; registered: {', '.join(sorted(known))}")
    return sorted({*chosen, *local})


def set_files(paths: tuple[str, ...] = ()) -> list[Path]:
    """Set files of the enabled data sets (bench/sets/<key>.jsonl that exist; a local one's set.jsonl)."""
    from bench.modalities import datasets

    if paths:
        return [Path(p) for p in paths]
    out = []
    for k in enabled_datasets():
        own = getattr(datasets()[k], "set_path", None)
        path = own if own is not None else SETS_DIR / f"{k}.jsonl"
        if path.is_file():
            out.append(path)
    return out


def repo_root(root: Path) -> Path:
    """The repository a DVC experiment workspace was copied from, or `root` itself.

    Queued and `--temp` experiments run in a copy under `<repo>/.dvc/tmp/exps/...`;
    relative mirror roots are meant relative to `<repo>`, not to that copy.
    """
    parts = root.parts
    for i in range(len(parts) - 3, -1, -1):
        if parts[i : i + 3] == (".dvc", "tmp", "exps"):
            return Path(*parts[:i]) if i else Path(parts[0])
    return root


def mirror_roots(configured: list[str], env: Mapping[str, str] | None = None, root: Path = ROOT) -> list[Path]:
    """Mirror roots to try, in order: $BENCH_MIRROR_DIRS (os.pathsep-separated) when set,
    else params.yaml fetch.mirror_dirs; relative ones against the original repository root."""
    env = os.environ if env is None else env
    dirs = [d for d in env[MIRROR_ENV].split(os.pathsep) if d] if env.get(MIRROR_ENV) else list(configured)
    base = repo_root(root)
    return [(base / d).resolve() for d in dirs]
