"""The registry of corpus sources: every data set the harness knows, with provenance.

Each data set is declared in its modality's folder (``bench/modalities/<name>/``) as a
:class:`~bench.modalities.base.Dataset` with its upstream repository, pinned revision,
license, ``annotation_source`` (who made the gold: third-party humans), modality, and
the rules that assign holders and ``observed_at``; a local data set (docs/local-data.md)
is registered here by the stage or command that read params ``local_datasets``. This
module is the one place that answers "which data sets exist": fetch, validate, the
report and the ``bench`` command read it. ``python -m bench.corpus_sources`` prints it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable

from bench.modalities import declared_datasets
from bench.modalities.base import Dataset

__all__ = ["dataset_by_name", "dataset_of_source", "datasets", "register_local"]

#: local data sets (bench/modalities/local.py) registered in this process
_LOCAL: dict[str, Dataset] = {}


def register_local(found: Iterable[Dataset]) -> None:
    """Make local data sets (built from params `local_datasets`) known like declared ones."""
    _LOCAL.clear()
    _LOCAL.update({ds.key: ds for ds in found})


def datasets() -> dict[str, Dataset]:
    """Every known data set by key: the declared ones, then the registered local ones."""
    return {**declared_datasets(), **_LOCAL} if _LOCAL else declared_datasets()


def dataset_by_name(name: str) -> Dataset | None:
    for ds in datasets().values():
        if ds.name == name:
            return ds
    return None


def dataset_of_source(source_id: str) -> Dataset | None:
    """Source ids are '<dataset key>:<rest>'."""
    return datasets().get(source_id.split(":", 1)[0])


def main() -> None:
    json.dump([ds.describe() for ds in datasets().values()], sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
