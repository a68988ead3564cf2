"""The registry of corpus sources: every data set the harness knows, with provenance.

Each data set is declared in its modality's folder (``bench/modalities/<name>/``) as a
:class:`~bench.modalities.base.Dataset` with its upstream repository, pinned
revision, license, ``annotation_source`` (who made the gold: third-party humans),
modality, and the rules that assign holders and ``observed_at``. This module is the
one place that lists them all; ``python bench/corpus_sources.py`` prints the table.
"""

from __future__ import annotations

import json
import sys

from bench.modalities import dataset_by_name, dataset_of_source, datasets, modalities
from bench.modalities.base import Dataset

__all__ = ["SOURCES", "dataset_by_name", "dataset_of_source", "modalities", "registry"]


def registry() -> dict[str, Dataset]:
    return datasets()


SOURCES = registry()


def main() -> None:
    json.dump([ds.describe() for ds in SOURCES.values()], sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
