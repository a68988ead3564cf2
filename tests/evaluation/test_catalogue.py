"""The measures' declarations (bench/evaluation/measures) are the one list of metrics and the
one denominator rule: every cell of the evaluation, the chunk-fair cells, the intervals,
`bench compare` and the verdict follow it. Checked on a real evaluation of LoCoMo and
MMLongBench-Doc (bm25 over the page/turn atoms), with real queries marked failed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.acceptance.in_memory import evaluate_entries
from bench.comparison.compare import compare, compared
from bench.evaluation.evaluate import EvalOptions, RunDescription, per_query_table
from bench.evaluation.measures import CATALOGUE, by_name, measures
from bench.evaluation.measures.base import Bar, Mean, Measure, counted
from bench.evaluation.measures.latency import Percentile
from bench.evaluation.per_query import query_measures
from bench.params import MetricsParams
from bench.reporting.report import bar_legend, verdict

K = 10
FAILED_PER_KIND = 5  # answerable and unanswerable queries marked failed (timeout)


# --------------------------------------------------------------------------- the catalogue itself


def test_names_and_columns_are_declared_once_in_report_order() -> None:
    ms = measures(K)
    assert len({m.name for m in ms}) == len(ms)
    # recall@budget beside recall@k (the verdict judges them side by side), the content MRR and nDCG after the budget
    # measures, then the rest of the ranking family
    assert [m.name for m in ms][:10] == ["recall@10", "recall@budget", "coverage@budget", "half_recall@budget", "touch_recall@budget",
                                        "content_mrr", "content_ndcg@10", "atom_recall@10", "mrr", "ndcg@10"]
    assert [m.name for m in ms if m.heading][:4] == ["recall@10", "recall@budget", "content_mrr", "content_ndcg@10"]
    assert measures(5)[0].name == "recall@5" and measures(5)[0].column == "recall@5"
    assert [m.name for m in query_measures(K)] == [m.name for m in ms if m.family in ("ranking", "false_recall", "leaks")]
    assert [m.name for m in ms if m.cutoff] == [f"{m.name}@10" for m in CATALOGUE if m.cutoff]
    assert all(m.k == K for m in ms)
    # higher is better <=> a failed query counts 0 (mean measures)
    for m in ms:
        if isinstance(m.reducer, Mean):
            assert m.worst == (0.0 if m.higher_is_better else 1.0), m.name


def test_the_spec_bars_and_the_verdict_columns_come_from_the_catalogue() -> None:
    bars = {m.name: (m.bar.direction, m.bar.value) for m in measures(K) if m.bar is not None}
    assert bars == {"recall@10": (">=", 0.90), "recall@budget": (">=", 0.90), "false_recall": ("<=", 0.10),
                    "temporal_correctness": (">=", 0.95), "holder_correctness": (">=", 0.95)}
    assert bar_legend(K) == ("recall@10 ≥ 0.90, recall@budget ≥ 0.90, false_recall ≤ 0.10, temporal_correctness ≥ 0.95, "
                             "holder_correctness ≥ 0.95")
    assert by_name(K)["recall@budget"].bar is by_name(K)["recall@10"].bar  # the same bar, declared once
    assert Bar(">=", 0.9).met(0.9) and not Bar("<=", 0.1).met(0.11)


def test_a_malformed_measure_is_refused() -> None:
    with pytest.raises(ValueError, match="compare"):
        Measure(name="x", scope="all", reducer=Percentile(50), higher_is_better=False, compared=True, description="", unit="ms")
    with pytest.raises(TypeError):  # declarations are keyword-only
        Measure("x", "x", "all", Percentile(50), False, "", "ms")  # type: ignore[misc]
    with pytest.raises(ValueError, match="no per-query contribution"):
        counted(by_name(K)["latency_p50_ms"], np.zeros(2), np.zeros(2, dtype=bool), np.zeros(2, dtype=bool))


def test_the_denominator_rule_by_hand() -> None:
    """Four answerable entries (one failed, one undefined) and two unanswerable ones (one failed)."""
    values = np.array([1.0, np.nan, 0.5, 0.25, 1.0, 0.0])
    unans = np.array([False, False, False, False, True, True])
    failed = np.array([False, False, True, False, False, True])
    contrib, ok = counted(by_name(K)["recall@10"], values, unans, failed)
    assert contrib.tolist() == [1.0, 0.0, 0.0, 0.25] and ok.tolist() == [True, True, False, True]
    contrib, ok = counted(by_name(K)["false_recall"], values, unans, failed)
    assert contrib.tolist() == [1.0, 1.0] and ok.tolist() == [True, False]  # failed: the worst case, 1
    contrib, _ = counted(by_name(K)["temporal_correctness"], values, unans, failed)
    assert contrib.tolist() == [1.0, 0.0, 0.0, 0.25, 1.0, 0.0]


# --------------------------------------------------------------------------- a real evaluation


@pytest.fixture(scope="module")
def real_eval(real_run: dict) -> dict:
    """The acceptance's evaluation step (bench.acceptance.in_memory.evaluate_entries) over the real run."""
    params, segments, checked, entries = real_run["params"], real_run["segments"], real_run["checked"], real_run["entries"]
    served, cfg, adapter, ran = real_run["served"], real_run["cfg"], real_run["adapter"], real_run["ran"]
    # real queries marked failed (as a timeout leaves them: no ranking, no response)
    ans = [e["query_id"] for e in entries if not e["unanswerable"]][:FAILED_PER_KIND]
    una = [e["query_id"] for e in entries if e["unanswerable"]][:FAILED_PER_KIND]
    failed = set(ans + una)
    run = ran.run.loc[~ran.run["query_id"].astype(str).isin(failed)]
    responses = ran.latency.loc[~ran.latency["query_id"].astype(str).isin(failed)]
    options = EvalOptions.from_params(MetricsParams(k=K, bootstrap_resamples=200), abstains=bool(getattr(adapter, "abstains", False)))
    description = RunDescription(system=cfg.name, depth=cfg.depth, chunking=params["chunking"], concurrency=1, warm=False,
                                 adapter=cfg.adapter, warmup_queries=0, timeout_s=cfg.timeout_s, latency=None)
    result = evaluate_entries(entries, [r for r in checked.invalid if r["split"] == "dev"], run, responses,
                              pd.DataFrame({"query_id": sorted(failed), "kind": "timeout"}), served, segments, options, description,
                              in_core_rows=10**9, sha256={})
    return {"result": result, "entries": entries, "failed": failed}


def _blocks(doc: dict) -> list[tuple[str, dict]]:
    return [*doc["by_modality"].items(), ("overall", doc["overall"])]


def test_every_cell_is_a_catalogue_measure_and_every_measure_a_cell(real_eval) -> None:
    doc = real_eval["result"].document
    assert set(doc["by_modality"]) == {"conversation", "pdf"}
    for group, block in _blocks(doc):
        assert list(block) == [m.name for m in measures(K)], group
        for name, cell in block.items():
            assert {"value", "n", "denominator", "ci95"} <= set(cell), (group, name)
            assert cell["value"] is None or cell["ci95"][0] is not None, (group, name)  # every measured cell has its interval


def test_failed_queries_count_as_the_worst_case_in_every_consumer(real_eval) -> None:
    """dev.json's value, the interval's resampled values and `bench compare`'s mean are
    the same per-query contributions: the catalogue's one rule."""
    res, failed = real_eval["result"], real_eval["failed"]
    full = res.query_table
    assert full.loc[full["failed"], "query_id"].astype(str).tolist() == sorted(failed)
    table = per_query_table(full, K)
    rows = {(r["modality"], r["metric"]): r for r in compare(table, table, resamples=50, permutations=100)["rows"]}
    for group, block in _blocks(res.document):
        g = full if group == "overall" else full.loc[full["modality"] == group]
        unans = g["unanswerable"].to_numpy(bool)
        for m in measures(K):
            cell = block[m.name]
            if not isinstance(m.reducer, Mean):
                continue
            contrib, ok = counted(m, g[m.column].to_numpy(float), unans, g["failed"].to_numpy(bool))
            assert cell["denominator"] == len(contrib) and cell["n"] == int(ok.sum()), (group, m.name)
            if cell["value"] is not None:
                assert cell["value"] == pytest.approx(contrib.mean(), rel=1e-12, abs=1e-15), (group, m.name)
            assert np.array_equal(m.reducer.values(m, g), contrib), (group, m.name)
            if m.compared:
                assert rows[(group, m.name)]["a"] == pytest.approx(contrib.mean(), rel=1e-12, abs=1e-15), (group, m.name)
    overall = res.document["overall"]
    n_ans = sum(1 for e in real_eval["entries"] if not e["unanswerable"])
    assert overall["recall@10"]["denominator"] == n_ans and overall["recall@10"]["n"] == n_ans - FAILED_PER_KIND
    n_un = len(real_eval["entries"]) - n_ans
    assert overall["false_recall"]["denominator"] == n_un and overall["false_recall"]["n"] == n_un - FAILED_PER_KIND


def test_compare_and_the_per_query_table_carry_every_comparable_measure(real_eval) -> None:
    full = real_eval["result"].query_table
    table = per_query_table(full, K)
    for m in measures(K):
        if m.family != "auroc":
            assert m.column in table.columns, m.name
    result = compare(table, table, resamples=50, permutations=100)
    for group in ("conversation", "pdf", "overall"):
        metrics = [r["metric"] for r in result["rows"] if r["modality"] == group]
        assert metrics == [m.name for m in compared(K)], group


def test_the_verdict_has_one_column_per_headed_measure(real_eval) -> None:
    doc = real_eval["result"].document
    rows = verdict(doc)
    headed = [m for m in measures(K) if m.heading is not None]
    assert [r["group"] for r in rows] == ["conversation", "pdf", "overall"]
    for row in rows:
        assert [c["metric"] for c in row["cells"]] == [m.name for m in headed]
        for c, m in zip(row["cells"], headed, strict=True):
            block = doc["overall"] if row["group"] == "overall" else doc["by_modality"][row["group"]]
            assert c["value"] == block[m.name]["value"]
            if m.bar is None:
                assert c["status"] is None
            elif c["value"] is not None:
                assert c["status"] == (("bought" if c["bought"] else "met") if m.bar.met(c["value"]) else "not met")
