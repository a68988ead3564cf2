"""COCO Captions val2017 (COCO-MINI subset): human captions, each describing one image.

Upstream: Obmutescence/COCO-MINI at 644f29e, ``annotations/captions_val2017.json``
(standard COCO captions JSON, 79 images, 395 captions; identical to the official
entries of these images) and ``val2017/<file_name>``.

Mapping: one entry per caption (annotations[]), in annotation-id order.
- query_id ``coco:<annotation id>``, origin.item ``annotation:<id>``.
- question = the caption verbatim (no whitespace normalisation: some captions end
  with a space; a retriever may normalise, the set keeps the annotators' text).
- gold = [{source_id ``coco:<file_name>`` of the captioned image, region {}}]. Source
  ids use the file name (e.g. ``coco:000000000139.jpg``), which is also the file path
  under ``val2017/``.
- answer null, answer_format "none" (retrieval only); COCO has no unanswerable
  captions (every human entry has unanswerable false).
- scope: holder "owner", session null, scenario "image-retrieval".
- split: assign_splits grouped by image (COCO's own split is val2017 only), so the
  five captions of an image share a split.

Time: observed_at of an image = its images[].date_captured (COCO's collection time
"YYYY-MM-DD HH:MM:SS", no zone recorded, read as UTC; all in Nov 2013). Every entry is
asked at one moment, fixed from the capture times alone before looking at any caption
(bench/modalities/derived.py, docs/moments.md): 1 s after the ceil(2/3)-th of the 79
photos was captured (2013-11-20T16:22:19Z). A caption of a photo captured by then is an
answerable entry; a caption of a later photo is a derived, temporally unanswerable one
(the photo is future memory): query_id ``coco:<id>:gold-later``, empty gold, origin.item
``annotation:<id>|derived:gold-later``, the caption's split. Captions whose text
(trimmed, case-folded) is a caption of another image are not made unanswerable (none in
this subset). One moment for all: ``as_of`` tells nothing about any entry (before issue
36 the derived ones were asked 1 s before their own photo and the human ones at
2024-01-01, so ``as_of`` alone gave answerability away). Caveat: captions are generic
and may fit photos captured earlier, which are in memory; COCO gold is only the
captioned image, so such a photo is no more "the answer" here than it is a hit for an
answerable caption. Entries are listed in a salted sha256 order of their query_id.

Upstream rows that cannot become entries (caption not a non-empty string, image id
not in images[], file name not a plain 12-digit .jpg) are excluded with a reason.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from bench.modalities.base import CorpusFile, Dataset, ImportResult, assign_splits, load_pins
from bench.modalities.derived import RULE, ask_at, moment_after, request_order
from bench.modalities.image.modality import SEGMENT_IMAGE_COLUMNS
from bench.modalities.ocr import ocr_many

ANNOTATIONS = "annotations/captions_val2017.json"
IMAGE_DIR = "val2017/"
FILE_NAME = re.compile(r"^\d{12}\.jpg$")
HOLDER = "owner"


def captured_at(text: Any) -> datetime | None:
    try:
        return datetime.strptime(str(text), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return None


class CocoCaptions(Dataset):
    key: ClassVar[str] = "coco"
    name: ClassVar[str] = "Obmutescence/COCO-MINI"
    repo: ClassVar[str] = "Obmutescence/COCO-MINI"
    revision: ClassVar[str] = "644f29e7c1d2eefd9c4412d39bc5b0ee6fd0afd4"
    license: ClassVar[str] = "captions CC BY 4.0 (COCO); images under their Flickr licenses (images[].license)"
    annotation_source: ClassVar[str] = (
        "human: MS-COCO Captions, five crowd-worker captions per image (Chen et al. 2015, "
        "arXiv:1504.00325); third-party work, identical to the official val2017 captions"
    )
    annotation_is_human: ClassVar[bool] = True
    modality: ClassVar[str] = "image"
    mirror_key: ClassVar[str] = "coco_captions_val2017"
    holders: ClassVar[str] = "every image belongs to holder 'owner' (one person's photo library)"
    observed_at_rule: ClassVar[str] = (
        "image: images[].date_captured read as UTC; as_of: one moment for every entry, 1 s after three "
        "quarters of the photos were captured"
    )
    caveats: ClassVar[str] = (
        "No human unanswerable entries (COCO has none); derived ones are captions of photos captured "
        f"after the set's one moment (origin.item '|derived:{RULE}'). Captions are generic and may fit other images; only "
        "the captioned image is gold. Region {} is the whole image (the spec's image form), so the "
        "'whole' chunker is exact by construction; photos mostly give no OCR text."
    )
    annotation_files: ClassVar[tuple[str, ...]] = (ANNOTATIONS,)

    def corpus_files(self, annotation_dir: Path) -> list[CorpusFile]:
        data = json.loads((annotation_dir / ANNOTATIONS).read_text(encoding="utf-8"))
        pins = self.pins()
        names = sorted({img["file_name"] for img in data["images"] if FILE_NAME.match(str(img.get("file_name", "")))})
        files = []
        for name in names:
            sha, size = pins.get(IMAGE_DIR + name, (None, None))
            files.append(CorpusFile(source_id=f"{self.key}:{name}", path=IMAGE_DIR + name, sha256=sha, bytes=size))
        return files

    def pins(self) -> dict[str, tuple[str, int]]:
        return load_pins(self.mirror_key)

    def file_of(self, source_id: str) -> str | None:
        prefix = f"{self.key}:"
        name = source_id[len(prefix):] if source_id.startswith(prefix) else ""
        return IMAGE_DIR + name if FILE_NAME.match(name) else None

    def extract(self, files: dict[str, Path], **_options: Any) -> pd.DataFrame:
        images = sorted(p for p in files if p.startswith(IMAGE_DIR))
        dates = self._capture_dates(files, images)
        results = ocr_many([files[p] for p in images])
        rows: list[dict] = []
        for path, res in zip(images, results):
            name = path[len(IMAGE_DIR):]
            if name not in dates:
                raise ValueError(f"{name}: no date_captured in {ANNOTATIONS}")
            rows.append(
                {
                    "source_id": f"{self.key}:{name}",
                    "seq": 0,
                    "text": "\n".join(b.text for b in res.boxes),
                    "observed_at": dates[name],
                    "width": res.width,
                    "height": res.height,
                    "n_boxes": len(res.boxes),
                    "ocr_boxes": json.dumps([[b.x0, b.y0, b.x1, b.y1] for b in res.boxes], separators=(",", ":")),
                }
            )
        df = pd.DataFrame(rows, columns=[c for c in SEGMENT_IMAGE_COLUMNS if c not in ("dataset", "modality", "holder")])
        df["observed_at"] = pd.to_datetime(df["observed_at"], utc=True)
        df["dataset"] = self.key
        df["modality"] = self.modality
        df["holder"] = HOLDER
        return df[SEGMENT_IMAGE_COLUMNS]

    def _capture_dates(self, files: dict[str, Path], images: list[str]) -> dict[str, datetime]:
        """file_name -> date_captured, from the annotation file (in `files` or beside val2017/)."""
        if not images:
            return {}
        local = files.get(ANNOTATIONS) or Path(files[images[0]]).parent.parent / ANNOTATIONS
        if not Path(local).is_file():
            raise FileNotFoundError(f"{ANNOTATIONS} is needed for observed_at and was not found at {local}")
        data = json.loads(Path(local).read_text(encoding="utf-8"))
        dates = {str(img.get("file_name")): captured_at(img.get("date_captured")) for img in data["images"]}
        return {k: v for k, v in dates.items() if v is not None}

    def import_set(self, mirror_dir: Path) -> ImportResult:
        data = json.loads((mirror_dir / ANNOTATIONS).read_text(encoding="utf-8"))
        images = {img["id"]: img for img in data["images"]}
        splits = assign_splits([str(i) for i in images], self.key)
        entries: list[dict] = []
        excluded: list[dict] = []
        for ann in sorted(data["annotations"], key=lambda a: a["id"]):
            item = f"annotation:{ann['id']}"
            img = images.get(ann.get("image_id")) if isinstance(ann.get("image_id"), int) else None
            caption = ann.get("caption")
            problem = None
            if img is None:
                problem = f"image_id {ann.get('image_id')!r} not in images[]"
            elif not FILE_NAME.match(str(img.get("file_name", ""))):
                problem = f"image file name {img.get('file_name')!r} is not a plain 12-digit .jpg"
            elif captured_at(img.get("date_captured")) is None:
                problem = f"image date_captured {img.get('date_captured')!r} is not 'YYYY-MM-DD HH:MM:SS'"
            elif not isinstance(caption, str) or not caption.strip():
                problem = "caption is not a non-empty string"
            if problem is not None or img is None:
                excluded.append({"item": item, "reason": problem})
                continue
            entries.append(
                {
                    "query_id": f"{self.key}:{ann['id']}",
                    "modality": self.modality,
                    "question": caption,
                    "answer": None,
                    "answer_format": "none",
                    "gold": [{"source_id": f"{self.key}:{img['file_name']}", "region": {}}],
                    "scope": {"holder": HOLDER, "session": None, "scenario": "image-retrieval"},
                    "as_of": None,  # set by ask_at: the set's one moment
                    "unanswerable": False,
                    "origin": {"dataset": self.name, "revision": self.revision, "item": item, "license": self.license},
                    "split": splits[str(img["id"])],
                }
            )
        captured = {f"{self.key}:{img['file_name']}": captured_at(img.get("date_captured")) for img in images.values()
                    if FILE_NAME.match(str(img.get("file_name", "")))}
        moment = moment_after([t for t in captured.values() if t is not None])

        def gold_times(entry: dict) -> list[datetime] | None:
            when = captured.get(entry["gold"][0]["source_id"])
            return None if when is None else [when]

        asked, moment_notes = ask_at(entries, gold_times, moment)
        notes = {"upstream_captions": len(data["annotations"]), "images": len(images), "moments": moment_notes}
        return ImportResult(entries=request_order(asked), excluded=excluded, notes=notes)
