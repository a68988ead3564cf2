"""SWE-bench Lite: GitHub issues whose gold is the code the human fix changed.

Rows. swe-bench-lite.json is the Lite test split (300 rows), swe_bench_lite_dev.csv the
dev split (23 rows); the split of a row is the file it comes from (SWE-bench Lite's own
split, kept: test -> "test", dev -> "dev"). Only rows of the three smaller repositories
(psf/requests, pallets/flask, marshmallow-code/marshmallow: 9 test + 2 dev instances)
have a registered corpus; every other row is excluded with that reason.

Sources. One per repository tree at the row's base_commit:
source_id "swebench:<owner>__<name>@<base_commit>", manifest path
"repos/<owner>__<name>@<base_commit>.tar.gz", fetched from the GitHub archive URL
https://github.com/<owner>/<name>/archive/<base_commit>.tar.gz (url() is overridden
for these paths; the fetch stage skips it offline). A mirror may hold the tree as the
tarball "<mirror>/swebench-lite/repos/<owner>__<name>@<commit>.tar.gz" or unpacked, as
the folder "<mirror>/swebench-lite/repos/<owner>__<name>@<commit>/" (the layout the
mirror's SOURCE.json describes): the fetch stage hard-links the folder's files into the
store and lists it under the same manifest path with "form": "tree", its file count
and a tree digest (bench/ingest/fetch.py), so validation finds it like a tarball. extract
reads the local copy safely (tree.py): a tar archive in memory, or the stored folder.
Only text files enter the tree. A tree whose file count or bytes differ
from the SWE-bench mirror's record (SOURCE.json corpus_repos) gives a warning.

Gold (derived mechanically from the human-written `patch`; test_patch is never read):
each file diff's old side ("--- a/<path>") and, per hunk, the old-side line numbers of
its '-' lines, plus for a pure insertion (a run of '+' lines not preceded by '-' lines)
the old-side line just above it (line 1 at the top of a file). New files have no old
side and add nothing. Without the base tree each such line is a {"path", "line"}
region. When the base tree is present in the mirror folder given to import_set (at
repos/<owner>__<name>@<commit>/ or .tar.gz there), each line is lifted to the innermost
def/class holding it, as {"path", "symbol": qualified name} when that name resolves to
it; lines at module level stay line regions. The hunk headers' context ("@@ ... @@ def
name(") is not used: git's default funcname is the last unindented line above the
hunk, which need not enclose the changed lines.

question = problem_statement verbatim (hints_text is not used); no text answer
(answer null, answer_format "none"); no unanswerable rows. query_id
"swebench:<instance_id>". Holder: the tree itself (holder = source_id), so each issue
sees only its own repository snapshot. observed_at: fixed 2012-01-01 (before the
earliest of the 11 PRs); as_of: the row's created_at (the fix PR's creation).
"""

from __future__ import annotations

import csv
import json
import re
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from bench.modalities.base import CorpusFile, Dataset, ImportResult, load_pins
from bench.modalities.code.modality import tree_segments
from bench.modalities.code.symbols import innermost, parse_symbols, resolve
from bench.modalities.code.tree import TreeError, decode_text, read_dir_tree, read_tar_tree, read_tree

TEST_FILE = "swe-bench-lite.json"
DEV_FILE = "swe_bench_lite_dev.csv"
REPOS = ("psf/requests", "pallets/flask", "marshmallow-code/marshmallow")
TREE_PATH = re.compile(r"^repos/([\w.-]+)__([\w.-]+)@([0-9a-f]{40})\.tar\.gz$")
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
OBSERVED_AT = "2012-01-01T00:00:00+00:00"
#: base_commit -> (file count, bytes) of the tree, from the mirror's SOURCE.json corpus_repos
TREE_SIZES: dict[str, tuple[int, int]] = {
    "a0df2cbb10419037d11d04352b3175405ab52941": (167, 1815187),  # psf__requests-863
    "091991be0da19de9108dbe5e3752917fea3d7fdc": (128, 1531286),  # psf__requests-2317
    "0be38a0c37c59c4b66ce908731da15b401655113": (132, 1585219),  # psf__requests-2674
    "110048f9837f8441ea536804115e80b69f400277": (121, 1435805),  # psf__requests-1963
    "fe693c492242ae532211e0c173324f09ca8cf227": (128, 1515655),  # psf__requests-2148
    "d8c37f43724cd9fb0870f77877b7c4c7e38a19e0": (235, 1470861),  # pallets__flask-4045
    "182ce3dd15dfa3537391c3efaf9c3ff407d134d4": (253, 1575018),  # pallets__flask-5063
    "36453b95b13079296776d11b09cab2567ea3e703": (140, 1710013),  # psf__requests-3362
    "4c288bc97ea371817199908d0d9b12de9dae327e": (250, 1577776),  # pallets__flask-4992
    "b40a0f4e33823e6d0f341f7e8684e359a99060d1": (78, 720107),  # marshmallow-code__marshmallow-1359
    "2be2d83a1a9a6d3d9b85804f3ab545cecc409bb0": (73, 624190),  # marshmallow-code__marshmallow-1343
}


def tree_name(repo: str, commit: str) -> str:
    return f"{repo.replace('/', '__')}@{commit}"


def read_rows(folder: Path) -> list[tuple[str, str, dict]]:
    """(file, split, row) of both Lite files, test first, in file order."""
    test = json.loads((folder / TEST_FILE).read_text(encoding="utf-8"))
    with open(folder / DEV_FILE, encoding="utf-8", newline="") as fh:
        dev = list(csv.DictReader(fh))
    return [(TEST_FILE, "test", r) for r in test] + [(DEV_FILE, "dev", r) for r in dev]


def old_side_lines(patch: str) -> dict[str, list[int]]:
    """Old-side path -> sorted changed lines of a unified diff (see the module docstring)."""
    out: dict[str, set[int]] = {}
    path: str | None = None
    lines = patch.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("diff --git "):
            path = None
        elif line.startswith("--- "):
            old = line[4:].split("\t", 1)[0].strip()
            path = None if old == "/dev/null" else (old[2:] if old.startswith("a/") else old)
        elif (m := HUNK.match(line)) and path is not None:
            start, n_old = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
            n_new = int(m.group(4) if m.group(4) is not None else 1)
            i = _walk_hunk(lines, i, start, n_old, n_new, out.setdefault(path, set()))
    return {p: sorted(v) for p, v in sorted(out.items()) if v}


def _walk_hunk(lines: list[str], i: int, start: int, n_old: int, n_new: int, found: set[int]) -> int:
    cursor = start if n_old else start + 1  # "-s,0" inserts after line s
    removed_in_run = False
    inserted_in_run = False
    while i < len(lines) and (n_old > 0 or n_new > 0):
        line = lines[i]
        i += 1
        tag = line[:1]
        if tag == "\\":
            continue
        if tag == "-":
            found.add(cursor)
            cursor += 1
            n_old -= 1
            removed_in_run = True
        elif tag == "+":
            if not removed_in_run and not inserted_in_run:
                found.add(max(1, cursor - 1))
            inserted_in_run = True
            n_new -= 1
        else:  # context (' ' or an empty line for a blank context line)
            cursor += 1
            n_old -= 1
            n_new -= 1
            removed_in_run = inserted_in_run = False
    return i


def lift_to_symbols(changed: dict[str, list[int]], tree: dict[str, str]) -> list[dict]:
    """Regions for changed lines: the innermost def/class when it resolves, else the line."""
    regions: list[dict] = []
    for path, lines in changed.items():
        text = tree.get(path)
        symbols = parse_symbols(text, path)[0] if text is not None else []
        for line in lines:
            sym = innermost(symbols, line)
            region: dict = {"path": path, "line": line}
            if sym is not None and resolve(symbols, sym["qualname"])[0] is sym:
                region = {"path": path, "symbol": sym["qualname"]}
            if region not in regions:
                regions.append(region)
    return regions


class SWEBenchLite(Dataset):
    key: ClassVar[str] = "swebench"
    name: ClassVar[str] = "princeton-nlp/SWE-bench_Lite"
    repo: ClassVar[str] = "ivan4722/csvtransfer"
    revision: ClassVar[str] = "9039a5db8b617ae6cf2c63bc08c295958c8a4968"
    license: ClassVar[str] = (
        "dataset card declares no license (SWE-bench code MIT); issue text by GitHub users; patches "
        "under the repositories' licenses (requests ISC/Apache-2.0, flask BSD-3-Clause, marshmallow MIT)"
    )
    annotation_source: ClassVar[str] = (
        "human: the gold is the fix PR each project's developers wrote and merged (SWE-bench `patch`, "
        "Jimenez et al., ICLR 2024); regions are derived mechanically from that human patch; third-party work"
    )
    annotation_is_human: ClassVar[bool] = True
    modality: ClassVar[str] = "code"
    mirror_key: ClassVar[str] = "swebench-lite"
    holders: ClassVar[str] = "one holder per repository snapshot: holder = source_id 'swebench:<owner>__<name>@<commit>'"
    observed_at_rule: ClassVar[str] = f"fixed {OBSERVED_AT} for every tree; as_of = the row's created_at (UTC)"
    caveats: ClassVar[str] = (
        "Base-commit trees are not in the shared mirror; offline every entry is invalid (tree unavailable) "
        "and reported until a tarball or an unpacked folder repos/<owner>__<name>@<commit>/ is mirrored. "
        "Gold is every old-side line the human patch changed (or the def/class holding it when the tree is "
        "at hand); other code may also be relevant. Only 11 of 323 Lite rows (three repositories) are imported."
    )
    annotation_files: ClassVar[tuple[str, ...]] = (TEST_FILE, DEV_FILE)

    def url(self, path: str) -> str:
        m = TREE_PATH.match(path)
        if m:
            return f"https://github.com/{m.group(1)}/{m.group(2)}/archive/{m.group(3)}.tar.gz"
        return super().url(path)

    def corpus_files(self, annotation_dir: Path) -> list[CorpusFile]:
        trees = sorted({tree_name(r["repo"], r["base_commit"]) for _, _, r in read_rows(annotation_dir) if r["repo"] in REPOS})
        return [CorpusFile(source_id=f"{self.key}:{t}", path=f"repos/{t}.tar.gz") for t in trees]

    def pins(self) -> dict[str, tuple[str, int]]:
        return load_pins(self.mirror_key)

    def file_of(self, source_id: str) -> str | None:
        prefix = f"{self.key}:"
        if not source_id.startswith(prefix):
            return None
        path = f"repos/{source_id[len(prefix):]}.tar.gz"
        return path if TREE_PATH.match(path) else None

    def extract(self, files: dict[str, Path], **_options: Any) -> pd.DataFrame:
        frames = []
        for path, local in sorted(files.items()):
            m = TREE_PATH.match(path)
            if not m:
                continue
            raw = read_dir_tree(local) if Path(local).is_dir() else read_tar_tree(local)
            _check_size(path, m.group(3), raw)
            tree = {p: t for p, t in ((p, decode_text(p, d)) for p, d in raw.items()) if t is not None}
            source_id = f"{self.key}:{m.group(1)}__{m.group(2)}@{m.group(3)}"
            frames.append(tree_segments(self.key, source_id, tree, source_id, OBSERVED_AT))
        if not frames:
            return tree_segments(self.key, "", {}, "", OBSERVED_AT)
        return pd.concat(frames, ignore_index=True)

    def import_set(self, mirror_dir: Path) -> ImportResult:
        entries: list[dict] = []
        excluded: list[dict] = []
        rows = read_rows(mirror_dir)
        lifted = 0
        tree_problems: list[str] = []
        for file, split, row in rows:
            item = f"{file}#{row['instance_id']}"
            if row["repo"] not in REPOS:
                excluded.append({"item": item, "reason": f"no corpus registered for {row['repo']} (only {', '.join(REPOS)})"})
                continue
            changed = old_side_lines(row["patch"])
            if not changed:
                excluded.append({"item": item, "reason": "patch changes no existing line (new files only)"})
                continue
            name = tree_name(row["repo"], row["base_commit"])
            source_id = f"{self.key}:{name}"
            tree = _mirrored_tree(mirror_dir, name, tree_problems)
            if tree is not None:
                regions = lift_to_symbols(changed, tree)
                lifted += 1
            else:
                regions = [{"path": p, "line": n} for p, lines in changed.items() for n in lines]
            try:
                as_of = datetime.fromisoformat(row["created_at"].replace("Z", "+00:00")).astimezone(UTC)
            except ValueError:
                excluded.append({"item": item, "reason": f"created_at {row['created_at']!r} is not ISO 8601"})
                continue
            entries.append({
                "query_id": f"{self.key}:{row['instance_id']}",
                "modality": self.modality,
                "question": row["problem_statement"],
                "answer": None,
                "answer_format": "none",
                "gold": [{"source_id": source_id, "region": r} for r in regions],
                "scope": {"holder": source_id, "session": None, "scenario": "issue-localisation"},
                "as_of": as_of.isoformat(),
                "unanswerable": False,
                "origin": {"dataset": self.name, "revision": self.revision, "item": item, "license": self.license},
                "split": split,
            })
        notes = {"upstream_rows": len(rows), "entries_with_symbol_lift": lifted,
                 "gold_from": "patch only (old-side changed lines); test_patch and hints_text unused",
                 "unreadable_mirrored_trees": tree_problems}
        return ImportResult(entries=entries, excluded=excluded, notes=notes)


def _mirrored_tree(mirror_dir: Path, name: str, problems: list[str]) -> dict[str, str] | None:
    for candidate in (mirror_dir / "repos" / name, mirror_dir / "repos" / f"{name}.tar.gz"):
        if candidate.exists():
            try:
                return read_tree(candidate)
            except TreeError as exc:
                problems.append(str(exc))
                return None
    return None


def _check_size(path: str, commit: str, raw: dict[str, bytes]) -> None:
    expected = TREE_SIZES.get(commit)
    n_bytes = sum(len(d) for d in raw.values())
    if expected and (len(raw), n_bytes) != expected:
        warnings.warn(f"{path}: {len(raw)} files, {n_bytes} bytes; the SWE-bench mirror records {expected[0]} files, {expected[1]} bytes", stacklevel=2)
