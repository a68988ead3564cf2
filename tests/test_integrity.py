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

from bench.corpus import IntegrityError, Manifest, extract_all, verified_files
from bench.fetch import FetchLog, copy_hashed, download, fetch_file
from bench.io import write_jsonl
from bench.modalities.base import CorpusFile
from bench.systems import Hit
from tests.conftest import MIRROR, need_mirror

# --------------------------------------------------------------------------- corpus files are verified


@pytest.fixture
def small_store(tmp_path: Path) -> tuple[Manifest, Path, Path]:
    """A store and manifest holding one real LoCoMo annotation file (copied, never the mirror)."""
    need_mirror("locomo")
    from bench.modalities import datasets

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

    def do_GET(self) -> None:  # noqa: N802
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
    from bench.retrieve import run_system

    with pytest.raises(ValueError, match=f"^{message}$"):
        run_system(FakeSystem(hits), [ENTRY], 10, known_atoms={"a1", "a2"})


def test_good_system_result_passes():
    from bench.retrieve import run_system

    run, latency = run_system(FakeSystem([Hit("a2", 2.0), Hit("a1", 2.0)]), [ENTRY], 10, known_atoms={"a1", "a2"})
    assert run["atom_id"].tolist() == ["a2", "a1"] and len(latency) == 1
    assert isinstance(run, pd.DataFrame)


# --------------------------------------------------------------------------- bad input not in test_validate_sets


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
        # wrong types that used to crash the uniqueness check (found by tests/test_properties.py)
        ("locomo", lambda e: e.update(query_id=["locomo:x"]), "query_id must be a non-empty string", '["locomo:x"]'),
        ("mmlongbench", lambda e: e.update(query_id={"a": 1}), "query_id must be a non-empty string", '{"a": 1}'),
        ("locomo", lambda e: e.update(modality=[]), "modality must be one of ['code', 'conversation', 'image', 'pdf', 'ui_screenshot', 'video']", "[]"),
        # region of another modality's shape, on a conversation
        ("locomo", lambda e: e["gold"][0].update(region={"page": 1}), "gold/region shape", "gold[0].region: conversation region must have keys {turn}, got {page}"),
    ],
)
def test_more_bad_entries_rejected(tmp_path, real_corpus, key, mutate, check, value):
    import copy

    from bench.validate_sets import validate
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

    from bench.validate_sets import validate
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
