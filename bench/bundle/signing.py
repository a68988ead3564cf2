"""Ed25519 keys and signatures over RFC 8785 canonical JSON (the `cryptography` and `rfc8785` libraries).

A key pair is two PEM files: the private key (PKCS #8, unencrypted, file mode 0600; a private
key file that others may read is refused) and the public key (SubjectPublicKeyInfo). A key is
named by its id, ``sha256:`` and the hex sha256 of the 32 raw public key bytes.

A signature (``signature.json`` of a bundle) says what it signs and how::

    {"format": "bench-signature/1", "algorithm": "ed25519", "canonicalization": "RFC 8785",
     "signed": "statement.json", "key_id": "sha256:...", "signature": "<base64 of 64 bytes>"}

and is checked only with the public key the verifier gives: a key, key id or anything else the
bundle carries is never trusted (the key id only names the key in a message). Both libraries are
imported when first needed; either missing is a BundleError, never a pass.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

__all__ = ["SIGNATURE_FORMAT", "BundleError", "PrivateKey", "PublicKey", "canonical", "check_signature", "load_private",
           "load_public", "new_key_pair", "sign"]

SIGNATURE_FORMAT = "bench-signature/1"
SIGNED_MEMBER = "statement.json"
SIGNATURE_FIELDS = {"format": SIGNATURE_FORMAT, "algorithm": "ed25519", "canonicalization": "RFC 8785", "signed": SIGNED_MEMBER}


class BundleError(Exception):
    """A bundle, key or signature that cannot be made, read or trusted; str() is the one-line message."""


def _crypto() -> Any:
    """The Ed25519 module of `cryptography`; BundleError when it cannot be imported."""
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:
        raise BundleError(f"the Ed25519 library cannot be imported (cryptography: {exc.__class__.__name__}); "
                          "install it (pip install cryptography): nothing is signed or verified without it") from None
    return ed25519


def _serialization() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError as exc:
        raise BundleError(f"the key file library cannot be imported (cryptography: {exc.__class__.__name__}); "
                          "install it (pip install cryptography)") from None
    return serialization


def canonical(obj: Any) -> bytes:
    """`obj` as RFC 8785 canonical JSON (BundleError when the library is missing or a value has no canonical form)."""
    try:
        import rfc8785
    except ImportError as exc:
        raise BundleError(f"the RFC 8785 canonical JSON library cannot be imported (rfc8785: {exc.__class__.__name__}); "
                          "install it (pip install rfc8785): nothing is signed or verified without it") from None
    try:
        return rfc8785.dumps(obj)
    except (rfc8785.CanonicalizationError, TypeError) as exc:
        raise BundleError(f"the statement has no RFC 8785 canonical form: {exc}") from None


class PublicKey:
    """A trusted Ed25519 public key (read from the verifier's own file)."""

    def __init__(self, key: Any) -> None:
        self.key = key
        raw = key.public_bytes(_serialization().Encoding.Raw, _serialization().PublicFormat.Raw)
        self.key_id = "sha256:" + hashlib.sha256(raw).hexdigest()

    def verifies(self, signature: bytes, data: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature

        try:
            self.key.verify(signature, data)
        except InvalidSignature:
            return False
        return True


class PrivateKey:
    """An Ed25519 signing key (read from a file of mode 0600)."""

    def __init__(self, key: Any) -> None:
        self.key = key
        self.public = PublicKey(key.public_key())

    def sign(self, data: bytes) -> bytes:
        return bytes(self.key.sign(data))


def new_key_pair(private_path: Path, public_path: Path) -> str:
    """Write a new key pair (private file mode 0600, neither file may exist); return the key id."""
    ed25519, serialization = _crypto(), _serialization()
    for path in (private_path, public_path):
        if path.exists() or path.is_symlink():
            raise BundleError(f"{path}: exists; a key file is never overwritten")
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never readable by others, not even for a moment
    with os.fdopen(fd, "wb") as fh:
        fh.write(private)
    os.chmod(private_path, 0o600)  # whatever the umask
    fd = os.open(public_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(public)
    return PrivateKey(key).public.key_id


def _read_key_file(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BundleError(f"{path}: the {what} cannot be read ({exc.strerror or exc.__class__.__name__})") from None


def load_private(path: Path) -> PrivateKey:
    """The Ed25519 private key in `path` (PEM); BundleError when others may read the file or it holds no such key."""
    ed25519, serialization = _crypto(), _serialization()
    data = _read_key_file(path, "private key")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise BundleError(f"{path}: private key file mode {mode:04o} lets others read it; chmod 600 {path.name}")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else "unreadable"
        raise BundleError(f"{path}: not an unencrypted PEM private key ({why})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise BundleError(f"{path}: not an Ed25519 private key ({type(key).__name__})")
    return PrivateKey(key)


def load_public(path: Path) -> PublicKey:
    """The trusted Ed25519 public key in `path` (PEM); BundleError when it holds no such key."""
    ed25519, serialization = _crypto(), _serialization()
    data = _read_key_file(path, "public key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        raise BundleError(f"{path}: not a PEM public key (a private key is never a trusted key; give the public one)") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise BundleError(f"{path}: not an Ed25519 public key ({type(key).__name__})")
    return PublicKey(key)


def sign(statement: dict[str, Any], key: PrivateKey) -> dict[str, Any]:
    """The signature document of `statement` (module docstring)."""
    signature = key.sign(canonical(statement))
    return {**SIGNATURE_FIELDS, "key_id": key.public.key_id, "signature": base64.b64encode(signature).decode("ascii")}


def check_signature(statement: dict[str, Any], signature: Any, trusted: PublicKey) -> str | None:
    """None when `signature` is a signature of `statement` made by the `trusted` key; else the one-line reason."""
    if not isinstance(signature, dict):
        return "signature.json: not a signature document (a JSON object)"
    for name, value in SIGNATURE_FIELDS.items():
        if signature.get(name) != value:
            return f"signature.json: {name} is {signature.get(name)!r}; this harness checks only {value!r}"
    try:
        raw = base64.b64decode(str(signature.get("signature", "")), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 64:
        return "signature.json: signature is not 64 bytes of base64 (an Ed25519 signature)"
    if not trusted.verifies(raw, canonical(statement)):
        named = signature.get("key_id")
        by = f"; it names key {named}" if named != trusted.key_id else " (its statement or signature was changed)"
        return f"signature: not a signature of this statement by the trusted key {trusted.key_id}{by}"
    return None
