"""The acceptance's result bundle of the test run (reports/test.bundle.zip; docs/acceptance.md).

The accept stage hands over what it evaluated (bench.acceptance.in_memory.evaluated: the result and
its evidence), the audit row and the system's record; :func:`acceptance_bundle` makes the bundle of the
test run (bench.bundle.build: checked by recomputing it before it is kept) and signs it with the key
``params.yaml: bundle.sign_key`` names, by path (:func:`signing_key`, read before the system runs,
so a bad key stops the acceptance before anything is spent or written)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from bench.bundle.build import build, run_record
from bench.bundle.code import harness_files
from bench.bundle.evidence import Evidence, dumps
from bench.bundle.make import Claims
from bench.bundle.signing import BundleError, PrivateKey, load_private
from bench.bundle.verify import ACCEPTANCE_ROW, Checks
from bench.evaluation.evaluate import EvalResult, per_query_table
from bench.reporting.report import verdict

__all__ = ["acceptance_bundle", "signing_key"]


def signing_key(written: str | None, root: Path) -> PrivateKey | None:
    """The private key `params.yaml: bundle.sign_key` names (relative to `root`, or absolute); None: unsigned."""
    if written is None:
        return None
    if "-----BEGIN" in written or "\n" in written:
        raise BundleError("params.yaml: bundle.sign_key: must be the path of a private key file, never the key itself")
    path = Path(written) if Path(written).is_absolute() else root / written
    try:
        return load_private(path)
    except BundleError as exc:
        raise BundleError(f"params.yaml: bundle.sign_key: {exc}") from None


def acceptance_bundle(root: Path, result: EvalResult, evidence: Evidence, *, row: dict[str, Any], system: dict[str, Any],
                key: PrivateKey | None, params: Path, manifest: Path, split_lock: Path) -> bytes:
    """The bundle of the test run: its evidence, test.json and its per-query table as claims, the audit row; BundleError
    when its own recomputation differs (nothing is then written)."""
    buf = io.BytesIO()
    per_query_table(result.query_table, evidence.options.k).to_parquet(buf, index=False)
    record = run_record(root, params, manifest, system, {ACCEPTANCE_ROW: dumps(row)})
    checks = Checks(verdict=verdict, harness_files=harness_files(root), split_lock=split_lock.relative_to(root).as_posix())
    return build(evidence, Claims(document=dumps(result.document), per_query=buf.getvalue()), record, checks, key)[0]
