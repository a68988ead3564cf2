"""Which entries are not independent: the clusters every interval, p-value and MDE resamples.

Entries are not independent draws when they put the same request to the system: LoCoMo
asks many of its questions at two moments (1,422 distinct questions among its 2,071 dev
entries), and a system that finds one asking's evidence finds the other's. Treating the
askings as independent shrinks every interval and p-value (three questions improved at both
askings read p 0.031 instead of the 0.25 of three questions). So the statistics resample and
permute **clusters** of entries, and say how many clusters and entries they rest on:

``question`` (the default)  entries of one modality that ask the same question (its text,
                            spaces collapsed, case kept) under the same scope (holder and
                            session): the same request to the system apart from its moment.
``source``                  entries that need a common source -- the conversation, the
                            document, the video, the repository (the data set's
                            ``Dataset.sources_of``: its gold sources and what every entry of
                            it reads) -- one cluster, question clusters kept whole (connected
                            components). Far fewer clusters (7 LoCoMo conversations in dev;
                            CoSQA's one function corpus is one cluster: no interval).
``entry``                   every entry its own cluster: entries treated as independent (the
                            unit before; what a per-query table without cluster columns gives).

The evaluation writes each entry's labels into the per-query table (:data:`COLUMNS`: the
smallest query_id of its question cluster, the smallest source id of its source cluster), so
``bench compare``, the gate and the leaderboard read them from a run's committed table. A
cluster's label means nothing but "these entries go together"; statistics use integer codes
(:func:`cluster_codes`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from bench.corpus_sources import dataset_by_name
from bench.evaluation.stats import CLUSTERINGS, Clustering

__all__ = ["CLUSTERINGS", "COLUMNS", "LABELS", "Clustering", "cluster_codes", "clusters_of", "entry_clusters", "source_ids"]

#: the per-query table's column of each clustering's labels (``entry`` needs none)
COLUMNS: Mapping[str, str] = {"question": "cluster", "source": "source_cluster"}
#: an entry that carries its own labels ({column: label}): a bundle's entry, cut to what the evaluation
#: reads (no question: bench.bundle.evidence), keeps the labels its full entry was given
LABELS = "clusters"
_SPACE = re.compile(r"\s+")


def _question_key(entry: Mapping[str, Any]) -> tuple[str, str, str, str]:
    scope = entry.get("scope") or {}
    return (str(entry.get("modality")), str(scope.get("holder")), str(scope.get("session")),
            _SPACE.sub(" ", str(entry.get("question", ""))).strip())


def source_ids(entry: Mapping[str, Any]) -> list[str]:
    """The sources an entry reads: its data set's ``sources_of`` (gold sources and what every entry
    of the data set needs), its gold sources for a data set the registry does not know."""
    ds = dataset_by_name(str((entry.get("origin") or {}).get("dataset", "")))
    if ds is not None:
        return list(ds.sources_of(dict(entry)))
    return sorted({str(g["source_id"]) for g in entry.get("gold") or [] if isinstance(g, Mapping) and "source_id" in g})


def _find(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def entry_clusters(entries: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """query_id, cluster (question clustering's label) and source_cluster (source clustering's)
    of every entry, sorted by query_id (module docstring); the labels entries carry (LABELS) when each has them."""
    rows = sorted(entries, key=lambda e: str(e["query_id"]))
    ids = [str(e["query_id"]) for e in rows]
    if rows and all(isinstance(e.get(LABELS), Mapping) for e in rows):  # labelled entries (LABELS) keep their labels
        return pd.DataFrame({"query_id": ids, **{c: [str(e[LABELS][c]) for e in rows] for c in COLUMNS.values()}})
    by_question: dict[tuple[str, str, str, str], str] = {}
    for qid, e in zip(ids, rows, strict=True):
        by_question.setdefault(_question_key(e), qid)  # ids sorted: the first is the smallest
    question = [by_question[_question_key(e)] for e in rows]
    parent = list(range(len(rows)))
    first: dict[str, int] = {}
    sources = [source_ids(e) for e in rows]
    for i, (label, found) in enumerate(zip(question, sources, strict=True)):
        for key in (f"q\x00{label}", *(f"s\x00{s}" for s in found)):
            j = first.setdefault(key, i)
            a, b = _find(parent, i), _find(parent, j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    roots = [_find(parent, i) for i in range(len(rows))]
    named: dict[int, str] = {}
    for i, root in enumerate(roots):
        best = min(sources[i]) if sources[i] else ids[i]
        named[root] = min(named.get(root, best), best)
    return pd.DataFrame({"query_id": ids, COLUMNS["question"]: question, COLUMNS["source"]: [named[r] for r in roots]})


def cluster_codes(table: pd.DataFrame, clustering: Clustering = "question") -> np.ndarray:
    """Integer cluster codes (0..C-1) of the rows of `table` under `clustering`; every row its own
    when the table has no labels for it (``entry``, or a table evaluated before clusters)."""
    if clustering not in CLUSTERINGS:
        raise ValueError(f"clustering {clustering!r} is not one of {', '.join(CLUSTERINGS)}")
    column = COLUMNS.get(clustering)
    if column is None or column not in table.columns:
        return np.arange(len(table), dtype=np.int64)
    labels = table[column].astype(str).to_numpy()
    return np.unique(labels, return_inverse=True)[1].astype(np.int64)


def clusters_of(table: pd.DataFrame, clustering: Clustering = "question") -> str:
    """What the statistics over `table` resample, in words (for a report's line)."""
    if clustering != "entry" and COLUMNS[clustering] not in table.columns:
        return "entries (the per-query table records no clusters: entries treated as independent)"
    return {"question": "clusters of entries asking the same question", "source": "clusters of entries reading the same source",
            "entry": "entries (treated as independent)"}[clustering]
