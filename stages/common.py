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


def enabled_datasets() -> list[str]:
    """Keys of the data sets selected by params `datasets` ("all" or a list)."""
    from bench.modalities import datasets

    chosen = params().get("datasets", "all")
    known = datasets()
    if chosen == "all":
        return sorted(known)
    unknown = [k for k in chosen if k not in known]
    if unknown:
        fail(f"params.yaml datasets: unknown data set {unknown[0]!r}; registered: {', '.join(sorted(known))}")
    return sorted(chosen)


def set_files(paths: tuple[str, ...] = ()) -> list[Path]:
    """Set files of the enabled data sets (bench/sets/<key>.jsonl that exist)."""
    if paths:
        return [Path(p) for p in paths]
    return [SETS_DIR / f"{k}.jsonl" for k in enabled_datasets() if (SETS_DIR / f"{k}.jsonl").is_file()]


def fail(message: str) -> None:
    """One line on stderr and exit 1: the stage's outputs are left as they were."""
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
