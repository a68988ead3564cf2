"""TutorialVQA: how-to questions over 76 Photoshop tutorial videos, with annotated answer windows.

Corpus: the timed transcript `data/raw/helpx_photoshop_tutorials.events.json`, one
source per video ("tutorialvqa:<video_id>"), one segment per transcript sentence with
its begin/end seconds. Of 3664 sentences, 13 (all in video 4255) have a null begin or
end and 2 have an end before their begin (19164 sent 23, 4255 sent 53): these 15
cannot be placed and are dropped; `extract` records the counts in
`segments.attrs["dropped_cues"]`. Video titles and descriptions are not corpus text.

Gold: a qa.json row names a video and an inclusive sentence span (answer_start,
answer_end); it is matched against the human-annotated segments of videos.json
(sentence_indexes) and the region is that segment's timestamps start/end, i.e. the
annotators' segment bounds, not the sentence times. Duration of a video = end of its
last placed cue; no gold window ends after it (tolerance unused here).

Entries: one per (video, question), where the question is compared without leading
or trailing whitespace (1003 rows carry a trailing space); the question text kept is
the verbatim text of the pair's first qa.json row. Rows identical in all four fields
are exact duplicates (123); rows identical after trimming the question are a further
43 (166 in all, as SOURCE.json counts): both are dropped and counted in notes. A pair
with several distinct spans (24 pairs) is one entry with several gold regions. The
same question text in two videos gives two entries. query_id is
"tutorialvqa:<video_id>:<row of the pair's first qa.json row>".

Splits: upstream train/dev/test.json hold the same rows split by question. A pair is
`test` when any of its rows is in upstream test.json, else `dev` (upstream dev, and
upstream train because this harness does not train; dev is the tuning split). 101
pairs (after merging duplicates) have rows in several upstream files (dev+train 50,
test+train 37, dev+test 11, all three 3); test wins so no held-out question is tuned on.
The 2 qa.json rows in no split file form pairs of their own and are excluded.

answer: TutorialVQA has no answer text; the segment title is a human label of the
segment, not an answer to the question, so answer is null with answer_format "none".
TutorialVQA has no unanswerable questions of its own.

Time: a memory watches each video from its publication time (the _YYYYMMDDhhmmss stamp
of its video_url, UTC; 2015-06-23 .. 2017-07-28), so a transcript sentence is observed
at publication + its begin second (bench/modalities/video/modality.py). Every entry is
asked at one moment, fixed from the videos alone before looking at any answer window
(bench/modalities/derived.py, docs/moments.md): 1 s after ceil(2/3) of the 76 videos
were watched to their end (2017-07-27T01:22:34.4Z). A question whose gold sentences were
all observed by then is answerable; one whose gold sentences all come later is a derived,
temporally unanswerable entry (rule "gold-later": query_id "<source query_id>:gold-later",
empty gold, origin.item "<source item>|derived:gold-later", the source's split); one
whose gold straddles the moment is dropped (listed in bench/sets/imports/tutorialvqa.json,
notes.moments), as is a later question whose text is gold in more than one video
(another video, already watched, may answer it). Before issue 36 human entries were
asked at 2018-01-01 and derived ones 1 s before their first gold sentence, so as_of
alone told them apart and, under replay, the next event was the twin's gold. Entries
are listed in a salted sha256 order of their query_id.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from bench.modalities.base import CorpusFile, Dataset, ImportResult, load_pins
from bench.modalities.derived import RULE, ask_at, moment_after, request_order
from bench.modalities.video.modality import VideoModality, cue_frame, finish_segments, fully_watched, gold_cue_times

EVENTS = "data/raw/helpx_photoshop_tutorials.events.json"
QA = "data/qa.json"
VIDEOS = "data/videos.json"
SPLIT_FILES = {"train": "data/train.json", "dev": "data/dev.json", "test": "data/test.json"}
#: upstream split -> ours; a pair takes the first of these its rows are in
SPLIT_MAP = (("test", "test"), ("dev", "dev"), ("train", "dev"))
HOLDER = "owner"
STAMP = re.compile(r"_(\d{14})\.[^/]*$")


def published_at(video_url: str) -> pd.Timestamp:
    """Publication time encoded in a TutorialVQA video URL ('_YYYYMMDDhhmmss', UTC)."""
    m = STAMP.search(video_url)
    if not m:
        raise ValueError(f"no _YYYYMMDDhhmmss stamp in video URL {video_url!r}")
    return pd.Timestamp(datetime.strptime(m.group(1), "%Y%m%d%H%M%S").replace(tzinfo=UTC))


def events_segments(events: list[dict[str, Any]], key: str) -> pd.DataFrame:
    """The events file -> placed cue segments of every video (dropped cues in attrs)."""
    cues: list[dict] = []
    observed: dict[str, pd.Timestamp] = {}
    for video in events:
        source_id = f"{key}:{video['video_id']}"
        observed[source_id] = published_at(video["video_url"])
        for block in video["segments"]:
            for sent in block["sentences"]:
                cues.append({"source_id": source_id, "cue_index": int(sent["sent_id"]),
                             "t_start": sent["begin"], "t_end": sent["end"], "text": sent["sent"]})
    placed, dropped = cue_frame(cues)
    df = finish_segments(placed, key, HOLDER, observed)
    df.attrs["dropped_cues"] = dropped
    df.attrs["upstream_cues"] = len(cues)
    return df


class TutorialVQA(Dataset):
    key: ClassVar[str] = "tutorialvqa"
    name: ClassVar[str] = "onue5/VideoQA"
    repo: ClassVar[str] = "onue5/VideoQA"
    revision: ClassVar[str] = "6c290acb05901363231b820a90ebaae00f8d0b6f"
    license: ClassVar[str] = (
        "none declared (no LICENSE, README states no terms); video and caption text belong to Adobe; "
        "research/eval use only, do not redistribute"
    )
    annotation_source: ClassVar[str] = (
        "human: TutorialVQA authors annotated the answer segments of each video and crowd workers "
        "wrote the questions (Colas et al., LREC 2020, arXiv:1912.01046); third-party work"
    )
    annotation_is_human: ClassVar[bool] = True
    modality: ClassVar[str] = "video"
    mirror_key: ClassVar[str] = "tutorialvqa"
    holders: ClassVar[str] = "every video belongs to holder 'owner' (one learner's video library)"
    observed_at_rule: ClassVar[str] = (
        "each sentence: its video's publication stamp _YYYYMMDDhhmmss in the video_url, read as UTC "
        "(2015-06-23 .. 2017-07-28), plus the sentence's begin second; as_of: one moment for every entry, 1 s after three "
        "quarters of the videos were watched to their end"
    )
    caveats: ClassVar[str] = (
        "No human unanswerable questions; derived ones are questions whose video is watched after the "
        f"set's one moment (origin.item '|derived:{RULE}'). No answer text (answer null). 89 question texts are gold "
        "in several videos and other videos may answer a question without being annotated "
        "(false-negative risk in corpus-wide retrieval). 15 transcript sentences with null or "
        "inverted times are not in the corpus. Upstream train rows are in dev."
    )
    annotation_files: ClassVar[tuple[str, ...]] = (QA, VIDEOS, *SPLIT_FILES.values())

    def corpus_files(self, annotation_dir: Path) -> list[CorpusFile]:
        videos = json.loads((annotation_dir / VIDEOS).read_text(encoding="utf-8"))
        sha, size = self.pins().get(EVENTS, (None, None))
        ids = sorted({str(v["video_id"]) for v in videos})
        return [CorpusFile(source_id=f"{self.key}:{v}", path=EVENTS, sha256=sha, bytes=size) for v in ids]

    def pins(self) -> dict[str, tuple[str, int]]:
        return load_pins(self.mirror_key)

    def file_of(self, source_id: str) -> str | None:
        prefix = f"{self.key}:"
        rest = source_id[len(prefix):] if source_id.startswith(prefix) else ""
        return EVENTS if rest.isdigit() else None

    def extract(self, files: dict[str, Path], **_options: Any) -> pd.DataFrame:
        if EVENTS not in files:
            return finish_segments(cue_frame([])[0], self.key, HOLDER, {})
        events = json.loads(Path(files[EVENTS]).read_text(encoding="utf-8"))
        return events_segments(events, self.key)

    def import_set(self, mirror_dir: Path) -> ImportResult:
        qa = _load(mirror_dir, QA)
        windows = segment_windows(_load(mirror_dir, VIDEOS))
        upstream_split = row_splits(mirror_dir)
        segments = events_segments(_load(mirror_dir, EVENTS), self.key)
        by_source = {sid: seg for sid, seg in segments.groupby("source_id", sort=False)}
        modality = VideoModality()

        pairs, exact_dups, trim_dups = group_pairs(qa)
        entries: list[dict] = []
        excluded: list[dict] = []
        split_counts: dict[str, int] = defaultdict(int)
        for (video, _), rows in pairs.items():
            first = rows[0]
            item = f"{QA}#rows:" + ",".join(str(i) for i in rows)
            source_id = f"{self.key}:{video}"
            splits = {s for i in rows for s in upstream_split.get(_row_key(qa[i]), ())}
            split = next((ours for theirs, ours in SPLIT_MAP if theirs in splits), None)
            if split is None:
                excluded.append({"item": item, "reason": "row in none of the upstream train/dev/test files"})
                continue
            if not str(qa[first]["question"]).strip():
                excluded.append({"item": item, "reason": "empty question text"})
                continue
            regions, problem = gold_regions(qa, rows, windows.get(video, {}), modality, by_source.get(source_id))
            if problem:
                excluded.append({"item": item, "reason": problem})
                continue
            split_counts["+".join(sorted(splits)) + "->" + split] += 1
            entries.append(
                {
                    "query_id": f"{self.key}:{video}:{first}",
                    "modality": self.modality,
                    "question": qa[first]["question"],
                    "answer": None,
                    "answer_format": "none",
                    "gold": [{"source_id": source_id, "region": r} for r in regions],
                    "scope": {"holder": HOLDER, "session": None, "scenario": "video-qa"},
                    "as_of": None,  # set by ask_at: the set's one moment
                    "unanswerable": False,
                    "origin": {"dataset": self.name, "revision": self.revision, "item": item, "license": self.license},
                    "split": split,
                }
            )
        notes = {
            "upstream_rows": len(qa),
            "exact_duplicate_rows_dropped": exact_dups,
            "trimmed_question_duplicate_rows_dropped": trim_dups,
            "video_question_pairs": len(pairs),
            "pairs_with_several_gold_windows": sum(len(e["gold"]) > 1 for e in entries),
            "gold_windows_ending_after_last_cue": sum(
                g["region"]["t_end"] > float(by_source[g["source_id"]]["t_end"].max()) for e in entries for g in e["gold"]
            ),
            "upstream_splits_to_ours": dict(sorted(split_counts.items())),
            "dropped_cues": segments.attrs["dropped_cues"],
            "upstream_cues": segments.attrs["upstream_cues"],
        }
        asked, notes["moments"] = ask_at(entries, lambda e: gold_cue_times(e, by_source), moment_after(fully_watched(by_source)))
        return ImportResult(entries=request_order(asked), excluded=excluded, notes=notes)


def _load(mirror_dir: Path, path: str) -> Any:
    return json.loads((mirror_dir / path).read_text(encoding="utf-8"))


def _row_key(row: dict) -> tuple[str, str, int, int]:
    return (str(row["video_id"]), row["question"], int(row["answer_start"]), int(row["answer_end"]))


def row_splits(mirror_dir: Path) -> dict[tuple, set[str]]:
    """Exact row -> the upstream split files that hold it."""
    found: dict[tuple, set[str]] = defaultdict(set)
    for split, path in SPLIT_FILES.items():
        for row in _load(mirror_dir, path):
            found[_row_key(row)].add(split)
    return found


def segment_windows(videos: list[dict]) -> dict[str, dict[tuple[int, int], tuple[float, float]]]:
    """video -> (first sentence, last sentence) -> annotated (start, end) seconds."""
    out: dict[str, dict[tuple[int, int], tuple[float, float]]] = {}
    for video in videos:
        spans = out.setdefault(str(video["video_id"]), {})
        for seg in video["segments"]:
            idx, ts = seg["sentence_indexes"], seg["timestamps"]
            spans[(int(idx["start"]), int(idx["end"]))] = (float(ts["start"]), float(ts["end"]))
    return out


def group_pairs(qa: list[dict]) -> tuple[dict[tuple[str, str], list[int]], int, int]:
    """(video, trimmed question) -> all its qa.json row numbers, in first-row order.

    Duplicate rows add no entry and no region; they stay in the group so that their
    upstream split counts and `origin.item` names them. Also returns the counts of
    exact duplicate rows and of rows that duplicate another only after trimming.
    """
    pairs: dict[tuple[str, str], list[int]] = {}
    seen_exact: set[tuple] = set()
    seen_trim: set[tuple] = set()
    exact = trimmed = 0
    for i, row in enumerate(qa):
        key = _row_key(row)
        trim_key = (key[0], key[1].strip(), key[2], key[3])
        if key in seen_exact:
            exact += 1
        elif trim_key in seen_trim:
            trimmed += 1
        seen_exact.add(key)
        seen_trim.add(trim_key)
        pairs.setdefault((key[0], key[1].strip()), []).append(i)
    return pairs, exact, trimmed


def gold_regions(
    qa: list[dict],
    rows: list[int],
    spans: dict[tuple[int, int], tuple[float, float]],
    modality: VideoModality,
    segments: pd.DataFrame | None,
) -> tuple[list[dict], str | None]:
    """Distinct annotated windows of a pair's rows, checked against the transcript."""
    regions: list[dict] = []
    for i in rows:
        span = (int(qa[i]["answer_start"]), int(qa[i]["answer_end"]))
        if span not in spans:
            return [], f"sentence span {span} matches no annotated segment of the video"
        t0, t1 = spans[span]
        region = {"t_start": t0, "t_end": t1}
        problem = modality.check_region_shape(region)
        if problem is None:
            problem = "video not in the transcript file" if segments is None else modality.check_region_in_corpus(region, segments)
        if problem:
            return [], f"gold window {span}: {problem}"
        if region not in regions:
            regions.append(region)
    return sorted(regions, key=lambda r: (r["t_start"], r["t_end"])), None
