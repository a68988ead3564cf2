"""A bundle made and checked before it is kept: `bench bundle` (the dev run) and the acceptance (the test run).

:func:`build` assembles the members (bench.bundle.make), writes the deterministic zip with its
Statement and, given a key, its signature (bench.bundle.statement), then checks it as a verifier
would (bench.bundle.verify.check_written: every digest, every number recomputed), so a bundle
whose claims its own run does not bear out -- outputs older than their inputs, a hand edit -- is
never written: BundleError names the first difference.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.bundle.code import declared_code, harness_record
from bench.bundle.evidence import Evidence
from bench.bundle.make import Claims, Record, bundle_members
from bench.bundle.signing import BundleError, PrivateKey
from bench.bundle.statement import bundle_bytes, strict_json
from bench.bundle.verify import Checks, check_written

__all__ = ["build", "run_record"]


def build(ev: Evidence, claims: Claims, record: Record, checks: Checks, key: PrivateKey | None = None) -> tuple[bytes, list[str]]:
    """(the bundle's bytes, the lines of its check); BundleError when the check fails."""
    document = strict_json(claims.document, "the claimed metrics document")
    members, predicate = bundle_members(ev, claims, record, document, checks.verdict)
    data = bundle_bytes(members, predicate, key)
    with tempfile.TemporaryDirectory(prefix="bench-bundle-") as tmp:
        path = Path(tmp) / f"{ev.split}.bundle.zip"
        path.write_bytes(data)
        checked = check_written(path, checks, None if key is None else key.public)
    if checked.failure:
        raise BundleError(f"the {ev.split} run's outputs are not what its evidence gives ({checked.failure}); nothing written")
    return data, checked.lines


def run_record(root: Path, params: Path, manifest: Path, system: dict[str, Any], extra: dict[str, bytes]) -> Record:
    """What a bundle carries about the run of the project at `root` besides its evidence: params and manifest as
    written, the harness's code, the system's record with its declared code's digests, and `extra` members."""
    return Record(params=params.read_bytes(), manifest=manifest.read_bytes(), harness=harness_record(root),
                  system={**system, "code_sha256": declared_code(system.get("code"), root)}, extra=extra)
