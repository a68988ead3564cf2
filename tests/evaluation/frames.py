"""Small hand-written frames of the per-query inputs (bench.evaluation.encoding), shared by the tests."""

from __future__ import annotations

import pandas as pd
import pytest

T0 = pd.Timestamp("2024-01-01", tz="UTC")


def entries_of(rows: list[tuple]) -> pd.DataFrame:
    """(query_id, modality, unanswerable, holder, n_regions) rows, as of T0."""
    df = pd.DataFrame(rows, columns=["query_id", "modality", "unanswerable", "holder", "n_regions"])
    return df.assign(as_of=T0)


def run_of(rows: list[tuple]) -> pd.DataFrame:
    """(query_id, atom_id, rank, score) rows."""
    return pd.DataFrame(rows, columns=["query_id", "atom_id", "rank", "score"])


def gold_of(rows: list[tuple]) -> pd.DataFrame:
    """(query_id, gold_idx, atom_id) rows."""
    return pd.DataFrame(rows, columns=["query_id", "gold_idx", "atom_id"])


def row_of(df: pd.DataFrame, qid: str) -> pd.Series:
    """The per-query row of `qid`."""
    return df.set_index("query_id").loc[qid]


def assert_cell(got: dict, value: float | None, n: int, d: int) -> None:
    """A dev.json cell with this value (a float, or None), n and denominator."""
    assert (got["n"], got["denominator"]) == (n, d)
    if value is None:
        assert got["value"] is None
    else:
        assert type(got["value"]) is float and got["value"] == pytest.approx(value)
