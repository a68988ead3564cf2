"""Image modality: {} regions, the 'whole' chunker, COCO captions importer and extraction."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.modalities.base import ATOM_COLUMNS, SEGMENT_COLUMNS
from bench.modalities.derived import is_derived, question_key
from bench.modalities.image import DATASETS, MODALITY
from bench.modalities.image import coco as coco_module
from bench.modalities.image.coco import ANNOTATIONS, CocoCaptions
from bench.modalities.image.modality import ATOM_IMAGE_COLUMNS, SEGMENT_IMAGE_COLUMNS
from bench.modalities.ocr import OcrResult, image_size

MIRROR = Path(__file__).resolve().parents[2].parent / "shared" / "mirror"
COCO_DIR = MIRROR / "coco_captions_val2017"
need_mirror = pytest.mark.skipif(not (COCO_DIR / ANNOTATIONS).is_file(), reason=f"COCO mirror absent at {COCO_DIR}")
IMAGE = "val2017/000000000139.jpg"
SPEC_KEYS = ["query_id", "modality", "question", "answer", "answer_format", "gold", "scope", "as_of",
             "unanswerable", "origin", "split"]


def fake_segments(names: list[str], texts: list[str] | None = None) -> pd.DataFrame:
    texts = texts or [""] * len(names)
    df = pd.DataFrame({"source_id": [f"coco:{n}" for n in names], "seq": 0, "text": texts, "width": 640, "height": 480,
                       "n_boxes": 0, "ocr_boxes": "[]"})
    df["dataset"], df["modality"], df["holder"] = "coco", "image", "owner"
    df["observed_at"] = pd.Timestamp("2013-11-14T16:58:54Z")
    return df[SEGMENT_IMAGE_COLUMNS]


def test_exports():
    assert MODALITY.name == "image" and MODALITY.strategies == ("whole",)
    assert [ds.key for ds in DATASETS] == ["coco"] and DATASETS[0].annotation_is_human


# -- region shape -----------------------------------------------------------------


def test_empty_region_passes():
    assert MODALITY.check_region_shape({}) is None


@pytest.mark.parametrize("region", [None, [], "", {"page": 1}, {"bbox": [0, 0, 1, 1]}, {"": None}, {"image": "x"}])
def test_other_regions_rejected(region):
    assert MODALITY.check_region_shape(region) is not None


def test_region_needs_the_image_in_corpus():
    seg = fake_segments(["000000000139.jpg"])
    assert MODALITY.check_region_in_corpus({}, seg) is None
    assert MODALITY.check_region_in_corpus({}, seg.iloc[0:0]) is not None


# -- chunk and overlap ----------------------------------------------------------------


def test_whole_chunker_and_round_trip():
    seg = fake_segments(["000000000002.jpg", "000000000001.jpg"], ["STOP", ""])
    atoms = MODALITY.chunk(seg, "whole", {})
    assert list(atoms.columns) == ATOM_IMAGE_COLUMNS and set(ATOM_COLUMNS) <= set(atoms.columns)
    assert atoms["atom_id"].tolist() == ["coco:000000000001.jpg#whole", "coco:000000000002.jpg#whole"]
    assert (atoms["extent"] == "{}").all() and atoms["text"].tolist() == ["", "STOP"]
    # round trip: the gold image's own atom is found (the caller passes one source's atoms)
    gold = {"source_id": "coco:000000000002.jpg", "region": {}}
    own = atoms[atoms["source_id"] == gold["source_id"]]
    mask = MODALITY.overlap(gold["region"], own, seg[seg["source_id"] == gold["source_id"]])
    assert own.loc[mask, "atom_id"].tolist() == ["coco:000000000002.jpg#whole"]


def test_chunk_edge_cases():
    empty = MODALITY.chunk(fake_segments([]).iloc[0:0], "whole", {})
    assert empty.empty and list(empty.columns) == ATOM_IMAGE_COLUMNS
    assert MODALITY.overlap({}, empty, fake_segments([])).shape == (0,)
    with pytest.raises(ValueError):
        MODALITY.chunk(fake_segments(["000000000001.jpg"]), "grid", {})


# -- COCO dataset -----------------------------------------------------------------


def test_file_of():
    ds = CocoCaptions()
    assert ds.file_of("coco:000000000139.jpg") == IMAGE
    assert ds.file_of("coco:../x.jpg") is None and ds.file_of("screenagent:000000000139.jpg") is None


@need_mirror
def test_corpus_files_from_annotations():
    files = CocoCaptions().corpus_files(COCO_DIR)
    assert len(files) == 79 and all(f.sha256 and f.path.startswith("val2017/") for f in files)
    assert all((COCO_DIR / f.path).is_file() for f in files)


@need_mirror
def test_real_extract_one_image():
    """Real OCR on one real photo: size from the file, date from the annotations, text is OCR's."""
    seg = CocoCaptions().extract({IMAGE: COCO_DIR / IMAGE, ANNOTATIONS: COCO_DIR / ANNOTATIONS})
    assert set(SEGMENT_COLUMNS) <= set(seg.columns) and list(seg.columns) == SEGMENT_IMAGE_COLUMNS
    row = seg.iloc[0]
    assert len(seg) == 1 and row["source_id"] == "coco:000000000139.jpg"
    assert (row["width"], row["height"]) == (640, 426)
    assert row["observed_at"] == pd.Timestamp("2013-11-21T01:34:01Z")
    assert isinstance(row["text"], str) and row["n_boxes"] == len(json.loads(row["ocr_boxes"]))
    captions = {a["caption"] for a in json.loads((COCO_DIR / ANNOTATIONS).read_text())["annotations"]}
    assert row["text"] not in captions


@need_mirror
def test_extract_finds_annotations_beside_images(monkeypatch):
    monkeypatch.setattr(coco_module, "ocr_many", lambda paths: [OcrResult(*image_size(p), ()) for p in paths])
    seg = CocoCaptions().extract({IMAGE: COCO_DIR / IMAGE})
    assert seg["text"].tolist() == [""] and seg["n_boxes"].tolist() == [0]


def test_extract_without_annotations_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(coco_module, "ocr_many", lambda paths: [])
    (tmp_path / "val2017").mkdir()
    with pytest.raises(FileNotFoundError):
        CocoCaptions().extract({IMAGE: tmp_path / IMAGE})


@pytest.fixture(scope="module")
def imported():
    if not (COCO_DIR / ANNOTATIONS).is_file():
        pytest.skip(f"COCO mirror absent at {COCO_DIR}")
    return CocoCaptions().import_set(COCO_DIR)


def human(result) -> list[dict]:
    return [e for e in result.entries if not is_derived(e)]


def test_importer_counts_and_fields(imported):
    entries = human(imported)
    assert len(imported.entries) == 395 and len(entries) == 265 and imported.excluded == []
    assert {k: v for k, v in imported.notes.items() if k != "moments"} == {"upstream_captions": 395, "images": 79}
    assert all(list(e) == SPEC_KEYS for e in imported.entries)
    assert len({e["query_id"] for e in imported.entries}) == 395
    assert all(re.fullmatch(r"coco:\d+", e["query_id"]) for e in entries)
    assert not any(e["unanswerable"] for e in entries)
    assert all(e["answer"] is None and e["answer_format"] == "none" and e["modality"] == "image" for e in entries)
    per_image = Counter(e["gold"][0]["source_id"] for e in entries)
    assert len(per_image) == 53 and set(per_image.values()) == {5}  # ceil(2/3 of 79) photos captured by the moment
    assert all(e["gold"] == [{"source_id": e["gold"][0]["source_id"], "region": {}}] for e in entries)
    assert {e["as_of"] for e in imported.entries} == {"2013-11-20T16:22:19+00:00"}  # one moment, every entry


def test_questions_verbatim_and_splits(imported):
    raw = json.loads((COCO_DIR / ANNOTATIONS).read_text(encoding="utf-8"))
    caption = {f"coco:{a['id']}": a["caption"] for a in raw["annotations"]}
    assert all(e["question"] == caption[e["query_id"].removesuffix(":gold-later")] for e in imported.entries)
    assert any(e["question"].endswith(" ") for e in imported.entries)  # kept verbatim
    image_of = {f"coco:{a['id']}": a["image_id"] for a in raw["annotations"]}
    split_of: dict[int, set[str]] = {}
    for e in imported.entries:
        split_of.setdefault(image_of[e["query_id"].removesuffix(":gold-later")], set()).add(e["split"])
    assert all(len(s) == 1 for s in split_of.values())
    assert Counter(next(iter(s)) for s in split_of.values())["test"] == round(0.3 * 79)


def test_importer_deterministic(imported):
    again = CocoCaptions().import_set(COCO_DIR)
    assert json.dumps(again.entries, sort_keys=True) == json.dumps(imported.entries, sort_keys=True)


def test_bad_upstream_rows_excluded(tmp_path):
    raw = json.loads((COCO_DIR / ANNOTATIONS).read_text(encoding="utf-8")) if (COCO_DIR / ANNOTATIONS).is_file() else None
    if raw is None:
        pytest.skip(f"COCO mirror absent at {COCO_DIR}")
    raw["annotations"][0]["image_id"] = 1
    raw["annotations"][1]["caption"] = "   "
    (tmp_path / "annotations").mkdir()
    (tmp_path / ANNOTATIONS).write_text(json.dumps(raw), encoding="utf-8")
    res = CocoCaptions().import_set(tmp_path)
    assert len(res.entries) == 393 and len(res.excluded) == 2
    assert {x["reason"].split(" ")[0] for x in res.excluded} == {"image_id", "caption"}
    assert np.all([x["item"].startswith("annotation:") for x in res.excluded])


def test_derived_after_the_moment_real(imported):
    """One moment: 1 s after ceil(2/3) of the photos were captured. A caption of a photo captured by
    then is answerable; one of a later photo is a derived unanswerable entry (the photo is future memory)."""
    raw = json.loads((COCO_DIR / ANNOTATIONS).read_text(encoding="utf-8"))
    captured = {f"coco:{i['file_name']}": pd.Timestamp(i["date_captured"], tz="UTC") for i in raw["images"]}
    ann = {f"coco:{a['id']}": a for a in raw["annotations"]}
    file_of = {i["id"]: f"coco:{i['file_name']}" for i in raw["images"]}
    times = sorted(captured.values())
    moment = times[52] + pd.Timedelta(seconds=1)  # ceil(2 * 79 / 3) = 53 photos
    derived = [e for e in imported.entries if is_derived(e)]
    assert len(derived) == 130 and imported.notes["moments"]["dropped"] == []  # no caption text is repeated
    assert len({question_key(e["question"]) for e in imported.entries}) == 395
    for e in imported.entries:
        assert pd.Timestamp(e["as_of"]) == moment
        shot = captured[file_of[ann[e["query_id"].removesuffix(":gold-later")]["image_id"]]]
        if is_derived(e):
            assert e["unanswerable"] is True and e["gold"] == [] and e["answer"] is None and shot > moment
            assert e["origin"]["item"] == f"annotation:{ann[e['query_id'][:-11]]['id']}|derived:gold-later"
        else:
            assert shot <= moment
    for split in ("dev", "test"):
        n, d = sum(e["split"] == split for e in imported.entries), sum(e["split"] == split for e in derived)
        assert d / n >= 0.15