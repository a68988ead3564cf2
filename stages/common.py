"""Paths and params shared by the stage scripts (the core never reads these)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
import yaml

ROOT = Path(__file__).resolve().parent.parent
PARAMS = ROOT / "params.yaml"
MANIFEST = ROOT / "bench" / "corpus" / "manifest.jsonl"
SETS_DIR = ROOT / "bench" / "sets"
SPLIT_LOCK = SETS_DIR / "splits.lock"
LOCAL_FINGERPRINTS = ROOT / "bench" / "corpus" / "local"  # written by the `local` stage, read by fetch
STORE = ROOT / "data" / "corpus"
SEGMENTS = ROOT / "data" / "segments"
VALID_DIR = ROOT / "data" / "sets"
ATOMS = ROOT / "data" / "atoms"
SERVED = ROOT / "data" / "served"  # the atoms the system under test serves (retrieve stage)
RUNS = ROOT / "data" / "runs"
RESOLVED = ROOT / "data" / "resolved"
REPORTS = ROOT / "reports"


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


def fail(message: str) -> None:
    """One line on stderr and exit 1: the stage's outputs are left as they were."""
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
