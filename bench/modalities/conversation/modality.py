"""Conversation: a source is one session of a conversation; regions are turns.

Turn numbers are the ones the data set gives within the session (LoCoMo's
"D<session>:<turn>"), so a region {"turn": 5} in source "...:session-3" is D3:5.
An atom overlaps a turn when the turn lies within the atom's turn range.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from bench.modalities.base import Modality, Option, extent_json, extent_range, is_int, unit_frame
from bench.modalities.boxes import interval_extents, leading_interval, placed_spans
from bench.modalities.textspan import key_spans, layout, layout_codes, source_codes


class ConversationModality(Modality):
    name: ClassVar[str] = "conversation"
    region_forms = (frozenset({"turn"}),)
    strategies = ("turn", "window", "session")
    chunk_options = {"window_turns": Option(5, high=100_000, low=1), "overlap_turns": Option(2, high=100_000)}
    windows = (("window_turns", "overlap_turns"),)

    def check_region_values(self, region: dict) -> str | None:
        if not is_int(region["turn"]):
            return f"turn must be an integer, got {region['turn']!r}"
        if region["turn"] < 0:
            return f"turn must be >= 0, got {region['turn']}"
        return None

    def check_region_in_corpus(self, region: dict, segments: pd.DataFrame) -> str | None:
        turns = segments["turn"].to_numpy()
        if region["turn"] not in set(turns.tolist()):
            lo, hi = (int(turns.min()), int(turns.max())) if len(turns) else (0, 0)
            return f"turn {region['turn']} not in the conversation session (turns {lo}..{hi})"
        return None

    def chunk(self, segments: pd.DataFrame, strategy: str, options: dict[str, Any]) -> pd.DataFrame:
        """Atoms of turns, windows of turns or whole sessions; each session laid out as `layout` does
        (its turns by seq, joined with one newline), all sessions in one sort, sessions in source order."""
        if segments.empty:
            return pd.DataFrame([], columns=ATOM_CONVERSATION_COLUMNS)
        seg = segments.sort_values(["source_id", "seq"], kind="stable")
        sources = seg["source_id"].to_numpy(dtype=object)
        texts = seg["text"].tolist()
        turns = seg["turn"].to_numpy()
        datasets, holders = seg["dataset"].to_numpy(dtype=object), seg["holder"].to_numpy(dtype=object)
        seen = seg["observed_at"]
        naive = seen.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy() if seen.dt.tz is not None else seen.to_numpy()
        seen_i = naive.view(np.int64)  # NaT is the smallest: a window's maximum skips it, as pandas' max does
        # each session's first row, and each turn's character offsets in its session's joined text
        first = np.flatnonzero(np.r_[True, sources[1:] != sources[:-1]])
        ends = np.r_[first[1:], len(seg)].astype(np.int64)
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        run = np.cumsum(lengths + 1) - (lengths + 1)  # offset of each row in all sessions' texts, one newline after each
        c_lo = run - np.repeat(run[first], ends - first)
        c_hi = c_lo + lengths
        names, heads, rows_a, rows_b = [], [], [], []
        for s0, s1 in zip(first.tolist(), ends.tolist(), strict=True):
            for key, a, b in _groups(s1 - s0, strategy, options):
                names.append(f"{sources[s0]}#{key}")
                heads.append(s0)  # the session's first turn names its data set and holder
                rows_a.append(s0 + a)
                rows_b.append(s0 + b)
        head = np.asarray(heads, dtype=np.int64)
        starts = np.asarray(rows_a, dtype=np.int64)
        stops = np.asarray(rows_b, dtype=np.int64)
        t0, t1 = turns[starts].astype(int).tolist(), turns[stops - 1].astype(int).tolist()
        latest_i = np.asarray([seen_i[i:j].max() for i, j in zip(rows_a, rows_b, strict=True)], dtype=np.int64)
        latest = pd.Series(latest_i.view(naive.dtype))
        if seen.dt.tz is not None:
            latest = latest.dt.tz_localize("UTC").dt.tz_convert(seen.dt.tz)
        return pd.DataFrame(
            {
                "atom_id": names,
                "source_id": sources[head],
                "dataset": datasets[head],
                "modality": self.name,
                "text": ["\n".join(texts[i:j]) for i, j in zip(rows_a, rows_b, strict=True)],
                "holder": holders[head],
                "observed_at": latest.to_numpy() if seen.dt.tz is None else latest.array,
                "extent": [extent_json({"turn_start": x, "turn_end": y}) for x, y in zip(t0, t1, strict=True)],
                "turn_start": t0,
                "turn_end": t1,
                "char_start": c_lo[starts].tolist(),
                "char_end": c_hi[stops - 1].tolist(),
            },
            columns=ATOM_CONVERSATION_COLUMNS,
        )

    def overlap(self, region: dict, atoms: pd.DataFrame, segments: pd.DataFrame) -> np.ndarray:
        turn = region["turn"]
        return (atoms["turn_start"].to_numpy() <= turn) & (atoms["turn_end"].to_numpy() >= turn)

    def overlap_pairs(self, regions: pd.DataFrame, atoms: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Vectorised `overlap` for many regions at once: (region_row, atom_row) pairs."""
        from bench.modalities.overlap import candidate_pairs, pairs_frame

        turn = np.asarray([r["turn"] for r in regions["region"]], dtype=np.int64)
        t0, t1 = atoms["turn_start"].to_numpy(dtype=np.int64), atoms["turn_end"].to_numpy(dtype=np.int64)
        r, a = candidate_pairs(regions["source_id"], turn, turn, atoms["source_id"], t0, t1)
        keep = (t0[a] <= turn[r]) & (t1[a] >= turn[r])
        return pairs_frame(r[keep], a[keep])

    region_columns: ClassVar[dict[str, str]] = {"turn": "Int64"}

    def place_regions(self, regions: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Vectorised `region_extent`: each turn's character span in its session's layout."""
        sources = pa.array(regions["source_id"], from_pandas=True)
        wanted = pc.is_in(pa.array(segments["source_id"], from_pandas=True), value_set=pc.unique(sources))
        rows = np.flatnonzero(wanted.to_numpy(zero_copy_only=False))  # the regions' sessions only
        laid = layout_codes(segments[["source_id", "seq", "text", "turn"]].take(rows), ("turn",))
        turn = regions["turn"].to_numpy(dtype=np.int64)
        found, lo, hi = key_spans(laid, ("turn",), source_codes(laid, regions["source_id"]), (turn,), np.arange(len(turn)))
        return placed_spans(found, lo, hi + 1)

    # Extents are characters of the session's joined text, each turn owning the
    # newline after it ([char_start, char_end + 1)), so turns tile the session.
    def extent_segments(self, segments: pd.DataFrame) -> pd.DataFrame:
        return layout(segments)  # character spans of the turns

    def atom_from_extent(self, extent: dict, segments: pd.DataFrame | None) -> dict[str, Any]:
        """{"turn_start": a, "turn_end": b} or {"turn": t}; the character span is that of the
        turns in the session's layout, as the harness's own chunks have it (so a system atom
        costs what it holds: bench.evaluation.measures.extent). Both ends must be turns of the
        session when its segments are known."""
        a, b = extent_range(extent, "turn", "turn_start", "turn_end", 0)
        lo = hi = -1
        if segments is not None and len(segments):
            turns = segments["turn"].to_numpy()
            known = set(turns.tolist())
            for t in (a, b):
                if t not in known:
                    raise ValueError(f"turn {t} is not a turn of the session (turns {int(turns.min())}..{int(turns.max())})")
            sel = segments[(turns >= a) & (turns <= b)]
            lo, hi = int(sel["char_start"].min()), int(sel["char_end"].max())
        return {"turn_start": a, "turn_end": b, "char_start": lo, "char_end": hi, "extent": {"turn_start": a, "turn_end": b}}

    def replay_units(self, segments: pd.DataFrame) -> pd.DataFrame:
        """One event per turn."""
        seg = segments.sort_values("seq", kind="stable")
        return unit_frame([{"turn": int(t)} for t in seg["turn"]], seg["text"], seg["observed_at"])

    def cited_units(self, extent: dict, segments: pd.DataFrame) -> pd.DataFrame:
        """Each turn of the cited range; both ends must be turns of the session."""
        a, b = extent_range(extent, "turn", "turn_start", "turn_end", 0)
        seg = segments.sort_values("seq", kind="stable")
        turns = seg["turn"].to_numpy()
        known = set(turns.tolist())
        for t in (a, b):
            if t not in known:
                lo, hi = (int(turns.min()), int(turns.max())) if len(turns) else (0, 0)
                raise ValueError(f"turn {t} is not a turn of the session (turns {lo}..{hi})")
        sel = seg[(turns >= a) & (turns <= b)]
        return unit_frame([{"turn": int(t)} for t in sel["turn"]], sel["text"], sel["observed_at"])

    extent_unit: ClassVar[str] = "chars"
    # The reader's budget: ten median gold regions of the dev set (a turn: 173 characters on
    # LoCoMo), rounded: 1,700 characters, about 425 tokens (~4 characters a token).
    budget: ClassVar[Option | None] = Option(1_700, high=1_000_000_000, low=0, low_open=True, whole=False)

    def cut(self, boxes: np.ndarray, amounts: np.ndarray) -> np.ndarray | None:
        """The leading characters in turn order (a session atom: its first turns)."""
        return leading_interval(boxes, amounts)

    def atom_extents(self, atoms: pd.DataFrame) -> pd.DataFrame:
        return interval_extents(atoms["char_start"].to_numpy(), atoms["char_end"].to_numpy() + 1)

    def region_extent(self, region: dict, segments: pd.DataFrame) -> tuple[str, float, float, float, float] | None:
        seg = layout(segments)
        sel = seg[seg["turn"] == region["turn"]]
        if sel.empty:
            return None
        return ("", float(sel["char_start"].min()), float(sel["char_end"].max() + 1), 0.0, 1.0)


ATOM_CONVERSATION_COLUMNS = [
    "atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at", "extent",
    "turn_start", "turn_end", "char_start", "char_end",
]


def _groups(n: int, strategy: str, options: dict[str, Any]) -> list[tuple[str, int, int]]:
    if n == 0:
        return []
    if strategy == "turn":
        return [(f"t{i}", i, i + 1) for i in range(n)]
    if strategy == "session":
        return [("session", 0, n)]
    if strategy == "window":
        from bench.modalities.textspan import windows

        size, overlap = int(options["window_turns"]), int(options["overlap_turns"])
        return [(f"w{i}", a, b) for i, (a, b) in enumerate(windows(n, size, overlap))]
    raise ValueError(
        f"unknown conversation chunking strategy {strategy!r}; choose one of {ConversationModality.strategies}"
    )
