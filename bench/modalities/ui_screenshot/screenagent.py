"""ScreenAgent (test split): sub-tasks on desktop screenshots with human-drawn click boxes.

Upstream layout (commit 2ebe97d, where data/ScreenAgent/test/ is stored unpacked):
``data/ScreenAgent/test/<session_id>/<timestamp>.json`` step files and the screenshot
``.../images/<saved_image_name>`` each one names. A step's ``actions[i].clickable_area``
``{upper_left_position: {width: x0, height: y0}, lower_right_position: {width: x1,
height: y1}}`` is a box in absolute pixels of the 1024x768 screenshot ("width" means
x, "height" means y), drawn by the authors' annotators.

Mapping: one entry per action that has a clickable_area.
- query_id ``screenagent:<session_id>/<timestamp>#<action index>`` (timestamp = step
  file stem), origin.item ``<step file path>#actions[<i>]``.
- question = ``current_task`` verbatim (the task_prompt is not prefixed: the text
  stays as annotated; the overall task is the session's context, not the question).
- gold = the screenshot (source_id ``screenagent:data/ScreenAgent/test/<session>/
  images/<saved_image_name>``) with region ``{"bbox": [x0, y0, x1, y1]}``.
- answer null, answer_format "none" (grounding only); ScreenAgent has no human
  unanswerable sub-tasks (*_neg_eval.json files are retry negatives, not empty-gold
  queries, and are not mirrored): every human entry has unanswerable false.
- scope: holder "owner", session null, scenario "ui-grounding". Not the session id:
  at the set's one moment the session alone would tell whether a sub-task can be
  answered (a session not begun yet holds none; docs/moments.md measured it).
- split: assign_splits grouped by session (ScreenAgent's own split is "test" only).

Time: observed_at of a screenshot is the capture time in its file name
(``YYYY-MM-DD_HH-MM-SS-ffffff``; no zone is recorded, read as UTC). Every entry is asked
at one moment, fixed from the capture times alone before looking at any box
(bench/modalities/derived.py, docs/moments.md): 1 s after ceil(2/3) of the 62 sessions
ended (their last screenshot; 2024-01-13T21:43:44.382869Z). A sub-task of a session
ended by then is answerable; one of a session not begun by then is a derived,
temporally unanswerable entry (rule "gold-later": query_id ``<source query_id>:gold-later``,
empty gold, origin.item ``<step file>#actions[i]|derived:gold-later``, the source's
split and scope). A sub-task whose session had begun but whose screenshot came after the
moment is dropped: earlier screenshots of the same session often show the same target
(a desktop icon, a menu bar), so it is neither clearly answerable nor unanswerable.
Sub-task texts that are gold on more than one screenshot are not made unanswerable.
Before issue 36 each human entry was asked 1 s after its own screenshot, so the latest
screenshot before as_of was always the gold one. Entries are listed in a salted sha256
order of their query_id.

annotation_files: every *.json of the pinned file list (bench/corpus/pins/
screenagent_test.json, built at import time of the class). The pins record the
mirrored subset of the upstream tree at this revision: the 208 step files with at
least one clickable_area plus the 62 planning files of their sessions (planning
files carry no box and yield no entry). corpus_files reads the step files that are
present and lists the screenshots they name.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

import pandas as pd

from bench.modalities.base import CorpusFile, Dataset, ImportResult, assign_splits, is_number, load_pins
from bench.modalities.derived import RULE, ask_at, moment_after, request_order
from bench.modalities.ocr import ocr_many
from bench.modalities.ui_screenshot.modality import SEGMENT_UI_COLUMNS, segment_rows

ROOT = "data/ScreenAgent/test/"
MIRROR_KEY = "screenagent_test"
HOLDER = "owner"
STAMP = re.compile(r"^(\d{4})-(\d{2})-(\d{2})_(\d{2})-(\d{2})-(\d{2})-(\d{6})$")


def stamp_time(name: str) -> datetime:
    """UTC time from a ScreenAgent file name such as 2024-01-12_16-52-37-180900.jpg."""
    m = STAMP.match(PurePosixPath(name).stem)
    if not m:
        raise ValueError(f"no capture time in file name {name!r}")
    y, mo, d, h, mi, s, us = (int(g) for g in m.groups())
    return datetime(y, mo, d, h, mi, s, us, tzinfo=UTC)


def annotation_paths() -> tuple[str, ...]:
    return tuple(sorted(p for p in load_pins(MIRROR_KEY) if p.startswith(ROOT) and p.endswith(".json") and "/images/" not in p))


def clickable_bbox(area: Any) -> list[Any] | None:
    """[x0, y0, x1, y1] of a clickable_area, or None when it is malformed."""
    try:
        ul, lr = area["upper_left_position"], area["lower_right_position"]
        return [ul["width"], ul["height"], lr["width"], lr["height"]]
    except (TypeError, KeyError):
        return None


def bbox_problem(bbox: list[Any] | None, width: Any, height: Any) -> str | None:
    if bbox is None:
        return "clickable_area without upper_left/lower_right width/height"
    if not all(is_number(v) for v in bbox):
        return f"clickable_area values are not finite numbers: {bbox}"
    x0, y0, x1, y1 = bbox
    if not (0 <= x0 < x1 and 0 <= y0 < y1):
        return f"clickable_area is empty or inverted: {bbox}"
    if is_number(width) and is_number(height) and (x1 > width or y1 > height):
        return f"clickable_area {bbox} outside the {width}x{height} screen"
    return None


class ScreenAgent(Dataset):
    key: ClassVar[str] = "screenagent"
    name: ClassVar[str] = "niuzaisheng/ScreenAgent"
    repo: ClassVar[str] = "niuzaisheng/ScreenAgent"
    revision: ClassVar[str] = "2ebe97daab52267375dece7f8928d8b5f67f93ec"
    license: ClassVar[str] = "dataset Apache-2.0, code MIT; screenshots show third-party UIs"
    annotation_source: ClassVar[str] = (
        "human: ScreenAgent authors manually annotated screenshots, clickable areas and corrected "
        "plans (Niu et al., IJCAI 2024, arXiv:2402.07945); third-party work. Sub-task wording began "
        "as model-proposed plan items edited by annotators; the boxes are human-drawn"
    )
    annotation_is_human: ClassVar[bool] = True
    modality: ClassVar[str] = "ui_screenshot"
    mirror_key: ClassVar[str] = MIRROR_KEY
    holders: ClassVar[str] = "every screenshot belongs to holder 'owner' (one operator's desktop)"
    observed_at_rule: ClassVar[str] = (
        "screenshot: capture time in its file name, read as UTC; as_of: one moment for every entry, "
        "1 s after two thirds of the sessions ended"
    )
    caveats: ClassVar[str] = (
        "No human unanswerable entries (ScreenAgent has none); derived ones are sub-tasks of sessions "
        f"begun after the set's one moment (origin.item '|derived:{RULE}'). Questions are sub-task texts, several "
        "repeated across steps, and screenshots of a session look alike. Only the mirrored subset "
        "(steps with a clickable_area) is pinned. OCR text is Chinese/English from VNC desktops."
    )
    annotation_files: ClassVar[tuple[str, ...]] = annotation_paths()

    def corpus_files(self, annotation_dir: Path) -> list[CorpusFile]:
        pins = self.pins()
        root = os.fspath(annotation_dir)  # plain strings: this runs on every fetch, once per step file
        paths: set[str] = set()
        for path in self.annotation_files:
            local = os.path.join(root, path)
            if not os.path.isfile(local):
                continue
            step = read_step(local)
            if boxed_actions(step) and plain_name(step.get("saved_image_name")):
                paths.add(screenshot_path(path, step))
        return [
            CorpusFile(source_id=f"{self.key}:{p}", path=p, sha256=pins.get(p, (None, None))[0], bytes=pins.get(p, (None, None))[1])
            for p in sorted(paths)
        ]

    def pins(self) -> dict[str, tuple[str, int]]:
        return load_pins(self.mirror_key)

    def file_of(self, source_id: str) -> str | None:
        prefix = f"{self.key}:"
        if not source_id.startswith(prefix):
            return None
        path = source_id[len(prefix):]
        return path if path.startswith(ROOT) and "/images/" in path else None

    def extract(self, files: dict[str, Path], **_options: Any) -> pd.DataFrame:
        shots = sorted(p for p in files if p.startswith(ROOT) and "/images/" in p)
        results = ocr_many([files[p] for p in shots])
        rows: list[dict] = []
        for path, res in zip(shots, results):
            observed = pd.Timestamp(stamp_time(path))
            for row in segment_rows(f"{self.key}:{path}", res.width, res.height, res.boxes):
                rows.append({**row, "observed_at": observed})
        df = pd.DataFrame(rows, columns=[c for c in SEGMENT_UI_COLUMNS if c not in ("dataset", "modality", "holder")])
        df["observed_at"] = pd.to_datetime(df["observed_at"], utc=True)
        df["dataset"] = self.key
        df["modality"] = self.modality
        df["holder"] = HOLDER
        return df[SEGMENT_UI_COLUMNS]

    def import_set(self, mirror_dir: Path) -> ImportResult:
        steps: list[tuple[str, dict]] = []
        missing = 0
        for path in self.annotation_files:
            local = mirror_dir / path
            if not local.is_file():
                missing += 1
                continue
            step = json.loads(local.read_text(encoding="utf-8"))
            if step.get("status") != "planning":
                steps.append((path, step))
        splits = assign_splits([session_of(p) for p, _ in steps], self.key)
        entries: list[dict] = []
        excluded: list[dict] = []
        n_boxes = 0
        for path, step in steps:
            session = session_of(path)
            for index, action in boxed_actions(step):
                n_boxes += 1
                item = f"{path}#actions[{index}]"
                bbox = clickable_bbox(action["clickable_area"])
                problem = bbox_problem(bbox, step.get("video_width"), step.get("video_height"))
                question = step.get("current_task")
                if problem is None and (not isinstance(question, str) or not question.strip()):
                    problem = "step without a current_task text"
                if problem is None and not plain_name(step.get("saved_image_name")):
                    problem = f"saved_image_name is not a plain <capture time>.jpg name: {step.get('saved_image_name')!r}"
                if problem is not None:
                    excluded.append({"item": item, "reason": problem})
                    continue
                shot = screenshot_path(path, step)
                entries.append(
                    {
                        "query_id": f"{self.key}:{session}/{PurePosixPath(path).stem}#{index}",
                        "modality": self.modality,
                        "question": question,
                        "answer": None,
                        "answer_format": "none",
                        "gold": [{"source_id": f"{self.key}:{shot}", "region": {"bbox": bbox}}],
                        "scope": {"holder": HOLDER, "session": None, "scenario": "ui-grounding"},
                        "as_of": None,  # set by ask_at: the set's one moment
                        "unanswerable": False,
                        "origin": {"dataset": self.name, "revision": self.revision, "item": item, "license": self.license},
                        "split": splits[session],
                    }
                )
        first_shot, last_shot = session_spans(steps)
        moment = moment_after(list(last_shot.values()))

        def gold_times(entry: dict) -> list[datetime]:
            # the session's first screenshot too: earlier screenshots of a session often show the
            # same target, so a sub-task is unanswerable only while its session has not begun
            shot = entry["gold"][0]["source_id"]
            return [first_shot[PurePosixPath(shot).parent.parent.name], stamp_time(shot)]

        asked, moment_notes = ask_at(entries, gold_times, moment)
        notes = {"step_files": len(steps), "boxed_actions": n_boxes, "missing_annotation_files": missing,
                 "moments": moment_notes}
        return ImportResult(entries=request_order(asked), excluded=excluded, notes=notes)


def session_spans(steps: list[tuple[str, dict]]) -> tuple[dict[str, datetime], dict[str, datetime]]:
    """Per session, its first and its last screenshot's capture time (every step, gold or not)."""
    first: dict[str, datetime] = {}
    last: dict[str, datetime] = {}
    for path, step in steps:
        if plain_name(step.get("saved_image_name")):
            taken, session = stamp_time(screenshot_path(path, step)), session_of(path)
            first[session] = min(taken, first.get(session, taken))
            last[session] = max(taken, last.get(session, taken))
    return first, last


def read_step(path: str) -> Any:
    """A step (or planning) file's JSON, read as UTF-8."""
    with open(path, "rb") as fh:
        return json.loads(fh.read().decode("utf-8"))


def session_of(path: str) -> str:
    return PurePosixPath(path).parent.name


def plain_name(name: Any) -> bool:
    """A bare '<capture time>.jpg' name (no folder, no '..'): a step names only its own images/."""
    return isinstance(name, str) and name.endswith(".jpg") and STAMP.match(name[: -len(".jpg")]) is not None


def screenshot_path(step_path: str, step: dict) -> str:
    """The screenshot a step names, in its session's images/ (`step_path`: a pinned path, already normal)."""
    return posixpath.join(posixpath.dirname(step_path), "images", str(step.get("saved_image_name")))


def boxed_actions(step: dict) -> list[tuple[int, dict]]:
    """(index, action) of every action with a clickable_area (planning steps have none)."""
    actions = step.get("actions")
    if step.get("status") == "planning" or not isinstance(actions, list):
        return []
    return [(i, a) for i, a in enumerate(actions) if isinstance(a, dict) and "clickable_area" in a]
