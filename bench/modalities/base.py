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
import pyarrow as pa
import pyarrow.compute as pc

SEGMENT_COLUMNS = ["source_id", "dataset", "modality", "seq", "text", "holder", "observed_at"]
ATOM_COLUMNS = ["atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at", "extent"]


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) and np.isfinite(value)


class Modality:
    """Base class; subclasses live one folder each under bench/modalities/."""

    name: ClassVar[str]
    #: allowed key sets of a region, e.g. ({"page"}, {"page", "block"})
    region_forms: ClassVar[tuple[frozenset[str], ...]]
    #: chunking strategies this modality offers; the first is the default
    strategies: ClassVar[tuple[str, ...]]

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

    def overlap_pairs(self, regions: pd.DataFrame, atoms: pd.DataFrame, segments: pd.DataFrame) -> pd.DataFrame:
        """Every (region_row, atom_row) pair that overlaps, by the modality's `overlap`.

        `regions` has columns source_id and region (the region dict); `atoms` holds the
        modality's atoms; `segments` the segments of (at least) their sources.
        Modalities override this with a vectorised join giving the same pairs (gold
        resolution, bench/evaluation/resolve.py); this default calls `overlap` once per
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

    # -- the report ----------------------------------------------------------------------
    def unreadable_gold(self, entries: list[dict], segments: pd.DataFrame) -> dict[str, Any] | None:
        """Answerable entries of this modality whose gold holds nothing to retrieve by text,
        as {"answerable": n, "entries": [{query_id, ...}]}, or None when the modality
        has no such notion (the default)."""
        return None

    def intersection(self, region: dict, atoms: pd.DataFrame, segments: pd.DataFrame) -> np.ndarray:
        """Per atom (all of one source): the amount of the region it covers, in `extent_unit`."""
        box = self.region_extent(region, segments)
        if box is None or not len(atoms):
            return np.zeros(len(atoms), dtype=float)
        ext = self.atom_extents(atoms)
        part, x0, x1, y0, y1 = box
        w = np.minimum(ext["x1"].to_numpy(float), x1) - np.maximum(ext["x0"].to_numpy(float), x0)
        h = np.minimum(ext["y1"].to_numpy(float), y1) - np.maximum(ext["y0"].to_numpy(float), y0)
        same = ext["part"].to_numpy(dtype=object) == part
        return np.where(same, np.clip(w, 0, None) * np.clip(h, 0, None), 0.0)


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


def split_of(group: str, salt: str, test_share: float = TEST_SHARE) -> str:
    """Deterministic split of a group (document, conversation, ...): about `test_share` test.

    All queries of one group share a split, so a document never feeds both splits.
    """
    import hashlib

    digest = hashlib.sha256(f"{salt}\x00{group}".encode()).digest()
    value = int.from_bytes(digest[:8], "big") / 2**64
    return "test" if value < test_share else "dev"


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


def interval_extents(x0: Any, x1: Any, part: Any = "") -> pd.DataFrame:
    """Extent boxes of 1-D atoms: [x0, x1) on the line y = [0, 1) of `part`."""
    lo = np.asarray(x0, dtype=float)
    hi = np.asarray(x1, dtype=float)
    parts = np.broadcast_to(np.asarray(part, dtype=object), lo.shape)
    return pd.DataFrame({"part": parts, "x0": lo, "x1": hi, "y0": np.zeros_like(lo), "y1": np.ones_like(lo)})


# -- vectorised overlap (gold resolution, see bench/evaluation/resolve.py) ----------------------

PAIR_COLUMNS = ["region_row", "atom_row"]


def pairs_frame(region_rows: Any, atom_rows: Any) -> pd.DataFrame:
    return pd.DataFrame({
        "region_row": np.asarray(region_rows, dtype=np.int64),
        "atom_row": np.asarray(atom_rows, dtype=np.int64),
    })


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


def _arrow_strings(values: Any) -> pa.Array | pa.ChunkedArray:
    """Strings as a pyarrow array (zero-copy for pandas' Arrow-backed ``str`` columns)."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    if isinstance(values, pd.Series | pd.Index):
        return pa.array(values, from_pandas=True)
    return pa.array(np.asarray(values, dtype=object), from_pandas=True)


def group_codes(a_group: Any, r_group: Any) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of the atoms' and the regions' groups (e.g. source ids) in one space.

    The atoms' values are dictionary-encoded once (pyarrow, in C), the regions' looked
    up in that dictionary; a region group no atom has gets -1 (it has no candidates).
    Integer arrays are codes already and are returned as they are.
    """
    a_arr, r_arr = np.asarray(a_group) if not isinstance(a_group, pd.Series) else a_group, r_group
    if isinstance(a_arr, np.ndarray) and a_arr.dtype.kind in "iu":
        return a_arr.astype(np.int64, copy=False), np.asarray(r_group).astype(np.int64, copy=False)
    encoded = pc.dictionary_encode(_arrow_strings(a_group))
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks() if encoded.num_chunks != 1 else encoded.chunk(0)
    a_code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    r_code = pc.index_in(_arrow_strings(r_arr), value_set=encoded.dictionary).fill_null(-1)
    return a_code, r_code.to_numpy(zero_copy_only=False).astype(np.int64)


def _int_valued(values: np.ndarray) -> bool:
    return values.dtype.kind in "iu" or (values.dtype.kind == "f" and bool(np.isfinite(values).all()) and bool((values == np.round(values)).all()))


def candidate_pairs(
    r_group: Any, r_lo: Any, r_hi: Any, a_group: Any, a_lo: Any, a_hi: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted-array interval join: (region, atom) positions with the same group and
    a_lo <= r_hi and a_hi >= r_lo (closed bounds, so a superset of every half-open or
    point rule; callers apply their exact rule to the pairs).

    Groups are strings (coded by `group_codes`) or integer codes already (a region code
    of -1 matches nothing). Integer bounds are used as they are; other values are
    replaced by their dense ranks over all four arrays (order and ties kept exactly,
    floats included). Offset by the group's code, one `searchsorted` per side finds
    each region's candidate run among the atoms sorted by (group, a_lo); the running
    maximum of a_hi bounds the run from below. Cost is O((R + A) log(R + A) + pairs)
    for atoms of similar length within a group.
    """
    a_code, r_code = group_codes(a_group, r_group)
    bounds = [np.asarray(v) for v in (a_lo, a_hi, r_lo, r_hi)]
    n_a, n_r = len(a_code), len(r_code)
    if all(_int_valued(v) for v in bounds) and (n_a + n_r):
        ints = [v.astype(np.int64) for v in bounds]
        low = min(int(v.min()) for v in ints if len(v))
        ra_lo, ra_hi, rr_lo, rr_hi = (v - low for v in ints)
        m = np.int64(max(int(v.max()) for v in (ra_lo, ra_hi, rr_lo, rr_hi) if len(v)) + 2)
        if (int(max(a_code.max(initial=0), r_code.max(initial=0))) + 2) * int(m) >= 2**62:
            _, ranks = np.unique(np.concatenate(ints), return_inverse=True)
            ra_lo, ra_hi = ranks[:n_a], ranks[n_a: 2 * n_a]
            rr_lo, rr_hi = ranks[2 * n_a: 2 * n_a + n_r], ranks[2 * n_a + n_r:]
            m = np.int64(len(ranks) + 1)
    else:
        values = np.concatenate([v.astype(float) for v in bounds])
        _, ranks = np.unique(values, return_inverse=True)
        ranks = ranks.astype(np.int64)
        ra_lo, ra_hi = ranks[:n_a], ranks[n_a: 2 * n_a]
        rr_lo, rr_hi = ranks[2 * n_a: 2 * n_a + n_r], ranks[2 * n_a + n_r:]
        m = np.int64(len(values) + 1)
    lo_all = a_code * m + ra_lo
    order = np.argsort(lo_all, kind="stable")  # by (group, a_lo): one key, one sort
    lo_key = lo_all[order]
    hi_key = np.maximum.accumulate(a_code[order] * m + ra_hi[order]) if n_a else np.zeros(0, np.int64)
    first = np.searchsorted(hi_key, r_code * m + rr_lo, side="left")
    last = np.searchsorted(lo_key, r_code * m + rr_hi, side="right")
    counts = np.where(r_code >= 0, np.clip(last - first, 0, None), 0)
    total = int(counts.sum())
    r_idx = np.repeat(np.arange(n_r, dtype=np.int64), counts)
    starts = np.repeat(first - (np.cumsum(counts) - counts), counts)
    a_idx = order[starts + np.arange(total, dtype=np.int64)] if total else np.zeros(0, np.int64)
    return r_idx, a_idx.astype(np.int64)


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
