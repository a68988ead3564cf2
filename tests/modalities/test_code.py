"""Code modality: regions, symbol spans, overlap, safe trees, CoSQA and SWE-bench Lite importers."""

from __future__ import annotations

import ast
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.modalities.code import DATASETS, MODALITY
from bench.modalities.code.cosqa import MANIFEST, CoSQA, load_code_map, materialise
from bench.modalities.code.modality import ATOM_CODE_COLUMNS, region_span, tree_segments
from bench.modalities.code.swebench import SWEBenchLite, old_side_lines
from bench.modalities.code.symbols import _ast_symbols, _regex_symbols, _token_symbols, parse_symbols, resolve
from bench.modalities.code.tree import TreeError, read_dir_tree, read_tar_tree, read_tree

MIRROR = Path(__file__).resolve().parents[2].parent / "shared" / "mirror"
COSQA = MIRROR / "cosqa"
SWE = MIRROR / "swebench-lite"
needs_cosqa = pytest.mark.skipif(not (COSQA / MANIFEST).exists(), reason=f"CoSQA mirror absent at {COSQA}")
needs_swe = pytest.mark.skipif(not (SWE / "swe-bench-lite.json").exists(), reason=f"SWE-bench Lite mirror absent at {SWE}")

SAMPLE = '''import os


@decorator
@other(1,
       2)
def top(a):
    def inner():
        return a
    return inner


class Box(Base):
    """Doc."""
    size = 3

    @property
    def area(self):
        return self.size ** 2

    async def fetch(self): return 1

    class Meta:
        ordering = ["id"]

        def hook(self):
            pass

    tail = 1


def inner():
    pass

if os.name == "nt":
    def win():
        pass
CONSTANT = 1
'''


def segs(files: dict[str, str], source_id: str = "t:tree") -> pd.DataFrame:
    return tree_segments("t", source_id, files, "owner", "2020-01-01T00:00:00+00:00")


def spans(symbols: list[dict]) -> dict[str, tuple[int, int]]:
    return {s["qualname"]: (s["line_start"], s["line_end"]) for s in symbols}


# -- region shapes ---------------------------------------------------------------

@pytest.mark.parametrize(
    "region",
    [
        None, [], "a.py", {}, {"path": "a.py"}, {"symbol": "f"}, {"line": 1},
        {"path": "a.py", "symbol": "f", "line": 1}, {"path": "a.py", "lines": 1},
        {"path": "", "line": 1}, {"path": 3, "line": 1}, {"path": "/abs/a.py", "line": 1},
        {"path": "../a.py", "line": 1}, {"path": "a/./b.py", "line": 1}, {"path": "a//b.py", "line": 1},
        {"path": "a\\b.py", "line": 1}, {"path": "C:/a.py", "line": 1},
        {"path": "a.py", "line": 0}, {"path": "a.py", "line": -3}, {"path": "a.py", "line": 1.0},
        {"path": "a.py", "line": True}, {"path": "a.py", "line": "1"},
        {"path": "a.py", "symbol": ""}, {"path": "a.py", "symbol": 5}, {"path": "a.py", "symbol": "a..b"},
        {"path": "a.py", "symbol": "1f"}, {"path": "a.py", "symbol": "f()"}, {"path": "a.py", "symbol": None},
    ],
)
def test_bad_region_shapes_rejected(region):
    assert MODALITY.check_region_shape(region) is not None


@pytest.mark.parametrize("region", [{"path": "a.py", "line": 1}, {"path": "pkg/a.py", "symbol": "Box.area"}])
def test_good_region_shapes_accepted(region):
    assert MODALITY.check_region_shape(region) is None


# -- symbol spans ----------------------------------------------------------------

def test_symbol_spans_decorators_nested_methods():
    symbols, parser = parse_symbols(SAMPLE, "m.py")
    assert parser == "ast"
    got = spans(symbols)
    assert got["top"] == (4, 10)  # starts at the first decorator, the multi-line one included
    assert got["top.inner"] == (8, 9)
    assert got["Box"] == (13, 29)
    assert got["Box.area"] == (17, 19)  # decorated method
    assert got["Box.fetch"] == (21, 21)  # async one-liner
    assert got["Box.Meta.hook"] == (26, 27)
    assert got["win"] == (36, 37)  # inside an if block: still module level
    seg = segs({"m.py": SAMPLE})
    assert region_span({"path": "m.py", "symbol": "area"}, seg)[0] == ("m.py", 17, 19)  # unique plain name
    assert region_span({"path": "m.py", "symbol": "hook"}, seg)[0] == ("m.py", 26, 27)
    assert region_span({"path": "m.py", "symbol": "inner"}, seg)[0] == ("m.py", 32, 33)  # qualname wins
    assert "not found" in MODALITY.check_region_in_corpus({"path": "m.py", "symbol": "Meta.hook"}, seg)


def test_ambiguous_symbols_rejected():
    text = "def f():\n    pass\n\n\ndef f():\n    return 2\n\n\nclass A:\n    def g(self): pass\n\n\nclass B:\n    def g(self): pass\n"
    seg = segs({"a.py": text})
    assert "ambiguous" in MODALITY.check_region_in_corpus({"path": "a.py", "symbol": "f"}, seg)
    assert "ambiguous" in MODALITY.check_region_in_corpus({"path": "a.py", "symbol": "g"}, seg)
    assert MODALITY.check_region_in_corpus({"path": "a.py", "symbol": "B.g"}, seg) is None
    assert MODALITY.check_region_in_corpus({"path": "a.py", "line": 5}, seg) is None


def test_tokenize_fallback_matches_ast_and_reads_python2():
    key = [(s["qualname"], s["line_start"], s["line_end"], s["def_line"], s["parent"]) for s in _ast_symbols(ast.parse(SAMPLE))]
    assert [(s["qualname"], s["line_start"], s["line_end"], s["def_line"], s["parent"]) for s in _token_symbols(SAMPLE)] == key
    py2 = 'def old(x):\n    print "hi %s" % x\n    try:\n        pass\n    except ValueError, e:\n        pass\n\n\n@d\ndef new():\n    return `1`\n'
    symbols, parser = parse_symbols(py2, "old.py")
    assert parser == "tokenize"
    assert spans(symbols) == {"old": (1, 6), "new": (9, 11)}
    broken = 'def a():\n    x = """never closed\n\ndef b():\n    pass\n'
    symbols, parser = parse_symbols(broken, "b.py")
    assert parser == "regex" and "b" in spans(symbols)
    assert spans(_regex_symbols(SAMPLE))["Box.area"] == (17, 19)
    assert parse_symbols("def f(): pass\n", "README.md") == ([], "none")


def test_region_in_corpus_errors():
    seg = segs({"m.py": SAMPLE, "docs/a.txt": "one\ntwo\n", "empty.py": ""})
    check = MODALITY.check_region_in_corpus
    assert "not in the source tree" in check({"path": "nope.py", "line": 1}, seg)
    assert check({"path": "docs/a.txt", "line": 2}, seg) is None
    assert "outside" in check({"path": "docs/a.txt", "line": 3}, seg)
    assert "outside" in check({"path": "empty.py", "line": 1}, seg)
    assert "not found" in check({"path": "docs/a.txt", "symbol": "one"}, seg)
    assert "not found" in check({"path": "m.py", "symbol": "missing"}, seg)


# -- overlap ---------------------------------------------------------------------

def atoms_of(rows: list[tuple[str, int, int]]) -> pd.DataFrame:
    return pd.DataFrame([{"path": p, "line_start": a, "line_end": b} for p, a, b in rows], columns=["path", "line_start", "line_end"])


def test_overlap_touching_and_shared_lines():
    seg = segs({"m.py": SAMPLE, "n.py": SAMPLE})
    region = {"path": "m.py", "symbol": "Box.area"}  # lines 17..19
    atoms = atoms_of([("m.py", 10, 16), ("m.py", 20, 25), ("m.py", 16, 17), ("m.py", 19, 19), ("n.py", 17, 19), ("m.py", 1, 40)])
    assert MODALITY.overlap(region, atoms, seg).tolist() == [False, False, True, True, False, True]
    line = {"path": "m.py", "line": 17}  # one-line span
    assert MODALITY.overlap(line, atoms, seg).tolist() == [False, False, True, False, False, True]
    assert not MODALITY.overlap({"path": "m.py", "line": 999}, atoms, seg).any()  # invalid: nothing
    assert MODALITY.overlap(region, atoms_of([]), seg).shape == (0,)


# -- chunking --------------------------------------------------------------------

def test_symbol_chunker_partitions_file():
    seg = segs({"m.py": SAMPLE, "notes.txt": "a\n\nb\n", "empty.py": ""})
    atoms = MODALITY.chunk(seg, "symbol", {})
    assert list(atoms.columns) == ATOM_CODE_COLUMNS and atoms["atom_id"].is_unique
    m = atoms[atoms.path == "m.py"]
    got = list(zip(m.line_start, m.line_end))
    assert (4, 10) in got and (17, 19) in got and (21, 21) in got and (26, 27) in got and (36, 37) in got
    assert (13, 15) in got and (23, 24) in got and (29, 29) in got  # class parts without methods
    assert (1, 1) in got and (35, 35) in got and (38, 38) in got  # module remainder runs
    covered = sorted(n for a, b in got for n in range(a, b + 1))
    assert len(covered) == len(set(covered))  # a partition: no line in two atoms
    text_lines = SAMPLE.split("\n")
    assert all(not text_lines[n - 1].strip() for n in set(range(1, 39)) - set(covered))
    row = m[(m.line_start == 17)].iloc[0]
    assert row.text == "\n".join(text_lines[16:19]) == SAMPLE[row.char_start:row.char_end]
    assert json.loads(row.extent) == {"path": "m.py", "line_start": 17, "line_end": 19}
    assert atoms[atoms.path == "notes.txt"][["line_start", "line_end"]].values.tolist() == [[1, 3]]
    assert atoms[atoms.path == "empty.py"].empty


def test_lines_and_file_chunkers():
    text = "\n".join(f"x{i} = {i}" for i in range(1, 11)) + "\n"
    seg = segs({"a.py": text})
    win = MODALITY.chunk(seg, "lines", {"window_lines": 4, "overlap_lines": 1})
    assert list(zip(win.line_start, win.line_end)) == [(1, 4), (4, 7), (7, 10)]
    whole = MODALITY.chunk(seg, "file", {})
    assert list(zip(whole.line_start, whole.line_end, whole.char_start, whole.char_end)) == [(1, 10, 0, len(text) - 1)]
    assert MODALITY.chunk(seg.iloc[0:0], "symbol", {}).columns.tolist() == ATOM_CODE_COLUMNS
    with pytest.raises(ValueError):
        MODALITY.chunk(seg, "paragraph", {})


# -- safe trees ------------------------------------------------------------------

def make_tar(path: Path, members: list[tuple[str, str | None, str | None]]) -> Path:
    """members: (name, text, symlink target)."""
    with tarfile.open(path, "w:gz") as tf:
        for name, text, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tf.addfile(info)
            else:
                data = (text or "").encode()
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return path


def test_tar_tree_read_and_top_folder_stripped(tmp_path):
    tar = make_tar(tmp_path / "r.tar.gz", [
        ("repo-abc/pkg/m.py", SAMPLE, None), ("repo-abc/README", "hi\r\nthere\r\n", None),
        ("repo-abc/img.bin", "\x00\x01", None), ("repo-abc/pkg/alias.py", None, "m.py"),
    ])
    assert sorted(read_tar_tree(tar)) == ["README", "img.bin", "pkg/m.py"]
    tree = read_tree(tar)
    assert sorted(tree) == ["README", "pkg/m.py"] and tree["README"] == "hi\nthere\n"


@pytest.mark.parametrize(
    "members, message",
    [
        ([("r/../evil.py", "x", None)], "'..'"),
        ([("/etc/evil.py", "x", None)], "absolute"),
        ([("r/ok.py", "x", None), ("r/link", None, "../../etc/passwd")], "leaves the tree"),
        ([("r/link", None, "/etc/passwd")], "leaves the tree"),
    ],
)
def test_tar_refuses_unsafe_members(tmp_path, members, message):
    tar = make_tar(tmp_path / "bad.tar.gz", members)
    with pytest.raises(TreeError, match=message.replace("(", r"\(")):
        read_tar_tree(tar)


def test_tar_bounds_and_garbage(tmp_path):
    tar = make_tar(tmp_path / "r.tar.gz", [(f"r/{i}.py", "x = 1\n", None) for i in range(5)])
    with pytest.raises(TreeError, match="members"):
        read_tar_tree(tar, max_members=3)
    with pytest.raises(TreeError, match="bytes"):
        read_tar_tree(tar, max_bytes=10)
    (tmp_path / "junk.tar.gz").write_bytes(b"not a tar")
    with pytest.raises(TreeError, match="not a readable tar"):
        read_tar_tree(tmp_path / "junk.tar.gz")


def test_dir_tree_refuses_escaping_link(tmp_path):
    root = tmp_path / "tree"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "m.py").write_text(SAMPLE)
    (root / "pkg" / "same.py").symlink_to(root / "pkg" / "m.py")
    assert sorted(read_dir_tree(root)) == ["pkg/m.py"]
    (tmp_path / "secret").write_text("s")
    (root / "out").symlink_to(tmp_path / "secret")
    with pytest.raises(TreeError, match="leaves the tree"):
        read_dir_tree(root)


# -- SWE-bench -------------------------------------------------------------------

PATCH = """diff --git a/pkg/m.py b/pkg/m.py
--- a/pkg/m.py
+++ b/pkg/m.py
@@ -1,3 +1,4 @@
 import os
+import sys
 
 
@@ -17,3 +18,3 @@ class Box(Base):
     @property
-    def area(self):
+    def area(self) -> int:
         return self.size ** 2
@@ -28,0 +29,1 @@
+    x = 1
diff --git a/pkg/new.py b/pkg/new.py
new file mode 100644
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1,2 @@
+--- not a header
+x = 2
"""


def test_patch_old_side_lines():
    assert old_side_lines(PATCH) == {"pkg/m.py": [1, 18, 28]}
    assert old_side_lines("") == {}


def fake_swe_mirror(tmp_path: Path, with_tree: bool) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    commit = "a" * 40
    rows = [
        {"repo": "psf/requests", "instance_id": "psf__requests-1", "base_commit": commit, "patch": PATCH,
         "test_patch": "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1 +1 @@\n-a\n+b\n",
         "problem_statement": "Box.area is wrong\r\n", "hints_text": "h", "created_at": "2015-01-02T03:04:05Z"},
        {"repo": "django/django", "instance_id": "django__django-2", "base_commit": commit, "patch": PATCH,
         "test_patch": "", "problem_statement": "p", "hints_text": "", "created_at": "2015-01-02T03:04:05Z"},
    ]
    (tmp_path / "swe-bench-lite.json").write_text(json.dumps(rows))
    fields = list(rows[0])
    (tmp_path / "swe_bench_lite_dev.csv").write_text(",".join(fields) + "\n", newline="")
    if with_tree:
        root = tmp_path / "repos" / f"psf__requests@{commit}" / "pkg"
        root.mkdir(parents=True)
        (root / "m.py").write_text(SAMPLE)
    return tmp_path


def test_swebench_importer_patch_only_and_lifted(tmp_path):
    ds = SWEBenchLite()
    plain = ds.import_set(fake_swe_mirror(tmp_path / "a", with_tree=False))
    assert [e["query_id"] for e in plain.entries] == ["swebench:psf__requests-1"]
    assert [x["reason"].startswith("no corpus registered for django/django") for x in plain.excluded] == [True]
    entry = plain.entries[0]
    assert entry["question"] == "Box.area is wrong\r\n" and entry["answer"] is None and entry["answer_format"] == "none"
    assert entry["split"] == "test" and entry["as_of"] == "2015-01-02T03:04:05+00:00" and entry["unanswerable"] is False
    sid = f"swebench:psf__requests@{'a' * 40}"
    assert entry["gold"] == [{"source_id": sid, "region": {"path": "pkg/m.py", "line": n}} for n in (1, 18, 28)]
    lifted = ds.import_set(fake_swe_mirror(tmp_path / "b", with_tree=True))
    assert [g["region"] for g in lifted.entries[0]["gold"]] == [
        {"path": "pkg/m.py", "line": 1}, {"path": "pkg/m.py", "symbol": "Box.area"}, {"path": "pkg/m.py", "symbol": "Box"}]
    assert ds.file_of(sid) == f"repos/psf__requests@{'a' * 40}.tar.gz"
    assert ds.url(ds.file_of(sid)) == f"https://github.com/psf/requests/archive/{'a' * 40}.tar.gz"
    assert ds.sources_of(entry) == [sid]


def test_swebench_extract_from_tar_and_folder(tmp_path):
    ds = SWEBenchLite()
    commit = "b" * 40
    path = f"repos/pallets__flask@{commit}.tar.gz"
    tar = make_tar(tmp_path / "t.tar.gz", [(f"flask-{commit}/pkg/m.py", SAMPLE, None)])
    folder = tmp_path / "folder"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "m.py").write_text(SAMPLE)
    for local in (tar, folder):
        seg = ds.extract({path: local, "swe-bench-lite.json": tmp_path / "ignored"})
        assert seg["source_id"].unique().tolist() == [f"swebench:pallets__flask@{commit}"]
        assert seg["holder"].iloc[0] == seg["source_id"].iloc[0] and str(seg["observed_at"].dt.tz) == "UTC"
        assert MODALITY.check_region_in_corpus({"path": "pkg/m.py", "symbol": "Box.area"}, seg) is None
    assert ds.extract({}).empty


@needs_swe
def test_swebench_importer_on_real_mirror():
    ds = SWEBenchLite()
    first, second = ds.import_set(SWE), ds.import_set(SWE)
    assert first.entries == second.entries and first.excluded == second.excluded
    assert len(first.entries) == 11 and len(first.excluded) == 312
    assert sorted(e["split"] for e in first.entries) == ["dev"] * 2 + ["test"] * 9
    files = ds.corpus_files(SWE)
    assert len(files) == 11 and all(ds.file_of(f.source_id) == f.path for f in files)
    for e in first.entries:
        assert e["gold"] and all(MODALITY.check_region_shape(g["region"]) is None for g in e["gold"])
        assert {g["source_id"] for g in e["gold"]} <= {f.source_id for f in files}
        assert all(not g["region"]["path"].startswith("tests/") for g in e["gold"])


# -- CoSQA -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def cosqa_real():
    if not (COSQA / MANIFEST).exists():
        pytest.skip(f"CoSQA mirror absent at {COSQA}")
    ds = CoSQA()
    seg = ds.extract({MANIFEST: COSQA / MANIFEST})
    return ds, ds.import_set(COSQA), seg


def test_cosqa_importer_counts_and_shapes(cosqa_real):
    ds, result, _ = cosqa_real
    entries = result.entries
    answerable = [e for e in entries if not e["unanswerable"]]
    unanswerable = [e for e in entries if e["unanswerable"]]
    assert len(answerable) + sum("retrieval" in x["item"] for x in result.excluded) == 1000
    assert len(unanswerable) + sum("qa/" in x["item"] for x in result.excluded) == 291
    assert all(x["reason"] for x in result.excluded)
    assert len({e["query_id"] for e in entries}) == len(entries)
    assert result.notes["functions_not_parsed_by_ast"] == 20 and result.notes["functions"] == 6267
    assert {e["split"] for e in answerable if "test-500" in e["origin"]["item"]} == {"test"}
    assert {e["split"] for e in answerable if "dev-500" in e["origin"]["item"]} == {"dev"}
    for e in unanswerable:
        assert e["gold"] == [] and e["answer"] is None and e["answer_format"] == "none"
        assert e["split"] == ("dev" if int(e["query_id"].rsplit("-", 1)[1]) % 2 == 0 else "test")
    for e in answerable:
        assert e["answer_format"] == "str" and isinstance(e["answer"], str) and len(e["gold"]) == 1
        assert e["query_id"].startswith("cosqa:cosqa-") and e["as_of"].endswith("+00:00")
        assert set(e) == {"query_id", "modality", "question", "answer", "answer_format", "gold", "scope",
                          "as_of", "unanswerable", "origin", "split"}
    assert len(unanswerable) / len(entries) >= 0.15
    assert ds.import_set(COSQA).entries == entries  # deterministic
    assert ds.sources_of(unanswerable[0]) == ["cosqa:functions"]
    assert ds.file_of("cosqa:functions") == MANIFEST


def test_cosqa_gold_valid_and_never_whole_file(cosqa_real):
    _, result, seg = cosqa_real
    kinds = set()
    for e in result.entries:
        for g in e["gold"]:
            region = g["region"]
            kinds.add("symbol" if "symbol" in region else "line")
            assert MODALITY.check_region_shape(region) is None
            assert MODALITY.check_region_in_corpus(region, seg) is None
            path, lo, hi = region_span(region, seg)[0]
            n_lines = int(seg.loc[seg.path == path, "n_lines"].iloc[0])
            assert hi - lo + 1 < n_lines
    assert kinds == {"symbol", "line"}  # repeated names in a shard fall back to the def line
    # a repeated name is refused as a symbol with a clear reason
    codes = load_code_map(COSQA / MANIFEST)
    tree, where = materialise(codes)
    line_gold = next(g["region"] for e in result.entries for g in e["gold"] if "line" in g["region"])
    idx = next(i for i, (p, n) in where.items() if (p, n) == (line_gold["path"], line_gold["line"]))
    name = codes[idx].split("(", 1)[0].split()[-1]
    assert "ambiguous" in MODALITY.check_region_in_corpus({"path": line_gold["path"], "symbol": name}, seg)
    assert "not in the source tree" in MODALITY.check_region_in_corpus({"path": "shard_999.py", "line": 1}, seg)
    assert "outside" in MODALITY.check_region_in_corpus({"path": "shard_000.py", "line": 10**6}, seg)


def test_cosqa_symbol_chunk_round_trip(cosqa_real):
    _, result, seg = cosqa_real
    atoms = MODALITY.chunk(seg, "symbol", {})
    assert atoms["atom_id"].is_unique and len(atoms) == 6267  # one atom per function, nothing else
    codes = load_code_map(COSQA / MANIFEST)
    for e in [x for x in result.entries if x["gold"]][:: 25]:
        region = e["gold"][0]["region"]
        mask = MODALITY.overlap(region, atoms, seg)
        hit = atoms[mask]
        assert len(hit) == 1
        assert hit["text"].iloc[0] == e["answer"] == codes[next(i for i, c in codes.items() if c == e["answer"])]
        if "symbol" in region:
            path, lo, hi = region_span(region, seg)[0]
            assert (hit["line_start"].iloc[0], hit["line_end"].iloc[0]) == (lo, hi)


def test_cosqa_python2_shards_parsed_by_fallback(cosqa_real):
    _, result, seg = cosqa_real
    assert result.notes["shards_parsed_by"]["tokenize"] == int((seg["parser"] == "tokenize").sum()) > 0
    for _, row in seg[seg["parser"] == "tokenize"].iterrows():
        assert len(json.loads(row["symbols"])) >= 1


def test_registered():
    assert [d.key for d in DATASETS] == ["cosqa", "swebench"]
    assert all(d.modality == "code" and d.annotation_is_human for d in DATASETS)
    assert resolve([], "x")[0] is None
    assert np.array_equal(MODALITY.overlap({"path": "a", "line": 1}, atoms_of([]), segs({})), np.zeros(0, bool))


# -- SWE-bench from a folder mirror, end to end --------------------------------------


@pytest.mark.e2e
def test_swebench_entry_from_a_folder_mirror_is_valid_and_evaluated(tmp_path):
    """A base-commit tree mirrored as a folder makes the entries on it valid; they are evaluated.

    The tree is built for the real dev entry marshmallow-code__marshmallow-1359 from its
    human patch (tests/swebench_tree.py: the patch's old-side lines at their real line
    numbers, other lines empty). The other dev entry's tree is not mirrored: it stays
    invalid (constraint 7) and is reported.
    """
    if not (SWE / "swe_bench_lite_dev.csv").is_file():
        pytest.skip(f"SWE-bench Lite mirror absent at {SWE}")
    import yaml

    from tests.project_copy import copy_project, project_env, run
    from tests.swebench_tree import build_tree

    sid, _ = build_tree(tmp_path / "trees", "marshmallow-code__marshmallow-1359")
    work = copy_project(tmp_path / "project", datasets=["swebench"])
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["fetch"]["mirror_dirs"] = [str(tmp_path / "trees"), str(MIRROR)]
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = project_env(tmp_path / "site-cache")
    run(["git", "init", "-q"], work, env)
    run(["git", "add", "-A"], work, env)
    run(["git", "commit", "-q", "-m", "copy"], work, env)
    run(["dvc", "repro"], work, env)

    rows = [json.loads(line) for line in (work / "bench/corpus/manifest.jsonl").read_text().splitlines()]
    trees = {r["source_id"]: r for r in rows if r["path"].startswith("repos/")}
    assert trees[sid]["status"] == "present" and trees[sid]["form"] == "tree" and trees[sid]["files"] == 1
    assert sum(r["status"] == "present" for r in trees.values()) == 1
    dev = [json.loads(line) for line in (work / "data/sets/dev.jsonl").read_text().splitlines()]
    assert [e["query_id"] for e in dev] == ["swebench:marshmallow-code__marshmallow-1359"]
    invalid = [json.loads(line) for line in (work / "data/sets/invalid.jsonl").read_text().splitlines()]
    dev_invalid = {r["query_id"]: r["reason"] for r in invalid if r.get("split", "dev") == "dev"}
    assert list(dev_invalid) == ["swebench:marshmallow-code__marshmallow-1343"]
    assert dev_invalid["swebench:marshmallow-code__marshmallow-1343"].startswith("corpus file unavailable")
    doc = json.loads((work / "reports/metrics/dev.json").read_text())
    code = doc["by_modality"]["code"]
    assert (code["recall@10"]["n"], code["recall@10"]["denominator"]) == (1, 1)
    assert code["recall@10"]["value"] is not None
    regions = pd.read_parquet(work / "data/resolved/regions.parquet")
    assert (regions[regions["query_id"] == dev[0]["query_id"]]["n_atoms"] > 0).all()


def _split_offsets(text: str) -> tuple[list[int], list[int]]:
    """Line starts and ends by splitting the text (the reference for the vectorised counts)."""
    from bench.modalities.code.symbols import split_lines

    starts, ends, at = [], [], 0
    for line in split_lines(text):
        starts.append(at)
        ends.append(at + len(line))
        at += len(line) + 1
    return starts, ends


def test_line_offsets_and_line_char_spans_count_code_points_as_splitting_does() -> None:
    """Line offsets from newline positions (one text) and from UTF-8 bytes (many texts at
    once, as placement counts them) equal splitting the text, non-ASCII and surrogates included."""
    from bench.modalities.code.symbols import line_char_spans, line_offsets

    rng = np.random.default_rng(23)
    alphabet = ["a", "b", "\n", "é", "😀", "\t", "中"]
    texts = ["", "\n", "a", "a\n", "\n\nx", *("".join(rng.choice(alphabet, size=int(rng.integers(0, 80)))) for _ in range(400))]
    rows, first, last, expected = [], [], [], []
    for i, text in enumerate(texts):
        starts, ends = _split_offsets(text)
        got = line_offsets(text)
        assert (got[0].tolist(), got[1].tolist()) == (starts, ends), repr(text)
        for _ in range(3 if starts else 0):
            a = int(rng.integers(1, len(starts) + 1))
            b = int(rng.integers(a, len(starts) + 1))
            rows.append(i), first.append(a), last.append(b), expected.append((starts[a - 1], ends[b - 1]))
    assert line_offsets("x\ud800\ny")[0].tolist() == [0, 3]  # a lone surrogate is one code point
    lo, hi = line_char_spans(pd.Series(texts, dtype="str"), np.array(rows), np.array(first), np.array(last))
    assert list(zip(lo.tolist(), hi.tolist(), strict=True)) == expected and len(expected) > 500
    # texts of ASCII alone take the path without a running count of code points: the same spans
    plain = [i for i, t in enumerate(texts) if t.isascii()]
    picked = [j for j, r in enumerate(rows) if r in set(plain)]
    renumber = {i: n for n, i in enumerate(plain)}
    lo, hi = line_char_spans(pd.Series([texts[i] for i in plain], dtype="str"), np.array([renumber[rows[j]] for j in picked]),
                             np.array([first[j] for j in picked]), np.array([last[j] for j in picked]))
    assert list(zip(lo.tolist(), hi.tolist(), strict=True)) == [expected[j] for j in picked] and len(picked) > 20
