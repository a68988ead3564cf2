"""MedVidQA (TRECVID 2023 merge): medical how-to questions over YouTube videos, with answer windows.

One CSV, `Dataset/test_merged_clean.csv`, read as cp1252 (not UTF-8), is both the
annotation file and the corpus file. Each row: video_id, question, timestamp
'(start, end)' (the gold window, whole seconds, marked and verified by medical
informatics experts per the MedVidQA paper), answer, subtitles, subtitle_timestamps.

Corpus: `subtitle_timestamps` is the video's timed caption track, a Python-dict-literal
string "'(start, end)': 'caption'"; the whole track is repeated on every row of the
video and the first row's copy is used. On 19 rows ast.literal_eval fails (quotes
were stripped), so every track is parsed with the key regex of SOURCE.json and the
caption is the text up to the next key with its quotes and separator removed; on
every row where literal_eval works this gives the same cues. Captions are rolling
YouTube windows that overlap, and some videos concatenate several tracks (start
times non-monotonic on 89 rows); cues are sorted by start time. One source per video:
"medvidqa:<YouTube id>". Duration = end of the last caption; one gold window (row
118, video Y9-54bnvPGg) ends 1.01 s after it and is kept by the modality's 2 s
tolerance.

Entries: one per CSV row, query_id "medvidqa:<row>" where row is the 0-based data row
of the CSV (header not counted). Exact duplicate rows are dropped and counted (there
are none in this file). The `answer` column is caption text cut out of the window by
the repackager, not a human answer: answer is null, answer_format "none". Row 94 has
video_id '#NAME?' (a spreadsheet error value: the YouTube id is lost); it is excluded
and its track is not in the corpus. The file has no split of its own: videos are
split with assign_splits (about 30% test). MedVidQA has no unanswerable questions of
its own. Time has no source in the data: a memory is taken to start watching every
video at OBSERVED_AT (the MedVidQA release, January 2022, by which all videos were
published; the same start for all, as if watched side by side), so a caption is
observed at OBSERVED_AT + its start second.

Moment: all videos start at OBSERVED_AT (the data has no dates), so every entry is asked
at one offset into all of them at once, fixed from the videos alone before looking at any
answer window (bench/modalities/derived.py, docs/moments.md): OBSERVED_AT + 2/3 of the
median video duration (299 s). A question whose gold captions were all observed by then is
answerable; one whose gold captions all come later is a derived, temporally unanswerable
entry (rule "gold-later": query_id "medvidqa:<row>:gold-later", empty gold, origin.item
"row:<row>|derived:gold-later", the source's split); one whose gold straddles the moment
is dropped (listed in bench/sets/imports/medvidqa.json, notes.moments). A moment per video
(a fraction of its own length) would tell which video a question is about, because the
videos' lengths differ. Entries are listed in a salted sha256 order of their query_id.
"""

from __future__ import annotations

import ast
import re
import statistics
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from bench.modalities.base import CorpusFile, Dataset, ImportResult, assign_splits, load_pins
from bench.modalities.derived import RULE, ask_at, request_order
from bench.modalities.video.modality import VideoModality, cue_frame, duration_of, finish_segments, gold_cue_times

CSV = "Dataset/test_merged_clean.csv"
ENCODING = "cp1252"
HOLDER = "owner"
OBSERVED_AT = "2022-01-01T00:00:00+00:00"
#: the key regex of SOURCE.json, with the key's quotes so caption text cannot match it
CUE_KEY = re.compile(r"""['"]\((\d+\.?\d*), (\d+\.?\d*)\)['"]:""")
GOLD = re.compile(r"^\(\s*(\d+(?:\.\d*)?)\s*,\s*(\d+(?:\.\d*)?)\s*\)$")
VIDEO_ID = re.compile(r"^[A-Za-z0-9_-]{11}$")


def read_rows(path: Path) -> tuple[pd.DataFrame, int]:
    """The CSV as strings, exact duplicate rows dropped; returns (rows, duplicates)."""
    df = pd.read_csv(path, encoding=ENCODING, dtype=str, keep_default_na=False)
    dup = df.duplicated(keep="first")
    return df[~dup], int(dup.sum())


def read_video_ids(path: Path) -> list[str]:
    """The video_id of every data row, for the corpus listing (run by every fetch): only that
    column is converted, and the bytes are read as latin-1, which maps each byte to one
    character without the cp1252 decoding of the subtitle columns (most of the file). The
    delimiters and a YouTube id (VIDEO_ID) are ASCII, the same in both, so the ids that match
    VIDEO_ID are exactly those `read_rows` gives (of a file cp1252 can decode: one it cannot is
    listed here and refused by `read_rows`)."""
    ids = pd.read_csv(path, encoding="latin-1", dtype=object, keep_default_na=False, usecols=["video_id"])["video_id"]
    return ids.tolist()


def parse_track(track: str) -> list[tuple[float, float, str]]:
    """(start, end, caption) of every key of a subtitle_timestamps string, in file order."""
    keys = list(CUE_KEY.finditer(track))
    close = track.rstrip().rfind("}")
    out = []
    for j, m in enumerate(keys):
        end = keys[j + 1].start() if j + 1 < len(keys) else (close if close > m.end() else len(track))
        out.append((float(m.group(1)), float(m.group(2)), _caption(track[m.end():end])))
    return out


def _caption(raw: str) -> str:
    text = raw.strip()
    if text.endswith(","):
        text = text[:-1].rstrip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        try:
            value = ast.literal_eval(text)
            if isinstance(value, str):
                return value.strip()
        except (ValueError, SyntaxError):
            pass
        return text[1:-1].strip()
    if text[:1] in "'\"":
        text = text[1:]
    return text.strip()


def parse_gold(text: str) -> tuple[float, float] | None:
    m = GOLD.match(text.strip())
    return (float(m.group(1)), float(m.group(2))) if m else None


def track_segments(rows: pd.DataFrame, key: str) -> pd.DataFrame:
    """One source per valid video id, cues from the first row of the video."""
    cues: list[dict] = []
    observed: dict[str, pd.Timestamp] = {}
    skipped = 0
    for video, grp in rows.groupby("video_id", sort=True):
        if not VIDEO_ID.match(video):
            skipped += 1
            continue
        source_id = f"{key}:{video}"
        observed[source_id] = pd.Timestamp(OBSERVED_AT)
        for n, (a, b, text) in enumerate(parse_track(grp["subtitle_timestamps"].iloc[0])):
            cues.append({"source_id": source_id, "cue_index": n, "t_start": a, "t_end": b, "text": text})
    placed, dropped = cue_frame(cues)
    df = finish_segments(placed, key, HOLDER, observed)
    df.attrs["dropped_cues"] = dropped
    df.attrs["upstream_cues"] = len(cues)
    df.attrs["videos_with_bad_id"] = skipped
    return df


class MedVidQA(Dataset):
    key: ClassVar[str] = "medvidqa"
    name: ClassVar[str] = "QiLong25/MedVidQA-2023"
    repo: ClassVar[str] = "QiLong25/MedVidQA-2023"
    revision: ClassVar[str] = "69f05b438e3181b960be09b52cbb536bdc060bbd"
    license: ClassVar[str] = (
        "repackaging repo declares none; upstream MedVidQA (NLM, OSF doi:10.17605/OSF.IO/PC594) terms "
        "unverified, assume research-only; captions belong to the YouTube video owners"
    )
    annotation_source: ClassVar[str] = (
        "human: medical informatics experts annotated and verified the answer timestamps "
        "(Gupta, Attal, Demner-Fushman, Scientific Data 2023, arXiv:2201.12888); file merged by a "
        "TRECVID-2023 participant (third party), whose 'answer' column is not used"
    )
    annotation_is_human: ClassVar[bool] = True
    modality: ClassVar[str] = "video"
    mirror_key: ClassVar[str] = "medvidqa"
    holders: ClassVar[str] = "every video belongs to holder 'owner' (one viewer's video library)"
    observed_at_rule: ClassVar[str] = (
        f"each caption: {OBSERVED_AT} (one start for every video; no date in the data) plus its start "
        f"second; as_of: one moment for every entry, OBSERVED_AT + 2/3 of the median video duration"
    )
    caveats: ClassVar[str] = (
        "Third-party merge, not the official release; 145 rows likely the official validation split. "
        f"No human unanswerable questions; derived ones are questions whose gold is said after the set's one "
        f"moment (origin.item '|derived:{RULE}'). No human answer text (answer null). Captions are YouTube "
        "tracks (rolling, overlapping). Row 94 (video id '#NAME?') excluded."
    )
    annotation_files: ClassVar[tuple[str, ...]] = (CSV,)

    def corpus_files(self, annotation_dir: Path) -> list[CorpusFile]:
        sha, size = self.pins().get(CSV, (None, None))
        ids = sorted({v for v in read_video_ids(annotation_dir / CSV) if VIDEO_ID.match(v)})
        return [CorpusFile(source_id=f"{self.key}:{v}", path=CSV, sha256=sha, bytes=size) for v in ids]

    def pins(self) -> dict[str, tuple[str, int]]:
        return load_pins(self.mirror_key)

    def file_of(self, source_id: str) -> str | None:
        prefix = f"{self.key}:"
        rest = source_id[len(prefix):] if source_id.startswith(prefix) else ""
        return CSV if VIDEO_ID.match(rest) else None

    def extract(self, files: dict[str, Path], **_options: Any) -> pd.DataFrame:
        if CSV not in files:
            return finish_segments(cue_frame([])[0], self.key, HOLDER, {})
        rows, _ = read_rows(Path(files[CSV]))
        return track_segments(rows, self.key)

    def import_set(self, mirror_dir: Path) -> ImportResult:
        rows, duplicates = read_rows(mirror_dir / CSV)
        segments = track_segments(rows, self.key)
        by_source = {sid: seg for sid, seg in segments.groupby("source_id", sort=False)}
        modality = VideoModality()
        good_ids = [v for v in rows["video_id"] if VIDEO_ID.match(v)]
        splits = assign_splits(good_ids, self.key)
        entries: list[dict] = []
        excluded: list[dict] = []
        past_end = 0
        for row_no, row in rows.iterrows():
            item = f"row:{row_no}"
            video = row["video_id"]
            source_id = f"{self.key}:{video}"
            if not VIDEO_ID.match(video):
                excluded.append({"item": item, "reason": f"video_id {video!r} is not a YouTube id"})
                continue
            window = parse_gold(row["timestamp"])
            if window is None:
                excluded.append({"item": item, "reason": f"timestamp {row['timestamp']!r} is not '(start, end)'"})
                continue
            region = {"t_start": window[0], "t_end": window[1]}
            problem = modality.check_region_shape(region)
            seg = by_source.get(source_id)
            if problem is None:
                problem = "video has no caption track" if seg is None else modality.check_region_in_corpus(region, seg)
            if problem or seg is None:
                excluded.append({"item": item, "reason": f"gold window: {problem}"})
                continue
            past_end += int(region["t_end"] > float(seg["t_end"].max()))
            entries.append(
                {
                    "query_id": f"{self.key}:{row_no}",
                    "modality": self.modality,
                    "question": row["question"],
                    "answer": None,
                    "answer_format": "none",
                    "gold": [{"source_id": source_id, "region": region}],
                    "scope": {"holder": HOLDER, "session": None, "scenario": "video-qa"},
                    "as_of": None,  # set by ask_at: the set's one moment
                    "unanswerable": False,
                    "origin": {"dataset": self.name, "revision": self.revision, "item": item, "license": self.license},
                    "split": splits[video],
                }
            )
        notes = {
            "upstream_rows": len(rows) + duplicates,
            "exact_duplicate_rows_dropped": duplicates,
            "videos": len(segments["source_id"].unique()),
            "gold_windows_ending_after_last_cue": past_end,
            "dropped_cues": segments.attrs["dropped_cues"],
            "upstream_cues": segments.attrs["upstream_cues"],
            "excluded_by_reason": dict(Counter(e["reason"] for e in excluded)),
        }
        asked, notes["moments"] = ask_at(entries, lambda e: gold_cue_times(e, by_source), watch_moment(by_source))
        return ImportResult(entries=request_order(asked), excluded=excluded, notes=notes)


def watch_moment(by_source: dict[str, pd.DataFrame]) -> datetime:
    """The set's one moment: every video has played for two thirds of the median video duration.

    All videos start at OBSERVED_AT (the data has no dates), so the moment is one
    offset into every video at once, read from the corpus (durations), never from gold.
    """
    durations = sorted(duration_of(seg) for seg in by_source.values() if len(seg))
    return pd.Timestamp(OBSERVED_AT).to_pydatetime() + timedelta(seconds=round(statistics.median(durations) * 2 / 3))
