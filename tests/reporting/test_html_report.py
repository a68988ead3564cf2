"""reports/dev.html: self-contained, metric table with intervals, pictures, drill-down misses first;
and it renders in headless Chromium (skipped when chromium is not installed)."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from bench.reporting.html_report import drilldown, render
from bench.reporting.plots import (
    fair_points,
    latency_quantiles,
    latency_svg,
    precision_coverage_svg,
    recall_curve,
    recall_curve_svg,
    threshold_curve,
    threshold_svg,
)
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def page() -> str:
    entries = [
        {"query_id": "q1", "question": "Where is <b>the</b> chart?", "modality": "pdf", "gold": [{"source_id": "d", "region": {"page": 1}}]},
        {"query_id": "q2", "question": "Found question", "modality": "pdf", "gold": [{"source_id": "d", "region": {"page": 1}}]},
        {"query_id": "u1", "question": "Not answerable", "modality": "pdf"},
    ]
    pq = pd.DataFrame({"query_id": ["q1", "q2", "u1"], "modality": "pdf", "unanswerable": [False, False, True],
                       "failed": False, "n_regions": [1, 1, 0], "recall@10": [0.0, 1.0, np.nan],
                       "coverage@10": [0.0, 1.0, np.nan], "precision@10": [0.0, 0.5, np.nan], "iou@10": [0.0, 0.5, np.nan],
                       "mrr": [0.0, 1.0, np.nan], "false_recall": [np.nan, np.nan, 1.0], "latency_ms": [1.0, 2.0, 3.0],
                       "top1_score": [3.0, 9.0, 5.0]})
    # atoms named by id for the drill-down, by code (0: d#p1, 1: d#p2) for the curves
    run = pd.DataFrame({"query_id": ["q1", "q2", "q2", "u1"], "atom_id": ["d#p2", "d#p1", "d#p2", "d#p1"], "atom": [1, 0, 1, 0],
                        "rank": [1, 1, 2, 1], "score": [3.0, 9.0, 2.0, 5.0]})
    gold = pd.DataFrame({"query_id": ["q1", "q2"], "gold_idx": [0, 0], "atom_id": ["d#p1", "d#p1"], "atom": [0, 0]})
    regions = pd.DataFrame({"query_id": ["q1", "q2"], "modality": "pdf", "gold_idx": [0, 0], "source_id": "d", "page": [1, 1],
                            "extent": [10.0, 10.0], "n_atoms": [1, 1], "n_future_atoms": [0, 0]})
    atoms = pd.DataFrame({"atom_id": ["d#p1", "d#p2"], "text": ["page one", "page two"],
                          "extent": ['{"page_end":1,"page_start":1}', '{"page_end":2,"page_start":2}'], "amount": [10.0, 10.0]})
    cell = {"value": 0.5, "n": 2, "denominator": 2, "ci95": [0.0, 1.0]}
    quiet = {"value": 0.05, "n": 1, "denominator": 1, "ci95": [0.0, 1.0]}
    lost = {"value": None, "n": 1, "denominator": 1, "reason": "not measurable (pdf: top-1 scores do not separate)", "ci95": [None, None]}
    doc = {"by_modality": {"pdf": {"recall@10": cell, "false_recall": quiet, "coverage@10": cell, "precision@10": cell, "iou@10": cell,
                                   "oracle_coverage@10": cell, "oracle_iou@10": cell}},
           "overall": {"recall@10": cell, "false_recall": lost},
           "run": {"system": "bm25", "depth": 100, "k": 10, "chunking": {"pdf": {"strategy": "page"}},
                   "bootstrap": {"resamples": 1000, "seed": 0}, "calibration_recall": 0.9, "auroc_signal": "top1_score",
                   "false_recall_rule": {"pdf": {"rule": "calibrated", "unanswerable": 1, "threshold_score": 9.0, "kept": 1, "answerable": 2},
                                         "overall": {"rule": "calibrated"}},
                   "isolation": {"network": "none", "filesystem": "read-only"}},
           "atom_stats": {"pdf": {"unit": "chars", "atoms": 2, "median_extent": 10.0, "p95_extent": 10.0, "gold_regions": 2,
                                  "unreached_regions": 0, "unreached_share": 0.0}},
           "ties": {"pdf": {"tied_positions": 0, "queries_with_ties": 0, "queries": 3}}}
    curve = recall_curve(pq, run, gold, max_k=100)
    assert curve.loc[(curve["modality"] == "pdf") & (curve["k"] == 10), "recall"].item() == 0.5
    th = threshold_curve(pq, run, gold, 10, shares=np.array([0.5, 1.0]))
    pdf = th[th["modality"] == "pdf"].set_index("calibration_recall")
    # share 0.5: threshold 9 (q2's top-1) keeps q2's hit, u1 (5) stays quiet; share 1.0: threshold 3 catches u1
    assert pdf["false_recall"].tolist() == [0.0, 1.0] and pdf["recall@10"].tolist() == [0.5, 0.5]
    # the x axis is a share: scaling or shifting every score changes nothing
    scaled = threshold_curve(pq.assign(top1_score=pq["top1_score"] * 1000 + 1), run.assign(score=run["score"] * 1000 + 1), gold, 10,
                             shares=np.array([0.5, 1.0]))
    pd.testing.assert_frame_equal(scaled, th)
    figures = {"recall": recall_curve_svg(curve), "pc": precision_coverage_svg(fair_points(doc)),
               "latency": latency_svg(latency_quantiles(pq)), "threshold": threshold_svg(th, 10, 0.9)}
    drill = drilldown(entries, pq, run, gold, regions, atoms, k=10)
    return render(doc, figures, drill)


def test_page_is_self_contained(page):
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(script|link|img|iframe)\b", page)
    assert not re.search(r"(src|href)\s*=\s*['\"]?https?:", page)
    assert page.count("<svg") == 4


def test_metric_table_and_drilldown(page):
    assert "<td class=num>[0.0000, 1.0000]</td>" in page and "denominator" in page
    assert "Where is &lt;b&gt;the&lt;/b&gt; chart?" in page  # escaped
    assert page.index("q1") < page.index("q2") < page.index("u1")  # misses first, then unanswerable
    assert "false recall" in page and "page one" in page


def test_page_opens_with_the_verdict_coloured(page):
    assert page.index("<h2>Verdict</h2>") < page.index("<h2>Metrics</h2>") < page.index("<h2>Pictures</h2>")
    verdict = page[page.index("<table class=verdict>"):page.index("</table>", page.index("<table class=verdict>"))]
    rows = {r.split("</td>")[0].split(">")[-1]: r for r in verdict.split("<tr>")[2:]}
    assert set(rows) == {"pdf", "overall"}
    # recall@10 0.5 misses the 0.90 bar (red), false recall 0.05 meets the 0.10 bar (green), a null cell is grey with its reason
    assert "<td class='notmet' title='not met'>0.5000<small>2/2 · not met</small></td>" in rows["pdf"]
    assert "<td class='met' title='met'>0.0500<small>1/1 · calibrated · met</small></td>" in rows["pdf"]
    assert "class='nm' title='not measurable: not measurable (pdf: top-1 scores do not separate)'" in rows["overall"]
    assert "Isolation: network none; filesystem read-only." in page


def test_markdown_report_opens_with_the_verdict():
    from bench.reporting.report import verdict_markdown

    cell = {"value": 0.95, "n": 20, "denominator": 21, "ci95": [0.9, 1.0]}
    doc = {"by_modality": {"pdf": {"recall@10": cell, "false_recall": {**cell, "value": 0.5}, "temporal_correctness": {**cell, "value": None}}},
           "overall": {"recall@10": cell}, "run": {"k": 10, "false_recall_rule": {"pdf": {"rule": "abstention"}}}}
    lines = verdict_markdown(doc)
    assert lines[0] == "## Verdict"
    head = next(line for line in lines if line.startswith("| modality |")).strip(" |").split(" | ")
    pdf = dict(zip(head, next(line for line in lines if line.startswith("| pdf |")).strip(" |").split(" | "), strict=True))
    assert pdf["recall@10"] == "0.9500 (20/21) **met**"  # no recall@budget cell: nothing says the bar was bought
    assert pdf["recall@budget"] == "— *not measurable*"
    assert pdf["false recall"] == "0.5000 (20/21) abstention **NOT met**"
    assert pdf["temporal correctness"] == "— (20/21) *not measurable*"
    assert pdf["abstention rate"] == "—"  # no abstention_rate cell at all


def test_figures_are_deterministic():
    curve = pd.DataFrame({"modality": "pdf", "k": [1, 2], "recall": [0.1, 0.2]})
    assert recall_curve_svg(curve) == recall_curve_svg(curve)


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")), reason="chromium is not installed")
def test_renders_in_headless_chromium(page, tmp_path):
    from PIL import Image

    html = tmp_path / "dev.html"
    html.write_text(page, encoding="utf-8")
    shot = tmp_path / "shot.png"
    proc = subprocess.run([str(ROOT / "scripts/screenshot_report.sh"), str(html), str(shot), "1200,1600"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    img = np.asarray(Image.open(shot).convert("L"))
    assert img.shape == (1600, 1200)
    dark = (img < 128).mean()
    assert 0.005 < dark < 0.5  # text and lines drawn, not a blank page


def test_drilldown_tells_apart_the_versions_of_a_memory_by_their_code():
    """A memory rewritten over time keeps its id: its versions are two codes (two rows of the
    atom table) with one atom_id. The drill-down shows each hit's own version (text, amount)
    and marks as gold only the version that is in the query's gold (a real replayed
    consolidating memory stopped the report here: its lookup by id found two rows)."""
    entries = [{"query_id": "q1", "question": "What does Ann own?", "modality": "conversation",
                "gold": [{"source_id": "c:s1", "region": {"turn": 1}}]},
               {"query_id": "q2", "question": "What did Ann adopt?", "modality": "conversation",
                "gold": [{"source_id": "c:s1", "region": {"turn": 1}}]}]
    pq = pd.DataFrame({"query_id": ["q1", "q2"], "modality": "conversation", "unanswerable": False, "failed": False,
                       "n_regions": 1, "recall@10": [0.0, 1.0], "coverage@10": [0.0, 1.0], "false_recall": np.nan})
    # code 0: a served turn; codes 1 and 2: two versions of memory "fact:ann"
    atoms = pd.DataFrame({"atom_id": ["c:s1#t1", "fact:ann", "fact:ann"], "text": ["Ann adopted a cat", "Ann has a dog", "Ann adopted Pixel, a cat"],
                          "extent": ['{"turn":1}', "[]", "[]"], "amount": [17.0, 13.0, 24.0]})
    run = pd.DataFrame({"query_id": ["q1", "q2"], "atom": [1, 2], "atom_id": ["fact:ann", "fact:ann"], "rank": [1, 1], "score": [1.0, 1.0]})
    gold = pd.DataFrame({"query_id": ["q1", "q2", "q2"], "gold_idx": 0, "atom": [0, 0, 2], "atom_id": ["c:s1#t1", "c:s1#t1", "fact:ann"]})
    regions = pd.DataFrame({"query_id": ["q1", "q2"], "gold_idx": 0, "source_id": "c:s1", "extent": [10.0, 10.0], "n_atoms": 1})
    drill = drilldown(entries, pq, run, gold, regions, atoms, k=10)
    shown = {q["query_id"]: q for q in drill["modalities"]["conversation"]["queries"]}
    (a1,), (a2,) = shown["q1"]["top"], shown["q2"]["top"]
    assert (a1["text"], a1["amount"], a1["gold"]) == ("Ann has a dog", 13.0, False)
    assert (a2["text"], a2["amount"], a2["gold"]) == ("Ann adopted Pixel, a cat", 24.0, True)


def test_an_abstained_answer_says_so_beside_its_hits_with_the_ranking_s_values():
    """The gold at rank 1 of a ranking whose answer abstained: recall@10 0 (the answer hands over
    nothing) beside the ranking's 1, and the words beside its hits; an unanswerable entry that
    abstained is quiet, and says it abstained."""
    entries = [{"query_id": "q1", "question": "Which page?", "modality": "pdf", "gold": [{"source_id": "d", "region": {"page": 1}}]},
               {"query_id": "q2", "question": "Found", "modality": "pdf", "gold": [{"source_id": "d", "region": {"page": 1}}]},
               {"query_id": "u1", "question": "Not answerable", "modality": "pdf"}]
    pq = pd.DataFrame({"query_id": ["q1", "q2", "u1"], "modality": "pdf", "unanswerable": [False, False, True], "failed": False,
                       "n_regions": [1, 1, 0], "recall@10": [0.0, 1.0, np.nan], "ranked_recall@10": [1.0, 1.0, np.nan],
                       "coverage@10": [0.0, 1.0, np.nan], "mrr": [0.0, 1.0, np.nan], "false_recall": [np.nan, np.nan, 0.0],
                       "abstained": [1.0, 0.0, 1.0]})
    run = pd.DataFrame({"query_id": ["q1", "q2", "u1"], "atom_id": "d#p1", "atom": 0, "rank": 1, "score": [3.0, 9.0, 1.0]})
    gold = pd.DataFrame({"query_id": ["q1", "q2"], "gold_idx": 0, "atom_id": "d#p1", "atom": 0})
    regions = pd.DataFrame({"query_id": ["q1", "q2"], "gold_idx": 0, "source_id": "d", "extent": 10.0, "n_atoms": 1})
    atoms = pd.DataFrame({"atom_id": ["d#p1"], "text": ["page one"], "extent": ['{"page":1}'], "amount": [10.0]})
    drill = drilldown(entries, pq, run, gold, regions, atoms, k=10)
    shown = {q["query_id"]: q for q in drill["modalities"]["pdf"]["queries"]}
    assert shown["q1"]["abstained"] and not shown["q2"]["abstained"] and shown["q1"]["ranking"] == {"recall@10": 1.0}
    html = render({"by_modality": {}, "overall": {}, "run": {"k": 10}}, {}, drill)
    q1, q2, u1 = (html[html.index(f"<code>{q}</code>"):].split("</details>")[0] for q in ("q1", "q2", "u1"))
    assert "<span class='tag miss'>miss</span><span class='tag abst'>abstained: hands over nothing</span>" in q1
    assert "recall@10 0.000 (ranking 1.000)" in q1 and "<b>Abstained: hands over nothing.</b>" in q1
    assert "(the ranking's own: recall@10 1.000)" in q1 and q1.index("Abstained") < q1.index("page one")  # beside its hits
    assert "abst" not in q2 and "(ranking" not in q2
    assert "unanswerable, quiet" in u1 and "(no false recall)" in u1
