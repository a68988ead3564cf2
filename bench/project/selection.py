"""What params.yaml selects: the typed configuration, the enabled data sets, their set files,
the local data sets and the mirror roots, for any project (a Layout).

Errors are ProjectError: one line ("error: ..."), exit 1, in a stage or in `bench`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.project.layout import HERE, Layout, ProjectError, read_params

if TYPE_CHECKING:
    from bench.params import Params

#: overrides params.yaml fetch.mirror_dirs: mirror roots separated by os.pathsep
MIRROR_ENV = "BENCH_MIRROR_DIRS"


def machine_memory() -> int | None:
    """Bytes of physical memory (os.sysconf), or None where the system does not tell."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def config(layout: Layout = HERE) -> Params:
    """params.yaml, checked against bench/params.py's schema, as the typed configuration
    with every default filled in: a bad key or value stops with one line naming it,
    before any output is touched."""
    from bench.corpus_sources import datasets
    from bench.modalities import modalities
    from bench.params import ParamsError, check_params

    doc = read_params(layout)
    try:
        return check_params(doc, modalities(), set(datasets()), machine_memory())
    except ParamsError as exc:
        raise ProjectError(str(exc)) from None


def local_datasets(layout: Layout = HERE) -> list[Any]:
    """The folders of params `local_datasets` as LocalDataset objects, registered (docs/local-data.md)."""
    from bench.corpus_sources import datasets, register_local
    from bench.modalities.local import LocalDataError, load_all

    folders = (read_params(layout).get("local_datasets") or []) if layout.params.is_file() else []
    register_local([])  # datasets() is then the registered ones
    try:
        found = load_all([layout.root / f for f in folders], [str(f) for f in folders], list(datasets().values()))
    except LocalDataError as exc:
        raise ProjectError(str(exc)) from None
    register_local(found)
    return found


def enabled_datasets(layout: Layout = HERE) -> list[str]:
    """Keys of the data sets selected by params `datasets` ("all" or a list), plus every local one."""
    from bench.corpus_sources import datasets

    local = [ds.key for ds in local_datasets(layout)]
    chosen = config(layout).datasets
    known = [k for k in datasets() if k not in local]
    if chosen == "all":
        return sorted([*known, *local])
    unknown = [k for k in chosen if k not in known and k not in local]
    if unknown:
        raise ProjectError(f"params.yaml datasets: unknown data set {unknown[0]!r}; registered: {', '.join(sorted(known))}")
    return sorted({*chosen, *local})


def set_files(paths: tuple[str, ...] = (), layout: Layout = HERE) -> list[Path]:
    """Set files of the enabled data sets (bench/sets/<key>.jsonl that exist; a local one's set.jsonl)."""
    from bench.corpus_sources import datasets

    if paths:
        return [Path(p) for p in paths]
    out = []
    for k in enabled_datasets(layout):
        own = getattr(datasets()[k], "set_path", None)
        path = own if own is not None else layout.sets_dir / f"{k}.jsonl"
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


def mirror_roots(configured: list[str], env: Mapping[str, str] | None = None, root: Path = HERE.root) -> list[Path]:
    """Mirror roots to try, in order: $BENCH_MIRROR_DIRS (os.pathsep-separated) when set,
    else params.yaml fetch.mirror_dirs; relative ones against the original repository root."""
    env = os.environ if env is None else env
    dirs = [d for d in env[MIRROR_ENV].split(os.pathsep) if d] if env.get(MIRROR_ENV) else list(configured)
    base = repo_root(root)
    return [(base / d).resolve() for d in dirs]
