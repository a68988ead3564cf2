"""CoSQA: real Bing web queries with human match labels over 6,267 Python functions.

Corpus. data/search/code_idx_map.txt is one JSON object {code string: retrieval_idx}
(the manifest file of the one source "cosqa:functions"). Extract materialises it as a
virtual tree so gold lands on one function, never on a whole file:
  file   shard_<retrieval_idx // 50, 3 digits>.py (shard_000.py .. shard_125.py),
  body   the shard's functions in retrieval_idx order, each code string verbatim,
         separated by two blank lines, the file ending with one newline.
So function i starts at a line computable from the code strings alone, and both the
importer and extract build the same files with `materialise`.

Gold. Every row of cosqa-retrieval-{dev,test}-500.json (label 1: a human-judged
match) gives one answerable entry whose gold is its retrieval_idx function:
{"path": shard, "symbol": name} when the name from its `def` line resolves, by the
code modality's rule, to exactly that function in its shard; otherwise (400 names
repeat in the corpus, some within one shard) {"path": shard, "line": its def line}.
The answer is the gold function's code string verbatim (answer_format "str").
The 291 label-0 rows of data/qa/cosqa-dev.json become unanswerable entries (answer
null, gold []). The 313 label-1 rows of that file are not imported (the retrieval
sets are the upstream evaluation sets; 34 of those rows reappear there); they are
counted in notes.

Split: the upstream's own: retrieval-test-500 -> "test", retrieval-dev-500 -> "dev".
Unanswerable rows cosqa-dev-N: even N -> "dev", odd N -> "test".
query_id "cosqa:<idx>" (e.g. "cosqa:cosqa-train-12467"); origin.item "<file>#<idx>".

Python 2: 20 functions do not parse under Python 3.11's ast; a shard holding one is
read with the tokenize fallback (symbols.py), which finds the same spans. The importer
counts them in notes["functions_not_parsed_by_ast"].
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from bench.modalities.base import CorpusFile, Dataset, ImportResult, load_pins
from bench.modalities.code.modality import tree_segments
from bench.modalities.code.symbols import parse_symbols, quiet_parse, resolve
from bench.modalities.derived import request_order

MANIFEST = "data/search/code_idx_map.txt"
QA_DEV = "data/qa/cosqa-dev.json"
RETRIEVAL = {"data/search/cosqa-retrieval-dev-500.json": "dev", "data/search/cosqa-retrieval-test-500.json": "test"}
SHARD_SIZE = 50
SEPARATOR = "\n\n\n"  # two blank lines between functions
DEF = re.compile(r"^\s*(?:async\s+)?def\s+([^\W\d]\w*)")
#: CodeSearchNet (the functions' origin) was released in September 2019; every query
#: is asked after CoSQA's release (arXiv 2105.13239, May 2021).
OBSERVED_AT = "2019-09-01T00:00:00+00:00"
AS_OF = "2021-06-01T00:00:00+00:00"
HOLDER = "owner"


def shard_path(retrieval_idx: int) -> str:
    return f"shard_{retrieval_idx // SHARD_SIZE:03d}.py"


def load_code_map(path: Path) -> dict[int, str]:
    """retrieval_idx -> code string (the file maps code -> idx)."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    codes: dict[int, str] = {}
    for code, idx in raw.items():
        if int(idx) in codes:
            raise ValueError(f"{path}: retrieval_idx {idx} given to two code strings")
        codes[int(idx)] = code
    return codes


def materialise(codes: dict[int, str]) -> tuple[dict[str, str], dict[int, tuple[str, int]]]:
    """Shard files (path -> text) and where each function starts: idx -> (path, first line)."""
    shards: dict[str, list[int]] = {}
    for idx in sorted(codes):
        shards.setdefault(shard_path(idx), []).append(idx)
    files: dict[str, str] = {}
    where: dict[int, tuple[str, int]] = {}
    for path, members in shards.items():
        line = 1
        for idx in members:
            where[idx] = (path, line)
            line += codes[idx].count("\n") + SEPARATOR.count("\n")  # its lines + 2 blank
        files[path] = SEPARATOR.join(codes[i] for i in members) + "\n"
    return files, where


def gold_region(name: str, path: str, def_line: int, symbols: list[dict]) -> dict:
    sym, _ = resolve(symbols, name)
    if sym is not None and sym["def_line"] == def_line:
        return {"path": path, "symbol": name}
    return {"path": path, "line": def_line}


class CoSQA(Dataset):
    key: ClassVar[str] = "cosqa"
    name: ClassVar[str] = "Jun-jie-Huang/CoCLR (CoSQA)"
    repo: ClassVar[str] = "Jun-jie-Huang/CoCLR"
    revision: ClassVar[str] = "14ebcacf9e9bc3e7109102632bc63047876f27d2"
    license: ClassVar[str] = (
        "data: Computational Use of Data Agreement (C-UDA); repo code MIT; code strings are "
        "CodeSearchNet excerpts of GitHub projects under their own licenses"
    )
    annotation_source: ClassVar[str] = (
        "human: CoSQA annotators judged each (Bing query, function) pair match / no match, "
        ">= 3 annotators per pair, majority vote (Huang et al., ACL 2021); third-party work. "
        "A model only picked which candidate function annotators saw"
    )
    annotation_is_human: ClassVar[bool] = True
    modality: ClassVar[str] = "code"
    mirror_key: ClassVar[str] = "cosqa"
    holders: ClassVar[str] = f"one holder '{HOLDER}' for the whole function corpus"
    observed_at_rule: ClassVar[str] = f"fixed {OBSERVED_AT} for every function; as_of {AS_OF} for every query"
    caveats: ClassVar[str] = (
        "Only one candidate function was judged per query: a label-0 (unanswerable) query means the "
        "one function shown was judged not to answer it; the other 6,266 were never judged, so 'no "
        "answer in the corpus' is an inference. Likewise answerable queries have one gold function; "
        "other functions may also answer. Functions are materialised into 50-per-file shards (a "
        "documented virtual layout, not the functions' original files); where a name repeats in a "
        "shard the gold is the def line, not a symbol."
    )
    annotation_files: ClassVar[tuple[str, ...]] = (*RETRIEVAL, QA_DEV)
    source_id: ClassVar[str] = "cosqa:functions"

    def corpus_files(self, annotation_dir: Path) -> list[CorpusFile]:
        pin = self.pins().get(MANIFEST)
        return [CorpusFile(source_id=self.source_id, path=MANIFEST,
                           sha256=pin[0] if pin else None, bytes=pin[1] if pin else None)]

    def pins(self) -> dict[str, tuple[str, int]]:
        return load_pins(self.mirror_key)

    def file_of(self, source_id: str) -> str | None:
        return MANIFEST if source_id == self.source_id else None

    def sources_of(self, entry: dict) -> list[str]:
        # the function corpus is needed by every entry, unanswerable ones included
        return sorted(set(super().sources_of(entry)) | {self.source_id})

    def extract(self, files: dict[str, Path], **_options: Any) -> pd.DataFrame:
        if MANIFEST not in files:
            return tree_segments(self.key, self.source_id, {}, HOLDER, OBSERVED_AT)
        tree, _ = materialise(load_code_map(files[MANIFEST]))
        return tree_segments(self.key, self.source_id, tree, HOLDER, OBSERVED_AT)

    def import_set(self, mirror_dir: Path) -> ImportResult:
        codes = load_code_map(mirror_dir / MANIFEST)
        tree, where = materialise(codes)
        symbols = {path: parse_symbols(text, path) for path, text in tree.items()}
        entries: list[dict] = []
        excluded: list[dict] = []
        seen: set[str] = set()
        n_rows = 0
        for file, split in RETRIEVAL.items():
            for row in json.loads((mirror_dir / file).read_text(encoding="utf-8")):
                n_rows += 1
                item = f"{file}#{row.get('idx')}"
                problem = self._check_row(row, codes, seen)
                if problem:
                    excluded.append({"item": item, "reason": problem})
                    continue
                idx = int(row["retrieval_idx"])
                path, line = where[idx]
                found = DEF.match(codes[idx])
                assert found is not None  # checked in _check_row
                name = found.group(1)
                region = gold_region(name, path, line, symbols[path][0])
                entries.append(self._entry(row, item, split, row["code"], [{"source_id": self.source_id, "region": region}]))
        qa = json.loads((mirror_dir / QA_DEV).read_text(encoding="utf-8"))
        n_label1 = 0
        for row in qa:
            n_rows += 1
            item = f"{QA_DEV}#{row.get('idx')}"
            if row.get("label") == 1:
                n_label1 += 1
                continue
            m = re.fullmatch(r"cosqa-dev-(\d+)", str(row.get("idx")))
            if row.get("label") != 0 or not m:
                excluded.append({"item": item, "reason": f"qa row with label {row.get('label')!r} or idx {row.get('idx')!r} not cosqa-dev-N"})
                continue
            if f"{self.key}:{row['idx']}" in seen:
                excluded.append({"item": item, "reason": "query id already used by a retrieval row"})
                continue
            seen.add(f"{self.key}:{row['idx']}")
            split = "dev" if int(m.group(1)) % 2 == 0 else "test"
            entries.append(self._entry(row, item, split, None, []))
        notes = {
            "upstream_rows": n_rows,
            "qa_dev_label1_not_imported": n_label1,
            "functions": len(codes),
            "functions_not_parsed_by_ast": sum(not _parses(c) for c in codes.values()),
            "shards": len(tree),
            "shards_parsed_by": dict(sorted(_count(p for _, p in symbols.values()).items())),
            "gold_regions": dict(sorted(_count("symbol" if "symbol" in e["gold"][0]["region"] else "line"
                                               for e in entries if e["gold"]).items())),
        }
        return ImportResult(entries=request_order(entries), excluded=excluded, notes=notes)

    def _check_row(self, row: dict, codes: dict[int, str], seen: set[str]) -> str | None:
        if row.get("label") != 1:
            return f"retrieval row with label {row.get('label')!r}, expected 1"
        idx = row.get("retrieval_idx")
        if not isinstance(idx, int) or idx not in codes:
            return f"retrieval_idx {idx!r} not in {MANIFEST}"
        if codes[idx] != row.get("code"):
            return f"code differs from {MANIFEST} entry {idx}"
        if not DEF.match(codes[idx]):
            return f"function {idx} does not start with a def line"
        qid = f"{self.key}:{row.get('idx')}"
        if qid in seen:
            return f"duplicate query id {qid}"
        if not isinstance(row.get("doc"), str) or not row["doc"].strip():
            return "empty query"
        seen.add(qid)
        return None

    def _entry(self, row: dict, item: str, split: str, answer: str | None, gold: list[dict]) -> dict:
        unanswerable = not gold
        return {
            "query_id": f"{self.key}:{row['idx']}",
            "modality": self.modality,
            "question": row["doc"],
            "answer": answer,
            "answer_format": "none" if unanswerable else "str",
            "gold": gold,
            "scope": {"holder": HOLDER, "session": None, "scenario": "code-search"},
            "as_of": AS_OF,
            "unanswerable": unanswerable,
            "origin": {"dataset": self.name, "revision": self.revision, "item": item, "license": self.license},
            "split": split,
        }


def _parses(code: str) -> bool:
    try:
        quiet_parse(code)
        return True
    except (SyntaxError, ValueError):
        return False


def _count(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out
