"""Local video data sets: each transcript (WebVTT .vtt or SubRip .srt) under files/ is one video.

Cue times become seconds; regions are windows {"t_start", "t_end"} on that time line.
Both formats are read strictly: a timing line that does not parse, an end before its
start, a VTT file without its WEBVTT header, or a transcript without cues is refused
with the file and line named. Markup tags (<i>, <c.x>, <v Speaker>) are dropped from
the cue text (a voice tag's speaker is kept as "Speaker: text"); NOTE, STYLE and
REGION blocks of WebVTT are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from bench.modalities.local import LocalDataError
from bench.modalities.video.modality import cue_frame

FORMATS = "transcripts (.vtt WebVTT, .srt SubRip)"
SUFFIXES: tuple[str, ...] | None = (".vtt", ".srt")
EXAMPLE_FILES: dict[str, str] = {
    "onboarding-call.vtt": (
        "WEBVTT\n\n"
        "00:00:00.000 --> 00:00:04.500\n<v Ana>Welcome to the team, this is the onboarding call.\n\n"
        "00:00:04.500 --> 00:00:09.000\n<v Ana>Expense reports are due on the fifth of each month.\n\n"
        "00:00:09.000 --> 00:00:13.000\n<v Ben>Where do I file them?\n\n"
        "00:00:13.000 --> 00:00:18.000\n<v Ana>In the finance portal, under My Expenses.\n"
    ),
}
EXAMPLE_GOLD: list[tuple[str, str | None, str | None, dict]] = [
    ("When are expense reports due?", "the fifth of each month", "onboarding-call.vtt", {"t_start": 4.5, "t_end": 9.0}),
    ("What is the parking policy?", None, None, {}),
]

TIME = r"(?:(\d+):)?([0-5]?\d):([0-5]\d)[.,](\d{1,3})"
TIMING = re.compile(rf"^\s*{TIME}\s*-->\s*{TIME}(?:\s+.*)?$")
VOICE = re.compile(r"<v(?:\.[^ >]*)?\s+([^>]+)>")
TAG = re.compile(r"<[^>]*>")


def source_of(path: str) -> str:
    return path


def _seconds(h: str | None, m: str, s: str, frac: str) -> float:
    return int(h or 0) * 3600 + int(m) * 60 + int(s) + int(frac.ljust(3, "0")) / 1000


def _clean(lines: list[str]) -> str:
    out = []
    for line in lines:
        voice = VOICE.search(line)
        text = TAG.sub("", line).strip()
        if voice and text:
            text = f"{voice.group(1).strip()}: {text}"
        if text:
            out.append(text)
    return " ".join(out)


def read_cues(text: str, name: str) -> list[tuple[float, float, str]]:
    """(start, end, text) of every cue of a WebVTT or SRT transcript, in file order."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    vtt = name.lower().endswith(".vtt")
    start = 0
    if vtt:
        if not lines or not lines[0].lstrip("\ufeff").startswith("WEBVTT"):
            raise LocalDataError(f"{name}: line 1: a WebVTT file must start with WEBVTT")
        start = 1
    elif lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    cues: list[tuple[float, float, str]] = []
    i = start
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        block_start = i
        block = []
        while i < len(lines) and lines[i].strip():
            block.append(lines[i])
            i += 1
        if vtt and block[0].startswith(("NOTE", "STYLE", "REGION")):
            continue
        timing = next((k for k, line in enumerate(block[:2]) if "-->" in line), None)
        if timing is None:
            raise LocalDataError(f"{name}: line {block_start + 1}: cue without a timing line 'start --> end'")
        m = TIMING.match(block[timing])
        if not m:
            raise LocalDataError(f"{name}: line {block_start + timing + 1}: timing {block[timing].strip()!r} is not 'hh:mm:ss.mmm --> hh:mm:ss.mmm'")
        a, b = _seconds(*m.group(1, 2, 3, 4)), _seconds(*m.group(5, 6, 7, 8))
        if b < a:
            raise LocalDataError(f"{name}: line {block_start + timing + 1}: cue ends ({b}) before it starts ({a})")
        cues.append((a, b, _clean(block[timing + 1:])))
    if not cues:
        raise LocalDataError(f"{name}: no cues")
    return cues


def parse(sources: dict[str, list[tuple[str, Path]]]) -> pd.DataFrame:
    raw: list[dict] = []
    for source_id, files in sorted(sources.items()):
        for inner, local in files:
            try:
                text = Path(local).read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise LocalDataError(f"{inner}: not UTF-8 text (byte {exc.start})") from None
            for n, (a, b, cue) in enumerate(read_cues(text, inner)):
                raw.append({"source_id": source_id, "cue_index": n, "t_start": a, "t_end": b, "text": cue})
    cues, _ = cue_frame(raw)  # every cue was checked above: none is dropped
    return cues[["source_id", "seq", "text", "t_start", "t_end", "cue_index"]]
