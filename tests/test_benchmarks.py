"""The benchmark suite runs at its small size and writes both reports; vectorised gold
resolution equals the per-region reference. No timed assertions."""

from __future__ import annotations

import json

import pytest

#: the small size with smaller inputs where a case's inputs only scale its work: each case's code
#: runs all the same (OCR of one photo, one PDF page and one screenshot; one PDF and one screenshot
#: on the local pool and on a Dask cluster of one worker; one run size of 200k rows in two
#: blocks; the first PDF of the mirror); the dvc, metrics, resolve, fetch and uncertainty cases
#: run at the small size as it is
SMALLER = {"ocr": (0, 1, 1), "ocr_settings": (1, 1, 1), "scale": (20, 1, 1, 0, 20, [1]), "blocks": ([2000], 100_000),
           "pdf_limit": 1}


@pytest.mark.slow
def test_suite_small_writes_both_reports(tmp_path, monkeypatch) -> None:
    """Every case at a small size (`pytest -m slow`: 2-5 minutes, most of it the dvc case's cold repro):
    the suite runs whole at its full size for every regeneration of reports/perf.* (CONTRIBUTING.md)."""
    from benchmarks.run import CASES, SIZES, run

    for key, value in SMALLER.items():
        assert key in SIZES["small"]
        monkeypatch.setitem(SIZES["small"], key, value)
    run("small", (), tmp_path)
    on_disk = json.loads((tmp_path / "perf.json").read_text())
    assert on_disk["size"] == "small" and set(on_disk["cases"]) == set(CASES)
    assert {"cores", "memory_gib", "usable_cores"} <= set(on_disk["machine"])
    keys = {"name", "ours_s", "reference", "reference_s", "ratio", "goal", "met"}
    figures = [f for figs in on_disk["cases"].values() if isinstance(figs, list) for f in figs]
    assert figures and all(keys <= set(f) for f in figures)
    metrics = on_disk["cases"]["metrics"]
    assert any(f["agreement_with_pytrec_eval"]["equal"] for f in metrics)
    assert all(f["equal_results"] and f["out_of_core_blocks"] > 1 for f in on_disk["cases"]["blocks"])  # in core == out of core
    resolve_ref = on_disk["cases"]["resolve"][0]
    assert resolve_ref["identical"] is True
    md = (tmp_path / "perf.md").read_text()
    assert "| case | figure | ours | reference | ratio | goal | met |" in md
    dvc = on_disk["cases"]["dvc"]
    if isinstance(dvc, dict):  # no mirror beside the checkout
        assert "skipped" in dvc
    else:
        edit = next(f for f in dvc if f["name"].startswith("dvc repro after a PDF-modality edit"))
        assert "extract@pdf" in edit["stages_run"] and edit["ocr_stages_run"] == [] and edit["met"] is True
        cold = next(f for f in dvc if f["name"].startswith("dvc cold repro"))
        assert {"extract@image", "extract@ui_screenshot", "extract@pdf"} <= {s["stage"] for s in cold["stages"]}
        assert isinstance(cold["ocr_cache"], dict) and cold["ocr_results_seeded"] >= 0
    pdf = on_disk["cases"]["pdf"]
    if isinstance(pdf, list):  # the warm-up OCRs into the suite's cache (hits + misses = text-less pages)
        assert set(pdf[0]["ocr_cache_warm_up"]) == {"hits", "misses", "bad"}
    # intervals and p-values agree with scipy's on the same values (up to Monte-Carlo noise)
    unc = on_disk["cases"]["uncertainty"]
    boots = [f for f in unc if f["name"].startswith("bootstrap")]
    assert len(boots) == 2 and all(f["max_bound_gap_share_of_width"] < 0.25 for f in boots)
    flips = next(f for f in unc if f["name"].startswith("randomization test, 1000 "))
    assert abs(flips["p"] - flips["scipy_p"]) < 0.1


def test_suite_ocr_cache_is_seeded_from_a_cache_folder_and_keeps_what_it_has(tmp_path) -> None:
    from benchmarks.common import copy_ocr_cache

    src = tmp_path / "project-cache" / "pdf"
    for key in ("ab12", "ab34", "cd56"):
        (src / key[:2]).mkdir(parents=True, exist_ok=True)
        (src / key[:2] / f"{key}.json").write_text(f'{{"key": "{key}"}}\n')
    (src / "stray.txt").write_text("not a result\n")
    dest = tmp_path / "suite"
    (dest / "ab").mkdir(parents=True)
    (dest / "ab" / "ab12.json").write_text("kept\n")
    assert copy_ocr_cache(src, dest) == 2
    assert (dest / "ab" / "ab12.json").read_text() == "kept\n"
    assert (dest / "cd" / "cd56.json").read_text() == '{"key": "cd56"}\n'
    assert not (dest / "stray.txt").exists()
    assert copy_ocr_cache(tmp_path / "absent", dest) == 0


# -- OCR accuracy against text layers (benchmarks/ocr_scoring.py) -----------------------


def test_normalise_folds_ligatures_quotes_dashes_controls_and_whitespace() -> None:
    from benchmarks.ocr_scoring import normalise

    assert normalise("ﬁnal “quoted” — it’s\u00ad ok\x00\n\n  Ｗide\tend ") == "final \"quoted\" - it's ok Wide end"


def test_error_counts_against_hand_checked_strings() -> None:
    from benchmarks.ocr_scoring import bag_of_words_errors, cer_counts, ordered_word_errors

    assert cer_counts("kitten", "sitting") == (3, 6)  # k->s, e->i, +g
    assert cer_counts("abc", "abc") == (0, 3)
    assert cer_counts("mont h s ok", "months ok") == (0, 8)  # whitespace is not compared
    # bags {a b c d} vs {a b c e e}: d->e substituted, one e inserted
    assert bag_of_words_errors("a b c d", "b a c e e") == (2, 4)
    assert bag_of_words_errors("a b c d", "d c b a") == (0, 4)  # order is not an error
    assert ordered_word_errors("a b c d", "d c b a") == (4, 4)  # ... in the ordered figure it is
    assert bag_of_words_errors("x y", "") == (2, 2)


def test_reading_lines_puts_both_columns_of_a_line_together() -> None:
    from benchmarks.ocr_scoring import Piece, reading_lines

    layer = [Piece(0, 0, 50, 10, "L1"), Piece(0, 20, 50, 30, "L2"), Piece(60, 1, 110, 11, "R1"), Piece(60, 21, 110, 31, "R2")]
    assert reading_lines(layer) == "L1 R1\nL2 R2"
    assert reading_lines(list(reversed(layer))) == "L1 R1\nL2 R2"  # the input order does not matter


def test_pooled_rate_and_its_bootstrap_interval() -> None:
    from benchmarks.ocr_scoring import pooled

    pages = [{"e": 1, "n": 10}, {"e": 3, "n": 10}, {"e": 0, "n": 20}]
    got = pooled(pages, "e", "n", resamples=500)
    assert got["value"] == 4 / 40 and got["errors"] == 4 and got["denominator"] == 40
    assert 0.0 <= got["ci95"][0] <= got["value"] <= got["ci95"][1] <= 0.3


#: three fixed pages of the accuracy sample (every 77th) and their measured edit counts with
#: the chosen setting (onnxruntime, PP-OCRv6 tiny recognition, recognition batch 1, arena on):
#: (document, 1-based page, char errors, non-space chars, bag-of-words errors, words). The small
#: recognition model with batch 1 gave 164, 382, 4 and 17, 9, 29 (550 and 55); with batch 6
#: 164, 381, 4; a detector limited to 736 px gave 281, 436, 3 character errors (720, 12.1 %),
#: the small print it loses (docs/performance.md)
PINNED_PAGES = [
    ("05-03-18-political-release.pdf", 10, 164, 1457, 13, 353),
    ("ADOBE_2015_10K.pdf", 43, 384, 3322, 13, 553),
    ("Pew-Research-Center_Hispanic-Identity-Report_12.20.2017.pdf", 32, 4, 1182, 28, 191),
]


def test_ocr_accuracy_of_three_fixed_pages_is_pinned() -> None:
    import pytest

    from benchmarks.ocr_candidates import best_of_interleaved, current
    from benchmarks.ocr_scoring import DOCUMENTS, summarise

    pages = [(str(DOCUMENTS / doc), page - 1) for doc, page, *_ in PINNED_PAGES]
    if not all((DOCUMENTS / doc).is_file() for doc, *_ in PINNED_PAGES):
        pytest.skip("MMLongBench-Doc PDFs absent from the mirror")
    run = best_of_interleaved([current()], pages, 1)[0]
    for got, (doc, page, ce, cn, we, wn) in zip(run["pages"], PINNED_PAGES):
        assert (got["document"], got["page"], got["chars"], got["words"]) == (doc, page, cn, wn)  # the layer side is exact
        assert abs(got["char_errors"] - ce) <= 0.01 * cn and abs(got["word_errors"] - we) <= 0.02 * wn
    summary = summarise(run["pages"])
    assert summary["pages"] == 3 and summary["cer"]["denominator"] == 5961
    assert summary["cer"]["value"] == pytest.approx(552 / 5961, abs=0.01)  # 9.3 %
    assert summary["wer"]["value"] == pytest.approx(54 / 1097, abs=0.02)  # 4.9 %


def test_loop_case_splits_stage_seconds_and_finds_differences(tmp_path):
    """benchmarks/case_loop.py: seconds per stage from the repro's lines; what differs from a cold run
    (latency fields and run.chunking apart, when asked)."""
    import pandas as pd

    from benchmarks.case_loop import OUTPUTS, differences, stage_seconds

    lines = [(0.0, "Stage 'fetch' didn't change, skipping"), (1.0, "Running stage 'chunk':"), (3.5, "> python -m stages.chunk"),
             (4.0, "Running stage 'evaluate':")]
    assert stage_seconds(lines, 10.0) == {"chunk": 3.0, "evaluate": 6.0}

    def outputs(folder, latency: float, recall: float, window: int):
        doc = {"overall": {"recall@10": {"value": recall}, "latency_p50_ms": {"value": latency}},
               "run": {"latency": {"p50_ms": latency}, "chunking": {"conversation": {"window_turns": window}}}}
        for rel, body in zip(OUTPUTS, (json.dumps(doc), None, "q Q0 a 1 1.0 bm25\n", "q 0 a 1\n"), strict=True):
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            if body is None:
                pd.DataFrame({"query_id": ["q"], "recall@10": [recall], "latency_ms": [latency]}).to_parquet(folder / rel)
            else:
                (folder / rel).write_text(body)
        return folder

    a = outputs(tmp_path / "a", 1.0, 0.5, 5)
    assert differences(a, outputs(tmp_path / "b", 2.0, 0.5, 5)) == []  # latency apart
    assert differences(a, outputs(tmp_path / "c", 1.0, 0.5, 6)) == [OUTPUTS[0]]
    assert differences(a, tmp_path / "c", chunking_apart=True) == []
    assert differences(a, outputs(tmp_path / "d", 1.0, 0.6, 5)) == list(OUTPUTS[:2])


def test_sweep_case_reads_queue_states_and_builds_grids_that_change_nothing(tmp_path, monkeypatch):
    """benchmarks/case_sweep.py: the states `dvc queue status` prints; the grid in DVC's order; the no-op experiments equal params.yaml's values."""
    import yaml

    from benchmarks import case_sweep

    printed = ("Task     Name        Created    Status\nbfdce5e  shoal-cols  11:46 PM   Success\nce7398d  owing-sorb  11:46 PM   Running\n"
               "cff61d2  gusty-snow  11:46 PM   Queued\n\nWorker status: 1 active, 0 idle\n")
    monkeypatch.setattr(case_sweep, "sh", lambda args, cwd, env: printed)
    assert case_sweep.queue_states(tmp_path, {}) == {"shoal-cols": "Success", "owing-sorb": "Running", "gusty-snow": "Queued"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"chunking": {"image": {"strategy": "whole"}, "code": {"strategy": "symbol"}}}))
    assert case_sweep.unchanged(tmp_path) == [("chunking.image.strategy=whole", "chunking.code.strategy=symbol")] * 9
    combos = case_sweep.grid()
    assert len(set(combos)) == 9 and combos[0] == ("chunking.pdf.strategy=page", "chunking.conversation.strategy=turn")
    assert combos[1] == ("chunking.pdf.strategy=page", "chunking.conversation.strategy=window")  # pdf outermost
    assert case_sweep.SWEEP == ("chunking.pdf.strategy=page,window,whole", "chunking.conversation.strategy=turn,window,session")
