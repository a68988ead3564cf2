"""`bench verify`: a bundle's signature, its members' digests, and every number recomputed; fails closed.

In this order, stopping at the first failure with one line that names it:

1. the libraries: Ed25519 (cryptography) and RFC 8785 (rfc8785) import, or nothing is verified;
2. the trusted key: the verifier's own public key file (never a key the bundle carries);
3. the bundle: a readable zip holding an in-toto Statement of the known format;
4. the signature: present, of the known kind, made over the Statement by the trusted key
   (a bundle nested in a signed one, the acceptance's test bundle, is covered by the outer
   signature and need not carry its own);
5. the members: exactly those the signed index lists, each with its sha256;
6. the recomputation: the bundled run evaluated again by the installed harness
   (bench.bundle.evidence.recompute: evaluate_run itself); the document (every metric, n,
   denominator and interval), the per-query table, the verdict matrix, the Statement's
   predicate, the latency percentiles and, for a test bundle, the acceptance row must equal the
   bundle's; the manifest's sha256 must be the one the run recorded;
7. a nested test bundle, the same way, and its audit row must be one of the bundled chain's;
8. with a mirror: the set files and split lock against the verifier's project, and every corpus
   file of the served data sets against the mirror (bench.bundle.mirror).

The installed harness's code digest is compared with the bundle's and reported, not required:
the recomputation is what holds the numbers to the run.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bench.bundle.code import code_digest
from bench.bundle.evidence import Evidence, read_evidence, recompute
from bench.bundle.make import HARNESS, MANIFEST, SYSTEM, VERDICT, document_name, per_query_name, predicate, sample_size
from bench.bundle.mirror import corpus_problem, manifest_rows, set_problem
from bench.bundle.signing import BundleError, PublicKey, canonical, check_signature, load_public
from bench.bundle.statement import SIGNATURE, Opened, index_problem, open_bundle, strict_json
from bench.evaluation.evaluate import EvalResult, per_query_table
from bench.io import sha256_bytes
from bench.systems.run import latency_percentiles

__all__ = ["ACCEPTANCE_ROW", "AUDIT_CHAIN", "NESTED", "Checks", "Verified", "check_written", "diff", "frame_difference", "verify"]

ACCEPTANCE_ROW, AUDIT_CHAIN, NESTED = "acceptance.json", "acceptance.jsonl", "test.bundle.zip"


@dataclass(frozen=True)
class Checks:
    """What the verifier brings: the verdict rule (bench.reporting.report.verdict), the installed harness's
    code files (bench.bundle.code.harness_files) and, for --mirror, its mirror root, project and registry."""

    verdict: Callable[[dict[str, Any]], Any]
    harness_files: Mapping[str, str]
    mirror: Path | None = None
    project: Path | None = None
    split_lock: str = "bench/sets/splits.lock"
    mirror_keys: Mapping[str, str] = field(default_factory=dict)  # data set key -> its folder in a mirror


@dataclass
class Verified:
    """What was checked (one line each) and the failure (None: everything checked)."""

    lines: list[str] = field(default_factory=list)
    failure: str | None = None


def verify(path: Path, key: Path | None, checks: Checks) -> Verified:
    """Verify the bundle at `path` with the trusted public key file `key` (module docstring)."""
    out = Verified()
    try:
        canonical({})  # both libraries, before anything else: a missing one is a failure, never a pass
        if key is None:
            raise BundleError("no trusted key given (--key PUBLIC): the key is always the verifier's own, never the bundle's")
        trusted = load_public(key)
        _verify(open_bundle(path), trusted, checks, out.lines, covered=False)
    except BundleError as exc:
        out.failure = str(exc)
    except Exception as exc:  # a bundle made to break the reader: still one line, never a pass
        out.failure = f"{path.name}: cannot be verified ({exc.__class__.__name__}: {exc})"
    return out


def check_written(path: Path, checks: Checks, trusted: PublicKey | None) -> Verified:
    """A bundle just written, checked by its writer before it is kept: every check of :func:`verify`
    but the mirror's, the signature only when `trusted` is given (the writer's own key)."""
    out = Verified()
    try:
        _verify(open_bundle(path), trusted, dataclasses.replace(checks, mirror=None), out.lines, covered=trusted is None)
    except BundleError as exc:
        out.failure = str(exc)
    except Exception as exc:
        out.failure = f"{path.name}: cannot be checked ({exc.__class__.__name__}: {exc})"
    return out


def _signature(opened: Opened, trusted: PublicKey | None, lines: list[str], *, covered: bool, prefix: str) -> None:
    if opened.signature is None:
        if not covered:
            raise BundleError(f"{prefix}{opened.path.name}: no signature ({SIGNATURE}): an unsigned bundle never verifies")
        lines.append(f"{prefix}signature: none of its own; its bytes are covered by the outer bundle's signed index")
    elif trusted is None:
        if not covered:
            raise BundleError("no trusted key given: a signature is checked only with the verifier's own key")
        lines.append(f"{prefix}signature: not checked (no key given to the writer's own check)")
    else:
        problem = check_signature(opened.statement, opened.signature, trusted)
        if problem:
            raise BundleError(f"{prefix}{problem}")
        lines.append(f"{prefix}signature: ed25519 over the Statement's RFC 8785 JSON, by the trusted key {trusted.key_id}")


def _verify(opened: Opened, trusted: PublicKey | None, checks: Checks, lines: list[str], *, covered: bool, prefix: str = "") -> None:
    _signature(opened, trusted, lines, covered=covered, prefix=prefix)
    problem = index_problem(opened)
    if problem:
        raise BundleError(f"{prefix}{problem}")
    lines.append(f"{prefix}members: {len(opened.members)}, each with the sha256 the signed index lists")
    ev = read_evidence(opened.members)
    _recomputed(opened, ev, checks, lines, prefix)
    if NESTED in opened.members:
        if prefix or ev.split != "dev":
            raise BundleError(f"{prefix}a {ev.split} bundle holding {NESTED}: only a dev bundle nests the acceptance's test bundle, once")
        _nested(opened, trusted, checks, lines)
    if not prefix:
        if checks.mirror is not None:
            _mirror(opened, ev, checks, lines)
        else:
            lines.append("mirror: not checked (--mirror DIR checks the set files and every served corpus file against their digests)")
        lines.append(_harness_line(opened, checks))


def _recomputed(opened: Opened, ev: Evidence, checks: Checks, lines: list[str], prefix: str) -> None:
    try:
        result = recompute(ev)
    except Exception as exc:  # whatever the bundled run makes the evaluation raise: it is not evaluable
        why = f"{exc.__class__.__name__}: {exc}"
        raise BundleError(f"{prefix}the bundled run cannot be evaluated by the installed harness ({why})") from None
    doc = json.loads(json.dumps(result.document, allow_nan=False, default=lambda o: o.item()))
    claimed = strict_json(_member(opened, document_name(ev.split)), document_name(ev.split))
    differences = list(diff(claimed, doc))
    if differences:
        where, was, now = differences[0]
        raise BundleError(f"{prefix}{document_name(ev.split)}: {len(differences)} value(s) differ from the recomputation; "
                          f"first {where}: bundle {was!r}, recomputed {now!r}")
    numbers = sum(1 for _ in leaves(doc))
    rows, columns = _same_per_query(opened, ev, result, prefix)
    problem = _claims_problem(opened, ev, doc, checks)
    if problem:
        raise BundleError(f"{prefix}{problem}")
    lines.append(f"{prefix}recomputed: {document_name(ev.split)} ({numbers} values), {per_query_name(ev.split)} ({rows} x {columns}), "
                 f"the verdict and the Statement's results equal the bundle's ({ev.options.bootstrap_resamples} bootstrap resamples, "
                 f"seed {ev.options.bootstrap_seed})")


def _member(opened: Opened, name: str) -> bytes:
    if name not in opened.members:
        raise BundleError(f"member {name!r} is missing: nothing to compare the recomputation with")
    return opened.members[name]


def _same_per_query(opened: Opened, ev: Evidence, result: EvalResult, prefix: str) -> tuple[int, int]:
    name = per_query_name(ev.split)
    data = _member(opened, name)
    try:
        claimed = pd.read_parquet(io.BytesIO(data))
    except Exception as exc:
        raise BundleError(f"{prefix}member {name!r}: not a readable parquet table ({exc.__class__.__name__})") from None
    buf = io.BytesIO()
    per_query_table(result.query_table, ev.options.k).to_parquet(buf, index=False)  # as the stage writes it
    now = pd.read_parquet(io.BytesIO(buf.getvalue()))
    problem = frame_difference(claimed, now)
    if problem:
        raise BundleError(f"{prefix}{name}: {problem}")
    return len(now), len(now.columns)


def _claims_problem(opened: Opened, ev: Evidence, doc: dict[str, Any], checks: Checks) -> str | None:
    """The first claim besides the document and the table that the recomputation does not bear out."""
    verdict = json.loads(json.dumps(checks.verdict(doc), default=lambda o: o.item()))
    if strict_json(_member(opened, VERDICT), VERDICT) != verdict:
        return f"{VERDICT}: the verdict matrix differs from the recomputed document's"
    harness, system = (strict_json(_member(opened, n), n) for n in (HARNESS, SYSTEM))
    stated = {k: v for k, v in opened.predicate.items() if k != "format"}
    # as the Statement holds it: RFC 8785 writes 1519.0 as 1519
    expected = json.loads(canonical(predicate(ev.split, doc, harness, system, sample_size(ev))))
    for where, was, now in diff(stated, expected):
        return f"statement.json: predicate {where}: the Statement says {was!r}, the bundle's members give {now!r}"
    run = doc.get("run", {})
    named = {"name": run.get("system"), "adapter": run.get("adapter"), "isolation": run.get("isolation")}
    if {k: system.get(k) for k in named} != named:
        return f"{SYSTEM}: names the system {({k: system.get(k) for k in named})}, the evaluated run {named}"
    latency = latency_percentiles(ev.responses["latency_ms"]) if "latency_ms" in ev.responses else None
    if ev.description.latency is not None and json.loads(json.dumps(latency)) != json.loads(json.dumps(ev.description.latency)):
        return f"evaluation.json: description.latency {ev.description.latency} is not the responses' percentiles {latency}"
    if sha256_bytes(_member(opened, MANIFEST)) != ev.sha256.get("manifest"):
        return f"{MANIFEST}: sha256 {sha256_bytes(_member(opened, MANIFEST))}, the run recorded {ev.sha256.get('manifest')}"
    if ACCEPTANCE_ROW in opened.members:
        row = strict_json(opened.members[ACCEPTANCE_ROW], ACCEPTANCE_ROW)
        mine = {"metrics": {"overall": doc["overall"], "by_modality": doc["by_modality"]}, "run": doc["run"],
                "invalid_entries": doc["invalid_entries"], "sha256": doc["sha256"]}
        for where, was, now in diff({k: row.get(k) for k in mine} if isinstance(row, dict) else row, mine):
            return f"{ACCEPTANCE_ROW}: {where}: the audit row says {was!r}, recomputed {now!r}"
    return None


def _nested(opened: Opened, trusted: PublicKey | None, checks: Checks, lines: list[str]) -> None:
    """The acceptance's test bundle inside a dev bundle: verified the same way; its row one of the chain's."""
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        path = Path(tmp) / NESTED
        path.write_bytes(opened.members[NESTED])
        inner = open_bundle(path)
        if inner.predicate.get("split") != "test":
            raise BundleError(f"{NESTED}: not a test bundle (split {inner.predicate.get('split')!r})")
        _verify(inner, trusted, checks, lines, covered=True, prefix=f"{NESTED}: ")  # the outer index covers its bytes
    row = strict_json(_member(inner, ACCEPTANCE_ROW), f"{NESTED}:{ACCEPTANCE_ROW}")
    chain = [strict_json(line, f"{AUDIT_CHAIN} line {i}") for i, line in enumerate(_member(opened, AUDIT_CHAIN).splitlines(), 1)
             if line.strip()]
    if row not in chain:
        raise BundleError(f"{NESTED}: its acceptance row is not a row of the bundled {AUDIT_CHAIN}")
    lines.append(f"{NESTED}: acceptance #{row.get('acceptance')} is row {chain.index(row) + 1} of the bundled {AUDIT_CHAIN}")


def _mirror(opened: Opened, ev: Evidence, checks: Checks, lines: list[str]) -> None:
    if checks.project is None:
        raise BundleError("--mirror: no project here to check the set files against (run bench verify in a checkout)")
    problem, sets = set_problem(ev.sha256, checks.project, checks.split_lock)
    if problem:
        raise BundleError(f"mirror: {problem}")
    keys = {str(k) for frame in ev.served.values() if "dataset" in frame for k in frame["dataset"].astype(str).unique()}
    problem, files = corpus_problem(manifest_rows(opened.members[MANIFEST]), keys, checks.mirror or Path(), checks.mirror_keys)
    if problem:
        raise BundleError(f"mirror: {problem}")
    lines.append(f"mirror: {sets} set and split lock files in {checks.project.name} and {files} corpus files of "
                 f"{', '.join(sorted(keys))} have the sha256 the bundle records")


def _harness_line(opened: Opened, checks: Checks) -> str:
    bundled = strict_json(opened.members[HARNESS], HARNESS)
    files = bundled.get("files", {}) if isinstance(bundled, dict) else {}
    if code_digest(checks.harness_files) == bundled.get("code_sha256"):
        return f"harness: the installed code is the bundle's (bench {bundled.get('version')}, code sha256 {bundled.get('code_sha256')})"
    changed = sorted(set(files) ^ set(checks.harness_files) | {p for p in files if checks.harness_files.get(p) not in (None, files[p])})
    return (f"harness: the installed code differs from the bundle's in {len(changed)} of {len(files)} files "
            f"(first {changed[0] if changed else '?'}); the numbers above are the installed code's")


def leaves(value: Any, where: str = "") -> Any:
    """(path, value) of every scalar in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from leaves(item, f"{where}[{i}]")
    else:
        yield where, value


def diff(a: Any, b: Any, where: str = "") -> Any:
    """(path, a's, b's) of every place two JSON values differ (a key one lacks: None there); exact for numbers."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            yield from diff(a.get(key), b.get(key), f"{where}.{key}" if where else str(key))
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from diff(x, y, f"{where}[{i}]")
    elif not (a == b and type(a) is type(b)) and not (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)):
        yield where or "<document>", a, b


def frame_difference(claimed: pd.DataFrame, now: pd.DataFrame) -> str | None:
    """The first difference between two per-query tables (columns, query order, any value; NaN equals NaN)."""
    if list(claimed.columns) != list(now.columns):
        return f"columns {list(claimed.columns)} in the bundle, {list(now.columns)} recomputed"
    if len(claimed) != len(now):
        return f"{len(claimed)} rows in the bundle, {len(now)} recomputed"
    ids = now["query_id"].astype(str).tolist() if "query_id" in now else [str(i) for i in range(len(now))]
    for column in now.columns:
        a, b = claimed[column].reset_index(drop=True), now[column].reset_index(drop=True)
        same = (a == b).fillna(False).to_numpy(dtype=bool) | (a.isna() & b.isna()).to_numpy(dtype=bool)
        if not same.all():
            i = int((~same).argmax())
            return f"query {ids[i]} {column}: bundle {a.iloc[i]!r}, recomputed {b.iloc[i]!r}"
    return None

