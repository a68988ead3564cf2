"""The verdict's rules for a bar that can be bought (bench.reporting.verdict): "met only by
atom size" and "met only by abstaining", in dev.md, dev.html and the acceptance's test.md."""

from __future__ import annotations

from bench.reporting.html_report import verdict_html
from bench.reporting.report import BOUGHT, MET, NOT_MET, acceptance_markdown, verdict, verdict_markdown
from bench.reporting.verdict import MOST, RULES, rules_text


def cell(value: float, n: int = 275, d: int = 275) -> dict:
    return {"value": value, "n": n, "denominator": d, "ci95": [value, value]}


def doc(recall: float, budget: float | None, false_recall: float, abstention: float) -> dict:
    block = {"recall@10": cell(recall, 1110, 1110), "false_recall": cell(false_recall, 49, 49), "abstention_rate": cell(abstention)}
    if budget is not None:
        block["recall@budget"] = cell(budget, 1110, 1110)
    return {"by_modality": {"conversation": block}, "overall": block,
            "run": {"k": 10, "system": "bm25", "depth": 100, "chunking": {"conversation": {"strategy": "session"}},
                    "false_recall_rule": {"conversation": {"rule": "abstention"}}, "isolation": "none"}}


def _cells(d: dict) -> dict:
    return {c["metric"]: c for c in verdict(d)[0]["cells"]}


def test_a_recall_met_only_by_atom_size_says_so() -> None:
    cells = _cells(doc(0.9548, 0.41, 0.0, 0.2))
    assert cells["recall@10"]["status"] == BOUGHT and cells["recall@10"]["bought"] == "met only by atom size: recall@budget 0.4100"
    assert cells["recall@budget"]["status"] == NOT_MET
    assert _cells(doc(0.9548, 0.93, 0.0, 0.2))["recall@10"]["status"] == MET  # at equal cost too: met
    assert _cells(doc(0.9548, None, 0.0, 0.2))["recall@10"]["status"] == MET  # no budget cell: nothing to tell
    assert _cells(doc(0.50, 0.41, 0.0, 0.2))["recall@10"]["status"] == NOT_MET


def test_a_false_recall_met_only_by_abstaining_says_so() -> None:
    cells = _cells(doc(0.5, 0.4, 0.0, 0.9673))
    assert cells["false_recall"]["status"] == BOUGHT
    assert cells["false_recall"]["bought"] == "met only by abstaining: abstention 0.9673 (266/275)"
    assert _cells(doc(0.5, 0.4, 0.0, MOST))["false_recall"]["status"] == MET  # half is not most
    assert _cells(doc(0.5, 0.4, 0.0, MOST + 1 / 275))["false_recall"]["status"] == BOUGHT
    assert _cells(doc(0.5, 0.4, 0.5, 0.99))["false_recall"]["status"] == NOT_MET


def test_both_reports_show_it_and_the_rules() -> None:
    d = doc(0.9548, 0.41, 0.0, 0.9673)
    md = "\n".join(verdict_markdown(d))
    assert "0.9548 (1110/1110) **met only by atom size**: recall@budget 0.4100" in md
    assert "0.0000 (49/49) abstention **met only by abstaining**: abstention 0.9673 (266/275)" in md
    assert rules_text() in md and all(r.words in rules_text() for r in RULES)
    html = verdict_html(d)
    assert html.count("class='bought'") == 4 and "met only by abstaining: abstention 0.9673 (266/275)" in html
    test = acceptance_markdown(d, 3, "0123456789abcdef")
    assert test.startswith("# Acceptance report (test split)") and "Acceptance #3 on commit `0123456789ab`" in test
    assert "**met only by atom size**" in test and rules_text() in test


def test_ndcg_and_mrr_at_atom_ranks_raised_by_atom_size_say_so_in_the_full_tables() -> None:
    """Issue 46: the diagnostics at atom ranks beside their content versions (what the verdict
    shows). Session chunks on LoCoMo: ndcg@10 0.7811 beside content_ndcg@10 0.2150."""
    from bench.reporting.html_report import metric_table_html
    from bench.reporting.report import metric_table
    from bench.reporting.verdict import raised

    block = {"content_mrr": {**cell(0.1943, 1603, 1603), "ci95": [0.18, 0.21]}, "content_ndcg@10": {**cell(0.2150, 1603, 1603), "ci95": [0.20, 0.23]},
             "mrr": cell(0.7480, 1603, 1603), "ndcg@10": cell(0.2300, 1603, 1603)}
    assert raised(block, "mrr") == "only by atom size: content_mrr 0.1943"
    assert raised(block, "ndcg@10") is None  # within the content version's interval: nothing to tell
    assert raised({**block, "ndcg@10": cell(0.2301, 1603, 1603)}, "ndcg@10") == "only by atom size: content_ndcg@10 0.2150"
    assert raised({k: v for k, v in block.items() if k != "content_mrr"}, "mrr") is None  # no content cell: nothing to tell
    assert raised(block, "content_mrr") is None
    assert "| mrr | 0.7480 **only by atom size**: content_mrr 0.1943 | 1603 | 1603 |" in metric_table(block)
    assert "only by atom size: content_mrr 0.1943" in metric_table_html(block)
    assert "*only by atom size*" in rules_text()
