"""The bundle file (bench.bundle.statement): a deterministic zip, an in-toto Statement indexing every member,
and reading that refuses what a zip or a JSON document can hide."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import pytest

from bench.bundle.signing import BundleError, load_private, new_key_pair
from bench.bundle.statement import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    bundle_bytes,
    index_problem,
    is_bundle,
    open_bundle,
    strict_json,
)

MEMBERS = {"metrics/dev.json": b'{"overall": {"mrr": {"value": 0.5, "n": 4, "denominator": 4}}}\n', "run/run.parquet": b"PAR1...PAR1",
           "entries.jsonl": b'{"query_id": "q1"}\n'}


def rezip(files: dict[str, bytes]) -> bytes:
    """A zip of `files` as they are (statement and signature included): what a tamperer writes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def members_of(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def test_the_same_members_give_the_same_bytes_and_a_statement_indexing_each(tmp_path):
    new_key_pair(tmp_path / "k.pem", tmp_path / "k.pub")
    key = load_private(tmp_path / "k.pem")
    first = bundle_bytes(MEMBERS, {"split": "dev"}, key)
    assert first == bundle_bytes(dict(reversed(MEMBERS.items())), {"split": "dev"}, key)  # order, time and mode fixed
    with zipfile.ZipFile(io.BytesIO(first)) as zf:
        infos = zf.infolist()
    assert [i.filename for i in infos] == sorted([*MEMBERS, "statement.json", "signature.json"])
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)} and {i.external_attr >> 16 for i in infos} == {0o100644}
    (tmp_path / "b.zip").write_bytes(first)
    opened = open_bundle(tmp_path / "b.zip")
    assert opened.statement["_type"] == STATEMENT_TYPE and opened.statement["predicateType"] == PREDICATE_TYPE
    assert opened.predicate == {"format": "bench-bundle/1", "split": "dev"}
    assert opened.statement["subject"] == [{"name": n, "digest": {"sha256": hashlib.sha256(MEMBERS[n]).hexdigest()}} for n in sorted(MEMBERS)]
    assert opened.members == MEMBERS and opened.signature["key_id"] == key.public.key_id
    assert index_problem(opened) is None and is_bundle(tmp_path / "b.zip")
    assert not is_bundle(tmp_path / "k.pub")


@pytest.mark.parametrize(("change", "problem"), [
    (lambda f: f.pop("run/run.parquet"), "member 'run/run.parquet' is in the signed index but not in the bundle (removed)"),
    (lambda f: f.update({"run/run.parquet": b"PAR1..edited..PAR1"}), "member 'run/run.parquet': sha256 "),
    (lambda f: f.update({"key.pub": b"-----BEGIN PUBLIC KEY-----"}), "member 'key.pub' is not in the signed index (added)"),
])
def test_a_member_removed_changed_or_added_is_named(tmp_path, change, problem):
    files = members_of(bundle_bytes(MEMBERS, {"split": "dev"}))
    change(files)
    (tmp_path / "b.zip").write_bytes(rezip(files))
    found = index_problem(open_bundle(tmp_path / "b.zip"))
    assert found is not None and found.startswith(problem)


def test_what_a_zip_or_json_can_hide_is_refused(tmp_path):
    files = members_of(bundle_bytes(MEMBERS, {"split": "dev"}))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf, pytest.warns(UserWarning, match="Duplicate name"):
        for name, data in [*files.items(), ("metrics/dev.json", b"{}")]:
            zf.writestr(name, data)
    (tmp_path / "twice.zip").write_bytes(buf.getvalue())
    with pytest.raises(BundleError, match="member 'metrics/dev.json' appears twice"):
        open_bundle(tmp_path / "twice.zip")
    with pytest.raises(BundleError, match="key 'a' twice"):
        strict_json(b'{"a": 1, "a": 2}', "x.json")
    with pytest.raises(BundleError, match="NaN is not JSON"):
        strict_json(b'{"a": NaN}', "x.json")
    (tmp_path / "no.zip").write_bytes(rezip({"a": b"1"}))
    with pytest.raises(BundleError, match="not a bench bundle \\(no statement.json\\)"):
        open_bundle(tmp_path / "no.zip")
    with pytest.raises(BundleError, match="no such bundle file"):
        open_bundle(tmp_path / "missing.zip")


@pytest.mark.parametrize(("field", "value"), [("_type", "https://in-toto.io/Statement/v0.1"), ("predicateType", "https://slsa.dev/provenance/v1"),
                                              ("format", "bench-bundle/2")])
def test_an_unknown_format_is_refused(tmp_path, field, value):
    files = members_of(bundle_bytes(MEMBERS, {"split": "dev"}))
    doc = json.loads(files["statement.json"])
    if field == "format":
        doc["predicate"]["format"] = value
    else:
        doc[field] = value
    files["statement.json"] = json.dumps(doc).encode()
    (tmp_path / "b.zip").write_bytes(rezip(files))
    with pytest.raises(BundleError, match=f"b.zip: unknown format .*{value}"):
        open_bundle(tmp_path / "b.zip")
