"""UI-screenshot modality: bbox checks, overlap edges, OCR-line and grid chunkers, ScreenAgent."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.modalities.base import ATOM_COLUMNS, SEGMENT_COLUMNS
from bench.modalities.derived import is_derived
from bench.modalities.ocr import OcrBox, OcrResult, image_size, ocr_image
from bench.modalities.ui_screenshot import DATASETS, MODALITY
from bench.modalities.ui_screenshot import screenagent as sa_module
from bench.modalities.ui_screenshot.modality import (
    ATOM_UI_COLUMNS,
    SEGMENT_UI_COLUMNS,
    segment_rows,
)
from bench.modalities.ui_screenshot.screenagent import ScreenAgent, stamp_time

MIRROR = Path(__file__).resolve().parents[2].parent / "shared" / "mirror"
SA_DIR = MIRROR / "screenagent_test"
need_mirror = pytest.mark.skipif(not (SA_DIR / "data").is_dir(), reason=f"ScreenAgent mirror absent at {SA_DIR}")
SESSION = "08b60963cba94824b4df484f1aca9482"
SHOT = f"data/ScreenAgent/test/{SESSION}/images/2024-01-12_16-52-37-180900.jpg"
SHOT_ID = f"screenagent:{SHOT}"
SEARCH_BOX = [253, 105, 310, 132]  # 'Click Search button.' in that step
SPEC_KEYS = ["query_id", "modality", "question", "answer", "answer_format", "gold", "scope", "as_of",
             "unanswerable", "origin", "split"]
T0 = pd.Timestamp("2024-01-12T16:52:37.1809Z")


def fake_segments(boxes: list[tuple[float, float, float, float, str]], width: int = 1024, height: int = 768,
                  source_id: str = "screenagent:x.jpg") -> pd.DataFrame:
    ocr_boxes = [OcrBox(x0, y0, x1, y1, t, 0.9) for x0, y0, x1, y1, t in boxes]
    df = pd.DataFrame(segment_rows(source_id, width, height, ocr_boxes))
    df["dataset"], df["modality"], df["holder"], df["observed_at"] = "screenagent", "ui_screenshot", "owner", T0
    return df[SEGMENT_UI_COLUMNS]


def atoms_of(*boxes: list[float]) -> pd.DataFrame:
    return pd.DataFrame([{"x0": b[0], "y0": b[1], "x1": b[2], "y1": b[3]} for b in boxes], columns=["x0", "y0", "x1", "y1"])


# -- registration and region shape ----------------------------------------------


def test_exports():
    assert MODALITY.name == "ui_screenshot" and MODALITY.strategies == ("ocr", "grid")
    assert [ds.key for ds in DATASETS] == ["screenagent"] and DATASETS[0].annotation_is_human


@pytest.mark.parametrize(
    "region",
    [
        None, [], {}, {"bbox": [0, 0, 1, 1], "page": 1}, {"box": [0, 0, 1, 1]},
        {"bbox": "0,0,1,1"}, {"bbox": [0, 0, 1]}, {"bbox": [0, 0, 1, 1, 2]},
        {"bbox": ["0", 0, 1, 1]}, {"bbox": [0, 0, None, 1]}, {"bbox": [True, 0, 1, 1]},
        {"bbox": [0, 0, float("nan"), 1]}, {"bbox": [0, 0, math.inf, 1]},
        {"bbox": [5, 0, 5, 1]}, {"bbox": [6, 0, 5, 1]}, {"bbox": [0, 3, 1, 3]}, {"bbox": [0, 4, 1, 3]},
        {"bbox": [-1, 0, 5, 5]}, {"bbox": [0, -0.5, 5, 5]},
    ],
)
def test_bad_shapes_rejected(region):
    assert MODALITY.check_region_shape(region) is not None


@pytest.mark.parametrize("bbox", [[0, 0, 1, 1], [0.5, 1.5, 2.25, 3], [0, 0, 1024, 768], [253, 105, 310, 132]])
def test_good_shapes_pass(bbox):
    assert MODALITY.check_region_shape({"bbox": bbox}) is None


def test_region_needs_the_screenshot():
    assert MODALITY.check_region_in_corpus({"bbox": [0, 0, 1, 1]}, fake_segments([]).iloc[0:0]) is not None


# -- overlap --------------------------------------------------------------------


def test_touching_boxes_do_not_overlap():
    gold = {"bbox": [10, 10, 20, 20]}
    atoms = atoms_of([0, 10, 10, 20], [20, 10, 30, 20], [10, 0, 20, 10], [10, 20, 20, 30], [0, 0, 10, 10], [20, 20, 30, 30])
    assert not MODALITY.overlap(gold, atoms, pd.DataFrame()).any()
    assert (MODALITY.overlap_fraction(gold, atoms, pd.DataFrame()) == 0).all()


def test_inside_containing_and_partial_overlap():
    gold = {"bbox": [0, 0, 10, 10]}
    atoms = atoms_of([2, 2, 4, 4], [-5, -5, 50, 50], [5, 0, 15, 10], [9.5, 9.5, 20, 20], [11, 0, 20, 10])
    assert MODALITY.overlap(gold, atoms, pd.DataFrame()).tolist() == [True, True, True, True, False]
    frac = MODALITY.overlap_fraction(gold, atoms, pd.DataFrame())
    assert np.allclose(frac, [0.04, 1.0, 0.5, 0.0025, 0.0])


def test_zero_area_atom_never_overlaps():
    atoms = atoms_of([5, 0, 5, 10], [0, 5, 10, 5])
    assert not MODALITY.overlap({"bbox": [0, 0, 10, 10]}, atoms, pd.DataFrame()).any()


def test_overlap_on_empty_atoms():
    assert MODALITY.overlap({"bbox": [0, 0, 1, 1]}, atoms_of(), pd.DataFrame()).shape == (0,)


# -- chunkers (fake OCR boxes) ---------------------------------------------------


def test_ocr_lines_group_close_boxes_on_one_row():
    seg = fake_segments([
        (100, 100, 150, 120, "File"), (160, 101, 200, 121, "Edit"),  # same line, gap 10 < 1.5 * 20
        (600, 100, 650, 120, "Help"),  # same row but far away: own line
        (100, 140, 180, 160, "Open"),  # next row
    ])
    atoms = MODALITY.chunk(seg, "ocr", {})
    assert list(atoms.columns) == ATOM_UI_COLUMNS and set(ATOM_COLUMNS) <= set(atoms.columns)
    assert atoms["text"].tolist() == ["File Edit", "Help", "Open"]
    first = atoms.iloc[0]
    assert json.loads(first["extent"]) == {"bbox": [100.0, 100.0, 200.0, 121.0]}
    assert json.loads(first["boxes"]) == [[100, 100, 150, 120], [160, 101, 200, 121]]
    assert atoms["atom_id"].is_unique and atoms["atom_id"].str.startswith("screenagent:x.jpg#l").all()
    # a wider gap allowance joins the far box too
    wide = MODALITY.chunk(seg, "ocr", {"line_h_gap": 30})
    assert wide["text"].tolist() == ["File Edit Help", "Open"]


def test_ocr_lines_vertical_tolerance():
    seg = fake_segments([(0, 0, 50, 20, "a"), (55, 9, 100, 29, "b")])  # centres 10 and 19: 9 < 0.5 * 20
    assert MODALITY.chunk(seg, "ocr", {})["text"].tolist() == ["a b"]
    seg = fake_segments([(0, 0, 50, 20, "a"), (55, 11, 100, 31, "b")])  # centres 10 and 21: 11 > 10
    assert MODALITY.chunk(seg, "ocr", {})["text"].tolist() == ["a", "b"]


def test_grid_tiles_carry_text_by_centre():
    seg = fake_segments([(120, 10, 140, 30, "edge"), (300, 400, 340, 420, "mid")])
    atoms = MODALITY.chunk(seg, "grid", {"grid_rows": 2, "grid_cols": 4})
    assert len(atoms) == 8 and atoms["atom_id"].is_unique
    by_key = dict(zip(atoms["atom_id"].str.split("#").str[1], atoms["text"]))
    assert by_key["r0c0"] == "edge"  # centre (130, 20) lies in tile [0, 256) x [0, 384)
    assert by_key["r1c1"] == "mid"
    assert sum(1 for t in by_key.values() if t == "") == 6  # empty tiles are still atoms
    assert atoms[["x0", "y0", "x1", "y1"]].iloc[-1].tolist() == [768.0, 384.0, 1024.0, 768.0]


def test_grid_centre_on_a_tile_edge_goes_right_and_down():
    seg = fake_segments([(246, 374, 266, 394, "x")])  # centre (256, 384)
    atoms = MODALITY.chunk(seg, "grid", {"grid_rows": 2, "grid_cols": 4})
    hit = atoms[atoms["text"] == "x"]["atom_id"].str.split("#").str[1].tolist()
    assert hit == ["r1c1"]


def test_screenshot_without_text():
    seg = fake_segments([])
    assert len(seg) == 1 and not seg["has_text"].iloc[0] and seg["width"].iloc[0] == 1024
    assert MODALITY.chunk(seg, "ocr", {}).empty
    grid = MODALITY.chunk(seg, "grid", {})
    assert len(grid) == 48 and (grid["text"] == "").all()
    assert list(MODALITY.chunk(seg.iloc[0:0], "ocr", {}).columns) == ATOM_UI_COLUMNS


def test_bad_strategy_and_grid():
    seg = fake_segments([])
    with pytest.raises(ValueError):
        MODALITY.chunk(seg, "page", {})
    with pytest.raises(ValueError):
        MODALITY.chunk(seg, "grid", {"grid_rows": 0, "grid_cols": 4})


def test_round_trip_grid_tile_equal_to_gold():
    seg = fake_segments([(130, 140, 200, 160, "Search")])
    atoms = MODALITY.chunk(seg, "grid", {})  # 6 x 8 tiles of 128 px
    gold = {"bbox": [128, 128, 256, 256]}
    assert MODALITY.check_region_shape(gold) is None and MODALITY.check_region_in_corpus(gold, seg) is None
    mask = MODALITY.overlap(gold, atoms, seg)
    assert atoms.loc[mask, "atom_id"].tolist() == ["screenagent:x.jpg#r1c1"]  # neighbours only touch
    assert MODALITY.overlap_fraction(gold, atoms, seg)[mask].tolist() == [1.0]
    assert atoms.loc[mask, "text"].tolist() == ["Search"]


def test_round_trip_ocr_line_equal_to_gold():
    seg = fake_segments([(253, 105, 310, 132, "Search"), (20, 300, 90, 320, "Other")])
    atoms = MODALITY.chunk(seg, "ocr", {})
    gold = {"bbox": SEARCH_BOX}
    mask = MODALITY.overlap(gold, atoms, seg)
    assert atoms.loc[mask, "text"].tolist() == ["Search"]
    assert MODALITY.overlap_fraction(gold, atoms, seg)[mask].tolist() == [1.0]


# -- real file: size and OCR ------------------------------------------------------


@pytest.fixture(scope="module")
def real_segments() -> pd.DataFrame:
    if not (SA_DIR / SHOT).is_file():
        pytest.skip(f"ScreenAgent screenshot absent at {SA_DIR / SHOT}")
    return ScreenAgent().extract({SHOT: SA_DIR / SHOT})


def test_real_ocr_gives_text_boxes(real_segments):
    seg = real_segments
    assert set(SEGMENT_COLUMNS) <= set(seg.columns) and list(seg.columns) == SEGMENT_UI_COLUMNS
    assert (seg["source_id"] == SHOT_ID).all() and seg["has_text"].all() and len(seg) >= 10
    assert (seg["width"] == 1024).all() and (seg["height"] == 768).all()
    assert ((seg["x0"] >= 0) & (seg["x0"] < seg["x1"]) & (seg["x1"] <= 1024)).all()
    assert ((seg["y0"] >= 0) & (seg["y0"] < seg["y1"]) & (seg["y1"] <= 768)).all()
    assert seg["text"].str.contains("douban", case=False).any()
    assert seg["seq"].tolist() == list(range(len(seg)))
    assert (seg["observed_at"] == T0).all() and str(seg["observed_at"].dt.tz) == "UTC"
    # the gold 'Search' box is covered by at least one OCR-line atom and one grid tile
    for strategy in MODALITY.strategies:
        atoms = MODALITY.chunk(seg, strategy, {})
        assert MODALITY.overlap({"bbox": SEARCH_BOX}, atoms, seg).any()


def test_real_ocr_is_deterministic(real_segments):
    again = ocr_image(SA_DIR / SHOT)
    assert [b.text for b in again.boxes] == real_segments["text"].tolist()
    assert [b.x0 for b in again.boxes] == real_segments["x0"].tolist()


def test_region_against_real_screenshot(real_segments):
    seg = real_segments
    assert MODALITY.check_region_in_corpus({"bbox": SEARCH_BOX}, seg) is None
    assert MODALITY.check_region_in_corpus({"bbox": [0, 0, 1024, 768]}, seg) is None
    assert MODALITY.check_region_in_corpus({"bbox": [1000, 0, 1025, 10]}, seg) is not None
    assert MODALITY.check_region_in_corpus({"bbox": [0, 700, 10, 768.5]}, seg) is not None


# -- ScreenAgent dataset ---------------------------------------------------------


def test_stamp_time():
    assert stamp_time("2024-01-12_16-52-37-180900.jpg") == T0.to_pydatetime()
    with pytest.raises(ValueError):
        stamp_time("screen.jpg")


def test_annotation_files_from_pins():
    ds = ScreenAgent()
    assert len(ds.annotation_files) == 270 and all(p.endswith(".json") for p in ds.annotation_files)
    assert ds.file_of(SHOT_ID) == SHOT and ds.file_of("coco:1.jpg") is None
    assert ds.file_of("screenagent:data/ScreenAgent/test/a/b.json") is None


def test_screenshot_path_is_in_the_steps_images_folder():
    step = f"data/ScreenAgent/test/{SESSION}/2024-01-12_16-52-37-180900.json"
    assert sa_module.screenshot_path(step, {"saved_image_name": "2024-01-12_16-52-37-180900.jpg"}) == SHOT


@need_mirror
def test_corpus_files_from_annotations():
    files = ScreenAgent().corpus_files(SA_DIR)
    assert len(files) == 208 and len({f.source_id for f in files}) == 208
    assert all(f.sha256 and f.bytes and f.source_id == f"screenagent:{f.path}" for f in files)
    assert all((SA_DIR / f.path).is_file() for f in files)
    assert SHOT in {f.path for f in files}


def test_corpus_files_skip_absent_step_files_and_unboxed_steps(tmp_path):
    """Only present step files count; a planning step, a step without a clickable_area or with
    a name that is not a plain capture time names no screenshot."""
    ds = ScreenAgent()
    boxed = {"status": "executing", "actions": [{"clickable_area": {}}]}
    steps = {0: {**boxed, "saved_image_name": "2024-01-12_16-52-37-180900.jpg"},
             1: {"status": "planning", "saved_image_name": "2024-01-12_16-52-38-000000.jpg"},
             2: {"status": "executing", "actions": [{"action_type": "key"}], "saved_image_name": "2024-01-12_16-52-39-000000.jpg"},
             3: {**boxed, "saved_image_name": "../2024-01-12_16-52-40-000000.jpg"},
             4: {**boxed, "saved_image_name": "2024-01-12_16-52-41-000000.jpg"}}
    for i, step in steps.items():
        local = tmp_path / ds.annotation_files[i]
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(json.dumps(step), encoding="utf-8")
    (tmp_path / ds.annotation_files[5]).mkdir(parents=True)  # a folder where a step file should be
    got = [f.path for f in ds.corpus_files(tmp_path)]
    assert got == sorted(sa_module.screenshot_path(ds.annotation_files[i], steps[i]) for i in (0, 4))


@need_mirror
def test_extract_with_fake_ocr(monkeypatch):
    def fake_ocr_many(paths):
        return [OcrResult(*image_size(p), (OcrBox(1, 2, 30, 12, "hi", 0.9),)) for p in paths]

    monkeypatch.setattr(sa_module, "ocr_many", fake_ocr_many)
    paths = [f.path for f in ScreenAgent().corpus_files(SA_DIR)][:3]
    seg = ScreenAgent().extract({p: SA_DIR / p for p in paths} | {"data/ScreenAgent/test/x/y.json": Path("/nonexistent")})
    assert len(seg) == 3 and seg["source_id"].tolist() == [f"screenagent:{p}" for p in sorted(paths)]
    assert (seg["dataset"] == "screenagent").all() and (seg["holder"] == "owner").all()


@pytest.fixture(scope="module")
def imported():
    if not (SA_DIR / "data").is_dir():
        pytest.skip(f"ScreenAgent mirror absent at {SA_DIR}")
    return ScreenAgent().import_set(SA_DIR)


def human(result) -> list[dict]:
    return [e for e in result.entries if not is_derived(e)]


def test_importer_counts_and_fields(imported):
    res = imported
    entries = human(res)
    assert len(res.entries) == 211 and len(entries) == 126 and res.excluded == []
    assert {k: v for k, v in res.notes.items() if k != "moments"} == {
        "step_files": 208, "boxed_actions": 218, "missing_annotation_files": 0}
    assert res.notes["moments"]["source_entries"] == 218 and res.notes["moments"]["dropped_by_reason"] == {
        "gold after the moment, but the question text is gold in more than one source": 7}
    assert all(list(e) == SPEC_KEYS for e in res.entries)
    assert len({e["query_id"] for e in res.entries}) == 211
    pattern = r"screenagent:[0-9a-f]{32}/\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d-\d{6}#\d+(:gold-later)?"
    assert all(re.fullmatch(pattern, e["query_id"]) for e in res.entries)
    assert not any(e["unanswerable"] for e in entries)
    assert all(e["answer"] is None and e["answer_format"] == "none" for e in entries)
    assert all(e["modality"] == "ui_screenshot" and len(e["gold"]) == 1 for e in entries)
    assert all(MODALITY.check_region_shape(e["gold"][0]["region"]) is None for e in entries)
    assert all(e["origin"]["revision"] == ScreenAgent.revision for e in entries)


def test_importer_question_time_and_split(imported):
    entries = human(imported)
    e = next(x for x in entries if x["query_id"] == f"screenagent:{SESSION}/2024-01-12_16-52-37-180900#0")
    assert e["question"] == "Click Search button."
    assert e["gold"] == [{"source_id": SHOT_ID, "region": {"bbox": SEARCH_BOX}}]
    assert e["as_of"] == "2024-01-13T21:43:44.382869+00:00"  # the set's one moment
    assert {x["as_of"] for x in imported.entries} == {e["as_of"]}
    # no session: at one moment the session alone would tell whether it has begun (docs/moments.md)
    assert e["scope"] == {"holder": "owner", "session": None, "scenario": "ui-grounding"}
    splits: dict[str, set[str]] = {}
    for x in imported.entries:
        splits.setdefault(x["query_id"].split(":")[1].split("/")[0], set()).add(x["split"])
    assert len(splits) == 62 and all(len(s) == 1 for s in splits.values())
    counts = Counter(next(iter(s)) for s in splits.values())
    assert counts["test"] == round(0.3 * 62)


def test_importer_deterministic(imported):
    again = ScreenAgent().import_set(SA_DIR)
    assert json.dumps(again.entries, sort_keys=True) == json.dumps(imported.entries, sort_keys=True)


def test_every_gold_box_inside_its_real_screenshot(imported):
    for e in human(imported):
        g = e["gold"][0]
        path = ScreenAgent().file_of(g["source_id"])
        width, height = image_size(SA_DIR / path)
        seg = pd.DataFrame(segment_rows(g["source_id"], width, height, ()))
        assert MODALITY.check_region_in_corpus(g["region"], seg) is None, e["query_id"]


def test_derived_after_the_moment_real(imported):
    """One moment: 1 s after ceil(2/3) of the sessions ended. A sub-task of a session ended by then is
    answerable; one of a session not begun is a derived unanswerable entry; one whose session began
    before the moment but whose screenshot came after would be neither and is dropped."""
    sessions: dict[str, list[pd.Timestamp]] = {}
    for e in imported.entries:
        session = e["query_id"].split(":")[1].split("/")[0]
        if not is_derived(e):
            sessions.setdefault(session, []).append(pd.Timestamp(stamp_time(e["gold"][0]["source_id"])))
    moment = pd.Timestamp(next(iter({e["as_of"] for e in imported.entries})))
    derived = [e for e in imported.entries if is_derived(e)]
    assert len(derived) == 85
    for d in derived:
        assert d["unanswerable"] is True and d["gold"] == [] and d["answer"] is None
        assert d["origin"]["item"].endswith("|derived:gold-later")
        session = d["query_id"].split(":")[1].split("/")[0]
        stamp = d["query_id"].split("/")[1].split("#")[0]
        assert pd.Timestamp(stamp_time(f"x/{stamp}.jpg")) > moment  # its screenshot is future memory
        assert all(t > moment for t in sessions.get(session, []))  # and no screenshot of its session is in memory
    assert all(t <= moment for ts in sessions.values() for t in ts)
    for split in ("dev", "test"):
        n, d = sum(e["split"] == split for e in imported.entries), sum(e["split"] == split for e in derived)
        assert d / n >= 0.15