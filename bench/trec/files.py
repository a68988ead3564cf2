"""The run and its gold as TREC files (reports/runs/dev.run, dev.qrels), for trec_eval, ir_measures and ranx."""

from __future__ import annotations

import pandas as pd


def trec_run(run: pd.DataFrame, tag: str) -> str:
    """The run in TREC format (query Q0 atom rank score tag), one line per hit."""
    # full precision (repr), so tools that re-sort by score see exactly our scores
    lines = [f"{r.query_id} Q0 {r.atom_id} {r.rank} {r.score!r} {tag}" for r in run.itertuples(index=False)]
    return "\n".join(lines) + ("\n" if lines else "")


def trec_qrels(gold: pd.DataFrame) -> str:
    """Binary qrels: every (query, atom) pair of the resolved gold, relevance 1."""
    pairs = gold[["query_id", "atom_id"]].drop_duplicates().sort_values(["query_id", "atom_id"])
    lines = [f"{q} 0 {a} 1" for q, a in pairs.itertuples(index=False)]
    return "\n".join(lines) + ("\n" if lines else "")
