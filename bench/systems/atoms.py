"""The atoms a system serves: the contract for system-provided atoms, and the served set.

A system that does its own chunking hands the harness its atoms as JSONL (one object
per line) or Parquet, one row per atom:

| field | type | meaning |
|---|---|---|
| atom_id | non-empty string, unique | the id the system returns in its hits |
| source_id | non-empty string | the harness source it was cut from (e.g. `locomo:conv-26:session-3`) |
| modality | one of the harness's modalities | must agree with the source's |
| extent | object (or its JSON text) | where the atom lies, in the modality's region terms (below) |
| observed_at | ISO 8601 time with a timezone | when the memory was formed |
| holder | non-empty string | whose memory it is |
| text | string, optional | what the atom says (the built-in systems need it) |
| source_file | string, optional | ignored on input (the harness writes it for command systems) |

Extents per modality (inclusive ranges unless stated):

| modality | extent |
|---|---|
| pdf | `{"page_start": p, "page_end": q}` or `{"page": p}` (pages 1-based) |
| conversation | `{"turn_start": a, "turn_end": b}` or `{"turn": t}` |
| code | `{"path": "...", "line_start": a, "line_end": b}` or `{"path": "...", "line": n}` |
| video | `{"t_start": s, "t_end": e}` (seconds, half-open) |
| ui_screenshot | `{"bbox": [x0, y0, x1, y1]}` (pixels, half-open) |
| image | `{}` (the whole image) |

`atoms_from_extents` turns valid rows into the frames each modality's `overlap`
reads (its ATOM_<MOD>_COLUMNS), so gold regions resolve against the system's own
atoms with the same rule as against the harness's chunks. Each modality reads its
own extents (`Modality.atom_from_extent`, on its source's segments as
`Modality.extent_segments` gives them: a PDF atom's character span is that of its
pages in the parsed document).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pa

from bench.annotations.schema import TIMESTAMP_MAX, TIMESTAMP_MIN, id_problem
from bench.io import LineError, iter_jsonl, short
from bench.modalities import modalities
from bench.modalities.base import extent_json

CONTRACT_FIELDS = ["atom_id", "source_id", "modality", "extent", "observed_at", "holder"]
OPTIONAL_FIELDS = ["text", "source_file"]  # source_file: written by the harness for command systems, ignored on input


class AtomsError(ValueError):
    """System-provided atoms break the contract; str() lists the first problems, one per line."""


def atom_columns(modality: str) -> list[str]:
    """ATOM_<MOD>_COLUMNS of a modality's module (the columns its chunker writes)."""
    module = importlib.import_module(f"bench.modalities.{modality}.modality")
    found = [v for k, v in vars(module).items() if k.startswith("ATOM_") and k.endswith("_COLUMNS")]
    if len(found) != 1:
        raise RuntimeError(f"bench.modalities.{modality}.modality must define exactly one ATOM_<MOD>_COLUMNS")
    return list(found[0])


# --------------------------------------------------------------------------- reading


def read_atoms_file(path: Path) -> pd.DataFrame:
    """Rows of a JSONL or Parquet atoms file, with a `_line` column (JSONL line / Parquet row)."""
    if not path.is_file():
        raise AtomsError(f"{path}: system.atoms: no such file")
    if path.suffix.lower() in (".parquet", ".pq"):
        df = pd.read_parquet(path)
        return df.assign(_line=np.arange(1, len(df) + 1))
    rows = []
    try:
        for lineno, obj in iter_jsonl(path):
            if not isinstance(obj, dict):
                raise AtomsError(f"{path}:{lineno}: <line>: an atom must be a JSON object, got {type(obj).__name__}")
            rows.append({**obj, "_line": lineno})
    except LineError as exc:
        raise AtomsError(str(exc)) from None
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the contract


def _iso_with_tz(value: Any) -> bool:
    if isinstance(value, pd.Timestamp):
        return value.tzinfo is not None
    if not isinstance(value, str):
        return False
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError):
        return False
    # within pandas' nanosecond range, or every later comparison with as_of crashes (bench.annotations.schema)
    return ts.tzinfo is not None and not pd.isna(ts) and TIMESTAMP_MIN <= ts.to_pydatetime(warn=False) <= TIMESTAMP_MAX


def _extent_object(value: Any) -> bool:
    if isinstance(value, dict):
        return True
    if isinstance(value, str):
        try:
            return isinstance(json.loads(value), dict)
        except json.JSONDecodeError:
            return False
    return False


def _nonempty_str(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def contract_schema() -> pa.DataFrameSchema:
    known = sorted(modalities())
    return pa.DataFrameSchema(
        {
            "atom_id": pa.Column(object, [pa.Check(_nonempty_str, element_wise=True, error="non-empty string"),
                                          pa.Check(lambda v: not id_problem(v, "atom_id"), element_wise=True, error="no whitespace or control character")],
                                 unique=True, nullable=False),
            "source_id": pa.Column(object, [pa.Check(_nonempty_str, element_wise=True, error="non-empty string")], nullable=False),
            "modality": pa.Column(object, [pa.Check(lambda v: v in known, element_wise=True, error=f"one of {known}")], nullable=False),
            "extent": pa.Column(object, [pa.Check(_extent_object, element_wise=True, error="a JSON object")], nullable=False),
            "observed_at": pa.Column(object, [pa.Check(_iso_with_tz, element_wise=True, error="ISO 8601 time with a timezone")], nullable=False),
            "holder": pa.Column(object, [pa.Check(_nonempty_str, element_wise=True, error="non-empty string")], nullable=False),
            "text": pa.Column(object, [pa.Check(lambda v: isinstance(v, str), element_wise=True, error="a string")], nullable=True, required=False),
        },
        strict=False,
        coerce=False,
    )


def _problems(df: pd.DataFrame, display: str) -> list[str]:
    missing = [c for c in CONTRACT_FIELDS if c not in df.columns]
    if missing:
        return [f"{display}: missing field(s) {missing}; every atom needs {CONTRACT_FIELDS}"]
    extra = sorted(set(df.columns) - set(CONTRACT_FIELDS) - set(OPTIONAL_FIELDS) - {"_line"})
    if extra:
        return [f"{display}: unknown field(s) {extra}; allowed: {CONTRACT_FIELDS + OPTIONAL_FIELDS}"]
    frame = df.astype({c: object for c in df.columns if c != "_line"})
    # timestamps read from Parquet are Timestamps already; strings are checked as text
    try:
        contract_schema().validate(frame.drop(columns="_line"), lazy=True)
    except pa.errors.SchemaErrors as exc:
        out = []
        cases = exc.failure_cases
        for row in cases.itertuples(index=False):
            idx = row.index
            line = int(df["_line"].iloc[int(idx)]) if idx is not None and not pd.isna(idx) else None
            where = f"{display}:{line}" if line is not None else display
            out.append(f"{where}: {row.column}: must be {row.check} (value: {short(row.failure_case)})")
        return out
    return []


def validate_contract(df: pd.DataFrame, display: str) -> pd.DataFrame:
    """Check rows against the contract (Pandera, lazy); raise AtomsError listing problems."""
    problems = _problems(df, display)
    if problems:
        head = "\n".join(problems[:20])
        more = f"\n… {len(problems) - 20} more" if len(problems) > 20 else ""
        raise AtomsError(f"{len(problems)} problem(s) in the system's atoms:\n{head}{more}")
    out = df.copy()
    out["extent"] = [e if isinstance(e, dict) else json.loads(e) for e in out["extent"]]
    out["observed_at"] = pd.to_datetime(out["observed_at"].map(lambda v: pd.Timestamp(v).isoformat()), utc=True, format="ISO8601")
    if "text" not in out.columns:
        out["text"] = ""
    out["text"] = out["text"].fillna("")
    return out


# --------------------------------------------------------------------------- extents -> modality columns
# Each modality turns a contract extent into its own atom columns
# (Modality.extent_segments, Modality.atom_from_extent): nothing here names a modality.


def atoms_from_extents(atoms: pd.DataFrame, segments: pd.DataFrame | None, display: str = "system.atoms") -> dict[str, pd.DataFrame]:
    """Contract rows (validated) -> modality -> frame with that modality's ATOM_<MOD>_COLUMNS.

    Raises AtomsError for an extent that does not fit its modality, or an atom whose
    source the corpus knows under another modality.
    """
    segs: dict[str, pd.DataFrame] = {}
    seg_modality: dict[str, str] = {}
    dataset_of: dict[str, str] = {}
    if segments is not None and len(segments):
        for sid, grp in segments.groupby("source_id", sort=False):
            seg_modality[str(sid)] = str(grp["modality"].iloc[0])
            dataset_of[str(sid)] = str(grp["dataset"].iloc[0])
            segs[str(sid)] = grp
    mods = modalities()
    laid: dict[str, pd.DataFrame] = {}
    problems: list[str] = []
    rows: dict[str, list[dict]] = {}
    lines = atoms["_line"].tolist() if "_line" in atoms.columns else [None] * len(atoms)
    for line, row in zip(lines, atoms.drop(columns=["_line"], errors="ignore").itertuples(index=False), strict=True):
        where = f"{display}:{line}" if line is not None else display
        sid, modality = str(row.source_id), str(row.modality)
        known = seg_modality.get(sid)
        if known is not None and known != modality:
            problems.append(f"{where}: modality: source {sid} is {known}, the atom says {modality}")
            continue
        seg = segs.get(sid)
        if seg is not None:
            if sid not in laid:
                laid[sid] = mods[modality].extent_segments(seg)
            seg = laid[sid]
        try:
            cols = mods[modality].atom_from_extent(row.extent, seg)
        except (ValueError, TypeError, KeyError) as exc:
            problems.append(f"{where}: extent: {exc} (value: {short(row.extent)})")
            continue
        cols["extent"] = extent_json(cols["extent"])
        rows.setdefault(modality, []).append({
            "atom_id": str(row.atom_id), "source_id": sid, "dataset": dataset_of.get(sid, sid.split(":", 1)[0]),
            "modality": modality, "text": str(row.text), "holder": str(row.holder), "observed_at": row.observed_at, **cols,
        })
    if problems:
        head = "\n".join(problems[:20])
        more = f"\n… {len(problems) - 20} more" if len(problems) > 20 else ""
        raise AtomsError(f"{len(problems)} problem(s) in the system's atoms:\n{head}{more}")
    out = {}
    for modality, recs in sorted(rows.items()):
        frame = pd.DataFrame(recs, columns=atom_columns(modality))
        frame["observed_at"] = pd.to_datetime(frame["observed_at"], utc=True)
        out[modality] = frame
    return out


def check_against_corpus(atoms: pd.DataFrame, segments: pd.DataFrame | None, display: str = "system.atoms") -> None:
    """A system's atoms must agree with the corpus: known source, its holder, not observed before it.

    `atoms` are validated contract rows (with `_line`). The source's observation time
    is the earliest `observed_at` of its segments. Raises AtomsError with one line
    naming the first bad row (and how many more there are).
    """
    if segments is None or not len(segments) or not {"holder", "observed_at"} <= set(segments.columns):
        return
    observed = pd.to_datetime(segments["observed_at"], utc=True)
    first_seen = observed.groupby(segments["source_id"].astype(str)).min().to_dict()
    holders = segments.groupby(segments["source_id"].astype(str))["holder"].agg(lambda h: set(h.astype(str))).to_dict()
    problems: list[str] = []
    lines = atoms["_line"].tolist() if "_line" in atoms.columns else [None] * len(atoms)
    stamps = pd.to_datetime(atoms["observed_at"], utc=True)
    for line, sid, holder, ts in zip(lines, atoms["source_id"].astype(str), atoms["holder"].astype(str), stamps, strict=True):
        where = f"{display}:{line}" if line is not None else display
        if sid not in first_seen:
            problems.append(f"{where}: source_id: {sid} is not a source of the corpus")
        elif holder not in holders[sid]:
            problems.append(f"{where}: holder: {holder!r} is not the holder of its source {sid} ({', '.join(sorted(holders[sid]))})")
        elif ts < first_seen[sid]:
            problems.append(f"{where}: observed_at: {ts.isoformat()} is before its source {sid} was observed ({first_seen[sid].isoformat()})")
    if problems:
        more = f" (and {len(problems) - 1} more row(s))" if len(problems) > 1 else ""
        raise AtomsError(f"{problems[0]}{more}")


def load_system_atoms(path: Path, segments: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """Read, validate (Pandera contract), check against the corpus and convert a system's atoms file."""
    rows = validate_contract(read_atoms_file(path), str(path))
    frames = atoms_from_extents(rows, segments, str(path))
    check_against_corpus(rows, segments, str(path))
    return frames


def contract_rows(served: dict[str, pd.DataFrame]) -> Iterator[dict[str, Any]]:
    """The served atoms as contract rows (what a command system is given to index)."""
    for modality in sorted(served):
        frame = served[modality]
        observed = pd.to_datetime(frame["observed_at"], utc=True)
        for row, ts in zip(frame[["atom_id", "source_id", "extent", "holder", "text"]].itertuples(index=False), observed, strict=True):
            yield {
                "atom_id": row.atom_id, "source_id": row.source_id, "modality": modality,
                "extent": json.loads(row.extent) if isinstance(row.extent, str) else row.extent,
                "observed_at": ts.isoformat(), "holder": row.holder, "text": "" if row.text is None else str(row.text),
            }
