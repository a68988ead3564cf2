"""The measure-family registry (bench.evaluation.measures): each family module exports its
declarations with its computation and phase, the evaluation runs the registry, the report
order is derived from it, and the one rule of abstention is declared per measure and applied
in one place (bench.evaluation.measures.base.run_family)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import bench.evaluation.measures as registry
from bench.evaluation.measures import CATALOGUE, FAMILIES, families, measures
from bench.evaluation.measures.base import PHASES, Family, Mean, Measure, RunRecord, run_family
from bench.evaluation.measures.latency import FAMILY as LATENCY
from bench.evaluation.per_query import per_query
from tests.conftest import ROOT
from tests.evaluation.frames import T0, entries_of, gold_of, row_of, run_of

K = 3


def test_every_family_module_is_registered_under_its_own_name() -> None:
    modules = {info.name: importlib.import_module(f"bench.evaluation.measures.{info.name}")
               for info in pkgutil.iter_modules(registry.__path__)}
    with_family = {name: module.FAMILY for name, module in modules.items() if hasattr(module, "FAMILY")}
    assert [f.name for f in FAMILIES] == ["ranking", "false_recall", "auroc", "leaks", "latency", "extent", "scores", "budget",
                                          "reading", "objective"]
    # the objective's family is built from the others' declarations (its parts are declared in_objective)
    assert {f.name for f in FAMILIES} == {*with_family, "objective"} and hasattr(modules["objective"], "family")
    for name, family in with_family.items():
        assert family is next(f for f in FAMILIES if f.name == name)
        assert family.phase in PHASES
        assert all(m.family == name for m in family.measures), name  # filled in by the family, never restated
        if family.measures:
            assert modules[name].MEASURES is family.measures, name


def test_the_report_order_is_derived_from_the_registry() -> None:
    """Registry order, budget placed right after recall, reading right after the budget's last and the objective right
    after handed_nothing (their declared ``after``)."""
    by_family = [m.name for f in FAMILIES if f.after is None for m in f.measures]
    budget = [m.name for m in next(f for f in FAMILIES if f.name == "budget").measures]
    reading = [m.name for m in next(f for f in FAMILIES if f.name == "reading").measures]
    at = by_family.index("handed_nothing") + 1
    assert [m.name for m in CATALOGUE] == [by_family[0], *budget, *reading, *by_family[1:at], "objective", *by_family[at:]]
    assert [m.name for m in measures(10)][:3] == ["recall@10", "recall@budget", "coverage@budget"]
    assert measures(10) is measures(10) and isinstance(measures(10), tuple)  # built once per cut-off, immutable
    with pytest.raises(TypeError):
        registry.by_name(10)["recall@10"] = CATALOGUE[0]  # type: ignore[index]
    orphan = Family(name="x", phase="run", measures=(replace(CATALOGUE[0], name="x", family="", abstained_nothing=False),), compute=dict,
                    columns=lambda k: (), after="no_such_measure")
    with pytest.raises(ValueError, match="no_such_measure"):
        registry._report_order((*FAMILIES, orphan))


def test_a_declaration_is_checked() -> None:
    recall = CATALOGUE[0]
    with pytest.raises(ValueError, match="says ranking"):
        Family(name="budget", phase="block", measures=(recall,), compute=dict, columns=lambda k: ())
    with pytest.raises(ValueError, match="phase"):
        Family(name="x", phase="later", measures=(), compute=dict, columns=lambda k: ())  # type: ignore[arg-type]
    wrong = replace(LATENCY, columns=lambda k: ("latency",))
    table = pd.DataFrame({"query_id": ["q"], "failed": [False]})
    with pytest.raises(ValueError, match="wrote columns"):  # a family writes exactly the columns it declares
        run_family(wrong, RunRecord(table=table, responses=pd.DataFrame({"query_id": ["q"], "latency_ms": [5.0]}), k=K))


def test_the_evaluation_runs_the_registry_not_the_families_by_hand() -> None:
    """per_query.py, evaluate.py and cells.py call no family's computation: they run each phase's families."""
    computations = re.compile(r"\b(ranking_columns|returned_columns|leak_columns|extent_columns|budget_columns|reading_columns|"
                              r"false_recall_columns|"
                              r"modality_rules|auroc_signal|tied_positions|latency_column)\(")
    for path in ("bench/evaluation/per_query.py", "bench/evaluation/evaluate.py", "bench/evaluation/cells.py"):
        text = (ROOT / path).read_text(encoding="utf-8")
        assert not computations.findall(text), (path, computations.findall(text))
        assert "run_family(" in text, path
    assert [f.name for f in families("query")] == ["ranking", "leaks"]
    assert [f.name for f in families("block")] == ["extent", "scores", "budget", "reading"]


def test_an_abstaining_answer_is_scored_as_the_empty_answer_where_its_measures_say_so() -> None:
    """Declared once per measure (``abstained_nothing``): the verdict's ranking columns, the budget
    measures and the leak measures; applied once (run_family): an answer that abstained scores
    exactly what the same answer sent empty scores -- 0 for recall, 1 for temporal and holder
    correctness (nothing from the future or of another holder handed over) --, and the ranking's
    diagnostics keep the ranking's value."""
    flagged = {m.name for m in CATALOGUE if m.abstained_nothing}
    assert flagged == {"recall", "mrr", "ndcg", "recall@budget", "coverage@budget", "half_recall@budget", "touch_recall@budget",
                       "content_mrr", "content_ndcg", "temporal_correctness", "holder_correctness"}
    atoms = pd.DataFrame({"atom_id": ["a1", "a2", "f1"], "holder": ["h", "h", "other"],
                          "observed_at": [T0 - pd.Timedelta(days=1)] * 2 + [T0 + pd.Timedelta(days=1)]})
    entries = entries_of([("q1", "pdf", False, "h", 1), ("q2", "pdf", False, "h", 1), ("u1", "pdf", True, "h", 0)])
    run = run_of([("q1", "a1", 1, 0.9), ("q1", "f1", 2, 0.8), ("q2", "a1", 1, 0.9), ("q2", "f1", 2, 0.8), ("u1", "a2", 1, 0.5)])
    gold = gold_of([("q1", 0, "a1"), ("q2", 0, "a1")])

    def answered(abstain: bool) -> pd.DataFrame:
        return pd.DataFrame({"query_id": ["q1", "q2", "u1"], "latency_ms": [1.0, 1.0, 1.0], "abstain": [abstain, False, True],
                             "confidence": [0.1, 0.9, 0.1]})

    table = per_query(entries, run, gold, atoms, k=K, responses=answered(True))
    empty = per_query(entries, run.loc[run["query_id"] != "q1"], gold, atoms, k=K, responses=answered(False))
    said, kept, sent_empty = row_of(table, "q1"), row_of(table, "q2"), row_of(empty, "q1")
    for m in measures(K):
        if m.family in ("ranking", "leaks"):
            assert kept[m.column] == (1.0 if m.family == "ranking" else 0.0), m.name  # the same ranking handed over: leaks count
            assert said[m.column] == (sent_empty[m.column] if m.abstained_nothing else kept[m.column]), m.name
    assert said["temporal_ok"] == said["holder_ok"] == 1.0 and said[f"recall@{K}"] == 0.0
    assert said["abstained"] == said["handed_nothing"] == sent_empty["abstained"] == sent_empty["handed_nothing"] == 1.0
    assert np.isnan(row_of(table, "u1")[f"recall@{K}"]) and row_of(table, "u1")["false_recall"] == 0.0
    assert isinstance(next(m for m in CATALOGUE if m.name == "recall").reducer, Mean)


def test_a_phase_that_cannot_hand_an_answer_over_refuses_the_rule() -> None:
    """Only the query and block phases can score what an answer handed over; another declaring it is refused."""
    flagged = replace(CATALOGUE[0], family="")
    with pytest.raises(ValueError, match="cannot score what an answer handed over"):
        Family(name="x", phase="cross_query", measures=(flagged,), compute=dict, columns=lambda k: ())


def test_every_measure_is_described() -> None:
    for m in CATALOGUE:
        assert m.description.strip() and m.unit.strip(), m.name
        assert m.reducer.worst_case, m.name
    with pytest.raises(TypeError):
        Measure(name="x", scope="all", reducer=Mean(worst=0.0), higher_is_better=True)  # type: ignore[call-arg]
