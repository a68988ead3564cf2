"""Integrity of data: corpus files checked before reading, fetch that survives faults,
and system results the harness refuses to score."""

from __future__ import annotations

import hashlib
import http.server
import math
import threading
from pathlib import Path

import pandas as pd
import pytest

from bench.ingest.corpus import IntegrityError, Manifest, extract_all, verified_files
from bench.ingest.fetch import FetchLog, copy_hashed, download, fetch_file
from bench.io import write_jsonl
from bench.modalities.base import CorpusFile
from bench.systems import Hit
from tests.conftest import MIRROR, need_mirror

# --------------------------------------------------------------------------- corpus files are verified


@pytest.fixture
def small_store(tmp_path: Path) -> tuple[Manifest, Path, Path]:
    """A store and manifest holding one real LoCoMo annotation file (copied, never the mirror)."""
    need_mirror("locomo")
    from bench.corpus_sources import datasets

    ds = datasets()["locomo"]
    log = FetchLog()
    store = tmp_path / "store"
    rows = [fetch_file(ds, CorpusFile(source_id=f"{ds.key}:annotations", path=p), store, [MIRROR], False, log) for p in ds.annotation_files]
    assert all(r["status"] == "present" for r in rows), log
    path = tmp_path / "manifest.jsonl"
    write_jsonl(path, rows)
    local = store / "locomo" / rows[0]["path"]
    # fetch hard-links mirror files; these tests tamper in place, so give the stored file its own inode
    data = local.read_bytes()
    local.unlink()
    local.write_bytes(data)
    return Manifest.load(path), store, local


def test_verified_store_passes(small_store):
    manifest, store, local = small_store
    assert list(verified_files(manifest, "locomo", store).values()) == [local]


def test_same_size_different_bytes_is_named(small_store):
    manifest, store, local = small_store
    data = bytearray(local.read_bytes())
    data[len(data) // 2] ^= 0x01
    local.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=r"^locomo/.+: sha256 [0-9a-f]{64} on disk, manifest says [0-9a-f]{64}$"):
        extract_all(manifest, store)


def test_size_change_is_named(small_store):
    manifest, store, local = small_store
    local.write_bytes(local.read_bytes() + b" ")
    with pytest.raises(IntegrityError, match=r"^locomo/.+: \d+ bytes on disk, manifest says \d+$"):
        extract_all(manifest, store)


def test_missing_file_is_named(small_store):
    manifest, store, local = small_store
    local.unlink()
    with pytest.raises(IntegrityError, match="listed as present in the manifest but missing from the store; run the fetch stage"):
        verified_files(manifest, "locomo", store)


def test_validate_cli_reads_the_corpus_only_through_the_check(small_store, tmp_path, monkeypatch):
    """`bench validate` without data/segments parses the corpus itself: verified first."""
    from click.testing import CliRunner

    from bench import cli

    manifest, store, local = small_store
    local.write_bytes(local.read_bytes() + b" ")
    root = tmp_path / "proj"
    (root / "bench" / "sets").mkdir(parents=True)
    (root / "params.yaml").write_text("datasets: all\n")
    (root / "data").mkdir()
    (root / "data" / "corpus").symlink_to(store)
    (root / "bench" / "sets" / "x.jsonl").write_text("")
    manifest_path = tmp_path / "manifest.jsonl"
    monkeypatch.chdir(root)
    result = CliRunner().invoke(cli.cli, ["validate", str(root / "bench" / "sets" / "x.jsonl"), "--manifest", str(manifest_path)])
    assert result.exit_code == 1
    assert "bytes on disk, manifest says" in result.output


# --------------------------------------------------------------------------- fetch survives faults


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves one payload with Range support; the first full response is cut short."""

    payload = b""
    cut_first = True
    requests: list[str | None] = []

    def do_GET(self) -> None:
        rng = self.headers.get("Range")
        type(self).requests.append(rng)
        start = int(rng.split("=")[1].rstrip("-")) if rng else 0
        if start >= len(self.payload):
            self.send_response(416)
            self.end_headers()
            return
        body = self.payload[start:]
        self.send_response(206 if rng else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if type(self).cut_first and not rng:
            type(self).cut_first = False
            self.wfile.write(body[: len(body) // 3])  # then the connection drops
            self.wfile.flush()
            self.connection.shutdown(2)
            return
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    RangeHandler.payload = bytes(range(256)) * 4096  # 1 MiB
    RangeHandler.cut_first = True
    RangeHandler.requests = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/file.bin"
    httpd.shutdown()


def test_interrupted_download_retries_and_resumes(server, tmp_path):
    dest = tmp_path / "store" / "file.bin"
    part = download(server, dest, attempts=3, backoff=0)
    assert part.read_bytes() == RangeHandler.payload
    assert RangeHandler.requests[0] is None and RangeHandler.requests[1].startswith("bytes=")  # resumed, not restarted
    assert not dest.exists()  # the caller renames it only once the hash is accepted


def test_whole_part_left_by_a_killed_run_is_not_refetched_forever(server, tmp_path):
    """A run killed after the download but before the rename left a whole part: 416 means done."""
    dest = tmp_path / "store" / "file.bin"
    part = dest.with_name(f".{dest.name}.download")
    part.parent.mkdir(parents=True)
    part.write_bytes(RangeHandler.payload)
    assert download(server, dest, attempts=2, backoff=0).read_bytes() == RangeHandler.payload
    assert RangeHandler.requests == [f"bytes={len(RangeHandler.payload)}-"]


def test_orphaned_temp_copies_are_removed_on_the_next_run(tmp_path):
    src = tmp_path / "mirror" / "a.bin"
    src.parent.mkdir()
    src.write_bytes(b"abc" * 1000)
    dest = tmp_path / "store" / "a.bin"
    dest.parent.mkdir()
    orphan = dest.parent / ".a.bin.k1ll3d.part"  # what kill -9 mid-copy leaves behind
    orphan.write_bytes(b"abc")
    sha, size, tmp = copy_hashed(src, dest)
    assert not orphan.exists() and tmp.exists() and size == 3000
    assert sha == hashlib.sha256(src.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- system results


class FakeSystem:
    name = "fake"

    def __init__(self, hits: list[Hit]):
        self.hits = hits

    def search(self, query) -> list[Hit]:
        return self.hits


ENTRY = {"query_id": "q:1", "question": "q", "as_of": "2024-01-01T00:00:00+00:00", "scope": {"holder": "h", "session": None, "scenario": None}}


@pytest.mark.parametrize(
    ("hits", "message"),
    [
        ([Hit("a1", math.nan)], r"query q:1: malformed response: hit 1 \(a1\): score must be a finite number, got nan"),
        ([Hit("a1", math.inf)], r"query q:1: malformed response: hit 1 \(a1\): score must be a finite number, got inf"),
        ([Hit("a1", 2.0), Hit("zz", 1.0)], r"query q:1: malformed response: hit 2: unknown atom id 'zz' \(not among the served atoms\)"),
        ([Hit("a1", 2.0), Hit("a1", 1.0)], r"query q:1: malformed response: hit 2: atom a1 returned twice"),
    ],
)
def test_bad_system_result_names_the_query(hits, message):
    from tests.systems.python_system import run_python_system

    with pytest.raises(ValueError, match=f"^{message}$"):
        run_python_system(FakeSystem(hits), [ENTRY], 10, known_atoms={"a1", "a2"})


def test_good_system_result_passes():
    from tests.systems.python_system import run_python_system

    run, latency = run_python_system(FakeSystem([Hit("a2", 2.0), Hit("a1", 2.0)]), [ENTRY], 10, known_atoms={"a1", "a2"})
    assert run["atom_id"].tolist() == ["a2", "a1"] and len(latency) == 1
    assert isinstance(run, pd.DataFrame)


# --------------------------------------------------------------------------- bad input not in tests/annotations/test_validate.py


def _dev(key: str) -> dict:
    import json

    from tests.conftest import ROOT

    for line in (ROOT / "bench" / "sets" / f"{key}.jsonl").read_text(encoding="utf-8").splitlines():
        e = json.loads(line)
        if e["split"] == "dev" and not e["unanswerable"] and e["gold"]:
            return e
    raise AssertionError


@pytest.mark.parametrize(
    ("key", "mutate", "check", "value"),
    [
        # whole-file gold where the modality needs a region
        ("locomo", lambda e: e["gold"][0].update(region={}), "gold/region shape", "gold[0].region: conversation region must have keys {turn}, got {}"),
        ("locomo", lambda e: e["gold"][0].pop("region"), "gold/region shape", "missing field gold[0].region"),
        # wrong types that used to crash the uniqueness check (found by tests/evaluation/test_properties.py)
        ("locomo", lambda e: e.update(query_id=["locomo:x"]), "query_id must be a non-empty string", '["locomo:x"]'),
        ("mmlongbench", lambda e: e.update(query_id={"a": 1}), "query_id must be a non-empty string", '{"a": 1}'),
        ("locomo", lambda e: e.update(modality=[]), "modality must be one of ['code', 'conversation', 'image', 'pdf', 'ui_screenshot', 'video']", "[]"),
        # region of another modality's shape, on a conversation
        ("locomo", lambda e: e["gold"][0].update(region={"page": 1}), "gold/region shape", "gold[0].region: conversation region must have keys {turn}, got {page}"),
    ],
)
def test_more_bad_entries_rejected(tmp_path, real_corpus, key, mutate, check, value):
    import copy

    from bench.annotations.validate import validate
    from tests.conftest import write_set

    bad = copy.deepcopy(_dev(key))
    mutate(bad)
    result = validate([write_set(tmp_path / "s.jsonl", [bad])], real_corpus["manifest"], real_corpus["segments"], root=tmp_path)
    rows = result.errors.to_dict("records")
    assert any(r["check"] == check and r["value"] == value and r["line"] == 1 and r["file"] == "s.jsonl" for r in rows), rows
    assert result.entries == []


def test_gold_iff_unanswerable_and_duplicates_are_one_clear_row_each(tmp_path, real_corpus):
    """Pandera reported the frame-wide gold/unanswerable check once per column (17 rows)."""
    import copy

    from bench.annotations.validate import validate
    from tests.conftest import write_set

    good = _dev("locomo")
    bad = copy.deepcopy(good)
    bad["gold"], bad["query_id"] = [], good["query_id"] + "-x"
    result = validate([write_set(tmp_path / "a.jsonl", [bad]), write_set(tmp_path / "b.jsonl", [good, good])],
                      real_corpus["manifest"], real_corpus["segments"], root=tmp_path)
    rows = [(r["file"], r["line"], r["check"], r["value"]) for r in result.errors.to_dict("records")]
    assert ("a.jsonl", 1, "gold must be empty if and only if unanswerable", "unanswerable=false, gold has 0 regions") in rows
    assert sum(1 for r in rows if r[0] == "a.jsonl") == 1
    assert [r for r in rows if r[0] == "b.jsonl"] == [("b.jsonl", 1, "query_id must be unique across all set files", good["query_id"]),
                                                     ("b.jsonl", 2, "query_id must be unique across all set files", good["query_id"])]


# --------------------------------------------------------------------------- refusals keep previous outputs


def _snapshot(work: Path, *rels: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for rel in rels:
        p = work / rel
        files = [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else []
        for f in files:
            out[f.relative_to(work).as_posix()] = f.read_bytes() if f.stat().st_size < 50_000_000 else str(f.stat().st_size).encode()
    return out


@pytest.mark.e2e
def test_refused_stages_leave_their_previous_outputs(tmp_path):
    """fetch (unknown data set), validate (a bad entry) and evaluate (k > depth) refuse
    with one line under `dvc repro`; each stage's previous outputs stay byte for byte."""
    import subprocess

    import yaml

    from tests.project_copy import copy_project, project_env, run

    need_mirror("mmlongbench-doc", "locomo")
    work = copy_project(tmp_path / "project", datasets=["mmlongbench", "locomo"], skip=("dvc.lock",))
    env = project_env(tmp_path / "site-cache", drop=("DVC_EXP", "DVC_STAGE"))
    for args in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "copy"], ["dvc", "repro"]):
        run(args, work, env)
    outputs = ("bench/corpus/manifest.jsonl", "data/corpus", "data/sets", "reports/metrics/dev.json", "reports/dev.md",
               "reports/per_query/dev.parquet", "reports/plots", "data/eval")
    before = _snapshot(work, *outputs)
    assert any(k.startswith("data/corpus/") for k in before) and "data/sets/dev.jsonl" in before
    params_text = (work / "params.yaml").read_text()

    def repro_refused(needle: str) -> str:
        proc = subprocess.run(["dvc", "repro"], cwd=work, env=env, capture_output=True, text=True, check=False)
        assert proc.returncode != 0, proc.stdout + proc.stderr
        errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and needle in errors[0], proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        after = _snapshot(work, *outputs)
        assert sorted(after) == sorted(before)
        assert [k for k in before if after[k] != before[k]] == []
        return errors[0]

    params = yaml.safe_load(params_text)
    params["datasets"] = ["mmlongbench", "locomoo"]
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert repro_refused("params.yaml: datasets: unknown data set 'locomoo' (did you mean 'locomo'?)")
    (work / "params.yaml").write_text(params_text)

    sets = work / "bench" / "sets" / "locomo.jsonl"
    good = sets.read_text(encoding="utf-8")
    sets.write_text(good + '{"query_id": "locomo:broken"}\n', encoding="utf-8")
    assert repro_refused("problems in 1 set file(s); nothing written")
    sets.write_text(good, encoding="utf-8")

    params = yaml.safe_load(params_text)
    params["metrics"]["k"] = 500
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert repro_refused("params.yaml: metrics.k: 500 is more than system.depth (100)")
    (work / "params.yaml").write_text(params_text)
    assert "up to date" in run(["dvc", "status", "dvc.yaml"], work, env).stdout


@pytest.mark.e2e
def test_unsafe_archive_member_is_a_one_line_refusal(tmp_path):
    """LoCoMo's real zip with one '..' member added, unpinned: the fetch stage stops with
    one line naming archive and member; no traceback, no manifest written."""
    import subprocess
    import sys
    import zipfile

    import yaml

    from tests.project_copy import copy_project, project_env

    need_mirror("locomo")
    mirror = tmp_path / "mirror"
    (mirror / "locomo" / "data").mkdir(parents=True)
    evil = mirror / "locomo" / "data" / "locomo10.zip"
    evil.write_bytes((MIRROR / "locomo" / "data" / "locomo10.zip").read_bytes())
    with zipfile.ZipFile(evil, "a") as zf:
        zf.writestr("data/multimodal_dialog/locomo10_v2/../../../../evil.json", b"{}")
    work = copy_project(tmp_path / "project", datasets=["locomo"])
    (work / "bench" / "corpus" / "pins" / "locomo.json").unlink()  # an unpinned archive is read
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["fetch"]["mirror_dirs"] = [str(mirror)]
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    manifest = (work / "bench" / "corpus" / "manifest.jsonl").read_bytes()
    env = {**project_env(tmp_path / "site"), "PYTHONPATH": str(work)}
    proc = subprocess.run([sys.executable, "-m", "stages.fetch"], cwd=work, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        ("error: fetch: refused: data/corpus/locomo/data/locomo10.zip: member 'data/multimodal_dialog/locomo10_v2/../../../../evil.json' "
         "leaves the target folder ('..'); nothing written to the manifest")]
    assert (work / "bench" / "corpus" / "manifest.jsonl").read_bytes() == manifest
    assert not (tmp_path / "evil.json").exists()


# --------------------------------------------------------------------------- unreadable corpus files


def _pdf(encrypted: bool) -> bytes:
    """A one-page PDF; with `encrypted`, it carries a standard security handler whose
    user password is not empty (as a reader sees a password-protected document)."""
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>"]
    if encrypted:
        objs.append(b"<< /Filter /Standard /V 1 /R 2 /O <" + b"11" * 32 + b"> /U <" + b"22" * 32 + b"> /P -4 >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for o in offsets:
        out += b"%010d 00000 n \n" % o
    trailer = b"<< /Size %d /Root 1 0 R" % (len(objs) + 1)
    if encrypted:
        trailer += b" /Encrypt 4 0 R /ID [<" + b"ab" * 16 + b"> <" + b"ab" * 16 + b">]"
    out += b"trailer\n" + trailer + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def test_corrupt_and_encrypted_pdfs_make_their_entries_invalid_named(tmp_path, real_corpus):
    """Three real MMLongBench-Doc documents; one replaced by an encrypted PDF, one by a
    truncated one. Extraction goes on and names both files; validation marks exactly
    their entries invalid (`unreadable corpus file`), the run goes on."""
    import json
    import shutil

    from bench.annotations.validate import invalid_counts, validate
    from bench.ingest.corpus import read_unreadable
    from bench.io import write_json
    from tests.conftest import ROOT

    rows = [r for r in real_corpus["manifest"].rows if r["key"] == "mmlongbench"]
    entries = [json.loads(x) for x in (ROOT / "bench/sets/mmlongbench.jsonl").read_text().splitlines()]
    entries = [e for e in entries if e["split"] == "dev"]
    docs = []
    for r in rows:
        if r["status"] == "present" and r["path"].startswith("data/documents/") and any(
                e["query_id"].split(":")[1] == r["path"].rsplit("/", 1)[1] for e in entries):
            docs.append(r)
        if len(docs) == 3:
            break
    annotation = next(r for r in rows if r["path"] == "data/samples.json")
    store = tmp_path / "store"
    keep = [annotation, *docs]
    for r in keep:
        (store / "mmlongbench" / r["path"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(real_corpus["store"] / "mmlongbench" / r["path"], store / "mmlongbench" / r["path"])
    good, encrypted, corrupt = docs
    bad_bytes = {encrypted["path"]: _pdf(True), corrupt["path"]: (real_corpus["store"] / "mmlongbench" / corrupt["path"]).read_bytes()[:2000]}
    manifest_rows = []
    for r in keep:
        r = dict(r)
        if r["path"] in bad_bytes:
            (store / "mmlongbench" / r["path"]).write_bytes(bad_bytes[r["path"]])
            r.update(sha256=hashlib.sha256(bad_bytes[r["path"]]).hexdigest(), bytes=len(bad_bytes[r["path"]]))
        manifest_rows.append(r)
    write_jsonl(tmp_path / "manifest.jsonl", manifest_rows)
    manifest = Manifest.load(tmp_path / "manifest.jsonl")

    with pytest.raises(IntegrityError, match=r"^mmlongbench/data/documents/.*\.pdf: cannot be read \(PdfiumError: Failed to load document"):
        extract_all(manifest, store)  # without a list to record them: a named stop, not a traceback
    unreadable: list[dict] = []
    frames = extract_all(manifest, store, unreadable)
    assert sorted((u["path"], u["reason"].split(" (PDFium: ")[-1]) for u in unreadable) == sorted(
        [(encrypted["path"], "Incorrect password error)."), (corrupt["path"], "Data format error).")])
    seg = frames["mmlongbench"]
    assert set(seg["source_id"]) == {f"mmlongbench:{good['path'].rsplit('/', 1)[1]}"}
    write_json(tmp_path / "segments" / "unreadable.json", unreadable)
    assert read_unreadable(tmp_path / "segments") == unreadable

    mine = [e for e in entries if e["query_id"].split(":")[1] in {d["path"].rsplit("/", 1)[1] for d in docs}]
    result = validate([write_set_file(tmp_path / "mmlongbench.jsonl", mine)], manifest, seg, root=tmp_path, unreadable=unreadable)
    assert result.ok, result.errors.head()
    invalid = {r["query_id"]: r["reason"] for r in result.invalid}
    bad_docs = {encrypted["path"].rsplit("/", 1)[1], corrupt["path"].rsplit("/", 1)[1]}
    assert set(invalid) == {e["query_id"] for e in mine if e["query_id"].split(":")[1] in bad_docs}
    assert all(reason.startswith("unreadable corpus file: data/documents/") and "PdfiumError" in reason for reason in invalid.values())
    assert invalid_counts(result.invalid) == {"dev": {"unreadable corpus file": len(invalid)}}
    assert {e["query_id"] for e in result.dev()} == {e["query_id"] for e in mine} - set(invalid)


def write_set_file(path: Path, entries: list[dict]) -> Path:
    import json

    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- a system's own atoms: ids and times


@pytest.mark.parametrize(("field", "value", "message"), [
    ("atom_id", "a 1", "atoms.jsonl:1: atom_id: must be no whitespace or control character (value: a 1)"),
    ("atom_id", "a1\n", "atoms.jsonl:1: atom_id: must be no whitespace or control character"),
    ("observed_at", "1500-01-01T00:00:00+00:00", "atoms.jsonl:1: observed_at: must be ISO 8601 time with a timezone (value: 1500-01-01T00:00:00+00:00)"),
])
def test_system_atoms_with_unusable_ids_or_times_are_refused(tmp_path, field, value, message):
    import json

    from bench.systems.atoms import AtomsError, load_system_atoms
    from tests.systems.test_atoms import GOOD

    path = tmp_path / "atoms.jsonl"
    path.write_text(json.dumps({**GOOD, field: value}) + "\n", encoding="utf-8")
    with pytest.raises(AtomsError) as err:
        load_system_atoms(path, None)
    assert message in str(err.value).replace(str(tmp_path) + "/", "")
