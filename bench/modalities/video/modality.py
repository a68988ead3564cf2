"""Video: a source is one video; regions are time windows {"t_start", "t_end"} in seconds.

Segments are the video's timed transcript cues (one row per caption line or
transcript sentence), with float columns t_start and t_end. Cues may overlap
(rolling captions) and arrive out of order (concatenated tracks): they are sorted by
(t_start, t_end, upstream position) and `seq` is that order. A cue whose time is
missing or inverted (end before start) cannot be placed; the dataset's extract drops
it and counts it (see `cue_frame`).

Region rules
  shape   t_start and t_end are finite numbers (ints accepted, bools refused),
          0 <= t_start < t_end.
  corpus  the video's known duration is the end of its last cue (neither data set
          gives a duration of its own). t_start must lie before that end and t_end may
          exceed it by at most DURATION_TOLERANCE seconds: gold windows are human
          marks in whole or rounded seconds and can end just after the last caption
          while the video still runs (MedVidQA: 1 window, 1.01 s past; TutorialVQA: 0).

Overlap (half-open intervals [t_start, t_end)): an atom overlaps a region when the
intersection has positive length, so touching intervals [0, 5] and [5, 10] do NOT
overlap. A zero-length atom (a cue with t_start == t_end) at time t overlaps a region
when t_start <= t < t_end of the region; the region end is excluded, as for every
half-open interval.

Time (observed_at): a memory watches a video as a stream. The data set gives each
video a start moment (the moment the memory began watching it; see its module) and
each cue is observed at that moment plus the cue's start time, so the end of a video
is future memory while its beginning is not. A cue atom keeps its cue's observed_at;
a window atom is observed at its latest cue's observed_at (the window is whole only
then), a window without cues at the video's start plus the window's start.

Chunkers
  cue     one atom per cue, with the cue's times and text.
  window  fixed windows [k*step, k*step + window_seconds) from 0 with
          step = window_seconds - overlap_seconds, the last one clipped to the
          duration; atom text = the cues (in seq order, joined by newlines) whose span
          intersects the window by the overlap rule above. Windows in silent stretches
          are kept with empty text, so the windows cover [0, duration] without gaps.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from bench.modalities.base import Modality, Option, extent_json, is_number, unit_frame
from bench.modalities.boxes import interval_extents, leading_interval, placed_frame

#: seconds a region may end after the video's last cue (see module docstring)
DURATION_TOLERANCE = 2.0

CUE_COLUMNS = ["source_id", "cue_index", "t_start", "t_end", "text"]

ATOM_VIDEO_COLUMNS = [
    "atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at", "extent",
    "t_start", "t_end",
]


class VideoModality(Modality):
    name: ClassVar[str] = "video"
    region_forms = (frozenset({"t_start", "t_end"}),)
    strategies = ("cue", "window")
    # a window of at least a second (about a word of speech) and at most a day
    chunk_options = {"window_seconds": Option(30, high=86_400, low=1, whole=False),
                     "overlap_seconds": Option(10, high=86_400, whole=False)}
    windows = (("window_seconds", "overlap_seconds"),)

    def check_region_values(self, region: dict) -> str | None:
        for key in ("t_start", "t_end"):
            if not is_number(region[key]):
                return f"{key} must be a finite number of seconds, got {region[key]!r}"
        if region["t_start"] < 0:
            return f"t_start must be >= 0, got {region['t_start']}"
        if not region["t_start"] < region["t_end"]:
            return f"t_start must be before t_end, got {region['t_start']} >= {region['t_end']}"
        return None

    def check_region_in_corpus(self, region: dict, segments: pd.DataFrame) -> str | None:
        if segments.empty:
            return "the video has no timed cues"
        duration = duration_of(segments)
        if region["t_start"] >= duration:
            return f"t_start {region['t_start']} at or after the video's end {duration} (end of last cue)"
        if region["t_end"] > duration + DURATION_TOLERANCE:
            return (
                f"t_end {region['t_end']} beyond the video's end {duration} (end of last cue) "
                f"plus {DURATION_TOLERANCE} s tolerance"
            )
        return None

    # -- chunking ---------------------------------------------------------------

    def chunk(self, segments: pd.DataFrame, strategy: str, options: dict[str, Any]) -> pd.DataFrame:
        if strategy not in self.strategies:
            raise ValueError(f"unknown video chunking strategy {strategy!r}; choose one of {self.strategies}")
        rows: list[dict] = []
        for source_id, seg in segments.groupby("source_id", sort=True):
            seg = seg.sort_values("seq", kind="stable").reset_index(drop=True)
            meta = seg.iloc[0]
            common = {
                "source_id": source_id,
                "dataset": meta["dataset"],
                "modality": self.name,
                "holder": meta["holder"],
            }
            spans = cue_atoms(seg) if strategy == "cue" else window_atoms(seg, options)
            for key, t0, t1, text, observed in spans:
                rows.append(
                    {
                        "atom_id": f"{source_id}#{key}",
                        **common,
                        "text": text,
                        "observed_at": observed,
                        "extent": extent_json({"t_start": t0, "t_end": t1}),
                        "t_start": t0,
                        "t_end": t1,
                    }
                )
        atoms = pd.DataFrame(rows, columns=ATOM_VIDEO_COLUMNS)
        atoms["t_start"] = atoms["t_start"].astype("float64")
        atoms["t_end"] = atoms["t_end"].astype("float64")
        atoms["observed_at"] = pd.to_datetime(atoms["observed_at"], utc=True)
        return atoms

    def overlap(self, region: dict, atoms: pd.DataFrame, segments: pd.DataFrame) -> np.ndarray:
        return overlaps(atoms["t_start"].to_numpy(dtype=float), atoms["t_end"].to_numpy(dtype=float),
                        float(region["t_start"]), float(region["t_end"]))

    def overlap_pairs(self, regions: pd.DataFrame, atoms: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Vectorised `overlap` for many regions at once: (region_row, atom_row) pairs."""
        from bench.modalities.overlap import candidate_pairs, pairs_frame

        g_lo = np.asarray([float(x["t_start"]) for x in regions["region"]], dtype=float)
        g_hi = np.asarray([float(x["t_end"]) for x in regions["region"]], dtype=float)
        lo, hi = atoms["t_start"].to_numpy(dtype=float), atoms["t_end"].to_numpy(dtype=float)
        r, a = candidate_pairs(regions["source_id"], g_lo, g_hi, atoms["source_id"], lo, hi)
        keep = overlaps(lo[a], hi[a], g_lo[r], g_hi[r])
        return pairs_frame(r[keep], a[keep])

    # Extents are seconds on the video's time line; a zero-length cue has extent 0.
    def atom_from_extent(self, extent: dict, segments: pd.DataFrame | None) -> dict[str, Any]:
        """{"t_start": s, "t_end": e} (seconds, half-open)."""
        if set(extent) != {"t_start", "t_end"}:
            raise ValueError(f"extent must have keys {{t_start, t_end}}, got {{{', '.join(sorted(extent))}}}")
        t0, t1 = extent["t_start"], extent["t_end"]
        if not (is_number(t0) and is_number(t1)) or t0 < 0 or t0 > t1:
            raise ValueError(f"t_start and t_end must be finite seconds with 0 <= t_start <= t_end, got {t0!r}, {t1!r}")
        return {"t_start": float(t0), "t_end": float(t1), "extent": {"t_start": t0, "t_end": t1}}

    def replay_units(self, segments: pd.DataFrame) -> pd.DataFrame:
        """One event per cue, in seq order."""
        seg = segments.sort_values("seq", kind="stable")
        extents = [{"t_start": float(a), "t_end": float(b)} for a, b in zip(seg["t_start"], seg["t_end"])]
        return unit_frame(extents, seg["text"], seg["observed_at"])

    def cited_units(self, extent: dict, segments: pd.DataFrame) -> pd.DataFrame:
        """Each cue the cited window overlaps (the overlap rule), clipped to the window; the
        window lies within the video as a gold region must (DURATION_TOLERANCE)."""
        cols = self.atom_from_extent(extent, None)
        t0, t1 = cols["t_start"], cols["t_end"]
        problem = self.check_region_in_corpus({"t_start": t0, "t_end": max(t1, t0)}, segments)
        if problem:
            raise ValueError(problem)
        seg = segments.sort_values("seq", kind="stable")
        lo, hi = seg["t_start"].to_numpy(dtype=float), seg["t_end"].to_numpy(dtype=float)
        hit = overlaps(lo, hi, t0, t1) if t1 > t0 else (lo <= t0) & (hi > t0)
        sel = seg[hit]
        extents = [{"t_start": max(float(a), t0), "t_end": min(float(b), t1)} if t1 > t0 else {"t_start": t0, "t_end": t0}
                   for a, b in zip(sel["t_start"], sel["t_end"])]
        return unit_frame(extents, sel["text"], sel["observed_at"])

    def pictures(self, query: dict[str, Any], files: Any, segments: dict[str, pd.DataFrame]) -> str:
        """A timeline of the video with the gold span and the top-k atoms (pictures.py)."""
        from bench.modalities.video.pictures import timeline_pictures

        return timeline_pictures(query, segments)

    extent_unit: ClassVar[str] = "seconds"
    region_columns: ClassVar[dict[str, str]] = {"t_start": "Float64", "t_end": "Float64"}

    def place_regions(self, regions: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Vectorised `region_extent`: the region's own seconds."""
        return placed_frame("", regions["t_start"].to_numpy(dtype=float), regions["t_end"].to_numpy(dtype=float), 0.0, 1.0)

    # The reader's budget: ten median gold regions of the dev set (an answer span: 32 s on
    # TutorialVQA, 47 s on MedVidQA; 32 s pooled), rounded: 320 s, about five minutes of
    # transcript (~800 spoken words, ~1,000 tokens).
    budget: ClassVar[Option | None] = Option(320, high=10_000_000, low=0, low_open=True, whole=False)

    def cut(self, boxes: np.ndarray, amounts: np.ndarray) -> np.ndarray | None:
        """The leading seconds in time order."""
        return leading_interval(boxes, amounts)

    def atom_extents(self, atoms: pd.DataFrame) -> pd.DataFrame:
        return interval_extents(atoms["t_start"].to_numpy(dtype=float), atoms["t_end"].to_numpy(dtype=float))

    def region_extent(self, region: dict, segments: pd.DataFrame) -> tuple[str, float, float, float, float] | None:
        return ("", float(region["t_start"]), float(region["t_end"]), 0.0, 1.0)


def overlaps(lo: np.ndarray, hi: np.ndarray, g_lo: float, g_hi: float) -> np.ndarray:
    """Half-open [lo, hi) against [g_lo, g_hi): positive-length intersection, or a point inside."""
    positive = (np.minimum(hi, g_hi) - np.maximum(lo, g_lo)) > 0
    point = (hi == lo) & (lo >= g_lo) & (lo < g_hi)
    return positive | point


def duration_of(segments: pd.DataFrame) -> float:
    """Known duration of one video: the end of its last cue."""
    return float(segments["t_end"].max()) if len(segments) else 0.0


def seconds(value: Any) -> Any:
    """Seconds (float or array) as a Timedelta rounded to whole microseconds (ISO 8601's finest)."""
    micro = np.round(np.asarray(value, dtype=float) * 1e6).astype(np.int64)
    return pd.to_timedelta(micro, unit="us") if micro.ndim else pd.Timedelta(int(micro), unit="us")


def video_start(seg: pd.DataFrame) -> pd.Timestamp:
    """When a memory began watching the video: a cue's observed_at minus its start."""
    return seg["observed_at"].iloc[0] - seconds(float(seg["t_start"].iloc[0]))


def cue_atoms(seg: pd.DataFrame) -> list[tuple[str, float, float, str, pd.Timestamp]]:
    return [
        (f"c{int(s)}", float(a), float(b), str(t), o)
        for s, a, b, t, o in zip(seg["seq"], seg["t_start"], seg["t_end"], seg["text"], seg["observed_at"], strict=True)
    ]


def window_bounds(duration: float, size: float, overlap: float) -> list[tuple[float, float]]:
    """Windows [k*step, k*step + size) from 0, the last clipped to `duration`."""
    if not (is_number(size) and is_number(overlap)) or size <= 0 or overlap < 0 or overlap >= size:
        raise ValueError(f"window_seconds {size!r} and overlap_seconds {overlap!r}: need window > overlap >= 0")
    step = size - overlap
    out: list[tuple[float, float]] = []
    k = 0
    while duration > 0:
        start = k * step
        end = min(start + size, duration)
        out.append((float(start), float(end)))
        if end >= duration:
            break
        k += 1
    return out


def window_atoms(seg: pd.DataFrame, options: dict[str, Any]) -> list[tuple[str, float, float, str, pd.Timestamp]]:
    missing = [k for k in ("window_seconds", "overlap_seconds") if k not in options]
    if missing:
        raise ValueError(f"video window chunker needs options {missing}")
    lo = seg["t_start"].to_numpy(dtype=float)
    hi = seg["t_end"].to_numpy(dtype=float)
    texts = seg["text"].tolist()
    observed = seg["observed_at"].tolist()
    start = video_start(seg) if len(seg) else None
    out = []
    for i, (a, b) in enumerate(window_bounds(duration_of(seg), options["window_seconds"], options["overlap_seconds"])):
        hit = np.flatnonzero(overlaps(lo, hi, a, b))
        # the window is whole once its latest cue is observed; a silent window at its start
        when = max(observed[j] for j in hit) if len(hit) else start + seconds(a)
        out.append((f"w{i}", a, b, "\n".join(texts[j] for j in hit), when))
    return out


def parse_time(value: Any) -> float | None:
    """Seconds from a number or numeric string; None when missing or not finite."""
    if value is None or isinstance(value, bool):
        return None
    try:
        t = float(value)
    except (TypeError, ValueError):
        return None
    return t if math.isfinite(t) else None


def cue_frame(cues: list[dict]) -> tuple[pd.DataFrame, dict[str, int]]:
    """Raw cues {source_id, cue_index, t_start, t_end, text} -> placed cues in seq order.

    Cues with a missing/non-finite time, a negative start or an end before the start
    cannot be placed on the time line: they are dropped and counted by reason.
    """
    kept: list[dict] = []
    dropped = {"missing_time": 0, "negative_time": 0, "inverted_time": 0}
    for cue in cues:
        a, b = parse_time(cue["t_start"]), parse_time(cue["t_end"])
        if a is None or b is None:
            dropped["missing_time"] += 1
        elif a < 0:
            dropped["negative_time"] += 1
        elif b < a:
            dropped["inverted_time"] += 1
        else:
            kept.append({**cue, "t_start": a, "t_end": b})
    df = pd.DataFrame(kept, columns=CUE_COLUMNS)
    df["t_start"] = df["t_start"].astype("float64")
    df["t_end"] = df["t_end"].astype("float64")
    df = df.sort_values(["source_id", "t_start", "t_end", "cue_index"], kind="stable").reset_index(drop=True)
    df["seq"] = df.groupby("source_id").cumcount()
    return df, dropped


def finish_segments(cues: pd.DataFrame, dataset: str, holder: str, observed_at: dict[str, pd.Timestamp]) -> pd.DataFrame:
    """Add the common segment columns to placed cues.

    `observed_at` maps a source to the moment a memory began watching it; a cue is
    observed at that moment plus its start time (see the module docstring).
    """
    df = cues.copy()
    df["dataset"] = dataset
    df["modality"] = "video"
    df["holder"] = holder
    start = pd.to_datetime(df["source_id"].map(observed_at), utc=True)
    df["observed_at"] = start + seconds(df["t_start"].to_numpy(dtype=float))
    cols = ["source_id", "dataset", "modality", "seq", "text", "holder", "observed_at", "t_start", "t_end", "cue_index"]
    return df[cols]


def gold_cue_times(entry: dict, segments: dict[str, pd.DataFrame]) -> list[datetime] | None:
    """When each cue overlapping an entry's gold windows is observed (None: not placed).

    A cue is observed at its video's start plus its start second (finish_segments), so
    a gold window is observed by a moment when every cue overlapping it is.
    """
    times: list[datetime] = []
    for g in entry["gold"]:
        seg = segments.get(g["source_id"])
        if seg is None or seg.empty:
            return None
        hit = overlaps(seg["t_start"].to_numpy(dtype=float), seg["t_end"].to_numpy(dtype=float),
                       float(g["region"]["t_start"]), float(g["region"]["t_end"]))
        if not hit.any():
            return None
        times.extend(t.to_pydatetime() for t in seg.loc[hit, "observed_at"])
    return times


def fully_watched(segments: dict[str, pd.DataFrame]) -> list[datetime]:
    """Per video, when its last cue is observed: the video has been watched to its end."""
    return [seg["observed_at"].max().to_pydatetime() for seg in segments.values() if len(seg)]
