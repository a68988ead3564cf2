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
    assert [f.name for f in FAMILIES] == ["ranking", "false_recall", "auroc", "leaks", "latency", "extent", "scores", "budget", "reading"]
    assert {f.name for f in FAMILIES} == set(with_family)  # a module with a FAMILY and no registry entry fails here
    for name, family in with_family.items():
        assert family is next(f for f in FAMILIES if f.name == name)
        assert family.phase in PHASES
        assert all(m.family == name for m in family.measures), name  # filled in by the family, never restated
        if family.measures:
            assert modules[name].MEASURES is family.measures, name


def test_the_report_order_is_derived_from_the_registry() -> None:
    """Registry order, budget placed right after recall and reading right after the budget's last (their declared ``after``)."""
    by_family = [m.name for f in FAMILIES if f.after is None for m in f.measures]
    budget = [m.name for m in next(f for f in FAMILIES if f.name == "budget").measures]
    reading = [m.name for m in next(f for f in FAMILIES if f.name == "reading").measures]
    assert [m.name for m in CATALOGUE] == [by_family[0], *budget, *reading, *by_family[1:]]
    assert [m.name for m in measures(10)][:3] == ["recall@10", "recall@budget", "coverage@budget"]
    assert measures(10) is measures(10) and isinstance(measures(10), tuple)  # built once per cut-off, immutable
    with pytest.raises(TypeError):
        registry.by_name(10)["recall@10"] = CATALOGUE[0]  # type: ignore[index]
    orphan = Family(name="x", phase="run", measures=(replace(CATALOGUE[0], name="x", family=""),), compute=dict,
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


def test_an_abstaining_answer_counts_nothing_where_its_measures_say_so() -> None:
    """Declared once per measure (``abstained_nothing``): the verdict's ranking columns, MRR and
    nDCG at atom ranks and the budget measures; the ranking's other diagnostics keep the ranking's value."""
    flagged = {m.name for m in CATALOGUE if m.abstained_nothing}
    assert flagged == {"recall", "mrr", "ndcg", "recall@budget", "coverage@budget", "half_recall@budget", "touch_recall@budget",
                       "content_mrr", "content_ndcg"}
    atoms = pd.DataFrame({"atom_id": ["a1", "a2"], "holder": ["h", "h"], "observed_at": [T0 - pd.Timedelta(days=1)] * 2})
    entries = entries_of([("q1", "pdf", False, "h", 1), ("q2", "pdf", False, "h", 1), ("u1", "pdf", True, "h", 0)])
    run = run_of([("q1", "a1", 1, 0.9), ("q2", "a1", 1, 0.9), ("u1", "a2", 1, 0.5)])
    gold = gold_of([("q1", 0, "a1"), ("q2", 0, "a1")])
    responses = pd.DataFrame({"query_id": ["q1", "q2", "u1"], "latency_ms": [1.0, 1.0, 1.0], "abstain": [True, False, True],
                              "confidence": [0.1, 0.9, 0.1]})
    table = per_query(entries, run, gold, atoms, k=K, responses=responses)
    said, kept = row_of(table, "q1"), row_of(table, "q2")
    for m in measures(K):
        if m.family == "ranking":
            assert kept[m.column] == 1.0, m.name  # the same ranking, not abstained: every ranking measure counts it
            assert said[m.column] == (0.0 if m.abstained_nothing else 1.0), m.name
    assert np.isnan(row_of(table, "u1")[f"recall@{K}"]) and row_of(table, "u1")["false_recall"] == 0.0
    assert isinstance(next(m for m in CATALOGUE if m.name == "recall").reducer, Mean)


def test_every_measure_is_described() -> None:
    for m in CATALOGUE:
        assert m.description.strip() and m.unit.strip(), m.name
        assert m.reducer.worst_case, m.name
    with pytest.raises(TypeError):
        Measure(name="x", scope="all", reducer=Mean(worst=0.0), higher_is_better=True)  # type: ignore[call-arg]
