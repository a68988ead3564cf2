"""Modality plug-ins, discovered from the sub-packages of this folder.

Each sub-package (``bench/modalities/<name>/``) exports ``MODALITY`` (a
:class:`~bench.modalities.base.Modality`) and ``DATASETS`` (a list of
:class:`~bench.modalities.base.Dataset`). Adding a modality means adding a folder;
nothing else in the harness names modalities.

``load(name)`` imports one sub-package only, so a per-modality stage (``python -m
stages.extract pdf``) imports no other modality's code and its DVC deps can name
only ``bench/modalities/<name>/``. ``modalities()`` and ``declared_datasets()`` (and the
registry built on them, bench/corpus_sources.py) import every sub-package (tests/test_dvc_deps.py models both).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # not imported at run time: `names()` is read by `bench --help` (bench/cli.py), which imports no pandas
    import pandas as pd

    from bench.modalities.base import Dataset, Modality


def names() -> list[str]:
    """Names of the modality sub-packages, sorted, without importing any of them."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if info.ispkg)


def load(name: str) -> ModuleType:
    """Import the one modality sub-package `name` (its MODALITY and DATASETS)."""
    if name not in names():
        raise ValueError(f"unknown modality {name!r}; known: {', '.join(names())}")
    return importlib.import_module(f"{__name__}.{name}")


@functools.cache
def _load() -> tuple[dict[str, Modality], dict[str, Dataset]]:
    modalities: dict[str, Modality] = {}
    datasets: dict[str, Dataset] = {}
    for name in names():
        module = load(name)
        modality: Modality = module.MODALITY
        modalities[modality.name] = modality
        for ds in module.DATASETS:
            if ds.key in datasets:
                raise RuntimeError(f"dataset key {ds.key!r} registered twice")
            datasets[ds.key] = ds
    return modalities, datasets


def modalities() -> dict[str, Modality]:
    return _load()[0]


def declared_datasets() -> dict[str, Dataset]:
    """The data sets the modality folders declare (their DATASETS); the registry with the
    local data sets added is bench/corpus_sources.py."""
    return _load()[1]


#: the columns of a resolved region row that are not a region's own (bench.gold.resolve)
RESOLVED_REGION_COLUMNS = ("query_id", "modality", "gold_idx", "source_id", "part", "x0", "x1", "y0", "y1", "extent",
                           "n_atoms", "n_future_atoms")


def region_columns() -> dict[str, str]:
    """Every modality's `Modality.region_columns` (name -> dtype), in modality-name order; a
    name two modalities share must have one dtype and no name may be a resolved row's own."""
    out: dict[str, str] = {}
    for name in sorted(modalities()):
        for column, dtype in modalities()[name].region_columns.items():
            if column in RESOLVED_REGION_COLUMNS or out.get(column, dtype) != dtype:
                raise RuntimeError(f"modality {name!r}: region column {column!r} clashes with another column of a resolved region")
            out[column] = dtype
    return out


def unreadable_gold(entries: list[dict], segments: pd.DataFrame) -> dict[str, Any] | None:
    """`Modality.unreadable_gold` of every modality, merged: {"answerable": n, "entries":
    [...]} over the modalities that have the notion, or None when none has it."""
    found = [r for m in sorted(modalities()) if (r := modalities()[m].unreadable_gold(entries, segments)) is not None]
    if not found:
        return None
    return {"answerable": sum(int(r["answerable"]) for r in found), "entries": [row for r in found for row in r["entries"]]}


def unreadable_gold_lines(found: dict[str, Any]) -> list[str]:
    """The report lines of `unreadable_gold`'s merged result: `Modality.unreadable_gold_lines`
    of every modality that has the notion (today one: pdf)."""
    return [line for m in sorted(modalities()) for line in modalities()[m].unreadable_gold_lines(found)]
