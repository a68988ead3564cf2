"""Fixtures for the system adapter tests: small atoms, entries, a served-atoms folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ROOT


def make_atoms() -> pd.DataFrame:
    rows = []
    for i in range(6):
        rows.append({
            "atom_id": f"locomo:conv-1:session-1#t{i}", "source_id": "locomo:conv-1:session-1", "dataset": "locomo",
            "modality": "conversation", "text": f"turn {i} about apples and pears number {i}", "holder": "locomo:conv-1",
            "observed_at": pd.Timestamp("2023-05-01T10:00:00Z"), "extent": json.dumps({"turn_start": i + 1, "turn_end": i + 1}),
            "turn_start": i + 1, "turn_end": i + 1, "char_start": 0, "char_end": 10,
        })
    return pd.DataFrame(rows)


def entry(qid: str, question: str, modality: str = "conversation") -> dict:
    """A full annotated entry, gold and split included: the harness must not pass those on."""
    return {
        "query_id": qid, "modality": modality, "question": question, "answer": f"SECRET-ANSWER-{qid}",
        "answer_format": "str", "gold": [{"source_id": "locomo:conv-1:session-1", "region": {"turn": 2}}],
        "scope": {"holder": "locomo:conv-1", "session": None, "scenario": "conversation-qa"},
        "as_of": "2023-05-02T00:00:00+00:00", "unanswerable": False,
        "origin": {"dataset": "snap-research/locomo", "revision": "r", "item": "i", "license": "l"}, "split": "dev",
    }


@pytest.fixture
def atoms() -> pd.DataFrame:
    return make_atoms()


@pytest.fixture
def served_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "served"
    (folder / "conversation").mkdir(parents=True)  # data/served layout: <modality>/<dataset>.parquet
    make_atoms().to_parquet(folder / "conversation" / "locomo.parquet", index=False)
    return folder


def serve_argv(served: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "bench.systems.serve", "tests.systems.fake:build", "--atoms", str(served), *extra]


def bwrap_usable() -> bool:
    """Whether command systems get bubblewrap here (`system.sandbox: auto` picks it)."""
    from bench.systems.sandbox import SandboxError, choose_isolation

    try:
        return choose_isolation("auto")[0] == "bwrap"
    except SandboxError:
        return False


__all__ = ["ROOT", "bwrap_usable", "entry", "make_atoms", "serve_argv"]
