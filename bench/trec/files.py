"""The run and its gold as TREC files (reports/runs/dev.run, dev.qrels), for trec_eval, ir_measures and ranx."""

from __future__ import annotations

import pandas as pd


def trec_run(run: pd.DataFrame, tag: str) -> str:
    """The run in TREC format (query Q0 atom rank score tag), one line per hit."""
    # full precision (repr), so tools that re-sort by score see exactly our scores; columns
    # as Python lists (one conversion each, not one pandas scalar per cell)
    cols = (run["query_id"].astype(str).tolist(), run["atom_id"].astype(str).tolist(), run["rank"].astype(int).tolist(),
            run["score"].astype(float).tolist())
    lines = [f"{q} Q0 {a} {r} {s!r} {tag}" for q, a, r, s in zip(*cols, strict=True)]
    return "\n".join(lines) + ("\n" if lines else "")


def trec_qrels(gold: pd.DataFrame) -> str:
    """Binary qrels: every (query, atom) pair of the resolved gold, relevance 1."""
    pairs = gold[["query_id", "atom_id"]].drop_duplicates().sort_values(["query_id", "atom_id"])
    lines = [f"{q} 0 {a} 1" for q, a in pairs.itertuples(index=False)]
    return "\n".join(lines) + ("\n" if lines else "")
