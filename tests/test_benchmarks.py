"""The benchmark suite runs at its small size and writes both reports; vectorised gold
resolution equals the per-region reference. No timed assertions."""

from __future__ import annotations

import json


def test_suite_small_writes_both_reports(tmp_path) -> None:
    from benchmarks.run import CASES, run

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
