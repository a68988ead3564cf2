"""The acceptance writes a bundle of its test run (reports/test.bundle.zip), signed with the key params
`bundle.sign_key` names by path; `bench verify` recomputes test.json and the audit row from it, and `bench
bundle` nests it in the dev run's bundle. On a clone of the reproduced project (tests/conftest.py)."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from bench.bundle.signing import new_key_pair
from tests.bundle.test_verify_e2e import bench, failed, verify
from tests.project_copy import clone_project, project_env, run

pytestmark = pytest.mark.e2e


def _with_key(work: Path, env: dict, key: Path) -> None:
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["bundle"] = {"sign_key": str(key)}
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run(["git", "commit", "-q", "-am", f"sign with {key.name}"], work, env)


def test_the_acceptance_bundles_and_signs_its_test_run(reproduced: Path, tmp_path: Path):
    work = clone_project(reproduced, tmp_path / "project")
    env = project_env(tmp_path / "site-cache", drop=("DVC_EXP", "DVC_STAGE", "BENCH_ACCEPT"))
    keys = tmp_path / "keys"
    keys.mkdir()
    new_key_pair(keys / "accept.pem", keys / "accept.pub")
    _with_key(work, env, keys / "accept.pem")
    proc = run([sys.executable, "-m", "bench.cli", "accept"], work, env)
    assert "acceptance #1 on commit" in proc.stdout
    bundle = work / "reports/test.bundle.zip"
    with zipfile.ZipFile(bundle) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    assert members["metrics/test.json"] == (work / "reports/metrics/test.json").read_bytes()
    row = json.loads((work / "reports/acceptance.jsonl").read_text().splitlines()[-1])
    assert json.loads(members["acceptance.json"]) == row
    assert json.loads(members["statement.json"])["predicate"]["split"] == "test"
    # the test entries travel without their questions, answers or gold text
    assert {key for line in members["entries.jsonl"].splitlines() for key in json.loads(line)} == {
        "query_id", "modality", "unanswerable", "as_of", "scope", "clusters"}  # clusters: labels, never the question
    assert "no signature" in failed(verify(_unsigned(bundle, tmp_path), keys / "accept.pub", cwd=work))

    # the dev run's bundle nests the accepted test run (its own signature checked too) and the audit chain;
    # both runs are recomputed (the test bundle alone verifies the same way: test_verify_e2e checks that path)
    res = bench("bundle", "--sign", str(keys / "accept.pem"), "--out", str(tmp_path / "dev.zip"), cwd=work)
    assert res.exit_code == 0, res.output
    res = verify(tmp_path / "dev.zip", keys / "accept.pub", cwd=work)
    assert res.exit_code == 0, res.output
    key_id = json.loads(members["signature.json"])["key_id"]
    for line in (f"verify: test.bundle.zip: signature: ed25519 over the Statement's RFC 8785 JSON, by the trusted key {key_id}",
                 "verify: test.bundle.zip: acceptance #1 is row 1 of the bundled acceptance.jsonl"):
        assert line in res.stdout.splitlines()
    assert any(line.startswith("verify: test.bundle.zip: recomputed: metrics/test.json (") for line in res.stdout.splitlines())


def _unsigned(bundle: Path, folder: Path) -> Path:
    out = folder / "unsigned.zip"
    with zipfile.ZipFile(bundle) as zf, zipfile.ZipFile(out, "w") as dest:
        for name in zf.namelist():
            if name != "signature.json":
                dest.writestr(name, zf.read(name))
    return out
