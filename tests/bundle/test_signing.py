"""Keys and signatures (bench.bundle.signing): Ed25519 over RFC 8785 canonical JSON, checked only with the
verifier's key, and every missing piece a failure."""

from __future__ import annotations

import base64
import json
import os
import stat
import sys

import pytest

from bench.bundle.signing import BundleError, canonical, check_signature, load_private, load_public, new_key_pair, sign

STATEMENT = {"_type": "https://in-toto.io/Statement/v1", "subject": [{"name": "a", "digest": {"sha256": "00" * 32}}],
             "predicateType": "urn:bench:evaluation:v1", "predicate": {"format": "bench-bundle/1", "value": 0.25, "n": 12}}


@pytest.fixture
def keys(tmp_path):
    new_key_pair(tmp_path / "k.pem", tmp_path / "k.pub")
    return load_private(tmp_path / "k.pem"), load_public(tmp_path / "k.pub"), tmp_path


def test_a_new_key_pair_keeps_the_private_key_to_its_owner(tmp_path):
    key_id = new_key_pair(tmp_path / "k.pem", tmp_path / "k.pub")
    assert stat.S_IMODE(os.stat(tmp_path / "k.pem").st_mode) == 0o600
    assert (tmp_path / "k.pem").read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert (tmp_path / "k.pub").read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert load_public(tmp_path / "k.pub").key_id == key_id == load_private(tmp_path / "k.pem").public.key_id
    assert key_id.startswith("sha256:") and len(key_id) == 7 + 64
    with pytest.raises(BundleError, match="exists; a key file is never overwritten"):
        new_key_pair(tmp_path / "k.pem", tmp_path / "other.pub")
    assert not (tmp_path / "other.pub").exists()


def test_a_private_key_others_may_read_is_refused(keys):
    _, _, folder = keys
    os.chmod(folder / "k.pem", 0o644)
    with pytest.raises(BundleError, match=r"k.pem: private key file mode 0644 lets others read it; chmod 600"):
        load_private(folder / "k.pem")


def test_a_private_key_is_never_a_trusted_key(keys):
    _, _, folder = keys
    with pytest.raises(BundleError, match="not a PEM public key"):
        load_public(folder / "k.pem")
    with pytest.raises(BundleError, match="cannot be read"):
        load_public(folder / "missing.pub")


def test_a_signature_holds_for_its_statement_and_its_key_only(keys, tmp_path):
    private, public, _ = keys
    signature = sign(STATEMENT, private)
    assert signature["algorithm"] == "ed25519" and signature["canonicalization"] == "RFC 8785"
    assert check_signature(STATEMENT, signature, public) is None
    # the canonical form signs: key order and spacing of the stored JSON do not matter
    assert check_signature(json.loads(json.dumps(STATEMENT, indent=3, sort_keys=True)), signature, public) is None
    changed = {**STATEMENT, "predicate": {**STATEMENT["predicate"], "value": 0.26}}
    assert "(its statement or signature was changed)" in check_signature(changed, signature, public)
    new_key_pair(tmp_path / "o.pem", tmp_path / "o.pub")
    other = load_public(tmp_path / "o.pub")
    assert f"not a signature of this statement by the trusted key {other.key_id}; it names key {public.key_id}" in \
        check_signature(STATEMENT, signature, other)


def test_a_signature_document_of_another_kind_is_refused(keys):
    private, public, _ = keys
    signature = sign(STATEMENT, private)
    for name, value in (("algorithm", "rsa"), ("canonicalization", "none"), ("format", "other/1"), ("signed", "index.json")):
        assert f"signature.json: {name} is {value!r}" in check_signature(STATEMENT, {**signature, name: value}, public)
    assert "not 64 bytes" in check_signature(STATEMENT, {**signature, "signature": "@@"}, public)
    assert "not 64 bytes" in check_signature(STATEMENT, {**signature, "signature": base64.b64encode(b"x" * 10).decode()}, public)
    assert "not a signature document" in check_signature(STATEMENT, ["x"], public)


def test_canonical_json_is_rfc_8785():
    assert canonical({"b": 1.0, "a": [1e21, "é", None, True]}) == '{"a":[1e+21,"é",null,true],"b":1}'.encode()
    with pytest.raises(BundleError, match="no RFC 8785 canonical form"):
        canonical({"seed": 2**63 - 1})  # beyond the integers JSON numbers hold exactly


def unimportable(monkeypatch: pytest.MonkeyPatch, package: str) -> None:
    """`package` and every module of it made unimportable (as if not installed): import raises ImportError."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")] + [package]:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.parametrize(("module", "words"), [("cryptography", "the Ed25519 library cannot be imported"),
                                               ("rfc8785", "the RFC 8785 canonical JSON library cannot be imported")])
def test_a_missing_library_is_an_error_never_a_pass(keys, monkeypatch, module, words):
    private, public, folder = keys
    signature = sign(STATEMENT, private)
    unimportable(monkeypatch, module)
    with pytest.raises(BundleError, match=words):
        if module == "rfc8785":
            check_signature(STATEMENT, signature, public)
        else:
            load_public(folder / "k.pub")
