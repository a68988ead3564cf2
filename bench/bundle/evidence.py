"""What a result rests on, as bundle members, and the evaluation recomputed from them.

:class:`Evidence` holds exactly what :func:`bench.evaluation.evaluate.evaluate_run` reads of one
evaluated split, and how it was called:

=============================  ==================================================================
``entries.jsonl``              the valid entries, each cut to what the evaluation reads: query_id,
                               modality, unanswerable, as_of, scope.holder and its cluster labels
                               (bench.evaluation.stats.clusters; no question, answer or gold)
``invalid.jsonl``              the entries invalid as samples (query_id, file, line, split, modality, reason)
``run/run.parquet``            the system's ranked atoms (query_id, rank, atom code, score)
``run/responses.parquet``      latency, returned count, abstention and confidence per answered query
``run/failures.parquet``       the failed queries and why
``gold/gold.parquet``          the resolved gold: (query_id, gold_idx, atom code) rows
``gold/regions.parquet``       every gold region, typed and placed (bench.gold.table)
``atoms/<modality>.parquet``   the served atoms without their ``text``: ids, sources, holders, times
                               and the places their extents are read from (row i of them, in
                               modality name order: atom code i)
``memories/*.parquet``         the run's memories (rows, credited boxes, hits; empty without them)
``evaluation.json``            the split, the options (k, bootstrap, calibration, thresholds,
                               budget), the run's description and the sha256 of manifest, sets and
                               split lock the run used
=============================  ==================================================================

No text of the corpus and no question or answer of a set is a member: a verifier with the same
mirror and sets checks them by digest (bench.bundle.mirror). :func:`recompute` runs the one
evaluation (evaluate_run, in one block) over these members; nothing here is a second
implementation of a measure.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bench.bundle.signing import BundleError
from bench.bundle.statement import strict_json
from bench.evaluation.blocks import FrameBlocks
from bench.evaluation.evaluate import EvalInputs, EvalOptions, EvalResult, RunDescription, evaluate_run
from bench.evaluation.memory_report import MemoryInputs
from bench.evaluation.stats.clusters import COLUMNS as CLUSTER_COLUMNS
from bench.evaluation.stats.clusters import LABELS, entry_clusters

__all__ = ["ENTRY_FIELDS", "Evidence", "dumps", "evidence_members", "read_evidence", "recompute"]

#: the fields of an entry the evaluation reads (bench.evaluation.evaluate.entries_frame)
ENTRY_FIELDS = ("query_id", "modality", "unanswerable", "as_of")
#: served atom columns never bundled: the corpus's own text
DROPPED_ATOM_COLUMNS = ("text",)
FRAMES = {"run": "run/run.parquet", "responses": "run/responses.parquet", "failures": "run/failures.parquet",
          "gold": "gold/gold.parquet", "regions": "gold/regions.parquet"}
MEMORY_FRAMES = {"rows": "memories/rows.parquet", "boxes": "memories/boxes.parquet", "hits": "memories/hits.parquet"}
ENTRIES, INVALID, EVALUATION, ATOMS = "entries.jsonl", "invalid.jsonl", "evaluation.json", "atoms/"


@dataclass(frozen=True)
class Evidence:
    """One evaluated split's inputs and options (the members in the module docstring)."""

    split: str  # "dev" or "test"
    entries: list[dict[str, Any]]
    invalid: list[dict[str, Any]]
    run: pd.DataFrame
    gold: pd.DataFrame
    regions: pd.DataFrame
    responses: pd.DataFrame
    failures: pd.DataFrame
    served: dict[str, pd.DataFrame]
    memories: MemoryInputs
    sha256: dict[str, Any]
    options: EvalOptions
    description: RunDescription


def dumps(obj: Any) -> bytes:
    """A JSON member: strict (no NaN), numpy scalars as numbers, keys in the order given."""
    return (json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False, default=lambda o: o.item()) + "\n").encode("utf-8")


def _parquet(frame: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    return buf.getvalue()


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in rows).encode("utf-8")


def cut_entry(entry: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """The entry as the evaluation reads it (ENTRY_FIELDS, its scope's holder, and its cluster `labels`:
    who asks the same question, read from the question it no longer carries)."""
    return {**{name: entry[name] for name in ENTRY_FIELDS}, "scope": {"holder": entry["scope"]["holder"]}, LABELS: dict(labels)}


def evidence_members(ev: Evidence) -> dict[str, bytes]:
    """The members of `ev` (module docstring)."""
    labels = entry_clusters(ev.entries).set_index("query_id")
    cut = [cut_entry(e, {c: str(labels.at[str(e["query_id"]), c]) for c in CLUSTER_COLUMNS.values()}) for e in ev.entries]
    out = {ENTRIES: _jsonl(cut), INVALID: _jsonl(list(ev.invalid))}
    out.update({name: _parquet(getattr(ev, field)) for field, name in FRAMES.items()})
    out.update({name: _parquet(getattr(ev.memories, field)) for field, name in MEMORY_FRAMES.items()})
    for modality, frame in sorted(ev.served.items()):
        out[f"{ATOMS}{modality}.parquet"] = _parquet(frame.drop(columns=[c for c in DROPPED_ATOM_COLUMNS if c in frame.columns]))
    out[EVALUATION] = dumps({"split": ev.split, "options": dataclasses.asdict(ev.options),
                             "description": dataclasses.asdict(ev.description), "sha256": ev.sha256})
    return out


def _read_parquet(members: Mapping[str, bytes], name: str) -> pd.DataFrame:
    if name not in members:
        raise BundleError(f"member {name!r} is missing: the evaluation cannot be recomputed without it")
    try:
        return pd.read_parquet(io.BytesIO(members[name]))
    except Exception as exc:
        raise BundleError(f"member {name!r}: not a readable parquet table ({exc.__class__.__name__})") from None


def _read_jsonl(members: Mapping[str, bytes], name: str) -> list[dict[str, Any]]:
    if name not in members:
        raise BundleError(f"member {name!r} is missing: the evaluation cannot be recomputed without it")
    rows = [strict_json(line, f"{name} line {i}") for i, line in enumerate(members[name].splitlines(), 1) if line.strip()]
    if any(not isinstance(r, dict) for r in rows):
        raise BundleError(f"member {name!r}: every line must be a JSON object")
    return rows


def _typed(cls: type, value: Any, where: str) -> Any:
    """The dataclass `cls` from its asdict() form; BundleError naming `where` when fields differ."""
    names = {f.name for f in dataclasses.fields(cls)}
    if not isinstance(value, dict) or set(value) - names:
        raise BundleError(f"{EVALUATION}: {where} is not this harness's {cls.__name__} (fields {sorted(names)})")
    try:
        return cls(**value)
    except TypeError as exc:
        raise BundleError(f"{EVALUATION}: {where}: {exc}") from None


def _options(value: Any) -> EvalOptions:
    """The options, within the bounds params.yaml's `metrics` block has (a bundle cannot ask for a billion resamples)."""
    from bench.params import ParamsError, check_block

    options = _typed(EvalOptions, value, "options")
    budget = {m: a for m, a in (options.budget or {}).items() if a is not None}
    try:
        check_block("metrics", {"k": options.k, "calibration_recall": options.calibration_recall, "budget": budget,
                                "bootstrap_resamples": options.bootstrap_resamples, "bootstrap_seed": options.bootstrap_seed})
    except ParamsError as exc:
        raise BundleError(f"{EVALUATION}: options {str(exc).removeprefix('params.yaml: ')}") from None
    return options


def read_evidence(members: Mapping[str, bytes]) -> Evidence:
    """The Evidence the members hold; BundleError (one line) naming a missing or unreadable member."""
    if EVALUATION not in members:
        raise BundleError(f"member {EVALUATION!r} is missing: the evaluation cannot be recomputed without it")
    how = strict_json(members[EVALUATION], EVALUATION)
    if not isinstance(how, dict) or how.get("split") not in ("dev", "test") or not isinstance(how.get("sha256"), dict):
        raise BundleError(f"{EVALUATION}: needs split (dev or test), options, description and sha256")
    frames = {field: _read_parquet(members, name) for field, name in FRAMES.items()}
    memories = MemoryInputs(**{field: _read_parquet(members, name) for field, name in MEMORY_FRAMES.items()})
    served = {name[len(ATOMS):-len(".parquet")]: _read_parquet(members, name) for name in sorted(members)
              if name.startswith(ATOMS) and name.endswith(".parquet")}
    return Evidence(split=how["split"], entries=_read_jsonl(members, ENTRIES), invalid=_read_jsonl(members, INVALID), served=served,
                    memories=memories, sha256=how["sha256"], options=_options(how.get("options")),
                    description=_typed(RunDescription, how.get("description"), "description"), **frames)


def recompute(ev: Evidence) -> EvalResult:
    """The evaluation of `ev` by the installed harness (evaluate_run, in one block, nothing reused)."""
    inputs = EvalInputs(entries=ev.entries, source=FrameBlocks(ev.run, ev.gold), regions=ev.regions, responses=ev.responses,
                        failures=ev.failures, served=ev.served, gold_segments={}, invalid=ev.invalid, sha256=ev.sha256,
                        memories=ev.memories)
    return evaluate_run(inputs, ev.options, ev.description)
