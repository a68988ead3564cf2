"""`system.code` checked by content: ids of any set, decompressed files, hard links and copies of protected files."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from bench.systems.sandbox.code_content import IdFinder, set_query_ids
from bench.systems.sandbox.declared import Forbidden, plan_code
from bench.systems.sandbox.isolation import runtime_dirs
from bench.systems.sandbox.workdir import SandboxError, protected_paths
from tests.systems.conftest import ROOT

ROW = {"query_id": "locomo:conv-26:q0", "question": "When?", "gold": [{"source_id": "locomo:conv-26:session-1"}]}


@pytest.fixture
def project(tmp_path) -> tuple[Path, Forbidden]:
    proj = tmp_path / "proj"
    (proj / "bench" / "sets").mkdir(parents=True)
    (proj / "data" / "sets").mkdir(parents=True)
    (proj / "reports").mkdir()
    (proj / "bench" / "sets" / "locomo.jsonl").write_text(json.dumps(ROW) + "\n")
    (proj / "data" / "sets" / "dev.jsonl").write_text(json.dumps(ROW) + "\n")
    (proj / "reports" / "dev.md").write_text("# dev\nRecall@10 0.41 (n=20)\n")
    ids = set_query_ids([proj / "bench" / "sets", proj / "data" / "sets"])
    assert ids == {"locomo:conv-26:q0"}
    return proj, Forbidden(proj, protected_paths(proj), query_ids=ids)


def refusal(proj: Path, fb: Forbidden, code: Path) -> str | None:
    try:
        plan_code([sys.executable, "s.py"], [str(code)], proj, fb, runtime_dirs())
    except SandboxError as exc:
        return str(exc)
    return None


def test_a_code_folder_is_refused_for_what_its_files_hold(project, tmp_path):
    proj, fb = project
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "system.py").write_text("print('ready')  # ranks by locomo:conv-26:q01 and coco:303x, neither an id here\n")
    assert refusal(proj, fb, mine) is None
    cases = {
        "notes.txt": lambda p: os.link(proj / "data" / "sets" / "dev.jsonl", p),
        "gold.txt": lambda p: p.write_text("the answer to locomo:conv-26:q0 is in session 1\n"),
        "sets.zip": lambda p: zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED).writestr("inner/dev.json", json.dumps([ROW])),
        "dev.jsonl.gz": lambda p: p.write_bytes(gzip.compress(json.dumps(ROW).encode())),
        "dev.qrels": lambda p: p.write_text("locomo:conv-26:q0 0 locomo:conv-26:session-1 1\n"),
        "gold.parquet": lambda p: pd.DataFrame({"q": ["locomo:conv-26:q0"] * 50, "rel": [1] * 50}).to_parquet(
            p, compression="gzip", write_statistics=False),  # the id only in compressed pages
        "copy.md": lambda p: shutil.copy(proj / "reports" / "dev.md", p),
    }
    expected = {
        "notes.txt": f"is a hard link of {proj / 'data' / 'sets' / 'dev.jsonl'}, which a system under test may not see",
        "gold.txt": "holds the query id 'locomo:conv-26:q0' of a set",
        "sets.zip": "holds the query id 'locomo:conv-26:q0' of a set (member inner/dev.json)",
        "dev.jsonl.gz": "holds the query id 'locomo:conv-26:q0' of a set (decompressed)",
        "dev.qrels": "holds the query id 'locomo:conv-26:q0' of a set",
        "gold.parquet": "holds the query id 'locomo:conv-26:q0' of a set (column q)",
        "copy.md": f"has the same bytes as {proj / 'reports' / 'dev.md'}, which a system under test may not see",
    }
    for name, make in cases.items():
        make(mine / name)
        assert refusal(proj, fb, mine) == f"system.code: {str(mine)!r}: {mine / name} {expected[name]}", name
        assert refusal(proj, fb, mine / name) == f"system.code: {str(mine / name)!r}: {mine / name} {expected[name]}", name
        (mine / name).unlink()
    assert refusal(proj, fb, mine) is None


def test_an_id_is_found_as_a_whole_token_only():
    finder = IdFinder(frozenset({"coco:303", "locomo:conv-26:q0", "screenagent:08a2/2024-01-13#0"}))
    assert finder.find(b'{"q": "coco:303"}') == "coco:303"
    assert finder.find(b"see coco:303.") == "coco:303"
    assert finder.find(b"coco:3031 xcoco:303 locomo:conv-26:q01") is None
    assert finder.find(b"screenagent:08a2/2024-01-13#0/frame.png") == "screenagent:08a2/2024-01-13#0"
    assert finder.in_stream([b"x" * 100 + b" loco", b"mo:conv-26:q0\n"]) == "locomo:conv-26:q0"  # across two chunks


def test_the_harness_protocol_server_is_still_shown():
    """`-m bench.systems.serve` shows the project's own bench/ (its docstrings name example ids); not checked by content."""
    ids = set_query_ids([ROOT / "bench" / "sets"])
    assert "locomo:conv-26:q0" in ids and len(ids) > 1000
    fb = Forbidden(ROOT, protected_paths(ROOT), query_ids=ids)
    plan = plan_code([sys.executable, "-m", "bench.systems.serve", "bm25"], None, ROOT, fb, runtime_dirs())
    assert plan.visible == [ROOT / "bench"]


GOLD = json.dumps([ROW]).encode() * 50  # repeated: compressed, the id is in no plain run of bytes


def tar_xz(data: bytes) -> bytes:
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:xz") as archive:
        info = tarfile.TarInfo("gold.json")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def zipped(name: str, data: bytes) -> bytes:
    import io

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(name, data)
    return out.getvalue()


def png_text(data: bytes) -> bytes:
    import struct
    import zlib

    def chunk(name: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + name + body + struct.pack(">I", zlib.crc32(name + body))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", bytes(13)) + chunk(b"zTXt", b"gold\0\0" + zlib.compress(data)) + chunk(b"IEND", b"")


def packed(kind: str) -> bytes:
    """The set row ROW hidden the ways issue 47's probe hid it in a declared code folder."""
    import base64
    import bz2
    import lzma
    import pickle
    import zlib

    ways = {
        "xz": lambda: lzma.compress(GOLD), "bz2": lambda: bz2.compress(GOLD), "gzip named .dat": lambda: gzip.compress(GOLD),
        "zlib pickle": lambda: zlib.compress(pickle.dumps({ROW["query_id"]: ROW["gold"]} | {f"pad{i}": ROW["gold"] for i in range(50)})),
        ".gz in a .zip": lambda: zipped("inner.gz", gzip.compress(GOLD)), "tar.xz": lambda: tar_xz(GOLD),
        ".tar.xz in a .zip": lambda: zipped("inner.tar.xz", tar_xz(GOLD)), "PNG text chunk": lambda: png_text(GOLD),
        "UTF-16": lambda: json.dumps([ROW]).encode("utf-16"), "UTF-16, big endian": lambda: json.dumps([ROW]).encode("utf-16-be"),
        "base64": lambda: base64.b64encode(GOLD), "reversed": lambda: GOLD[::-1],
        "split across strings": lambda: b'QID = "locomo:conv" + "-26:q0"\n',
        "keyed by question text": lambda: json.dumps({ROW["question"]: ROW["gold"]}).encode(),
    }
    return ways[kind]()


FOUND = {"xz": "decompressed", "bz2": "decompressed", "gzip named .dat": "decompressed", "zlib pickle": "decompressed",
         ".gz in a .zip": "member inner.gz, decompressed", "tar.xz": "decompressed", "PNG text chunk": "PNG zTXt chunk gold",
         ".tar.xz in a .zip": "member inner.tar.xz, decompressed", "UTF-16": None, "UTF-16, big endian": None}
NOT_SEEN = ("base64", "reversed", "split across strings", "keyed by question text")


@pytest.mark.parametrize("kind", list(FOUND))
def test_gold_compressed_nested_or_in_utf16_is_found_whatever_the_file_is_called(project, tmp_path, kind):
    """Issue 47: gold as xz, bz2, gzip under another suffix, a .gz in a .zip, a zlib pickle, a PNG text chunk or UTF-16 was
    accepted (with gold.xz: recall@10 1.0000 under bwrap). Each is now refused by its bytes, not by its name."""
    proj, fb = project
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "model.dat").write_bytes(packed(kind))
    where = f" ({FOUND[kind]})" if FOUND[kind] else ""
    assert refusal(proj, fb, mine) == f"system.code: {str(mine)!r}: {mine / 'model.dat'} holds the query id 'locomo:conv-26:q0' of a set{where}"


@pytest.mark.parametrize("kind", NOT_SEEN)
def test_what_the_content_check_cannot_see(project, tmp_path, kind):
    """The documented limit (docs/systems.md, section 4; every isolated report's heading says it): gold transformed on
    purpose is not found. The check guards against accidents and folder mistakes; the locked test split is the defence."""
    proj, fb = project
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "model.dat").write_bytes(packed(kind))
    assert refusal(proj, fb, mine) is None


def test_archives_nested_too_deep_or_too_large_are_refused(project, tmp_path, monkeypatch):
    from bench.systems.sandbox import code_content

    proj, fb = project
    mine = tmp_path / "mine"
    mine.mkdir()
    data = b"nothing to see here\n"
    for _ in range(code_content.MAX_DEPTH + 1):
        data = gzip.compress(data)
    (mine / "deep.bin").write_bytes(data)
    assert refusal(proj, fb, mine) == (f"system.code: {str(mine)!r}: {mine / 'deep.bin'} holds archives or compressed streams nested "
                                       f"more than {code_content.MAX_DEPTH} deep, too deep to check for query ids")
    (mine / "deep.bin").write_bytes(gzip.compress(b"\0" * 2_000_000))  # a small bomb: 2 MB from 2 kB
    monkeypatch.setattr(code_content, "MAX_CHECKED_BYTES", 1_000_000)
    assert refusal(proj, fb, mine) == (f"system.code: {str(mine)!r}: {mine / 'deep.bin'} is (or decompresses to) more than 1000000 "
                                       "bytes, too large to check for query ids")
