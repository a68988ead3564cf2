"""Pandera schema of annotation entries (spec b-2, sections 1-3).

Entries are nested JSON; `flatten` turns them into one row each, with the nested
problems Pandera cannot see directly (field sets, gold structure, region shapes)
pre-computed into `*_problem` columns that the schema requires to be empty. Every
failure then comes out of one lazy Pandera validation as a row of its failure-cases
table, which `failures` maps back to file, line and query_id.
"""

from __future__ import annotations

import math
import unicodedata
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pandera.pandas as pa

from bench.corpus_sources import dataset_by_name
from bench.modalities import modalities

ENTRY_FIELDS = ("query_id", "modality", "question", "answer", "answer_format", "gold", "scope", "as_of", "unanswerable", "origin", "split")
SCOPE_FIELDS = ("holder", "session", "scenario")
ORIGIN_FIELDS = ("dataset", "revision", "item", "license")
GOLD_FIELDS = ("source_id", "region")
ANSWER_FORMATS = ("str", "int", "float", "list", "none")
SPLITS = ("dev", "test")


def _field_problem(obj: dict, expected: tuple[str, ...], where: str) -> str:
    keys = set(obj)
    missing = [f for f in expected if f not in keys]
    extra = sorted(keys - set(expected))
    if missing:
        return f"missing field {where}{missing[0]}"
    if extra:
        return f"unknown field {where}{extra[0]}"
    return ""


def entry_field_problem(entry: Any) -> str:
    if not isinstance(entry, dict):
        return f"entry must be a JSON object, got {type(entry).__name__}"
    problem = _field_problem(entry, ENTRY_FIELDS, "")
    if problem:
        return problem
    for name, fields in (("scope", SCOPE_FIELDS), ("origin", ORIGIN_FIELDS)):
        if not isinstance(entry[name], dict):
            return f"{name} must be an object"
        problem = _field_problem(entry[name], fields, f"{name}.")
        if problem:
            return problem
    return ""


def gold_problem(entry: dict) -> str:
    """Structure of gold and each region's shape against the entry's modality."""
    gold = entry.get("gold")
    if not isinstance(gold, list):
        return f"gold must be a list, got {type(gold).__name__}"
    modality = modalities().get(str(entry.get("modality")))
    for i, g in enumerate(gold):
        if not isinstance(g, dict):
            return f"gold[{i}] must be an object"
        problem = _field_problem(g, GOLD_FIELDS, f"gold[{i}].")
        if problem:
            return problem
        if not isinstance(g["source_id"], str) or not g["source_id"]:
            return f"gold[{i}].source_id must be a non-empty string"
        if modality is not None:
            shape = modality.check_region_shape(g["region"])
            if shape:
                return f"gold[{i}].region: {shape}"
    return ""


#: the instants pandas can hold at nanosecond resolution (1677-09-21 .. 2262-04-11, UTC)
TIMESTAMP_MIN = pd.Timestamp.min.tz_localize("UTC").to_pydatetime(warn=False)
TIMESTAMP_MAX = pd.Timestamp.max.tz_localize("UTC").to_pydatetime(warn=False)


def id_problem(value: Any, name: str = "query_id") -> str:
    """An id must be a non-empty string without whitespace or control characters
    (ids are one field of a TREC run/qrels line: a space, tab or newline breaks it)."""
    if not isinstance(value, str) or not value:
        return f"{name} must be a non-empty string"
    bad = next((c for c in value if c.isspace() or unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")), None)
    if bad is not None:
        return f"{name} holds whitespace or a control character ({bad!a} at position {value.index(bad)})"
    return ""


def moment_problem(moment: datetime, name: str) -> str:
    """A zoned date-time pandas cannot represent at nanosecond resolution (it would crash
    every later timestamp comparison) is refused, naming the range."""
    try:
        utc = moment.astimezone(UTC)
    except (OverflowError, ValueError):
        utc = None
    if utc is None or not (TIMESTAMP_MIN <= utc <= TIMESTAMP_MAX):
        return f"{name} {moment.isoformat()} is outside the range pandas can represent ({TIMESTAMP_MIN:%Y-%m-%d} .. {TIMESTAMP_MAX:%Y-%m-%d} UTC)"
    return ""


def as_of_problem(value: Any) -> str:
    if not isinstance(value, str):
        return f"as_of must be an ISO 8601 string, got {type(value).__name__}"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return "as_of is not an ISO 8601 date-time"
    if moment.tzinfo is None or moment.utcoffset() is None:
        return "as_of has no timezone (naive date-time)"
    return moment_problem(moment, "as_of")


def surrogate_path(value: Any, where: str = "") -> str | None:
    """Dotted path of the first string (key or value) holding a lone surrogate, or None.

    JSON allows escapes such as \\ud800 that decode to a lone surrogate: such text
    cannot be written as UTF-8 and crashed every later stage."""
    if isinstance(value, str):
        return where or "<value>" if any("\ud800" <= c <= "\udfff" for c in value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            found = surrogate_path(k, f"{where}.<key>" if where else "<key>") or surrogate_path(v, f"{where}.{k}" if where else str(k))
            if found:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = surrogate_path(v, f"{where}[{i}]")
            if found:
                return found
    return None


def text_problem(entry: Any) -> str:
    found = surrogate_path(entry)
    return f"{found} holds a lone surrogate (a \\ud800-\\udfff escape): not encodable as UTF-8" if found else ""


def printable(value: Any) -> Any:
    """The value with every string made safe to print and write as UTF-8 (lone
    surrogates shown as escapes), nested dicts and lists included."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8") if surrogate_path(value) else value
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable(v) for v in value]
    return value


def dataset_problem(origin: Any) -> str:
    name = origin.get("dataset") if isinstance(origin, dict) else None
    ds = dataset_by_name(name) if isinstance(name, str) else None
    if ds is None:
        return "dataset not registered in bench/corpus_sources.py"
    if not ds.annotation_is_human or not ds.annotation_source.lower().startswith("human"):
        return "dataset's annotation_source is not third-party human annotation"
    return ""


def answer_problem(entry: dict) -> str:
    answer = entry.get("answer")
    if isinstance(answer, float) and not math.isfinite(answer):
        return "answer is not a finite number"
    if entry.get("unanswerable") is True and answer is not None:
        return "unanswerable entry must have answer null"
    return ""


def flatten(entry: Any, file: str, line: int) -> dict:
    """One row per entry; nested structure problems land in *_problem columns."""
    fp = entry_field_problem(entry)
    e = entry if isinstance(entry, dict) else {}
    scope: dict = e["scope"] if isinstance(e.get("scope"), dict) else {}
    origin: dict = e["origin"] if isinstance(e.get("origin"), dict) else {}
    gold = e.get("gold")
    tp = text_problem(entry)
    if tp:  # shown in the table and hashed for uniqueness: keep only printable text
        e = printable(e)
    return {
        "file": file,
        "line": line,
        "query_id": e.get("query_id"),
        "modality": e.get("modality"),
        "question": e.get("question"),
        "answer_format": e.get("answer_format"),
        "unanswerable": e.get("unanswerable"),
        "n_gold": len(gold) if isinstance(gold, list) else -1,
        "scope_holder": scope.get("holder"),
        "as_of": e.get("as_of"),
        "origin_dataset": origin.get("dataset"),
        "origin_revision": origin.get("revision"),
        "origin_item": origin.get("item"),
        "split": e.get("split"),
        "field_problem": fp,
        "gold_problem": "" if fp else gold_problem(e),
        "as_of_problem": "" if fp else as_of_problem(e.get("as_of")),
        "dataset_problem": "" if fp else dataset_problem(origin),
        "answer_problem": "" if fp else answer_problem(e),
        "text_problem": tp,
        "id_problem": id_problem(e.get("query_id")) if _nonempty_str(e.get("query_id")) else "",
    }


def _nonempty_str(v: Any) -> bool:
    return isinstance(v, str) and v.strip() != ""


def _empty(v: Any) -> bool:
    return v == ""


def entry_schema() -> pa.DataFrameSchema:
    names = sorted(modalities())
    return pa.DataFrameSchema(
        {
            "query_id": pa.Column(object, [pa.Check(_nonempty_str, element_wise=True, error="query_id must be a non-empty string")], unique=True, report_duplicates="all", nullable=True),
            "id_problem": pa.Column(object, pa.Check(_empty, element_wise=True, error="query_id format"), required=False),
            "modality": pa.Column(object, pa.Check(lambda v: v in names, element_wise=True, error=f"modality must be one of {names}"), nullable=True),
            "question": pa.Column(object, pa.Check(_nonempty_str, element_wise=True, error="question must be a non-empty string"), nullable=True),
            "answer_format": pa.Column(object, pa.Check(lambda v: v in ANSWER_FORMATS, element_wise=True, error=f"answer_format must be one of {list(ANSWER_FORMATS)}"), nullable=True),
            "unanswerable": pa.Column(object, pa.Check(lambda v: isinstance(v, bool), element_wise=True, error="unanswerable must be true or false"), nullable=True),
            "scope_holder": pa.Column(object, pa.Check(_nonempty_str, element_wise=True, error="scope.holder must be a non-empty string"), nullable=True),
            "origin_revision": pa.Column(object, pa.Check(_nonempty_str, element_wise=True, error="origin.revision must be a non-empty string"), nullable=True),
            "origin_item": pa.Column(object, pa.Check(_nonempty_str, element_wise=True, error="origin.item must be a non-empty string"), nullable=True),
            "split": pa.Column(object, pa.Check(lambda v: v in SPLITS, element_wise=True, error="split must be dev or test"), nullable=True),
            "field_problem": pa.Column(object, pa.Check(_empty, element_wise=True, error="fields")),
            "gold_problem": pa.Column(object, pa.Check(_empty, element_wise=True, error="gold/region shape")),
            "as_of_problem": pa.Column(object, pa.Check(_empty, element_wise=True, error="as_of")),
            "dataset_problem": pa.Column(object, pa.Check(_empty, element_wise=True, error="dataset registration")),
            "answer_problem": pa.Column(object, pa.Check(_empty, element_wise=True, error="answer")),
            "text_problem": pa.Column(object, pa.Check(_empty, element_wise=True, error="text encoding"), required=False),
            "corpus_problem": pa.Column(object, pa.Check(_empty, element_wise=True, error="corpus"), required=False),
        },
        checks=[
            pa.Check(
                lambda df: (df["n_gold"] == 0) == (df["unanswerable"] == True),  # noqa: E712
                error="gold must be empty if and only if unanswerable",
            ),
        ],
        strict=False,
    )


#: columns whose check is about another column's raw value (for the failure table)
PROBLEM_COLUMNS = ("field_problem", "gold_problem", "as_of_problem", "dataset_problem", "answer_problem", "corpus_problem", "id_problem", "text_problem")


def failures(frame: pd.DataFrame, schema: pa.DataFrameSchema | None = None) -> pd.DataFrame:
    """Validate lazily; return a table file, line, query_id, check, value (empty if valid)."""
    schema = schema or entry_schema()
    columns = ["file", "line", "query_id", "check", "value"]
    try:
        schema.validate(frame, lazy=True)
        return pd.DataFrame(columns=columns)
    except pa.errors.SchemaErrors as err:
        cases = err.failure_cases
    rows = []
    for _, case in cases.iterrows():
        idx = case["index"]
        if idx is None or (isinstance(idx, float) and math.isnan(idx)):
            continue
        idx = int(idx)
        src = frame.loc[idx]
        col = case["column"]
        check = str(case["check"])
        if col in PROBLEM_COLUMNS:
            value = str(case["failure_case"])
        elif isinstance(col, str) and col in frame.columns:
            value = _show(src[col])
            check = f"{col}: {check}" if not check.startswith(col.split("_")[0]) else check
        else:  # dataframe-wide check: one failure row per column; keep one per entry
            value = f"unanswerable={_show(src['unanswerable'])}, gold has {src['n_gold']} regions"
        if check.startswith("field_uniqueness"):
            check = "query_id must be unique across all set files"
        rows.append({"file": src["file"], "line": int(src["line"]), "query_id": _show(src["query_id"]), "check": check, "value": value})
    out = pd.DataFrame(rows, columns=columns).drop_duplicates()
    return out.sort_values(["file", "line", "check"], kind="stable").reset_index(drop=True)


def _show(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "null"
    return str(v) if not isinstance(v, str) else v
