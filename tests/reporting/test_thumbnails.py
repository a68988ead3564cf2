"""Drill-down pictures are real pictures of real corpus files: decode the inline image
and find the gold box green and the returned atoms' boxes red where they belong."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench.annotations.splits import load_lock
from bench.corpus_sources import datasets
from bench.modalities.code.pictures import code_lines_html
from bench.modalities.image.pictures import IMAGE_WIDTH
from bench.modalities.pdf.pictures import PDF_WIDTH
from bench.modalities.ui_screenshot.pictures import SHOT_WIDTH
from bench.modalities.video.pictures import timeline_svg
from bench.reporting.html_report import render
from bench.reporting.thumbnails import CorpusFiles, pictures, query_pictures
from tests.conftest import ROOT, need_mirror

DATA_URI = re.compile(r'src="data:image/jpeg;base64,([A-Za-z0-9+/=]+)"')


def first_dev_entry(key: str, query_id: str | None = None) -> dict:
    """The first answerable dev entry of a real set whose gold file is in the mirror (or the one named)."""
    ds = datasets()[key]
    mirror = need_mirror(ds.mirror_key) / ds.mirror_key
    dev = {e.query_id for e in load_lock(ROOT / "bench/sets/splits.lock").entries if e.split == "dev"}
    for line in (ROOT / f"bench/sets/{key}.jsonl").read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if query_id is not None and entry["query_id"] != query_id:
            continue
        if entry["query_id"] in dev and entry["gold"] and (mirror / ds.file_of(entry["gold"][0]["source_id"])).is_file():
            return entry
    raise AssertionError(f"no answerable dev entry in {key}")


#: a dark-themed desktop (a terminal showing an error message): its thumbnail is mostly dark
DARK_SCREEN = "screenagent:08a2def941d942ffb542ba0ba3d8aa99/2024-01-13_21-37-47-367890#0"


@pytest.fixture()
def files(tmp_path: Path) -> CorpusFiles:
    """A corpus store laid out as the fetch stage lays it (store/<key>/<manifest path>),
    linking to the real mirror; only the files named present are usable."""
    keys = ("screenagent", "coco", "mmlongbench")
    mirror = need_mirror(*(datasets()[k].mirror_key for k in keys))
    store = tmp_path / "store"
    store.mkdir()
    present = set()
    for key in keys:
        (store / key).symlink_to(mirror / datasets()[key].mirror_key, target_is_directory=True)
        entry = first_dev_entry(key)
        present.add((key, datasets()[key].file_of(entry["gold"][0]["source_id"])))
    dark = first_dev_entry("screenagent", DARK_SCREEN)
    present.add(("screenagent", datasets()["screenagent"].file_of(dark["gold"][0]["source_id"])))
    return CorpusFiles(store, frozenset(present))


def images(fragment: str) -> list[Image.Image]:
    return [Image.open(io.BytesIO(base64.b64decode(b))).convert("RGB") for b in DATA_URI.findall(fragment)]


def is_green(px: np.ndarray) -> bool:
    r, g, b = (int(v) for v in px)
    return g > 110 and g > r + 60 and g > b + 60


def is_red(px: np.ndarray) -> bool:
    r, g, b = (int(v) for v in px)
    return r > 150 and r > g + 80 and r > b + 80


def query(entry: dict, top: list[dict]) -> dict:
    return {"query_id": entry["query_id"], "question": entry["question"], "unanswerable": False, "failed": False,
            "metrics": {}, "top": top,
            "gold": [{"source_id": g["source_id"], "region": json.dumps(g["region"]), "extent": 1.0, "n_atoms": 1}
                     for g in entry["gold"]]}


def test_screenshot_gold_box_green_and_atom_boxes_red(files):
    entry = first_dev_entry("screenagent")
    source = entry["gold"][0]["source_id"]
    gx0, gy0, gx1, gy1 = entry["gold"][0]["region"]["bbox"]
    with Image.open(files.path_of(source)) as im:
        width, height = im.size
    atom_box = [40.0, height - 200.0, 340.0, height - 120.0]  # an OCR-line-sized box away from the gold one
    top = [{"rank": 3, "atom_id": f"{source}#l7", "source_id": source, "extent": json.dumps({"bbox": atom_box})},
           {"rank": 1, "atom_id": "cosqa:functions#x", "source_id": "cosqa:functions", "extent": "{}"}]
    fragment = query_pictures("ui_screenshot", query(entry, top), files, {})
    full, zoom = images(fragment)
    assert full.width == SHOT_WIDTH and abs(full.height - height * SHOT_WIDTH / width) <= 1
    s = SHOT_WIDTH / width
    arr = np.asarray(full)
    mid_y = round((gy0 + gy1) / 2 * s)
    assert is_green(arr[mid_y, round(gx0 * s) + 1]), arr[mid_y, round(gx0 * s) + 1]  # left edge of the gold box
    assert is_green(arr[mid_y, round(gx1 * s) - 1])
    ay = round((atom_box[1] + atom_box[3]) / 2 * s)
    assert is_red(arr[ay, round(atom_box[2] * s)]), arr[ay, round(atom_box[2] * s)]  # right edge of the atom box
    # inside the boxes the screenshot itself shows (not painted over)
    inner = arr[ay, round(atom_box[0] * s) + 6: round(atom_box[2] * s) - 6]
    assert not all(is_red(p) for p in inner)
    assert (np.asarray(zoom)[..., 1] > 110).any() and zoom.width <= 240 + 1
    assert "Top-k ranks from other sources: 1." in fragment


def test_photo_framed_green_and_its_rank_when_returned(files):
    entry = first_dev_entry("coco")
    source = entry["gold"][0]["source_id"]
    missed = images(query_pictures("image", query(entry, []), files, {}))[0]
    assert missed.width == IMAGE_WIDTH
    arr = np.asarray(missed)
    assert is_green(arr[missed.height // 2, 1]) and is_green(arr[1, missed.width // 2])
    assert arr[missed.height // 2, missed.width // 2].std() >= 0  # the photo is there
    assert np.asarray(missed)[20:-20, 20:-20].std() > 20  # a real photo, not a flat fill
    found = query_pictures("image", query(entry, [{"rank": 2, "atom_id": f"{source}#whole", "source_id": source, "extent": "{}"}]),
                           files, {})
    assert "returned at rank 2" in found
    arr = np.asarray(images(found)[0])
    assert is_red(arr[arr.shape[0] // 2, 7]) and is_green(arr[arr.shape[0] // 2, 1])


def test_pdf_gold_page_rendered_with_the_ranks_of_its_atoms(files):
    entry = first_dev_entry("mmlongbench")
    source, page = entry["gold"][0]["source_id"], entry["gold"][0]["region"]["page"]
    top = [{"rank": 4, "atom_id": f"{source}#p{page}", "source_id": source,
            "extent": json.dumps({"page_end": page, "page_start": page})},
           {"rank": 1, "atom_id": f"{source}#p{page + 1}", "source_id": source,
            "extent": json.dumps({"page_end": page + 1, "page_start": page + 1})}]
    fragment = query_pictures("pdf", query(entry, top), files, {})
    thumbs = images(fragment)
    assert len(thumbs) == len(entry["gold"][:4])
    page_img = np.asarray(thumbs[0])
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(files.path_of(source)))
    w, h = pdf[page - 1].get_size()
    pdf.close()
    assert thumbs[0].width == PDF_WIDTH and abs(thumbs[0].height - PDF_WIDTH * h / w) <= 1  # that page, to scale
    assert (page_img[5:-5, 5:-5] < 100).mean() > 0.001  # text was rendered (dark pixels)
    assert is_green(page_img[page_img.shape[0] // 2, 1])  # its atom came back: green frame
    assert f"p. {page}: returned at rank 4" in fragment
    missed = query_pictures("pdf", query(entry, top[1:]), files, {})
    assert f"p. {page}: not in the top k" in missed
    assert is_red(np.asarray(images(missed)[0])[50, 1])


def test_missing_file_is_a_note_not_a_crash(files):
    entry = first_dev_entry("screenagent")
    entry = {**entry, "gold": [{"source_id": "screenagent:data/ScreenAgent/test/none/images/x.jpg", "region": {"bbox": [1, 1, 5, 5]}}]}
    assert "is not in the corpus store" in query_pictures("ui_screenshot", query(entry, []), files, {})


def test_undecodable_file_is_a_note_not_a_crash(tmp_path):
    entry = first_dev_entry("screenagent")
    source = entry["gold"][0]["source_id"]
    rel = datasets()["screenagent"].file_of(source)
    broken = tmp_path / "store" / "screenagent" / rel
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a jpeg")
    files = CorpusFiles(tmp_path / "store", frozenset({("screenagent", rel)}))
    fragment = query_pictures("ui_screenshot", query(entry, []), files, {})
    assert fragment.startswith("<p class=muted>No picture: UnidentifiedImageError: cannot identify image file")


def test_video_timeline_places_gold_and_atoms_on_the_video_length():
    svg = timeline_svg(200.0, [(50.0, 100.0)], [(2, 150.0, 160.0), (1, 0.0, 10.0)], width=628)
    root = ET.fromstring(svg)  # well-formed SVG
    ns = {"s": "http://www.w3.org/2000/svg"}
    gold = root.find("s:rect[@class='gold']", ns)
    atoms = root.findall("s:rect[@class='atom']", ns)
    # inner width 628 - 2 * 28 = 572 px for 200 s
    assert float(gold.get("x")) == pytest.approx(28 + 572 * 0.25, abs=0.1)
    assert float(gold.get("width")) == pytest.approx(572 * 0.25, abs=0.1)
    assert [a.find("s:title", ns).text for a in atoms] == ["rank 1: 0.00–10.00 s", "rank 2: 150.00–160.00 s"]
    assert float(atoms[1].get("x")) == pytest.approx(28 + 572 * 0.75, abs=0.1)
    assert "200.0 s" in svg


def test_code_lines_mark_the_ranks_covering_each_line():
    lines = (ROOT / "bench/io.py").read_text(encoding="utf-8").split("\n")
    first = next(i for i, t in enumerate(lines, 1) if t.startswith("def sha256_file"))
    html_ = code_lines_html(lines, first, first + 5, [(3, first + 4, first + 20), (1, 1, first)])
    rows = re.findall(r"<tr(?: class=hitline)?><td class=num>(\d+)</td><td class=num>([^<]*)</td>", html_)
    assert rows[0] == (str(first), "1") and rows[4] == (str(first + 4), "3") and rows[2] == (str(first + 2), "")
    assert "def sha256_file" in html_ and html_.count("class=hitline") == 3


def test_pictures_are_capped_per_modality_and_the_page_says_so(files):
    entry = first_dev_entry("screenagent")
    qs = [{**query(entry, []), "query_id": f"q{i}"} for i in range(5)]
    drill = {"k": 10, "modalities": {"ui_screenshot": {"total": 9, "shown": 5, "queries": qs}}}
    pics = pictures(drill, files, {}, per_modality=2)
    assert sorted(pics["queries"]) == ["q0", "q1"]
    page = render({"by_modality": {}, "overall": {}}, {}, drill, pictures=pics)
    assert "ui_screenshot — 5 of 9 queries shown, 2 with pictures" in page
    assert "for the first 2 answerable queries per modality" in page
    assert not re.search(r"(src|href)\s*=\s*['\"]?https?:", page)  # every picture is inline


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")), reason="chromium is not installed")
def test_pictures_show_in_headless_chromium(files, tmp_path):
    entry = first_dev_entry("screenagent", DARK_SCREEN)
    drill = {"k": 10, "modalities": {"ui_screenshot": {"total": 1, "shown": 1, "queries": [query(entry, [])]}}}
    page = render({"by_modality": {}, "overall": {}}, {}, drill, pictures=pictures(drill, files, {}))
    (tmp_path / "p.html").write_text(page, encoding="utf-8")
    proc = subprocess.run([str(ROOT / "scripts/screenshot_report.sh"), str(tmp_path / "p.html"), str(tmp_path / "p.png"), "1000,2400"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    shot = np.asarray(Image.open(tmp_path / "p.png").convert("RGB")).astype(int)
    dark = (shot.mean(axis=2) < 60).mean()
    assert dark > 0.02  # the (dark-themed) screenshot thumbnail is drawn: a text-only page is mostly white
    green = (shot[..., 1] > 120) & (shot[..., 1] > shot[..., 0] + 60) & (shot[..., 1] > shot[..., 2] + 60)
    assert green.sum() > 50  # the gold box is visible on screen
