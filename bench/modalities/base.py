"""The two plug-in types of the harness: a Modality and a Dataset.

A *modality* knows its region shapes, how to check a region against the parsed
corpus, how to chunk parsed segments into atoms and when an atom overlaps a region.
A *dataset* is one registered third-party source of gold: where its files live
upstream, who annotated it, how to parse its corpus files into the modality's
segments and how to import its annotations into a spec-conformant set.

Frames passed between them (all pandas):

segments  one row per smallest natural unit of a source (pdf page block,
          conversation turn, ...). Common columns: source_id, dataset, modality,
          seq, text, holder, observed_at (tz-aware UTC). A modality adds its own.
atoms     one row per retrievable unit after chunking. Common columns: atom_id,
          source_id, dataset, modality, text, holder, observed_at, extent (JSON of
          the atom's extent in the modality's region terms). A modality adds the
          numeric columns its overlap test needs.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from bench.modalities.boxes import PLACED
from bench.modalities.overlap import pairs_frame

SEGMENT_COLUMNS = ["source_id", "dataset", "modality", "seq", "text", "holder", "observed_at"]
ATOM_COLUMNS = ["atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at", "extent"]


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) and np.isfinite(value)


@dataclass(frozen=True)
class Option:
    """A numeric option of params.yaml a modality reads (`chunking.<modality>` or
    `extraction.<modality>`): its default and its bounds, checked by bench/params.py.

    A whole number unless `whole` is False; at least `low` (above it when `low_open`)
    and at most `high`: every size has an upper bound (docs/bad-input.md)."""

    default: float
    high: float
    low: float = 0
    low_open: bool = False
    whole: bool = True


class Modality:
    """Base class; subclasses live one folder each under bench/modalities/."""

    name: ClassVar[str]
    #: allowed key sets of a region, e.g. ({"page"}, {"page", "block"})
    region_forms: ClassVar[tuple[frozenset[str], ...]]
    #: chunking strategies this modality offers; the first is the default
    strategies: ClassVar[tuple[str, ...]]
    #: params.yaml `chunking.<name>` options its chunkers read (besides `strategy`)
    chunk_options: ClassVar[dict[str, Option]] = {}
    #: (window, overlap) option pairs of its windowed strategies: the overlap stays below the window
    windows: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: params.yaml `extraction.<name>` options its data sets' `extract` takes
    extraction_options: ClassVar[dict[str, Option]] = {}
    #: `text_source` of its atoms when the chunker sets none: "layer" (the source's own
    #: text) or "ocr" (the harness's OCR read it)
    text_source: ClassVar[str] = "layer"

    def check_region_shape(self, region: Any) -> str | None:
        """Return a one-line problem with the region's shape or types, or None."""
        if not isinstance(region, dict):
            return f"region must be an object, got {type(region).__name__}"
        keys = frozenset(region)
        if keys not in self.region_forms:
            forms = " or ".join("{" + ", ".join(sorted(f)) + "}" for f in self.region_forms)
            return f"{self.name} region must have keys {forms}, got {{{', '.join(sorted(keys))}}}"
        return self.check_region_values(region)

    def check_region_values(self, region: dict) -> str | None:
        return None

    def check_region_in_corpus(self, region: dict, segments: pd.DataFrame) -> str | None:
        """Return a problem if the region does not exist in the source's parsed segments."""
        return None

    def chunk(self, segments: pd.DataFrame, strategy: str, options: dict[str, Any]) -> pd.DataFrame:
        raise NotImplementedError

    def overlap(self, region: dict, atoms: pd.DataFrame, segments: pd.DataFrame) -> np.ndarray:
        """Boolean mask over `atoms` (all of one source): which atoms overlap `region`."""
        raise NotImplementedError

    # -- extents (chunk-fair metrics, see bench/evaluation/measures/extent.py) ---------------------------
    #: unit of extent amounts: "chars", "seconds", "px^2", "image"
    extent_unit: ClassVar[str] = "units"

    def atom_extents(self, atoms: pd.DataFrame) -> pd.DataFrame:
        """Each atom's extent as a box in its source's coordinates, row for row.

        Columns ``part`` (a sub-space of the source, e.g. a file path; "" when the
        source is one space), ``x0``, ``x1``, ``y0``, ``y1`` (half-open; 1-D
        modalities use y0 = 0, y1 = 1). The box's area is the extent amount.
        """
        raise NotImplementedError

    def region_extent(self, region: dict, segments: pd.DataFrame) -> tuple[str, float, float, float, float] | None:
        """The region as (part, x0, x1, y0, y1) in the atoms' coordinates, or None if it cannot be placed."""
        raise NotImplementedError

    # -- gold regions as typed columns, placed (bench/gold/resolve.py) ------------------
    #: a region's typed columns in data/resolved/regions.parquet: name -> pandas dtype, all
    #: nullable (a key a region form leaves out is <NA>); by default the region's keys
    region_columns: ClassVar[dict[str, str]] = {}

    def region_table(self, regions: list[dict]) -> dict[str, Any]:
        """The `region_columns` of each region, one array per column, row for row."""
        return {name: pd.array([r.get(name) for r in regions], dtype=dtype) for name, dtype in self.region_columns.items()}

    def place_regions(self, regions: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Each region as a box in its atoms' coordinates, row for row: columns part, x0,
        x1, y0, y1 (part "" and a NaN box where `region_extent` gives None).

        `regions` has source_id, region (the region dict) and the `region_columns`, each
        region's source with segments; `segments` holds those of (at least) the regions'
        sources (other rows, of any modality, are ignored). Modalities override this with
        a vectorised version giving the same boxes; this default calls `region_extent`
        once per region.
        """
        return place_regions_per_region(self, regions, segments)

    # -- the reader's budget (recall@budget, bench/evaluation/measures/budget.py) ----------------
    #: params.yaml `metrics.budget.<name>`: what a reader is handed per query, in `extent_unit`
    #: (its default and bounds); None: no default, the budget measures of the modality then
    #: have no value unless params.yaml names one
    budget: ClassVar[Option | None] = None

    def cut(self, boxes: np.ndarray, amounts: np.ndarray) -> np.ndarray | None:
        """The leading part of each atom box (rows x0, x1, y0, y1, as `atom_extents` gives)
        worth ``amounts`` of `extent_unit`, in the modality's reading order; None when its
        atoms cannot be cut (the default: an atom then counts only whole, when it fits)."""
        return None

    def overlap_pairs(self, regions: pd.DataFrame, atoms: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Every (region_row, atom_row) pair that overlaps, by the modality's `overlap`.

        `regions` has columns source_id and region (the region dict); `atoms` holds the
        modality's atoms; `segments` the segments of (at least) their sources.
        Modalities override this with a vectorised join giving the same pairs (gold
        resolution, bench/gold/resolve.py); this default calls `overlap` once per
        region (see overlap_pairs_per_region).
        """
        return overlap_pairs_per_region(self, regions, atoms, segments)

    # -- system-provided atoms (bench/systems/atoms.py) ---------------------------------
    def extent_segments(self, segments: pd.DataFrame) -> pd.DataFrame:
        """One source's segments in the form `atom_from_extent` reads (default: as they are)."""
        return segments

    def atom_from_extent(self, extent: dict, segments: pd.DataFrame | None) -> dict[str, Any]:
        """A system atom's modality columns from its contract extent.

        Returns the columns of the modality's ATOM_<MOD>_COLUMNS beyond the common ones,
        plus ``extent`` (the normalised extent object); `segments` are the atom's
        source's (after `extent_segments`), or None when the corpus lacks the source.
        Raises ValueError (one line) when the extent does not fit the modality.
        """
        raise ValueError(f"the {self.name} modality does not take system-provided atoms")

    # -- replay and memory citations (bench/systems/replay.py, bench/systems/credit/provenance.py)
    def replay_units(self, segments: pd.DataFrame) -> pd.DataFrame:
        """One source's events for a replay, in order: its finest units (a turn, a page, a
        cue, a file, a screenshot, a photo) as :func:`unit_frame` rows."""
        raise NotImplementedError

    def cited_units(self, extent: dict, segments: pd.DataFrame) -> pd.DataFrame:
        """The units a memory's citation of `extent` (atom-extent terms) covers in one source,
        as :func:`unit_frame` rows; each unit's extent is also a region of the modality (its
        support is judged on its own text). Raises ValueError (one line) when the extent is
        malformed or does not lie within the source."""
        raise NotImplementedError

    # -- the report ----------------------------------------------------------------------
    def unreadable_gold(self, entries: list[dict], segments: pd.DataFrame) -> dict[str, Any] | None:
        """Answerable entries of this modality whose gold holds nothing to retrieve by text,
        as {"answerable": n, "entries": [{query_id, ...}]}, or None when the modality
        has no such notion (the default)."""
        return None

    def unreadable_gold_lines(self, found: dict[str, Any]) -> list[str]:
        """Markdown lines of reports/dev.md for what `unreadable_gold` found ([] by default)."""
        return []

    def pictures(self, query: dict[str, Any], files: Any, segments: dict[str, pd.DataFrame]) -> str:
        """The HTML fragment of pictures for one drill-down query of reports/dev.html ('' by
        default). `files` is bench.reporting.thumbnails.CorpusFiles; `segments` maps a
        source id to its parsed segments. Raises OSError, ValueError or RuntimeError on a
        file that cannot be decoded (the caller turns it into a one-line note)."""
        return ""

@dataclass
class ImportResult:
    """What an importer produced: entries in spec order plus rows it could not use."""

    entries: list[dict]
    excluded: list[dict] = field(default_factory=list)  # {item, reason}
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CorpusFile:
    """One file a dataset needs, as the fetch stage lists it in the manifest."""

    source_id: str
    path: str  # path inside the upstream repository (archive members: "a.zip!/member")
    sha256: str | None = None  # pinned hash where known
    bytes: int | None = None


class Dataset:
    """Base class of a registered dataset; one instance per data set."""

    key: ClassVar[str]  # short name: source_id prefix and set file name
    name: ClassVar[str]  # origin.dataset in the set entries
    repo: ClassVar[str]  # upstream repository (owner/name)
    revision: ClassVar[str]  # pinned commit
    license: ClassVar[str]
    annotation_source: ClassVar[str]  # who made the gold
    annotation_is_human: ClassVar[bool]
    modality: ClassVar[str]
    mirror_key: ClassVar[str]  # folder name under a mirror root
    url_template: ClassVar[str] = "https://raw.githubusercontent.com/{repo}/{revision}/{path}"
    holders: ClassVar[str]  # how holders are assigned (documentation)
    observed_at_rule: ClassVar[str]  # how observed_at is assigned (documentation)
    caveats: ClassVar[str] = ""
    annotation_files: ClassVar[tuple[str, ...]]  # upstream files that hold the gold

    def url(self, path: str) -> str:
        outer = path.split("!/", 1)[0]
        return self.url_template.format(repo=self.repo, revision=self.revision, path=outer)

    def corpus_files(self, annotation_dir: Path) -> list[CorpusFile]:
        """Every corpus file the annotations name (from the annotations, not the mirror)."""
        raise NotImplementedError

    def pins(self) -> dict[str, tuple[str, int]]:
        """path -> (sha256, bytes) known for this revision."""
        return {}

    def file_of(self, source_id: str) -> str | None:
        """Manifest path of the file that holds `source_id`."""
        raise NotImplementedError

    def sources_of(self, entry: dict) -> list[str]:
        """Source ids an entry needs in the corpus (gold sources by default)."""
        return sorted({g["source_id"] for g in entry.get("gold", []) if isinstance(g, dict) and "source_id" in g})

    def extract(self, files: dict[str, Path], **options: Any) -> pd.DataFrame:
        """Parse the present corpus files (manifest path -> local path) into segments.

        `options` are params.yaml `extraction.<modality>` (checked by bench.params); a data
        set takes the ones its modality declares there."""
        raise NotImplementedError

    def import_set(self, mirror_dir: Path) -> ImportResult:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "dataset": self.name,
            "repo": self.repo,
            "revision": self.revision,
            "license": self.license,
            "annotation_source": self.annotation_source,
            "annotation_is_human": self.annotation_is_human,
            "modality": self.modality,
            "holders": self.holders,
            "observed_at": self.observed_at_rule,
            "caveats": self.caveats,
        }


def extent_json(extent: dict[str, Any]) -> str:
    return json.dumps(extent, sort_keys=True, separators=(",", ":"))


PINS_DIR = Path(__file__).resolve().parent.parent / "corpus" / "pins"


def load_pins(mirror_key: str) -> dict[str, tuple[str, int]]:
    """Pinned sha256 and size of upstream files, recorded in bench/corpus/pins/<key>.json.

    Read once per process (fetch asks for every file; the screenshot pins alone are
    87 KB of JSON); callers get a shared mapping and must not change it.
    """
    return _pins_cached(str(PINS_DIR / f"{mirror_key}.json"))


@functools.cache
def _pins_cached(path: str) -> dict[str, tuple[str, int]]:
    if not Path(path).exists():
        return {}
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {p: (v[0], int(v[1])) for p, v in data["files"].items()}


TEST_SHARE = 0.30


def assign_splits(groups: list[str], salt: str, test_share: float = TEST_SHARE) -> dict[str, str]:
    """Exactly round(test_share * n) groups go to test, chosen by a salted hash order.

    Deterministic (no RNG, no dependence on input order), and grouped: callers split
    documents or conversations, never single questions of one document.
    """
    import hashlib

    unique = sorted(set(groups))
    order = sorted(unique, key=lambda g: hashlib.sha256(f"{salt}\x00{g}".encode()).hexdigest())
    n_test = round(test_share * len(unique))
    test = set(order[:n_test])
    return {g: ("test" if g in test else "dev") for g in unique}


# -- vectorised overlap (gold resolution, see bench/gold/resolve.py) ----------------------

def overlap_pairs_per_region(modality: Modality, regions: pd.DataFrame, atoms: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
    """Reference join: `modality.overlap` called once per region on its source's atoms.

    `regions` has columns source_id and region (the region dict); `atoms` holds the
    modality's atoms; `segments` the segments of (at least) their sources. Returns
    (region_row, atom_row) positions of every overlapping pair, by region then atom.
    """
    by_source = atoms.groupby("source_id", sort=False).indices
    segs_by_source = segments.groupby("source_id", sort=False).indices if len(segments) else {}
    empty = pd.DataFrame()
    r_out: list[np.ndarray] = []
    a_out: list[np.ndarray] = []
    for r, (sid, region) in enumerate(zip(regions["source_id"].tolist(), regions["region"].tolist(), strict=True)):
        pos = by_source.get(sid)
        if pos is None or not len(pos):
            continue
        seg_pos = segs_by_source.get(sid)
        seg = segments.iloc[seg_pos] if seg_pos is not None else empty
        hit = np.asarray(modality.overlap(region, atoms.iloc[pos], seg), dtype=bool)
        a_out.append(pos[hit])
        r_out.append(np.full(int(hit.sum()), r, dtype=np.int64))
    if not r_out:
        return pairs_frame([], [])
    return pairs_frame(np.concatenate(r_out), np.concatenate(a_out))


def place_regions_per_region(modality: Modality, regions: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
    """Reference placement: `modality.region_extent` called once per region on its source's segments."""
    by_source = segments.groupby("source_id", sort=False).indices if len(segments) else {}
    frames: dict[str, pd.DataFrame] = {}  # each source's segments, cut once
    rows = []
    for sid, region in zip(regions["source_id"].tolist(), regions["region"].tolist(), strict=True):
        pos = by_source.get(sid)
        if pos is not None and sid not in frames:
            frames[sid] = segments.iloc[pos]
        box = modality.region_extent(region, frames[sid]) if pos is not None and len(pos) else None
        rows.append(("", np.nan, np.nan, np.nan, np.nan) if box is None else (str(box[0]), *(float(v) for v in box[1:])))
    return pd.DataFrame(rows, columns=PLACED).astype({"x0": float, "x1": float, "y0": float, "y1": float})


def extent_ints(extent: dict, keys: tuple[str, ...], minimum: int) -> list[int]:
    """The integer values of `keys` in a system atom's extent, each >= `minimum` (ValueError otherwise)."""
    vals = [extent[k] for k in keys]
    for k, v in zip(keys, vals, strict=True):
        if not is_int(v) or v < minimum:
            raise ValueError(f"{k} must be an integer >= {minimum}, got {v!r}")
    return vals


def extent_range(extent: dict, single: str, lo: str, hi: str, minimum: int) -> tuple[int, int]:
    """An inclusive integer range given as {single} or {lo, hi} (system atom extents)."""
    if set(extent) == {single}:
        (v,) = extent_ints(extent, (single,), minimum)
        return v, v
    if set(extent) == {lo, hi}:
        a, b = extent_ints(extent, (lo, hi), minimum)
        if a > b:
            raise ValueError(f"{lo} {a} is after {hi} {b}")
        return a, b
    raise ValueError(f"extent must have keys {{{single}}} or {{{lo}, {hi}}}, got {{{', '.join(sorted(extent))}}}")


def short(value: Any, limit: int = 80) -> str:
    """A value for a one-line message: its JSON (or the string), cut at `limit` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def source_size(segments: pd.DataFrame | None) -> tuple[int, int]:
    """(width, height) of a picture source from its segments; (-1, -1) when unknown."""
    if segments is None or not len(segments) or "width" not in segments:
        return -1, -1
    return int(segments["width"].iloc[0]), int(segments["height"].iloc[0])


UNIT_COLUMNS = ["extent", "text", "observed_at"]


def unit_frame(extents: list[dict[str, Any]], texts: Any, observed: Any) -> pd.DataFrame:
    """Units of one source (Modality.replay_units, cited_units): extent (a dict in atom-extent
    terms, also a region), text, observed_at."""
    frame = pd.DataFrame({"extent": pd.Series(extents, dtype=object), "text": [str(t) for t in texts]})
    frame["observed_at"] = pd.to_datetime(pd.Series(list(observed), dtype=object), utc=True) if len(frame) else pd.Series(
        [], dtype="datetime64[ns, UTC]")
    return frame[UNIT_COLUMNS]
