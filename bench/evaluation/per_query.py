"""The per-query table (schema b-2, section 4): one row per annotated entry with every
per-query measure column. Pure functions of pandas frames; no I/O.

:func:`query_block` runs the families of phase ``query`` (bench.evaluation.measures.
FAMILIES: the ranking, returned and leak columns) and reads abstained and confidence, block
by block over the entries (bench.evaluation.evaluate reads a big run in blocks);
:func:`finish_per_query` runs those of phase ``cross_query`` (what needs every query of a
modality: the false-recall rules, the AUROC signal) and blanks each measure's column outside
its declared scope and for failed queries (there is no result to score: NaN; the cells count
a failed query as the measure's worst case). :func:`per_query` is the two in one, so one
block and many give the same table. Inputs: bench.evaluation.encoding; definitions and
computations: the family modules of bench.evaluation.measures.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.encoding import Failed, encode_inputs, responses_per_entry
from bench.evaluation.measures import families, measures
from bench.evaluation.measures.base import AllQueries, Mean, Measure, QueryRows, in_denominator, run_family

__all__ = ["finish_per_query", "per_query", "query_block", "query_measures"]


def query_measures(k: int) -> list[Measure]:
    """The mean measures whose per-query column :func:`per_query` computes (families of the
    phases query and cross_query), in report order."""
    mine = {f.name for f in families("query", "cross_query")}
    return [m for m in measures(k) if m.family in mine and isinstance(m.reducer, Mean)]


def per_query(
    entries: pd.DataFrame,
    run: pd.DataFrame,
    gold: pd.DataFrame,
    atoms: pd.DataFrame,
    *,
    k: int = 10,
    failed: Failed = None,
    responses: pd.DataFrame | None = None,
    abstains: bool = False,
    calibration_recall: float = 0.9,
    thresholds: dict[str, float | None] | None = None,
) -> pd.DataFrame:
    """One row per entry (sorted by query_id) with every per-query measure.

    ``responses``: query_id, abstain, confidence per answered query (the retrieve
    stage's latency table); ``abstains``: the system declared abstention once (its
    ready line or attribute); ``thresholds``: per modality, the dev run's calibrated
    top-1 score (None: not measurable) -- given, the calibration is not redone.
    A measure's column is NaN outside its scope and for a failed query (whose
    ``failed`` column is True).
    """
    block = query_block(entries, run, gold, atoms, k=k, failed=failed, responses=responses)
    return finish_per_query(block, k=k, abstains=abstains, calibration_recall=calibration_recall, thresholds=thresholds)


def query_block(
    entries: pd.DataFrame,
    run: pd.DataFrame,
    gold: pd.DataFrame,
    atoms: pd.DataFrame,
    *,
    k: int = 10,
    failed: Failed = None,
    responses: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The per-query part of :func:`per_query` for a block of entries: every column that
    depends on one query's own rows only (ranking, returned, leak, abstained as bool,
    confidence). ``run`` and ``gold`` may hold rows of other queries (they are ignored).
    Blocks of disjoint entries, concatenated in query_id order, give
    :func:`finish_per_query` what one block of all entries gives it."""
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError("k must be a positive int")
    k = int(k)
    coded = encode_inputs(entries, run, gold, atoms, failed)
    abstained, confidence = responses_per_entry(responses, coded.entries)
    frame = coded.entries.frame
    columns: dict[str, Any] = {
        "modality": frame["modality"],
        "unanswerable": frame["unanswerable"],
        "failed": coded.entries.failed,
        "n_regions": frame["n_regions"],
        "abstained": abstained & ~coded.entries.failed,
        "confidence": confidence,
    }
    rows = QueryRows(coded=coded, k=k, abstained=abstained)
    for family in families("query"):  # ranking, leaks (bench.evaluation.measures.FAMILIES)
        columns.update(run_family(family, rows))
    return pd.DataFrame(columns, index=frame.index).rename_axis("query_id").reset_index()


def finish_per_query(
    blocks: pd.DataFrame,
    *,
    k: int = 10,
    abstains: bool = False,
    calibration_recall: float = 0.9,
    thresholds: dict[str, float | None] | None = None,
) -> pd.DataFrame:
    """:func:`per_query`'s table from :func:`query_block` rows of all entries (sorted by
    query_id): the steps that need every query -- the false-recall rules (calibration
    over a modality's answerable entries), the AUROC signal -- and each measure's scope."""
    k = int(k)
    blocks = blocks.reset_index(drop=True)
    unans = blocks["unanswerable"].to_numpy(dtype=bool)
    failed = blocks["failed"].to_numpy(dtype=bool)
    every = AllQueries(blocks=blocks, k=k, abstains=abstains, calibration_recall=calibration_recall, thresholds=thresholds)
    columns: dict[str, Any] = {c: blocks[c] for c in ("query_id", "modality", "unanswerable")}
    columns.update({"failed": failed, "n_regions": blocks["n_regions"]})
    for family in families("query", "cross_query"):  # in registry order: their columns' order
        columns.update(run_family(family, every) if family.phase == "cross_query" else
                       {c: blocks[c].to_numpy() for c in family.columns(k)})
    for m in query_measures(k):  # defined on the measure's scope, for queries with a result
        columns[m.column] = np.where(in_denominator(m.scope, unans) & ~failed, columns[m.column], np.nan)
    for col in ("top1_score", "confidence"):
        columns[col] = np.where(failed, np.nan, columns[col])
    return pd.DataFrame(columns).reset_index(drop=True)
