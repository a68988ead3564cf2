"""A bundle's members and its Statement's predicate, from a run's evidence and what its evaluation claimed.

Besides the evidence (bench.bundle.evidence) a bundle holds:

==============================  ===============================================================
``metrics/<split>.json``        the claimed document (dev.json or test.json, bytes as written)
``per_query/<split>.parquet``   the claimed per-query table (what `bench compare` reads)
``verdict.json``                the verdict matrix of the document (bench.reporting.report.verdict)
``params.yaml``                 the params of the run, as written
``manifest.jsonl``              the corpus manifest the run used (paths, sizes, sha256; no data)
``harness.json``                the harness: name, version, code digest, every code file's sha256
``system.json``                 the system's record of the run (name, adapter, entry, declared
                                code, isolation and its note, latency) and ``code_sha256``
``acceptance.json``             (a test bundle) the acceptance's audit row
``acceptance.jsonl``            (a dev bundle of an accepted project) the audit chain
``test.bundle.zip``             (likewise) the acceptance's own bundle of the test run
==============================  ===============================================================

The predicate (``urn:bench:evaluation:v1``) states the result in one place: the split, the
harness (name, version, code digest), the system (name, adapter, entry, declared code
digests, isolation), the digests of manifest, sets and split lock, the sample size (valid
entries, invalid entries, run rows) and every cell of the document (scope, metric, value,
n, denominator, ci95).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.bundle.evidence import Evidence, dumps, evidence_members
from bench.bundle.signing import BundleError
from bench.bundle.statement import index_problem, open_bundle, strict_json

__all__ = ["HARNESS", "MANIFEST", "PARAMS", "SYSTEM", "VERDICT", "ClaimedRun", "Claims", "Record", "bundle_members", "claimed_run",
           "document_name", "per_query_name", "predicate"]

PARAMS, MANIFEST, HARNESS, SYSTEM, VERDICT = "params.yaml", "manifest.jsonl", "harness.json", "system.json", "verdict.json"
CELL_FIELDS = ("value", "n", "denominator", "ci95")
#: the fields of the system's record the predicate names it by
IDENTITY = ("name", "adapter", "entry", "code", "isolation")


def document_name(split: str) -> str:
    return f"metrics/{split}.json"


def per_query_name(split: str) -> str:
    return f"per_query/{split}.parquet"


@dataclass(frozen=True)
class Claims:
    """What the run's evaluation wrote: its document and per-query table, as bytes."""

    document: bytes
    per_query: bytes


@dataclass(frozen=True)
class Record:
    """What else a bundle carries about the run (module docstring)."""

    params: bytes
    manifest: bytes
    harness: dict[str, Any]
    system: dict[str, Any]  # the run's system.json record with code_sha256
    extra: dict[str, bytes] = field(default_factory=dict)  # acceptance.json / acceptance.jsonl / test.bundle.zip


def predicate(split: str, document: Mapping[str, Any], harness: Mapping[str, Any], system: Mapping[str, Any],
              sample: Mapping[str, int]) -> dict[str, Any]:
    """The Statement's predicate (module docstring); the same function states it and checks it."""
    cells = [("overall", document.get("overall", {})), *sorted((document.get("by_modality") or {}).items())]
    results = [{"scope": scope, "metric": metric, **{f: cell[f] for f in CELL_FIELDS if f in cell}}
               for scope, block in cells for metric, cell in block.items() if isinstance(cell, dict)]
    return {"split": split,
            "harness": {name: harness.get(name) for name in ("name", "version", "code_sha256")},
            "system": {**{name: system.get(name) for name in IDENTITY}, "code_sha256": system.get("code_sha256", {})},
            "inputs": document.get("sha256", {}), "sample_size": dict(sample), "results": results}


def sample_size(ev: Evidence) -> dict[str, int]:
    """The predicate's sample size: valid entries (the queries), invalid entries, run rows."""
    return {"entries": len(ev.entries), "invalid_entries": len(ev.invalid), "run_rows": len(ev.run)}


def bundle_members(ev: Evidence, claims: Claims, record: Record, document: Mapping[str, Any],
                   verdict: Callable[[dict[str, Any]], Any]) -> tuple[dict[str, bytes], dict[str, Any]]:
    """(every member, the predicate) of the bundle of `ev` and the `claims` of its evaluation (`document`:
    the claimed document, parsed)."""
    members = {**evidence_members(ev), document_name(ev.split): claims.document, per_query_name(ev.split): claims.per_query,
               VERDICT: dumps(verdict(dict(document))), PARAMS: record.params, MANIFEST: record.manifest,
               HARNESS: dumps(record.harness), SYSTEM: dumps(record.system), **record.extra}
    return members, predicate(ev.split, document, record.harness, record.system, sample_size(ev))


@dataclass(frozen=True)
class ClaimedRun:
    """A bundle read as a finished run (`bench compare`, `bench gate`): its claimed per-query table and
    document, and its params, each member's digest checked against the Statement's index."""

    split: str
    per_query: Any  # pd.DataFrame
    document: dict[str, Any]
    params: bytes


def claimed_run(path: Path) -> ClaimedRun:
    """The run a bundle claims (its signature is `bench verify`'s to check); BundleError (one line) otherwise."""
    import io

    import pandas as pd

    opened = open_bundle(path)
    problem = index_problem(opened)
    if problem:
        raise BundleError(f"{path.name}: {problem}")
    split = opened.predicate.get("split")
    names = [document_name(str(split)), per_query_name(str(split)), PARAMS]
    missing = [n for n in names if n not in opened.members]
    if missing:
        raise BundleError(f"{path.name}: member {missing[0]!r} is missing")
    try:
        frame = pd.read_parquet(io.BytesIO(opened.members[names[1]]))
    except Exception as exc:
        raise BundleError(f"{path.name}: member {names[1]!r}: not a readable parquet table ({exc.__class__.__name__})") from None
    document = strict_json(opened.members[names[0]], f"{path.name}:{names[0]}")
    if not isinstance(document, dict):
        raise BundleError(f"{path.name}: member {names[0]!r}: not a metrics document (a JSON object)")
    return ClaimedRun(str(split), frame, document, opened.members[PARAMS])
