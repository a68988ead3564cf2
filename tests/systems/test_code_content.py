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

from bench.systems.code_content import IdFinder, set_query_ids
from bench.systems.declared import Forbidden, plan_code
from bench.systems.isolation import runtime_dirs
from bench.systems.sandbox import SandboxError, protected_paths
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
