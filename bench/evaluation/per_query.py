"""The per-query table (schema b-2, section 4): one row per annotated entry with every
per-query measure column. Pure functions of pandas frames; no I/O.

:func:`query_block` computes everything one query's own rows decide (the ranking,
leak and returned columns, abstained, confidence), block by block over the entries
(bench.evaluation.evaluate reads a big run in blocks); :func:`finish_per_query` adds
what needs every query of a modality (the false-recall rules, the AUROC signal) and
blanks each measure's column outside its declared scope and for failed queries (there
is no result to score: NaN; the cells count a failed query as the measure's worst
case). :func:`per_query` is the two in one, so one block and many give the same
table. Inputs: bench.evaluation.encoding; definitions: the family modules of
bench.evaluation.measures.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.encoding import Failed, encode_inputs, responses_per_entry
from bench.evaluation.measures import measures
from bench.evaluation.measures.auroc import auroc_signal
from bench.evaluation.measures.base import Mean, Measure, in_denominator
from bench.evaluation.measures.false_recall import false_recall_columns, modality_rules
from bench.evaluation.measures.leaks import leak_columns
from bench.evaluation.measures.ranking import abstained_counts_nothing, ranking_columns, returned_columns

__all__ = ["PER_QUERY_FAMILIES", "finish_per_query", "per_query", "query_block", "query_measures"]

#: the families whose per-query columns this table computes (extent: bench.evaluation.measures.extent; latency: the run's)
PER_QUERY_FAMILIES = ("ranking", "false_recall", "auroc", "leaks")


def query_measures(k: int) -> list[Measure]:
    """The mean measures whose per-query column :func:`per_query` computes, in report order."""
    return [m for m in measures(k) if m.family in PER_QUERY_FAMILIES and isinstance(m.reducer, Mean)]


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
        **ranking_columns(coded.run, coded.gold, coded.entries, k),
        **returned_columns(coded.run, coded.entries),
        "abstained": abstained & ~coded.entries.failed,
        "confidence": confidence,
        **leak_columns(coded.run, coded.entries, coded.atoms, k),
    }
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
    mods = blocks["modality"].to_numpy()
    unans = blocks["unanswerable"].to_numpy(dtype=bool)
    failed = blocks["failed"].to_numpy(dtype=bool)
    top1 = blocks["top1_score"].to_numpy(dtype=float)
    abstained = blocks["abstained"].to_numpy(dtype=bool)
    confidence = blocks["confidence"].to_numpy(dtype=float)
    declared = bool(abstains) or bool(abstained.any())
    rules = modality_rules(mods, unans, failed, top1, declared, float(calibration_recall), thresholds)
    signal, source = auroc_signal(top1, confidence, failed)
    ranking = ["n_gold_atoms", "first_hit_rank", *(m.column for m in measures(k) if m.family == "ranking")]
    columns: dict[str, Any] = {
        "query_id": blocks["query_id"],
        "modality": blocks["modality"],
        "unanswerable": blocks["unanswerable"],
        "failed": failed,
        "n_regions": blocks["n_regions"],
        **{c: blocks[c].to_numpy() for c in ranking},
        "n_returned": blocks["n_returned"].to_numpy(),
        "top1_score": top1,
        **false_recall_columns(mods, blocks["n_returned"].to_numpy(), top1, abstained, rules),
        "abstained": abstained.astype(float),
        "confidence": confidence,
        "auroc_signal": signal,
        "auroc_signal_source": source,
        **{m.column: blocks[m.column].to_numpy() for m in measures(k) if m.family == "leaks"},
    }
    abstained_counts_nothing(columns, abstained & ~unans, k)
    for m in query_measures(k):  # defined on the measure's scope, for queries with a result
        columns[m.column] = np.where(in_denominator(m.scope, unans) & ~failed, columns[m.column], np.nan)
    for col in ("top1_score", "confidence"):
        columns[col] = np.where(failed, np.nan, columns[col])
    return pd.DataFrame(columns).reset_index(drop=True)
