"""Code: a source is a tree of files; regions are a symbol or a line of one file.

Region forms: {"path": str, "symbol": str} or {"path": str, "line": int}. `path` is a
relative POSIX path inside the source's tree; `line` is 1-based. A symbol resolves to
its line span by parsing the file (see symbols.py): decorators are part of the span
(it starts at the first decorator line), nested defs and methods are named by dotted
qualified names ("Class.method", "outer.inner"), and an undotted name also resolves
when exactly one symbol of the file carries it. A name that is missing or ambiguous
(two definitions of one qualified name, or a plain name carried by several symbols)
fails validation with a message saying which.

Segments: one row per file of the tree (seq = the file's rank in path order) with the
whole normalised text, `path`, `n_lines`, `parser` and `symbols` (the JSON symbol
table), so one source's segments are enough to validate and resolve any region.

Atoms: extent {"path", "line_start", "line_end"} (inclusive, 1-based) plus the columns
path, line_start, line_end and char_start/char_end (half-open, within the file).
An atom overlaps a region when it is in the same file and its line range intersects
the region's span (inclusive ranges; a line region is the one-line span [line, line]):
ranges that only touch (one ends on line k, the other starts on k + 1) do not overlap,
two ranges that share a line do.

Chunkers:
  symbol  per Python file a partition of its lines: one atom per top-level def or
          class-less function (nested defs stay inside it), one per method (a def
          directly in a class body, decorators included; classes nested in classes
          are split the same way), and the remaining lines as runs: a class atom holds
          only the class's own lines outside its methods (header, docstring,
          attributes; several atoms if methods sit between them), and module-level
          remainder runs (imports, constants, `if __name__` ...) are atoms of their
          own. Runs are trimmed of blank lines; all-blank runs are dropped. A file
          without symbols (not Python) is one remainder run.
  lines   windows of `window_lines` lines with `overlap_lines` shared lines, per file.
  file    one atom per file.
Empty files yield no atoms.
"""

from __future__ import annotations

import functools
import json
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from bench.modalities.base import Modality, Option, extent_json, extent_range, is_int, unit_frame
from bench.modalities.boxes import interval_extents, leading_interval
from bench.modalities.code.symbols import (
    line_char_spans,
    line_offsets,
    parse_symbols,
    resolve,
    split_lines,
)
from bench.modalities.overlap import SameFrame
from bench.modalities.textspan import windows

ATOM_CODE_COLUMNS = [
    "atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at", "extent",
    "path", "line_start", "line_end", "char_start", "char_end",
]
SEGMENT_CODE_COLUMNS = [
    "source_id", "dataset", "modality", "seq", "text", "holder", "observed_at",
    "path", "n_lines", "parser", "symbols",
]


class CodeModality(Modality):
    name: ClassVar[str] = "code"
    region_forms = (frozenset({"path", "symbol"}), frozenset({"path", "line"}))
    strategies = ("symbol", "lines", "file")
    chunk_options = {"window_lines": Option(40, high=1_000_000, low=1), "overlap_lines": Option(10, high=1_000_000)}
    windows = (("window_lines", "overlap_lines"),)

    def check_region_values(self, region: dict) -> str | None:
        problem = check_path(region["path"])
        if problem:
            return problem
        if "line" in region:
            if not is_int(region["line"]):
                return f"line must be an integer, got {region['line']!r}"
            if region["line"] < 1:
                return f"line must be >= 1 (lines are 1-based), got {region['line']}"
            return None
        symbol = region["symbol"]
        if not isinstance(symbol, str) or not symbol:
            return f"symbol must be a non-empty string, got {symbol!r}"
        if not all(part.isidentifier() for part in symbol.split(".")):
            return f"symbol must be a dotted name of identifiers, got {symbol!r}"
        return None

    def check_region_in_corpus(self, region: dict, segments: pd.DataFrame) -> str | None:
        _, problem = region_span(region, segments)
        return problem

    def chunk(self, segments: pd.DataFrame, strategy: str, options: dict[str, Any]) -> pd.DataFrame:
        if strategy not in self.strategies:
            raise ValueError(f"unknown code chunking strategy {strategy!r}; choose one of {self.strategies}")
        rows: list[dict] = []
        for _, seg in segments.sort_values(["source_id", "seq"], kind="stable").iterrows():
            text = seg["text"]
            starts, ends = line_offsets(text)
            common = {"source_id": seg["source_id"], "dataset": seg["dataset"], "modality": self.name,
                      "holder": seg["holder"], "observed_at": seg["observed_at"], "path": seg["path"]}
            for key, a, b in _spans(seg, text, strategy, options):
                lo, hi = int(starts[a - 1]), int(ends[b - 1])
                rows.append({
                    **common,
                    "atom_id": f"{seg['source_id']}#{seg['path']}#{key}",
                    "text": text[lo:hi],
                    "extent": extent_json({"path": seg["path"], "line_start": a, "line_end": b}),
                    "line_start": a, "line_end": b, "char_start": lo, "char_end": hi,
                })
        return pd.DataFrame(rows, columns=ATOM_CODE_COLUMNS)

    def overlap(self, region: dict, atoms: pd.DataFrame, segments: pd.DataFrame) -> np.ndarray:
        span, _ = region_span(region, segments)
        if span is None:
            return np.zeros(len(atoms), dtype=bool)
        path, lo, hi = span
        return (
            (atoms["path"].to_numpy() == path)
            & (atoms["line_start"].to_numpy() <= hi)
            & (atoms["line_end"].to_numpy() >= lo)
        )

    def overlap_pairs(self, regions: pd.DataFrame, atoms: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Vectorised `overlap` for many regions at once: (region_row, atom_row) pairs.

        Region spans come from `region_spans` (one parse per file, one lookup per
        distinct region); the join is on (source, path) and the inclusive line ranges.
        """
        from bench.modalities.overlap import candidate_pairs, group_codes, pairs_frame

        found = [(i, s) for i, s in enumerate(region_spans(regions, segments)) if s is not None]
        placed = np.asarray([i for i, _ in found], dtype=np.int64)
        if not len(placed) or not len(atoms):
            return pairs_frame([], [])
        # group = (source, path): two integer codes combined, no joined strings
        a_src, r_src = group_codes(atoms["source_id"], regions["source_id"])
        a_path, r_path = group_codes(atoms["path"], [s[0] for _, s in found])
        n_paths = int(a_path.max(initial=0)) + 1
        r_src = r_src[placed]
        r_key = np.where((r_src >= 0) & (r_path >= 0), r_src * n_paths + r_path, -1)
        a_key = a_src * n_paths + a_path
        g_lo = np.asarray([s[1] for _, s in found], dtype=np.int64)
        g_hi = np.asarray([s[2] for _, s in found], dtype=np.int64)
        l0, l1 = atoms["line_start"].to_numpy(dtype=np.int64), atoms["line_end"].to_numpy(dtype=np.int64)
        r, a = candidate_pairs(r_key, g_lo, g_hi, a_key, l0, l1)
        keep = (l0[a] <= g_hi[r]) & (l1[a] >= g_lo[r])
        return pairs_frame(placed[r[keep]], a[keep])

    region_columns: ClassVar[dict[str, str]] = {"path": "string", "symbol": "string", "line": "Int64"}

    def place_regions(self, regions: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Vectorised `region_extent`: each region's line span (`region_spans`) as characters of
        its file (the source's first segment of the path), all files' lines counted at once."""
        from bench.modalities.boxes import placed_frame

        spans = region_spans(regions, segments)
        placed = np.asarray([i for i, span in enumerate(spans) if span is not None], dtype=np.int64)
        part = np.full(len(spans), "", dtype=object)
        lo, hi = np.full(len(spans), np.nan), np.full(len(spans), np.nan)
        if len(placed):
            found = pd.DataFrame({"source_id": regions["source_id"].to_numpy(dtype=object)[placed],
                                  "path": [spans[i][0] for i in placed]})
            named = pc.and_(pc.is_in(pa.array(segments["source_id"], from_pandas=True), value_set=pa.array(found["source_id"].unique())),
                            pc.is_in(pa.array(segments["path"], from_pandas=True), value_set=pa.array(found["path"].unique())))
            candidates = np.flatnonzero(named.fill_null(False).to_numpy(zero_copy_only=False))
            firsts = candidates[~segments[["source_id", "path"]].take(candidates).duplicated(keep="first").to_numpy()]
            files = segments[["source_id", "path"]].take(firsts).assign(segment=firsts)
            needed = found.drop_duplicates().merge(files, on=["source_id", "path"])  # only the files regions name
            row = found.merge(needed.assign(row=np.arange(len(needed))), on=["source_id", "path"], how="left")["row"].to_numpy()
            first = np.asarray([spans[i][1] for i in placed], dtype=np.int64)
            last = np.asarray([spans[i][2] for i in placed], dtype=np.int64)
            start, end = line_char_spans(segments["text"].take(needed["segment"].to_numpy()), row, first, last)
            part[placed], lo[placed], hi[placed] = found["path"].to_numpy(dtype=object), start, end + 1
        unplaced = np.isnan(lo)
        return placed_frame(part, lo, hi, np.where(unplaced, np.nan, 0.0), np.where(unplaced, np.nan, 1.0))

    def atom_from_extent(self, extent: dict, segments: pd.DataFrame | None) -> dict[str, Any]:
        """{"path": "...", "line_start": a, "line_end": b} or {"path": "...", "line": n}."""
        path = extent.get("path")
        if not isinstance(path, str) or not path:
            raise ValueError(f"extent needs a non-empty path, got {path!r}")
        rest = {k: v for k, v in extent.items() if k != "path"}
        a, b = extent_range(rest, "line", "line_start", "line_end", 1)
        lo = hi = -1
        if segments is not None and len(segments) and "path" in segments:
            rows = segments[segments["path"] == path]
            if rows.empty:
                raise ValueError(f"path {path!r} not in the source tree ({len(segments)} files)")
            starts, ends = line_offsets(str(rows.iloc[0]["text"]))
            if b > len(starts):
                raise ValueError(f"line {b} beyond the file's {len(starts)} lines")
            lo, hi = int(starts[a - 1]), int(ends[b - 1])  # as the harness's chunks: the atom costs what it holds
        return {"path": path, "line_start": a, "line_end": b, "char_start": lo, "char_end": hi,
                "extent": {"path": path, "line_start": a, "line_end": b}}

    def replay_units(self, segments: pd.DataFrame) -> pd.DataFrame:
        """One event per file of the tree: its whole text, extent all its lines."""
        seg = segments.sort_values("seq", kind="stable")
        extents = [{"path": str(p), "line_start": 1, "line_end": max(1, len(split_lines(t)))} for p, t in zip(seg["path"], seg["text"])]
        return unit_frame(extents, seg["text"], seg["observed_at"])

    def cited_units(self, extent: dict, segments: pd.DataFrame) -> pd.DataFrame:
        """Each line of the cited range, within the file's lines."""
        cols = self.atom_from_extent(extent, None)
        path, a, b = cols["path"], cols["line_start"], cols["line_end"]
        rows = segments[segments["path"] == path] if "path" in segments else segments.iloc[0:0]
        if rows.empty:
            raise ValueError(f"path {path!r} not in the source tree ({len(segments)} files)")
        lines = split_lines(str(rows.iloc[0]["text"]))
        if b > len(lines):
            raise ValueError(f"line {b} outside {path!r} (lines 1..{len(lines)})")
        seen = rows.iloc[0]["observed_at"]
        return unit_frame([{"path": path, "line": n} for n in range(a, b + 1)], lines[a - 1:b], [seen] * (b - a + 1))

    def pictures(self, query: dict[str, Any], files: Any, segments: dict[str, pd.DataFrame]) -> str:
        """The gold symbol's lines and the ranks covering each (pictures.py)."""
        from bench.modalities.code.pictures import symbol_pictures

        return symbol_pictures(query, segments, region_span)

    # Extents are characters of a file (part = the file's path), each line owning its
    # newline ([line start, line end + 1)), so lines tile the file and a blank line
    # still has extent 1.
    extent_unit: ClassVar[str] = "chars"
    # The reader's budget: ten median gold regions of the dev set (a function: 243 characters
    # on CoSQA), rounded: 2,400 characters, about 600 tokens (~4 characters a token).
    budget: ClassVar[Option | None] = Option(2_400, high=1_000_000_000, low=0, low_open=True, whole=False)

    def cut(self, boxes: np.ndarray, amounts: np.ndarray) -> np.ndarray | None:
        """The leading characters in line order of the atom's file (a file atom: its first lines)."""
        return leading_interval(boxes, amounts)

    def atom_extents(self, atoms: pd.DataFrame) -> pd.DataFrame:
        return interval_extents(atoms["char_start"].to_numpy(), atoms["char_end"].to_numpy() + 1,
                                atoms["path"].to_numpy(dtype=object))

    def region_extent(self, region: dict, segments: pd.DataFrame) -> tuple[str, float, float, float, float] | None:
        span, _ = region_span(region, segments)
        if span is None:
            return None
        path, lo, hi = span
        starts, ends = line_offsets(segments[segments["path"] == path].iloc[0]["text"])
        return (path, float(starts[lo - 1]), float(ends[hi - 1] + 1), 0.0, 1.0)


def check_path(path: Any) -> str | None:
    if not isinstance(path, str) or not path:
        return f"path must be a non-empty string, got {path!r}"
    if path.startswith("/") or "\\" in path or (len(path) > 1 and path[1] == ":"):
        return f"path must be relative with '/' separators, got {path!r}"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return f"path must not hold empty, '.' or '..' parts, got {path!r}"
    return None


def symbols_of(seg: pd.Series) -> list[dict[str, Any]]:
    """The segment's symbol table (parsed from its text when the column is absent)."""
    raw = seg.get("symbols") if hasattr(seg, "get") else None
    if isinstance(raw, str):
        return json.loads(raw)
    return parse_symbols(seg["text"], seg["path"])[0]


@functools.lru_cache(maxsize=8192)
def _symbol_table(raw: str) -> tuple[dict[str, Any], ...]:
    """A recorded symbol table parsed, once for the join and the placement of the same
    regions (`region_spans` runs for both); read only."""
    return tuple(json.loads(raw))


def region_span(region: dict, segments: pd.DataFrame) -> tuple[tuple[str, int, int] | None, str | None]:
    """(path, first line, last line) of a region in one source's segments, or a problem."""
    path = region["path"]
    rows = segments[segments["path"] == path] if "path" in segments else segments.iloc[0:0]
    if rows.empty:
        return None, f"path {path!r} not in the source tree ({len(segments)} files)"
    seg = rows.iloc[0]
    if "line" in region:
        n_lines = len(split_lines(seg["text"]))
        if not 1 <= region["line"] <= n_lines:
            return None, f"line {region['line']} outside {path!r} (lines 1..{n_lines})"
        return (path, region["line"], region["line"]), None
    sym, problem = resolve(symbols_of(seg), region["symbol"])
    if sym is None:
        return None, f"{problem} in {path!r}"
    return (path, int(sym["line_start"]), int(sym["line_end"])), None


def region_spans(regions: pd.DataFrame, segments: pd.DataFrame) -> list[tuple[str, int, int] | None]:
    """`region_span` of many (source_id, region) rows, with each file parsed once.

    Same answers as region_span on the source's segments: the first segment of the
    source with the region's path is the file; a line must lie in it; a symbol must
    resolve in its symbol table.
    """
    keys = [(sid, r["path"], "line" if "line" in r else "symbol", r["line"] if "line" in r else r["symbol"])
             for sid, r in zip(regions["source_id"].tolist(), regions["region"].tolist(), strict=True)]
    known = _SPANS.get(segments)  # the join's spans, when the placement asks of the same segments
    if known is not None and all(k in known for k in keys):
        return [known[k] for k in keys]
    out, memo = _find_spans(regions, segments)
    _SPANS.put(segments, memo)
    return out


def _find_spans(regions: pd.DataFrame, segments: pd.DataFrame) -> tuple[list[tuple[str, int, int] | None], dict[tuple[str, str, str, Any], tuple[str, int, int] | None]]:
    """`region_spans` worked out: each region's span, and the span of each (source, path, kind, line or symbol)."""
    files: dict[tuple[str, str], dict[str, Any]] = {}
    if len(segments) and "path" in segments:
        # the recorded line count and symbol table when the segments have them (the
        # extract stage writes both); the file's text only where one is missing
        cols = [c for c in ("n_lines", "symbols") if c in segments]
        # only the files the regions name (a tree holds thousands), hashed in C, not per Python string
        wanted = pc.unique(pa.array(regions["source_id"], from_pandas=True))
        paths = pc.unique(pa.array([r["path"] for r in regions["region"]], type=pa.string()))
        mask = pc.and_(pc.is_in(pa.array(segments["source_id"], from_pandas=True), value_set=wanted),
                       pc.is_in(pa.array(segments["path"], from_pandas=True), value_set=paths)).fill_null(False)
        mask = mask.to_numpy(zero_copy_only=False)
        # take by positions: a boolean .loc over all segments costs 30 times more here
        firsts = segments[["source_id", "path", *cols, "text"]].take(np.flatnonzero(mask))
        firsts = firsts.drop_duplicates(["source_id", "path"], keep="first")
        if len(cols) == 2 and not firsts[cols].isna().to_numpy().any():
            firsts = firsts.drop(columns="text")
        else:
            cols.append("text")
        values = zip(firsts["source_id"].tolist(), firsts["path"].tolist(), *(firsts[c].tolist() for c in cols), strict=True)
        for sid, path, *rest in values:
            files[(sid, path)] = {"path": path, **dict(zip(cols, rest, strict=True))}
    n_lines: dict[tuple[str, str], int] = {}
    symbols: dict[tuple[str, str], list[dict[str, Any]]] = {}
    memo: dict[tuple[str, str, str, Any], tuple[str, int, int] | None] = {}
    out: list[tuple[str, int, int] | None] = []
    for sid, region in zip(regions["source_id"].tolist(), regions["region"].tolist(), strict=True):
        path = region["path"]
        kind = "line" if "line" in region else "symbol"
        key = (sid, path, kind, region[kind])
        if key not in memo:
            seg = files.get((sid, path))
            span = None
            if seg is not None and kind == "line":
                if (sid, path) not in n_lines:
                    n_lines[(sid, path)] = int(seg["n_lines"]) if "n_lines" in seg else len(split_lines(seg["text"]))
                if 1 <= region["line"] <= n_lines[(sid, path)]:
                    span = (path, region["line"], region["line"])
            elif seg is not None:
                if (sid, path) not in symbols:
                    raw = seg.get("symbols")
                    symbols[(sid, path)] = list(_symbol_table(raw)) if isinstance(raw, str) else symbols_of(seg)
                sym, _ = resolve(symbols[(sid, path)], region["symbol"])
                if sym is not None:
                    span = (path, int(sym["line_start"]), int(sym["line_end"]))
            memo[key] = span
        out.append(memo[key])
    return out, memo


#: region spans by (source, path, kind, line or symbol), for the segments frame they were found in
_SPANS: SameFrame[dict[tuple[str, str, str, Any], tuple[str, int, int] | None]] = SameFrame()


def _spans(seg: pd.Series, text: str, strategy: str, options: dict[str, Any]) -> list[tuple[str, int, int]]:
    lines = split_lines(text)
    n = len(lines)
    if n == 0:
        return []
    if strategy == "file":
        return [("file", 1, n)]
    if strategy == "lines":
        size, overlap = int(options["window_lines"]), int(options["overlap_lines"])
        return [(f"w{i}", a + 1, b) for i, (a, b) in enumerate(windows(n, size, overlap))]
    return symbol_spans(symbols_of(seg), lines)


def symbol_spans(symbols: list[dict[str, Any]], lines: list[str]) -> list[tuple[str, int, int]]:
    """The `symbol` strategy's partition of a file's lines (see the module docstring)."""
    out: list[tuple[str, int, int]] = []
    children: dict[int, list[int]] = {}
    for i, s in enumerate(symbols):
        children.setdefault(int(s["parent"]), []).append(i)

    def remainder(lo: int, hi: int, taken: list[tuple[int, int]], tag: str) -> None:
        line = lo
        for a, b in sorted(taken) + [(hi + 1, hi + 1)]:
            _run(line, min(a - 1, hi), tag)
            line = max(line, b + 1)

    def _run(a: int, b: int, tag: str) -> None:
        while a <= b and not lines[a - 1].strip():
            a += 1
        while b >= a and not lines[b - 1].strip():
            b -= 1
        if a <= b:
            out.append((f"{tag}:L{a}-{b}", a, b))

    def split(lo: int, hi: int, members: list[int], tag: str) -> None:
        taken: list[tuple[int, int]] = []
        for i in sorted(members, key=lambda k: symbols[k]["line_start"]):
            s = symbols[i]
            a, b = int(s["line_start"]), min(int(s["line_end"]), hi)
            if a < lo or a > hi or (taken and a <= taken[-1][1]):
                continue  # outside the owner or overlapping a sibling (fallback parses only)
            taken.append((a, b))
            if s["kind"] == "class":
                split(a, b, children.get(i, []), f"c:{s['qualname']}")
            else:
                out.append((f"s:{s['qualname']}:L{a}", a, b))
        remainder(lo, hi, taken, tag)

    split(1, len(lines), children.get(-1, []), "m")
    return sorted(out, key=lambda t: t[1])


def tree_segments(dataset: str, source_id: str, files: dict[str, str], holder: str, observed_at: Any) -> pd.DataFrame:
    """Segments of one source tree: one row per file (path -> normalised text)."""
    rows = []
    for seq, path in enumerate(sorted(files)):
        text = files[path]
        symbols, parser = parse_symbols(text, path)
        rows.append({
            "source_id": source_id, "dataset": dataset, "modality": "code", "seq": seq, "text": text,
            "holder": holder, "observed_at": observed_at, "path": path,
            "n_lines": len(split_lines(text)), "parser": parser,
            "symbols": json.dumps(symbols, separators=(",", ":")),
        })
    df = pd.DataFrame(rows, columns=SEGMENT_CODE_COLUMNS)
    df["observed_at"] = pd.to_datetime(df["observed_at"], utc=True)
    return df
