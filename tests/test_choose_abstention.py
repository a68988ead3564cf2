"""scripts/choose_abstention.py, the procedure that chooses the built-in bm25's abstention threshold on
dev: its objective by hand on a small frame, and on real data its prediction for a threshold equals
the evaluation of a run made with that threshold, the dev.json `objective` included (LoCoMo, three
dev conversations: 786 entries)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pandas as pd
import pytest
import yaml

from bench.systems.builtin.bm25 import BM25System, bm25_scoped
from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("choose_abstention", ROOT / "scripts" / "choose_abstention.py")
assert spec is not None and spec.loader is not None
ca = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ca)


def test_the_objective_by_hand() -> None:
    frame = pd.DataFrame({"modality": ["a", "a", "a", "b"], "unanswerable": [False, False, True, True],
                          "credit": [1.0, 0.5, 0.0, 0.0], "handed": [False, False, True, False], "confidence": [0.9, 0.3, 0.6, 0.1]})
    assert ca.score(frame, 0.0) == {"objective": (1.0 + 0.5 + 0 + 1) / 4, "n": 4, "credit": 0.75, "answerable": 2, "quiet": 0.5,
                                    "unanswerable": 2, "abstained": 0.0}
    assert ca.score(frame, 0.5)["objective"] == (1.0 + 0 + 0 + 1) / 4  # the 0.3 answer withheld; the 0.6 false recall kept
    assert ca.score(frame, 0.7) == {"objective": (1.0 + 0 + 1 + 1) / 4, "n": 4, "credit": 0.5, "answerable": 2, "quiet": 1.0,
                                    "unanswerable": 2, "abstained": 0.5}
    table = ca.sweep(frame, (0.0, 0.5, 0.7, 0.95))
    assert set(table["group"]) == {"overall", "a", "b"} and ca.chosen(table) == 0.7
    assert "| 0.70 | 0.7500 (0.5000 / 1.0000; 0.5000)" in ca.markdown(table)


def scoped_never(atoms: pd.DataFrame) -> BM25System:
    return bm25_scoped(atoms, abstain_below=0.0)


def scoped_at_half(atoms: pd.DataFrame) -> BM25System:
    return bm25_scoped(atoms, abstain_below=0.5)


@pytest.fixture(scope="module")
def locomo(real_corpus: dict) -> dict[str, Any]:
    from bench.annotations.validate import validate
    from tests.ingest.chunks import chunk_all

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    checked = validate([ROOT / "bench" / "sets" / "locomo.jsonl"], real_corpus["manifest"], real_corpus["segments"], root=ROOT)
    holders = sorted({e["scope"]["holder"] for e in checked.split("dev")})[:3]
    entries = [e for e in checked.split("dev") if e["scope"]["holder"] in holders]
    segments = real_corpus["segments"].loc[real_corpus["segments"]["holder"].isin(holders)].reset_index(drop=True)
    return {"entries": entries, "segments": segments, "served": chunk_all(segments, {"conversation": params["chunking"]["conversation"]})}


def test_the_prediction_is_the_run_at_that_threshold(locomo: dict) -> None:
    from tests.systems.oracles import evaluate_system

    seen: list[pd.DataFrame] = []

    def keep(responses: pd.DataFrame) -> pd.DataFrame:
        seen.append(responses.copy())
        return responses

    never = evaluate_system("tests.test_choose_abstention:scoped_never", locomo["entries"], locomo["served"], locomo["segments"], keep)
    frame = ca.entries_frame(never.query_table, seen[0])
    predicted = ca.score(frame, 0.5)
    real = evaluate_system("tests.test_choose_abstention:scoped_at_half", locomo["entries"], locomo["served"], locomo["segments"], keep)
    cells = real.document["by_modality"]["conversation"]
    assert predicted["answerable"] == cells["recall@budget"]["denominator"] > 100 and predicted["unanswerable"] == cells["false_recall"]["denominator"]
    assert predicted["credit"] == pytest.approx(cells["recall@budget"]["value"], abs=1e-12)
    assert predicted["abstained"] == pytest.approx(cells["abstention_rate"]["value"], abs=1e-12) and 0 < predicted["abstained"] < 1
    assert 1 - predicted["quiet"] == pytest.approx(cells["false_recall"]["value"], abs=1e-12)
    assert predicted["objective"] == pytest.approx(cells["objective"]["value"], abs=1e-12)  # the evaluation's own objective
    with pytest.raises(ValueError, match="run it with system.abstain_below 0"):
        ca.entries_frame(real.query_table, seen[1])  # a run that withheld answers cannot tell what they held
