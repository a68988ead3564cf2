"""The acceptance's signing key (bench.acceptance.bundled.signing_key): named by path in params, read before
the system runs; anything else refused with one line naming params bundle.sign_key."""

from __future__ import annotations

import os

import pytest

from bench.acceptance.bundled import signing_key
from bench.bundle.signing import BundleError, new_key_pair


def test_the_key_is_read_by_path_relative_to_the_project(tmp_path):
    new_key_pair(tmp_path / "accept.pem", tmp_path / "accept.pub")
    assert signing_key(None, tmp_path) is None  # null: the bundle is written unsigned
    assert signing_key("accept.pem", tmp_path).public.key_id == signing_key(str(tmp_path / "accept.pem"), tmp_path).public.key_id


def test_anything_but_a_private_key_file_of_its_owner_is_refused(tmp_path):
    new_key_pair(tmp_path / "accept.pem", tmp_path / "accept.pub")
    pem = (tmp_path / "accept.pem").read_text()
    with pytest.raises(BundleError, match="^params.yaml: bundle.sign_key: must be the path of a private key file, never the key itself$"):
        signing_key(pem, tmp_path)
    with pytest.raises(BundleError, match="^params.yaml: bundle.sign_key: .*missing.pem: the private key cannot be read"):
        signing_key("missing.pem", tmp_path)
    os.chmod(tmp_path / "accept.pub", 0o600)
    with pytest.raises(BundleError, match="^params.yaml: bundle.sign_key: .*accept.pub: not an unencrypted PEM private key"):
        signing_key("accept.pub", tmp_path)
    os.chmod(tmp_path / "accept.pem", 0o640)
    with pytest.raises(BundleError, match="mode 0640 lets others read it"):
        signing_key("accept.pem", tmp_path)
