"""bench.ingest.fetch: mirror copies, pins and quarantine, resume, downloads, archive members, manifest."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import shutil
import stat
import time
import zipfile
from pathlib import Path
from typing import ClassVar

import pytest

from bench.ingest.fetch import (
    FetchLog,
    download,
    fetch_dataset,
    fetch_file,
    hash_tree,
    local_path,
    sort_manifest,
    stored_path,
)
from bench.io import write_jsonl
from bench.modalities.base import CorpusFile, Dataset

MIRROR = Path(__file__).resolve().parents[2].parent / "shared" / "mirror"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            zf.writestr(info, data)
    return buf.getvalue()


INDEX = "ann/index.json"
A = b"alpha document\n"
B = b"beta document, a little longer\n"
C = b"gamma: not in any mirror\n"
MEMBERS = {"inner/one.json": b'{"one": 1}', "inner/two.json": b'{"two": 2}'}
BUNDLE = zip_bytes(MEMBERS)
MEMBER_PATHS = ["bundle.zip!/inner/one.json", "bundle.zip!/inner/two.json"]
FILES = ["docs/a.txt", "docs/b.txt", "docs/c.txt", "bundle.zip", "bundle.zip!/inner/one.json", "bundle.zip!/inner/two.json"]
INDEX_BYTES = json.dumps({"files": FILES}).encode()


class FakeDataset(Dataset):
    """A tiny registered-looking data set: an index file names the corpus files."""

    key: ClassVar[str] = "fake"
    name: ClassVar[str] = "test/fake"
    repo: ClassVar[str] = "test/fake"
    revision: ClassVar[str] = "0123456789abcdef0123456789abcdef01234567"
    license: ClassVar[str] = "test"
    annotation_source: ClassVar[str] = "human: test annotators"
    annotation_is_human: ClassVar[bool] = True
    modality: ClassVar[str] = "pdf"
    mirror_key: ClassVar[str] = "fake-mirror"
    holders: ClassVar[str] = "owner"
    observed_at_rule: ClassVar[str] = "fixed"
    annotation_files: ClassVar[tuple[str, ...]] = (INDEX,)

    def __init__(self, pins: dict[str, tuple[str, int]] | None = None):
        self._pins = dict(pins or {})

    def corpus_files(self, annotation_dir: Path) -> list[CorpusFile]:
        listed = json.loads((annotation_dir / INDEX).read_text(encoding="utf-8"))["files"]
        return [CorpusFile(source_id=f"{self.key}:{p}", path=p) for p in listed]

    def pins(self) -> dict[str, tuple[str, int]]:
        return self._pins

    def file_of(self, source_id: str) -> str | None:
        return source_id.split(":", 1)[1]


def good_pins() -> dict[str, tuple[str, int]]:
    return {
        INDEX: (sha(INDEX_BYTES), len(INDEX_BYTES)),
        "docs/a.txt": (sha(A), len(A)),
        "docs/b.txt": (sha(B), len(B)),
        "docs/c.txt": (sha(C), len(C)),
        "bundle.zip": (sha(BUNDLE), len(BUNDLE)),
    }


def make_mirror(root: Path, files: dict[str, bytes] | None = None) -> Path:
    """A mirror root holding the fake data set (everything but docs/c.txt)."""
    files = files if files is not None else {INDEX: INDEX_BYTES, "docs/a.txt": A, "docs/b.txt": B, "bundle.zip": BUNDLE}
    for path, data in files.items():
        p = root / FakeDataset.mirror_key / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root


def umask_mode() -> int:
    """The mode a normally created file gets (mkstemp's 0600 would differ unless umask is 077)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def by_path(rows: list[dict]) -> dict[str, dict]:
    return {r["path"]: r for r in rows}


def stray_temp_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and (p.name.endswith((".part", ".tmp", ".download")))]


def assert_no_local_paths(rows: list[dict], log: FetchLog, *roots: Path) -> None:
    texts = [json.dumps(r) for r in rows] + log.quarantined + log.problems
    for text in texts:
        for root in roots:
            assert str(root) not in text, text
    for r in rows:
        assert not r["path"].startswith("/")
        for value in r.values():
            assert not (isinstance(value, str) and value.startswith("/")), r


class Downloader:
    """Injected stand-in for bench.ingest.fetch.download: serves bytes per URL, or fails."""

    def __init__(self, payloads: dict[str, bytes]):
        self.payloads = payloads
        self.calls: list[str] = []

    def __call__(self, url: str, dest: Path) -> Path:
        self.calls.append(url)
        if url not in self.payloads:
            raise OSError(f"download failed after 3 attempts: {url}: HTTP Error 404: Not Found")
        part = dest.with_name(f".{dest.name}.download")
        part.parent.mkdir(parents=True, exist_ok=True)
        part.write_bytes(self.payloads[url])
        return part


# -- mirror copies ---------------------------------------------------------------


def test_files_copied_from_mirror_with_hash_and_size(tmp_path):
    ds = FakeDataset(good_pins())
    mirror = make_mirror(tmp_path / "mirror")
    store = tmp_path / "store"
    log = FetchLog()
    rows = fetch_dataset(ds, store, [mirror], False, log)
    got = by_path(rows)
    assert list(got) == [INDEX, *FILES]  # annotations first, then the list the annotations give
    for path, data in [(INDEX, INDEX_BYTES), ("docs/a.txt", A), ("docs/b.txt", B), ("bundle.zip", BUNDLE)]:
        row = got[path]
        assert row["status"] == "present"
        assert (row["sha256"], row["bytes"]) == (sha(data), len(data))
        local = store / "fake" / path
        assert local.read_bytes() == data
        assert stat.S_IMODE(local.stat().st_mode) == umask_mode(), "stored copies must not be 0600"
        assert os.stat(local).st_ino == os.stat(mirror / "fake-mirror" / path).st_ino  # linked, not copied
    row = got["docs/a.txt"]
    assert row["source_id"] == "fake:docs/a.txt"
    assert (row["dataset"], row["key"], row["revision"]) == (ds.name, "fake", ds.revision)
    assert row["url"] == f"https://raw.githubusercontent.com/test/fake/{ds.revision}/docs/a.txt"
    assert got[INDEX]["source_id"] == "fake:annotations"
    assert log.quarantined == [] and stray_temp_files(store) == []
    assert_no_local_paths(rows, log, tmp_path)


def test_missing_file_is_unavailable(tmp_path):
    ds = FakeDataset(good_pins())
    store = tmp_path / "store"
    log = FetchLog()
    row = by_path(fetch_dataset(ds, store, [make_mirror(tmp_path / "m")], False, log))["docs/c.txt"]
    assert row["status"] == "unavailable"
    assert (row["sha256"], row["bytes"]) == (sha(C), len(C))  # the pin is still reported
    assert not local_path(store, "fake", "docs/c.txt").exists()


def test_missing_unpinned_file_has_no_hash(tmp_path):
    pins = good_pins()
    del pins["docs/c.txt"]
    log = FetchLog()
    row = by_path(fetch_dataset(FakeDataset(pins), tmp_path / "s", [make_mirror(tmp_path / "m")], False, log))["docs/c.txt"]
    assert (row["status"], row["sha256"], row["bytes"]) == ("unavailable", None, None)


def test_missing_annotations_stop_the_dataset(tmp_path):
    mirror = make_mirror(tmp_path / "m", {"docs/a.txt": A})
    log = FetchLog()
    rows = fetch_dataset(FakeDataset(good_pins()), tmp_path / "s", [mirror], False, log)
    assert [(r["path"], r["status"]) for r in rows] == [(INDEX, "unavailable")]
    assert any("annotation files unavailable" in p for p in log.problems)


def test_unpinned_file_is_accepted_with_its_real_hash(tmp_path):
    pins = good_pins()
    del pins["docs/a.txt"]
    row = by_path(fetch_dataset(FakeDataset(pins), tmp_path / "s", [make_mirror(tmp_path / "m")], False, FetchLog()))["docs/a.txt"]
    assert (row["status"], row["sha256"], row["bytes"]) == ("present", sha(A), len(A))


# -- pins and quarantine -------------------------------------------------------------


def test_mirror_copy_with_wrong_hash_is_quarantined(tmp_path):
    mirror = make_mirror(tmp_path / "m")
    (mirror / "fake-mirror/docs/b.txt").write_bytes(b"tampered beta\n")
    store = tmp_path / "store"
    log = FetchLog()
    rows = fetch_dataset(FakeDataset(good_pins()), store, [mirror], False, log)
    row = by_path(rows)["docs/b.txt"]
    assert row["status"] == "unavailable"
    assert (row["sha256"], row["bytes"]) == (sha(B), len(B))  # the pin, not the bad copy's hash
    assert len(log.quarantined) == 1
    assert log.quarantined[0].startswith("fake-mirror/docs/b.txt: ")
    assert sha(b"tampered beta\n") in log.quarantined[0] and sha(B) in log.quarantined[0]
    assert not (store / "fake/docs/b.txt").exists()
    assert stray_temp_files(store) == []
    assert by_path(rows)["docs/a.txt"]["status"] == "present"  # one bad file spoils nothing else
    assert_no_local_paths(rows, log, tmp_path)


def test_bad_mirror_copy_never_overwrites_a_good_stored_copy(tmp_path):
    ds = FakeDataset(good_pins())
    store = tmp_path / "store"
    fetch_dataset(ds, store, [make_mirror(tmp_path / "good")], False, FetchLog())
    stored = store / "fake/docs/b.txt"
    before = stored.stat()
    bad = make_mirror(tmp_path / "bad")
    (bad / "fake-mirror/docs/b.txt").write_bytes(b"tampered beta\n")
    log = FetchLog()
    row = by_path(fetch_dataset(ds, store, [bad], False, log))["docs/b.txt"]
    assert (row["status"], row["sha256"]) == ("present", sha(B))
    assert stored.read_bytes() == B
    assert stored.stat().st_ino == before.st_ino


def test_bad_first_mirror_root_falls_through_to_a_good_one(tmp_path):
    bad = make_mirror(tmp_path / "bad")
    (bad / "fake-mirror/docs/b.txt").write_bytes(b"tampered beta\n")
    good = make_mirror(tmp_path / "good")
    log = FetchLog()
    row = by_path(fetch_dataset(FakeDataset(good_pins()), tmp_path / "s", [bad, good], False, log))["docs/b.txt"]
    assert (row["status"], row["sha256"]) == ("present", sha(B))
    assert len(log.quarantined) == 1 and "docs/b.txt" in log.quarantined[0]
    assert (tmp_path / "s/fake/docs/b.txt").read_bytes() == B


def test_corrupt_stored_copy_is_fetched_again(tmp_path):
    ds = FakeDataset(good_pins())
    store = tmp_path / "store"
    mirror = make_mirror(tmp_path / "m")
    fetch_dataset(ds, store, [mirror], False, FetchLog())
    stored = store / "fake/docs/a.txt"
    assert os.stat(stored).st_ino == os.stat(mirror / "fake-mirror/docs/a.txt").st_ino  # a hard link
    stored.unlink()  # tampered by replacing: writing in place would change the mirror's own inode
    stored.write_bytes(b"bit rot\n")
    log = FetchLog()
    rows = fetch_dataset(ds, store, [mirror], False, log)
    assert by_path(rows)["docs/a.txt"]["status"] == "present"
    assert (store / "fake/docs/a.txt").read_bytes() == A
    assert len(log.problems) == 1 and "docs/a.txt" in log.problems[0] and "fetched again" in log.problems[0]
    assert_no_local_paths(rows, log, tmp_path)


# -- resume and determinism ---------------------------------------------------------


def test_second_run_resumes_without_the_mirror(tmp_path):
    ds = FakeDataset(good_pins())
    mirror = make_mirror(tmp_path / "m")
    store = tmp_path / "store"
    first = fetch_dataset(ds, store, [mirror], False, FetchLog())
    inodes = {p: p.stat().st_ino for p in store.rglob("*") if p.is_file()}
    shutil.rmtree(mirror)  # nothing left to copy from
    log = FetchLog()
    second = fetch_dataset(ds, store, [mirror], False, log)
    assert second == first
    assert {p: p.stat().st_ino for p in store.rglob("*") if p.is_file()} == inodes  # nothing rewritten
    assert log.problems == [] and log.quarantined == []
    assert sum(r["status"] == "present" for r in second) == len(second) - 1  # all but docs/c.txt


def test_sort_manifest_is_deterministic(tmp_path):
    rows = fetch_dataset(FakeDataset(good_pins()), tmp_path / "s", [make_mirror(tmp_path / "m")], False, FetchLog())
    rows += [dict(r, key="aaa", path="z") for r in rows[:1]]
    expected = sorted(rows, key=lambda r: (r["key"], r["path"]))
    for seed in range(5):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        assert sort_manifest(shuffled) == expected
    assert sort_manifest(rows)[0]["key"] == "aaa"
    paths = [r["path"] for r in sort_manifest(rows) if r["key"] == "fake"]
    assert paths == sorted(paths) and "bundle.zip" in paths


def test_manifest_byte_identical_across_runs_and_stores(tmp_path):
    ds = FakeDataset(good_pins())
    mirror = make_mirror(tmp_path / "m")
    rows1 = fetch_dataset(ds, tmp_path / "store1", [mirror], False, FetchLog())
    rows2 = fetch_dataset(ds, tmp_path / "store2", [mirror], False, FetchLog())
    rows3 = fetch_dataset(ds, tmp_path / "store1", [mirror], False, FetchLog())  # resumed run
    write_jsonl(tmp_path / "m1.jsonl", sort_manifest(rows1))
    write_jsonl(tmp_path / "m2.jsonl", sort_manifest(list(reversed(rows2))))
    write_jsonl(tmp_path / "m3.jsonl", sort_manifest(rows3))
    m1 = (tmp_path / "m1.jsonl").read_bytes()
    assert m1 == (tmp_path / "m2.jsonl").read_bytes() == (tmp_path / "m3.jsonl").read_bytes()
    assert b"store1" not in m1 and str(tmp_path).encode() not in m1


def test_leftover_temp_copies_in_an_existing_store_folder_are_swept(tmp_path):
    """A killed run's temp links/copies (.<name>.<random>.part) are removed when the
    next run first uses their folder; a resumable '.download' part is kept."""
    ds = FakeDataset(good_pins())
    mirror = make_mirror(tmp_path / "m")
    store = tmp_path / "store"
    fetch_dataset(ds, store, [mirror], False, FetchLog())
    (store / "fake/docs/a.txt").unlink()
    leftovers = [store / "fake/docs/.a.txt.k1ll3d.part", store / "fake/docs/.b.txt.0123ab.part"]
    for orphan in leftovers:
        orphan.write_bytes(b"half a copy")
    (store / "fake/docs/.c.txt.part.d").mkdir()  # not a temp copy's name: left alone
    download_part = store / "fake/docs/.c.txt.download"
    download_part.write_bytes(b"gamma: n")
    rows = by_path(fetch_dataset(ds, store, [mirror], False, FetchLog()))
    assert rows["docs/a.txt"]["status"] == "present" and (store / "fake/docs/a.txt").read_bytes() == A
    assert not any(p.exists() for p in leftovers)
    assert download_part.read_bytes() == b"gamma: n" and (store / "fake/docs/.c.txt.part.d").is_dir()


def test_a_mirror_path_that_is_not_a_regular_file_is_skipped(tmp_path):
    """A FIFO or a folder where a file should be is not a mirror copy (and a FIFO must not hang the run)."""
    import threading

    mirror = make_mirror(tmp_path / "bad", {INDEX: INDEX_BYTES, "docs/b.txt": B})
    os.mkfifo(mirror / "fake-mirror/docs/a.txt")
    (mirror / "fake-mirror/bundle.zip").mkdir()
    good = make_mirror(tmp_path / "good", {"bundle.zip": BUNDLE})
    out: list[list[dict]] = []
    worker = threading.Thread(target=lambda: out.append(
        fetch_dataset(FakeDataset(good_pins()), tmp_path / "s", [mirror, good], False, FetchLog())), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert out, "fetch hung on a FIFO in the mirror"
    rows = by_path(out[0])
    assert rows["docs/a.txt"]["status"] == "unavailable" and not (tmp_path / "s/fake/docs/a.txt").exists()
    assert rows["docs/b.txt"]["status"] == "present"
    assert rows["bundle.zip"]["status"] == "present"  # the folder in the first root is skipped
    assert os.stat(tmp_path / "s/fake/bundle.zip").st_ino == os.stat(good / "fake-mirror/bundle.zip").st_ino


class OtherFake(FakeDataset):
    key: ClassVar[str] = "other"
    name: ClassVar[str] = "test/other"
    mirror_key: ClassVar[str] = "other-mirror"


def test_data_sets_fetched_concurrently_give_the_rows_of_one_by_one(tmp_path):
    from bench.ingest.fetch import FetchJob, fetch_datasets

    mirror = make_mirror(tmp_path / "m")
    shutil.copytree(mirror / "fake-mirror", mirror / "other-mirror")
    (mirror / "other-mirror/docs/b.txt").unlink()
    (mirror / "other-mirror/docs/b.txt").write_bytes(b"tampered beta\n")  # quarantined in "other" only
    jobs = [FetchJob(FakeDataset(good_pins()), [mirror], False), FetchJob(OtherFake(good_pins()), [mirror], False)]
    one_log = FetchLog()
    one_by_one = [r for job in jobs for r in fetch_dataset(job.ds, tmp_path / "s1", job.mirror_roots, False, one_log)]
    log = FetchLog()
    together = fetch_datasets(jobs, tmp_path / "s2", log)
    assert together == one_by_one
    assert [r["key"] for r in together[:7]] == ["fake"] * 7 and by_path(together[7:])["docs/b.txt"]["status"] == "unavailable"
    assert sorted(log.quarantined) == sorted(one_log.quarantined) and len(log.quarantined) == 1
    assert "other-mirror/docs/b.txt" in log.quarantined[0]


def test_in_threads_keeps_call_order_and_raises_the_first_error():
    import threading

    from bench.ingest.fetch import in_threads

    calls = [(CorpusFile(source_id=f"fake:{i}", path=f"p{i}"), None) for i in range(60)]
    threads: set[int] = set()

    def fn(cf: CorpusFile, _sha: str | None) -> dict:
        threads.add(threading.get_ident())
        return {"path": cf.path}

    assert [r["path"] for r in in_threads(fn, calls, 4)] == [f"p{i}" for i in range(60)]
    threads.clear()
    assert [r["path"] for r in in_threads(fn, calls[:5], 1)] == ["p0", "p1", "p2", "p3", "p4"]
    assert threads == {threading.get_ident()}  # one worker: the calling thread alone
    assert in_threads(fn, [], 4) == []

    done: list[str] = []

    def failing(cf: CorpusFile, _sha: str | None) -> dict:
        if cf.path in ("p3", "p7"):
            raise ValueError(cf.path)
        time.sleep(0.01)
        done.append(cf.path)
        return {}

    with pytest.raises(ValueError, match="^p3$"):  # calls are taken in order: p3's error is always met
        in_threads(failing, calls, 4)
    assert len(done) <= 8  # an error stops the taking of further calls


def test_hash_file_in_many_threads_at_once(tmp_path):
    """Threads share the read buffers (taken and given back per file): every hash is still right."""
    from concurrent.futures import ThreadPoolExecutor

    from bench.ingest.fetch import CHUNK, hash_file

    rng = random.Random(7)
    blobs = [rng.randbytes(rng.choice([0, 1, 4096, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5])) for _ in range(40)]
    paths = []
    for i, blob in enumerate(blobs):
        paths.append(tmp_path / f"f{i}")
        paths[-1].write_bytes(blob)
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(hash_file, paths * 3))
    assert got == [(sha(b), len(b)) for b in blobs] * 3


# -- downloads (injected downloader) ---------------------------------------------------


def url_of(path: str) -> str:
    return FakeDataset().url(path)


def test_download_when_the_mirror_lacks_the_file(tmp_path):
    ds = FakeDataset(good_pins())
    store = tmp_path / "store"
    dl = Downloader({url_of("docs/c.txt"): C})
    log = FetchLog()
    rows = fetch_dataset(ds, store, [make_mirror(tmp_path / "m")], True, log, downloader=dl)
    row = by_path(rows)["docs/c.txt"]
    assert (row["status"], row["sha256"], row["bytes"]) == ("present", sha(C), len(C))
    assert (store / "fake/docs/c.txt").read_bytes() == C
    assert dl.calls == [url_of("docs/c.txt")]  # the mirror served everything else
    assert stray_temp_files(store) == [] and log.problems == []


def test_no_download_when_not_allowed(tmp_path):
    dl = Downloader({url_of("docs/c.txt"): C})
    row = by_path(fetch_dataset(FakeDataset(good_pins()), tmp_path / "s", [make_mirror(tmp_path / "m")], False, FetchLog(), downloader=dl))["docs/c.txt"]
    assert row["status"] == "unavailable" and dl.calls == []


def test_downloaded_file_with_wrong_hash_is_quarantined(tmp_path):
    store = tmp_path / "store"
    dl = Downloader({url_of("docs/c.txt"): b"someone else's gamma\n"})
    log = FetchLog()
    rows = fetch_dataset(FakeDataset(good_pins()), store, [make_mirror(tmp_path / "m")], True, log, downloader=dl)
    row = by_path(rows)["docs/c.txt"]
    assert row["status"] == "unavailable"
    assert not (store / "fake/docs/c.txt").exists()
    assert (store / ".quarantine/fake/c.txt").read_bytes() == b"someone else's gamma\n"
    assert len(log.quarantined) == 1
    assert url_of("docs/c.txt") in log.quarantined[0] and sha(C) in log.quarantined[0]
    assert stray_temp_files(store / "fake") == []
    assert_no_local_paths(rows, log, tmp_path)


def test_download_error_is_unavailable_and_logged(tmp_path):
    dl = Downloader({})
    log = FetchLog()
    rows = fetch_dataset(FakeDataset(good_pins()), tmp_path / "s", [make_mirror(tmp_path / "m")], True, log, downloader=dl)
    row = by_path(rows)["docs/c.txt"]
    assert row["status"] == "unavailable"
    assert len(log.problems) == 1 and url_of("docs/c.txt") in log.problems[0]
    assert log.quarantined == []
    assert_no_local_paths(rows, log, tmp_path)


def test_download_function_writes_a_part_file_and_reports_failure(tmp_path):
    src = tmp_path / "upstream.bin"
    src.write_bytes(b"payload" * 100)
    dest = tmp_path / "store" / "x" / "file.bin"
    part = download(src.as_uri(), dest, attempts=1, backoff=0)
    assert part.parent == dest.parent and part != dest
    assert part.read_bytes() == src.read_bytes()
    with pytest.raises(OSError, match="download failed after 2 attempts"):
        download((tmp_path / "absent.bin").as_uri(), dest, attempts=2, backoff=0)


# -- archive members ---------------------------------------------------------------


def test_archive_members_extracted_from_the_stored_zip(tmp_path):
    store = tmp_path / "store"
    log = FetchLog()
    rows = by_path(fetch_dataset(FakeDataset(good_pins()), store, [make_mirror(tmp_path / "m")], False, log))
    for member, data in MEMBERS.items():
        path = f"bundle.zip!/{member}"
        assert (rows[path]["status"], rows[path]["sha256"], rows[path]["bytes"]) == ("present", sha(data), len(data))
        local = local_path(store, "fake", path)
        assert local == store / "fake" / "bundle.zip.unpacked" / member
        assert local.read_bytes() == data
        assert stat.S_IMODE(local.stat().st_mode) == umask_mode()
    assert rows["bundle.zip!/inner/one.json"]["url"] == url_of("bundle.zip")
    assert stray_temp_files(store) == []


def test_each_file_is_read_once_and_not_copied(tmp_path, monkeypatch):
    """A first fetch hashes every mirror file once (the outer zip too, though its members
    are unpacked after it) and writes no copy of a mirror file's bytes."""
    import bench.ingest.fetch as fetch_mod

    reads: list[int] = []
    real = fetch_mod.hash_file

    def counting(path):
        reads.append(os.stat(path).st_ino)
        return real(path)

    monkeypatch.setattr(fetch_mod, "hash_file", counting)
    store = tmp_path / "store"
    mirror = make_mirror(tmp_path / "m")
    rows = by_path(fetch_dataset(FakeDataset(good_pins()), store, [mirror], False, FetchLog()))
    plain = [INDEX, "docs/a.txt", "docs/b.txt", "bundle.zip"]
    assert all(rows[p]["status"] == "present" for p in (*plain, *MEMBER_PATHS))
    mirror_inodes = [os.stat(mirror / "fake-mirror" / p).st_ino for p in plain]
    assert sorted(reads) == sorted(mirror_inodes)  # each mirror file read once, through its link
    for path, inode in zip(plain, mirror_inodes, strict=True):
        assert os.stat(store / "fake" / path).st_ino == inode


def test_member_of_a_missing_archive_is_unavailable(tmp_path):
    mirror = make_mirror(tmp_path / "m", {INDEX: INDEX_BYTES, "docs/a.txt": A})
    rows = by_path(fetch_dataset(FakeDataset(good_pins()), tmp_path / "s", [mirror], False, FetchLog()))
    assert rows["bundle.zip"]["status"] == "unavailable"
    assert rows["bundle.zip!/inner/one.json"]["status"] == "unavailable"
    assert not (tmp_path / "s/fake/bundle.zip.unpacked").exists()


def test_member_with_wrong_hash_is_quarantined(tmp_path):
    ds = FakeDataset(good_pins())
    cf = CorpusFile(source_id="fake:one", path="bundle.zip!/inner/one.json", sha256=sha(b"other"))
    store = tmp_path / "store"
    fetch_dataset(ds, store, [make_mirror(tmp_path / "m")], False, FetchLog())
    shutil.rmtree(store / "fake/bundle.zip.unpacked")
    log = FetchLog()
    row = fetch_file(ds, cf, store, [], False, log)
    assert row["status"] == "unavailable"
    assert len(log.quarantined) == 1 and log.quarantined[0].startswith("bundle.zip!/inner/one.json: ")
    assert not (store / "fake/bundle.zip.unpacked/inner/one.json").exists()


def test_member_of_a_rejected_archive_is_never_used(tmp_path):
    """A stored outer zip whose hash differs from its pin is not present, so neither are its members."""
    ds = FakeDataset(good_pins())
    store = tmp_path / "store"
    forged = zip_bytes({"inner/one.json": b'{"one": "forged"}', "inner/two.json": b'{"two": "forged"}'})
    (store / "fake").mkdir(parents=True)
    (store / "fake/bundle.zip").write_bytes(forged)
    mirror = make_mirror(tmp_path / "m", {INDEX: INDEX_BYTES})
    log = FetchLog()
    rows = by_path(fetch_dataset(ds, store, [mirror], False, log))
    assert rows["bundle.zip"]["status"] == "unavailable"
    assert rows["bundle.zip!/inner/one.json"]["status"] == "unavailable"
    assert rows["bundle.zip!/inner/two.json"]["status"] == "unavailable"
    assert not (store / "fake/bundle.zip.unpacked").exists()
    assert_no_local_paths(list(rows.values()), log, tmp_path)


# -- the real data sets ------------------------------------------------------------------


def test_real_mmlongbench_and_locomo_from_the_mirror(tmp_path):
    if not (MIRROR / "mmlongbench-doc").is_dir() or not (MIRROR / "locomo").is_dir():
        pytest.skip(f"the real mirror is not beside the checkout ({MIRROR})")
    from bench.modalities.conversation.locomo import LoCoMo
    from bench.modalities.pdf.mmlongbench import MMLongBench

    real = {"mmlongbench": MMLongBench(), "locomo": LoCoMo()}
    store = tmp_path / "store"
    log = FetchLog()
    refuse = Downloader({})
    mml = fetch_dataset(real["mmlongbench"], store, [MIRROR], False, log, downloader=refuse)
    loc = fetch_dataset(real["locomo"], store, [MIRROR], False, log, downloader=refuse)
    assert refuse.calls == []
    assert log.quarantined == [] and log.problems == []

    samples = json.loads((MIRROR / "mmlongbench-doc/data/samples.json").read_text(encoding="utf-8"))
    docs = sorted({s["doc_id"] for s in samples})
    assert len(docs) == 135
    assert [r["path"] for r in mml] == ["data/samples.json"] + [f"data/documents/{d}" for d in docs]
    status = [r["status"] for r in mml[1:]]
    assert mml[0]["status"] == "present"
    assert (status.count("present"), status.count("unavailable")) == (74, 61)
    pins = real["mmlongbench"].pins()
    for r in mml:
        if r["status"] == "present":
            assert (r["sha256"], r["bytes"]) == pins[r["path"]]
            assert (MIRROR / "mmlongbench-doc" / r["path"]).stat().st_size == r["bytes"]
        else:
            assert not (MIRROR / "mmlongbench-doc" / r["path"]).exists()

    assert len(loc) == 11 and all(r["status"] == "present" for r in loc)
    assert loc[0]["path"] == "data/locomo10.zip"
    assert (loc[0]["sha256"], loc[0]["bytes"]) == real["locomo"].pins()["data/locomo10.zip"]
    members = sorted(r["path"] for r in loc[1:])
    assert members == [f"data/locomo10.zip!/data/multimodal_dialog/locomo10_v2/{n}.json" for n in (26, 30, 41, 42, 43, 44, 47, 48, 49, 50)]
    with zipfile.ZipFile(MIRROR / "locomo/data/locomo10.zip") as zf:
        for r in loc[1:]:
            data = zf.read(r["path"].split("!/", 1)[1])
            assert (r["sha256"], r["bytes"]) == (sha(data), len(data))
            assert r["source_id"] == "locomo:conv-" + Path(r["path"]).stem
    assert_no_local_paths(mml + loc, log, tmp_path, MIRROR)


# -- unpacked trees (a .tar.gz mirrored as a folder) ---------------------------------------

INSTANCE = "marshmallow-code__marshmallow-1359"


def independent_digest(folder: Path) -> tuple[str, int, int]:
    """sha256sum's lines over every regular file, sorted by path: computed here without bench.ingest.fetch."""
    lines = []
    total = 0
    for p in folder.rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            total += len(data)
            lines.append((p.relative_to(folder).as_posix(), sha(data)))
    text = "".join(f"{h}  {rel}\n" for rel, h in sorted(lines))
    return sha(text.encode()), total, len(lines)


def swebench_with_tree(tmp_path: Path, pins: dict | None = None):
    if not (MIRROR / "swebench-lite" / "swe_bench_lite_dev.csv").is_file():
        pytest.skip(f"the real SWE-bench Lite mirror is not beside the checkout ({MIRROR})")
    from bench.modalities.code.swebench import SWEBenchLite
    from tests.swebench_tree import build_tree

    class Pinned(SWEBenchLite):
        def pins(self) -> dict[str, tuple[str, int]]:
            return {**super().pins(), **(pins or {})}

    trees = tmp_path / "trees"
    sid, folder = build_tree(trees, INSTANCE)
    # more real text files in sub-folders, and a link, which is not part of the tree
    (folder / "README.rst").write_text("marshmallow\n", encoding="utf-8")
    (folder / "docs" / "api").mkdir(parents=True)
    (folder / "docs" / "api" / "index.rst").write_text("API\n===\n", encoding="utf-8")
    (folder / "link.py").symlink_to("src/marshmallow/fields.py")
    return Pinned(), trees, sid, folder


def test_tree_fetched_from_mirror_folder_by_hard_links(tmp_path):
    ds, trees, sid, folder = swebench_with_tree(tmp_path)
    store = tmp_path / "store"
    log = FetchLog()
    refuse = Downloader({})
    rows = fetch_dataset(ds, store, [trees, MIRROR], False, log, downloader=refuse)
    assert refuse.calls == [] and log.quarantined == [] and log.problems == []
    tree_rows = [r for r in rows if r["path"].startswith("repos/")]
    assert len(tree_rows) == 11
    got = [r for r in tree_rows if r["status"] == "present"]
    assert [r["source_id"] for r in got] == [sid]
    row = got[0]
    digest, total, count = independent_digest(folder)
    assert count == 3  # fields.py, README.rst, docs/api/index.rst; the link is not a file of the tree
    assert (row["form"], row["files"], row["sha256"], row["bytes"]) == ("tree", count, digest, total)
    assert row["path"] == f"repos/{sid.split(':', 1)[1]}.tar.gz"  # the registered path validation looks up
    assert all("form" not in r for r in rows if r is not row)
    stored = stored_path(store, row)
    assert stored == store / "swebench" / "repos" / sid.split(":", 1)[1] and stored.is_dir()
    for rel in ("src/marshmallow/fields.py", "README.rst", "docs/api/index.rst"):
        assert os.stat(stored / rel).st_ino == os.stat(folder / rel).st_ino  # linked, not copied
    assert not (stored / "link.py").exists()
    assert stray_temp_files(store) == [] and not list(stored.parent.glob(".*.part"))
    assert_no_local_paths(rows, log, tmp_path, MIRROR)


def test_tree_digest_deterministic_and_manifest_byte_identical(tmp_path):
    ds, trees, _, folder = swebench_with_tree(tmp_path)
    # the same files written in another order, in another mirror root
    other = tmp_path / "other" / "swebench-lite" / "repos" / folder.name
    for rel in sorted((p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and not p.is_symlink()), reverse=True):
        (other / rel).parent.mkdir(parents=True, exist_ok=True)
        (other / rel).write_bytes((folder / rel).read_bytes())
    outs = []
    for n, root in enumerate((trees, tmp_path / "other", trees)):
        rows = fetch_dataset(ds, tmp_path / f"store{n}", [root, MIRROR], False, FetchLog())
        write_jsonl(tmp_path / f"m{n}.jsonl", sort_manifest(rows))
        outs.append((tmp_path / f"m{n}.jsonl").read_bytes())
    assert outs[0] == outs[1] == outs[2]
    assert hash_tree(folder) == independent_digest(folder)
    # one changed byte changes the digest
    (other / "README.rst").write_text("marshmallow!\n", encoding="utf-8")
    assert hash_tree(other)[0] != hash_tree(folder)[0]


def test_tree_rerun_uses_the_store_and_tarball_is_preferred(tmp_path):
    ds, trees, _, folder = swebench_with_tree(tmp_path)
    store = tmp_path / "store"
    first = by_path(fetch_dataset(ds, store, [trees, MIRROR], False, FetchLog()))
    # the mirror folder is gone: the stored tree is verified and kept
    again = by_path(fetch_dataset(ds, store, [MIRROR], False, FetchLog()))
    assert again == first
    # a tarball of the same tree in another root wins over the folder
    import tarfile

    tar_root = tmp_path / "tar-root"
    tar = tar_root / "swebench-lite" / "repos" / f"{folder.name}.tar.gz"
    tar.parent.mkdir(parents=True)
    with tarfile.open(tar, "w:gz") as tf:
        tf.add(folder / "README.rst", arcname="top/README.rst")
    row = by_path(fetch_dataset(ds, tmp_path / "store2", [trees, tar_root, MIRROR], False, FetchLog()))[f"repos/{folder.name}.tar.gz"]
    assert row["status"] == "present" and "form" not in row and row["sha256"] == sha(tar.read_bytes())


def test_tree_against_its_pin(tmp_path):
    _, _, _, folder = swebench_with_tree(tmp_path / "probe")
    digest, total, _ = independent_digest(folder)
    name = f"repos/{folder.name}/"
    ds, trees, _, folder = swebench_with_tree(tmp_path, pins={name: ("0" * 64, total)})
    log = FetchLog()
    rows = by_path(fetch_dataset(ds, tmp_path / "store", [trees, MIRROR], False, log))
    assert rows[f"repos/{folder.name}.tar.gz"]["status"] == "unavailable"
    assert log.quarantined == [f"swebench-lite/{name}: tree digest {digest} differs from pin {'0' * 64}: not used"]
    assert not (tmp_path / "store" / "swebench" / "repos" / folder.name).exists()
    assert not list((tmp_path / "store" / "swebench" / "repos").glob(".*"))
    ds, trees, _, folder = swebench_with_tree(tmp_path / "ok", pins={name: (digest, total)})
    rows = by_path(fetch_dataset(ds, tmp_path / "store", [trees, MIRROR], False, FetchLog()))
    assert rows[f"repos/{folder.name}.tar.gz"]["sha256"] == digest


def test_tree_integrity_checked_before_extract(tmp_path):
    from bench.ingest.corpus import IntegrityError, Manifest, extract_all

    ds, trees, sid, folder = swebench_with_tree(tmp_path)
    store = tmp_path / "store"
    rows = fetch_dataset(ds, store, [trees, MIRROR], False, FetchLog())
    write_jsonl(tmp_path / "m.jsonl", sort_manifest(rows))
    with pytest.warns(UserWarning, match="3 files, .* the SWE-bench mirror records 78 files"):
        frames = extract_all(Manifest.load(tmp_path / "m.jsonl"), store)
    seg = frames["swebench"]
    assert seg["source_id"].unique().tolist() == [sid]
    assert sorted(seg["path"].unique()) == ["README.rst", "docs/api/index.rst", "src/marshmallow/fields.py"]
    # a changed stored file (replaced, never written through the hard link) is refused
    stored = stored_path(store, next(r for r in rows if r.get("form") == "tree"))
    (stored / "README.rst").unlink()
    (stored / "README.rst").write_text("changed\n", encoding="utf-8")
    assert (folder / "README.rst").read_text(encoding="utf-8") == "marshmallow\n"
    with pytest.raises(IntegrityError, match=r"swebench/repos/.*\.tar\.gz: tree digest"):
        extract_all(Manifest.load(tmp_path / "m.jsonl"), store)
