"""End to end on the reproduced project (tests/conftest.py `reproduced`: MMLongBench-Doc and LoCoMo, default
params): `bench bundle --sign` and `bench verify`, which recomputes dev.json from the bundle alone and fails
closed, with one line naming what, on each tampering issue 51 names; a bundle as a run of `bench gate` and
`bench compare`.

Tampering "re-signed" is a signer whose claims its own run does not bear out (the signature is valid, the
recomputation is not); "not re-signed" is a third party editing a signed bundle (the index catches it)."""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner, Result

from bench.bundle.signing import PrivateKey, load_private, load_public, new_key_pair
from bench.bundle.statement import bundle_bytes, open_bundle
from bench.cli import cli
from tests.bundle.test_signing import unimportable
from tests.conftest import MIRROR

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Signed:
    project: Path
    bundle: Path
    key: PrivateKey
    public: Path
    folder: Path


def bench(*args: str, cwd: Path) -> Result:
    with contextlib.chdir(cwd):
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def signed(reproduced: Path, tmp_path_factory: pytest.TempPathFactory) -> Signed:
    folder = tmp_path_factory.mktemp("bundle")
    new_key_pair(folder / "k.pem", folder / "k.pub")
    res = bench("bundle", "--sign", str(folder / "k.pem"), "--out", str(folder / "dev.zip"), cwd=reproduced)
    assert res.exit_code == 0, res.output
    assert "signed by sha256:" in res.stdout and "harness: the installed code is the bundle's" in res.stdout
    return Signed(reproduced, folder / "dev.zip", load_private(folder / "k.pem"), folder / "k.pub", folder)


def verify(path: Path, key: Path | None, *more: str, cwd: Path) -> Result:
    return bench("verify", str(path), *(["--key", str(key)] if key else []), *more, cwd=cwd)


def failed(res: Result) -> str:
    """The one failure line (asserting there is exactly one, exit 1 and no pass)."""
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("verify: FAILED: "), res.stderr
    assert "verify: ok" not in res.stdout
    return lines[0]


def raw(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def edited(s: Signed, name: str, change: Callable[[dict[str, bytes]], None], *, resign: PrivateKey | None = None,
           predicate: Callable[[dict], None] | None = None) -> Path:
    """The signed bundle with `change` made to its members: re-signed by `resign` (its Statement restated), or
    written back with the original Statement and signature (a third party's edit)."""
    opened = open_bundle(s.bundle)
    members = dict(opened.members)
    change(members)
    out = s.folder / f"{name}.zip"
    if resign is not None:
        stated = {k: v for k, v in opened.predicate.items() if k != "format"}
        if predicate is not None:
            predicate(stated)
        out.write_bytes(bundle_bytes(members, stated, resign))
        return out
    original = raw(s.bundle)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for member, data in {**members, "statement.json": original["statement.json"], "signature.json": original["signature.json"]}.items():
            zf.writestr(member, data)
    out.write_bytes(buf.getvalue())
    return out


def json_member(name: str, change: Callable[[dict], None]) -> Callable[[dict[str, bytes]], None]:
    def apply(members: dict[str, bytes]) -> None:
        doc = json.loads(members[name])
        change(doc)
        members[name] = (json.dumps(doc, indent=2) + "\n").encode()
    return apply


def parquet_member(name: str, change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[dict[str, bytes]], None]:
    def apply(members: dict[str, bytes]) -> None:
        buf = io.BytesIO()
        change(pd.read_parquet(io.BytesIO(members[name]))).to_parquet(buf, index=False)
        members[name] = buf.getvalue()
    return apply


def test_a_clean_bundle_verifies_and_its_recomputation_equals_dev_json(signed):
    res = verify(signed.bundle, signed.public, "--mirror", str(MIRROR), cwd=signed.project)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[-1] == f"verify: ok: {signed.bundle}"
    assert any(line.startswith("verify: recomputed: metrics/dev.json (") and "per_query/dev.parquet (" in line for line in lines)
    assert any(line.startswith("verify: mirror: ") and "corpus files of locomo, mmlongbench" in line for line in lines)
    # what verify recomputed equal is the project's own dev.json and per-query table, byte for byte
    members = raw(signed.bundle)
    assert members["metrics/dev.json"] == (signed.project / "reports/metrics/dev.json").read_bytes()
    assert members["per_query/dev.parquet"] == (signed.project / "reports/per_query/dev.parquet").read_bytes()
    # no question, answer or corpus text: entries cut to what the evaluation reads, atoms without their text
    assert {key for line in members["entries.jsonl"].splitlines() for key in json.loads(line)} == {
        "query_id", "modality", "unanswerable", "as_of", "scope", "clusters"}  # clusters: labels, never the question
    for name in ("atoms/conversation.parquet", "atoms/pdf.parquet"):
        assert "text" not in pd.read_parquet(io.BytesIO(members[name])).columns
    statement = json.loads(members["statement.json"])
    cell = next(r for r in statement["predicate"]["results"] if r["scope"] == "overall" and r["metric"] == "recall@10")
    assert set(cell) == {"scope", "metric", "value", "n", "denominator", "ci95"} and cell["n"] == cell["denominator"] > 0


def _edit_recall(doc: dict) -> None:
    doc["overall"]["recall@10"]["value"] += 0.01


def _first_hit_row_moved(members: dict[str, bytes]) -> None:
    """A query whose rank-1 atom is gold gets another query's atom there (neither in its run nor its gold)."""
    table = pd.read_parquet(io.BytesIO(members["per_query/dev.parquet"]))
    query = str(table.loc[table["first_hit_rank"] == 1, "query_id"].iloc[0])

    def change(run: pd.DataFrame) -> pd.DataFrame:
        mine = run["query_id"].astype(str) == query
        gold = pd.read_parquet(io.BytesIO(members["gold/gold.parquet"]))
        taken = set(run.loc[mine, "atom"]) | set(gold.loc[gold["query_id"].astype(str) == query, "atom"])
        other = next(a for a in run.loc[~mine, "atom"] if a not in taken)
        run.loc[mine & (run["rank"] == 1), "atom"] = other
        return run

    parquet_member("run/run.parquet", change)(members)


def _first_row_recall_flipped(frame: pd.DataFrame) -> pd.DataFrame:
    frame.loc[0, "recall@10"] = 1.0 - float(frame.loc[0, "recall@10"])
    return frame


def test_a_signer_whose_numbers_its_run_does_not_give_fails(signed):
    cases = {
        "metric": (json_member("metrics/dev.json", _edit_recall), "metrics/dev.json: 1 value(s) differ from the recomputation; "
                                                                  "first overall.recall@10.value"),
        "per-query": (parquet_member("per_query/dev.parquet", _first_row_recall_flipped), "per_query/dev.parquet: query "),
        "run-row": (_first_hit_row_moved, "metrics/dev.json: "),
    }
    for name, (change, words) in cases.items():
        line = failed(verify(edited(signed, name, change, resign=signed.key), signed.public, cwd=signed.project))
        assert words in line, (name, line)
    assert "recall@10: bundle" in line or "value(s) differ" in line


def test_a_swapped_set_digest_fails_against_the_sets(signed):
    set_file = "bench/sets/locomo.jsonl"
    swapped = "0" * 64

    def swap(members: dict[str, bytes]) -> None:
        for name, where in (("metrics/dev.json", lambda d: d["sha256"]), ("evaluation.json", lambda d: d["sha256"])):
            json_member(name, lambda d, where=where: where(d)["sets"].__setitem__(set_file, swapped))(members)

    signer = edited(signed, "digest", swap, resign=signed.key, predicate=lambda p: p["inputs"]["sets"].__setitem__(set_file, swapped))
    line = failed(verify(signer, signed.public, "--mirror", str(MIRROR), cwd=signed.project))
    assert line.startswith(f"verify: FAILED: mirror: {set_file}: sha256 ") and f"the bundle records {swapped}" in line
    # a third party's swap: the index
    third = edited(signed, "digest3", json_member("metrics/dev.json", lambda d: d["sha256"]["sets"].__setitem__(set_file, swapped)))
    assert "member 'metrics/dev.json': sha256 " in failed(verify(third, signed.public, cwd=signed.project))


def test_a_third_party_edit_or_a_removed_member_fails_on_the_index(signed):
    line = failed(verify(edited(signed, "metric3", json_member("metrics/dev.json", _edit_recall)), signed.public, cwd=signed.project))
    assert "member 'metrics/dev.json': sha256 " in line and "the signed index says" in line and line.endswith("(changed)")
    removed = edited(signed, "removed", lambda m: m.pop("gold/regions.parquet"))
    assert failed(verify(removed, signed.public, cwd=signed.project)).endswith(
        "member 'gold/regions.parquet' is in the signed index but not in the bundle (removed)")


def test_only_the_verifiers_key_is_trusted(signed):
    new_key_pair(signed.folder / "o.pem", signed.folder / "o.pub")
    other = load_public(signed.folder / "o.pub")
    line = failed(verify(signed.bundle, signed.folder / "o.pub", cwd=signed.project))
    assert f"by the trusted key {other.key_id}; it names key {signed.key.public.key_id}" in line
    # an attacker re-signs an edited bundle with their own key and embeds that key: never trusted
    attacker = load_private(signed.folder / "o.pem")

    def embed(members: dict[str, bytes]) -> None:
        json_member("metrics/dev.json", _edit_recall)(members)
        members["signer.pub"] = (signed.folder / "o.pub").read_bytes()

    forged = edited(signed, "forged", embed, resign=attacker)
    files = raw(forged)
    signature = json.loads(files["signature.json"])
    signature["public_key"] = files["signer.pub"].decode()
    forged.write_bytes(_zip({**files, "signature.json": json.dumps(signature).encode()}))
    line = failed(verify(forged, signed.public, cwd=signed.project))
    assert f"by the trusted key {signed.key.public.key_id}; it names key {other.key_id}" in line
    assert "no trusted key given (--key PUBLIC)" in failed(verify(forged, None, cwd=signed.project))


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_a_missing_signature_or_library_fails(signed, monkeypatch):
    files = raw(signed.bundle)
    files.pop("signature.json")
    (signed.folder / "unsigned.zip").write_bytes(_zip(files))
    assert failed(verify(signed.folder / "unsigned.zip", signed.public, cwd=signed.project)).endswith(
        "unsigned.zip: no signature (signature.json): an unsigned bundle never verifies")
    with monkeypatch.context() as m:
        unimportable(m, "cryptography")
        assert "the Ed25519 library cannot be imported" in failed(verify(signed.bundle, signed.public, cwd=signed.project))
    with monkeypatch.context() as m:
        unimportable(m, "rfc8785")
        assert "the RFC 8785 canonical JSON library cannot be imported" in failed(verify(signed.bundle, signed.public, cwd=signed.project))


def test_gate_and_compare_read_a_bundle_as_a_run(signed):
    stats = ("--resamples", "50", "--permutations", "200")
    res = bench("gate", str(signed.bundle), *stats, cwd=signed.project)
    assert res.exit_code == 0, res.output  # the project's own run against its bundle: nothing differs
    res = bench("compare", str(signed.bundle), str(signed.project), "--format", "json", *stats, cwd=signed.project)
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert rows and all(r["diff"] == 0 for r in rows if r.get("diff") is not None)
    changed = edited(signed, "gate3", json_member("metrics/dev.json", _edit_recall))
    res = bench("gate", str(changed), *stats, cwd=signed.project)
    assert res.exit_code == 2 and "gate: refused: gate3.zip: member 'metrics/dev.json': sha256 " in res.stderr
