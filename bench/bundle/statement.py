"""The bundle file: a deterministic zip of members, the in-toto Statement that indexes them, its signature.

Members are written in name order with a fixed time (1980-01-01 00:00), mode 0644 and one
compression, so the same members give the same bytes. ``statement.json`` is an in-toto
Statement v1 (RFC 8785 canonical JSON)::

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "<member>", "digest": {"sha256": "<hex>"}}, ...],   every other member, by name
     "predicateType": "urn:bench:evaluation:v1",
     "predicate": {"format": "bench-bundle/1", ...}}                          bench.bundle.evidence.predicate

and ``signature.json`` signs it (bench.bundle.signing). Reading refuses what a zip can hide:
unsafe names, links and size bombs (bench.archive), a name twice, and JSON with a key twice
or a NaN.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.archive import ArchiveError, check_members, read_member
from bench.bundle.signing import BundleError, PrivateKey, canonical, sign
from bench.io import sha256_bytes

__all__ = ["FORMAT", "PREDICATE_TYPE", "SIGNATURE", "STATEMENT", "STATEMENT_TYPE", "Opened", "bundle_bytes", "index_problem",
           "is_bundle", "open_bundle", "strict_json"]

FORMAT = "bench-bundle/1"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:bench:evaluation:v1"
STATEMENT, SIGNATURE = "statement.json", "signature.json"
#: every member's time in the zip (the earliest a zip can hold)
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def statement(members: Mapping[str, bytes], predicate: Mapping[str, Any]) -> dict[str, Any]:
    """The in-toto Statement of `members` (their sha256, by name) with the evaluation `predicate`."""
    return {"_type": STATEMENT_TYPE,
            "subject": [{"name": name, "digest": {"sha256": sha256_bytes(members[name])}} for name in sorted(members)],
            "predicateType": PREDICATE_TYPE, "predicate": {"format": FORMAT, **predicate}}


def bundle_bytes(members: Mapping[str, bytes], predicate: Mapping[str, Any], key: PrivateKey | None = None) -> bytes:
    """The bundle file: `members`, their Statement and (with `key`) its signature, as a deterministic zip."""
    for name in (STATEMENT, SIGNATURE):
        if name in members:
            raise ValueError(f"{name} is the bundle's own member")
    doc = statement(members, predicate)
    files = {**members, STATEMENT: canonical(doc)}
    if key is not None:
        files[SIGNATURE] = canonical(sign(doc, key))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.compress_type, info.create_system, info.external_attr = zipfile.ZIP_DEFLATED, 3, 0o100644 << 16
            zf.writestr(info, files[name], compresslevel=6)
    return buf.getvalue()


def strict_json(data: bytes, where: str) -> Any:
    """`data` as JSON, refusing a key twice, NaN and infinities (a reader could see another value)."""
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"key {key!r} twice")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=pairs, parse_constant=constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BundleError(f"{where}: not strict JSON ({exc})") from None


@dataclass(frozen=True)
class Opened:
    """A bundle read: its Statement, its other members (name -> bytes) and its signature document (None: unsigned)."""

    path: Path
    statement: dict[str, Any]
    members: dict[str, bytes]
    signature: Any | None

    @property
    def predicate(self) -> dict[str, Any]:
        return self.statement["predicate"]


def is_bundle(path: Path) -> bool:
    """Whether `path` is a zip file holding a Statement (what `bench compare` and `bench gate` read as a bundle)."""
    if not path.is_file() or not zipfile.is_zipfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            return STATEMENT in zf.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def _format_problem(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return "not an in-toto Statement (a JSON object)"
    predicate = doc.get("predicate")
    found = (doc.get("_type"), doc.get("predicateType"), predicate.get("format") if isinstance(predicate, dict) else None)
    if found != (STATEMENT_TYPE, PREDICATE_TYPE, FORMAT):
        return (f"unknown format (_type {found[0]!r}, predicateType {found[1]!r}, predicate.format {found[2]!r}); "
                f"this harness reads {STATEMENT_TYPE} with {PREDICATE_TYPE} {FORMAT}")
    if not isinstance(doc.get("subject"), list):
        return "the Statement has no subject list (the index of the members)"
    return None


def open_bundle(path: Path) -> Opened:
    """Read the bundle at `path`; BundleError (one line) when it is no readable bundle of a known format."""
    if not path.is_file():
        raise BundleError(f"{path}: no such bundle file")
    try:
        infos = check_members(path)
        names = [i.filename for i in infos]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise BundleError(f"{path}: member {twice[0]!r} appears twice (a reader could see either copy)")
        files = {name: read_member(path, name) for name in names}
    except ArchiveError as exc:
        raise BundleError(str(exc)) from None
    if STATEMENT not in files:
        raise BundleError(f"{path}: not a bench bundle (no {STATEMENT})")
    doc = strict_json(files.pop(STATEMENT), f"{path.name}:{STATEMENT}")
    problem = _format_problem(doc)
    if problem:
        raise BundleError(f"{path.name}: {problem}")
    signature = files.pop(SIGNATURE, None)
    return Opened(path, doc, files, None if signature is None else strict_json(signature, f"{path.name}:{SIGNATURE}"))


def index_problem(opened: Opened) -> str | None:
    """None when the members are exactly those the Statement indexes, each with its sha256; else the first problem."""
    index: dict[str, str] = {}
    for item in opened.statement["subject"]:
        name = item.get("name") if isinstance(item, dict) else None
        digest = item.get("digest", {}).get("sha256") if isinstance(item, dict) and isinstance(item.get("digest"), dict) else None
        if not isinstance(name, str) or not isinstance(digest, str) or name in index:
            return f"{STATEMENT}: subject entry {item!r} is not one member's name and sha256"
        index[name] = digest
    for name in sorted(index):
        if name not in opened.members:
            return f"member {name!r} is in the signed index but not in the bundle (removed)"
        found = sha256_bytes(opened.members[name])
        if found != index[name]:
            return f"member {name!r}: sha256 {found}, the signed index says {index[name]} (changed)"
    extra = sorted(set(opened.members) - set(index))
    if extra:
        return f"member {extra[0]!r} is not in the signed index (added)"
    return None
