#!/usr/bin/env python3
"""A tiny external memory system speaking the harness's command protocol.

Pure Python standard library, no harness import: it stands for a system written
elsewhere, in any language. Run by the harness as

    system:
      name: keyword-example
      adapter: command
      entry: "{python} examples/keyword_system.py {atoms} --scoped"

`{atoms}` is the served-atoms file the harness writes (JSON lines: atom_id,
source_id, modality, extent, observed_at, holder, text, source_file). The harness
starts it sandboxed in a working folder where `source_file` (relative path) is the
atom's source, read-only: a multimodal system would open the PDF or image there;
this one only reads `text`. The system indexes it,
prints `{"ready": true}`, then reads one request per line on stdin and writes one
response per line on stdout (docs/systems.md). Scoring: the sum over the question's
distinct words of log(1 + N / df) for each word the atom contains (a plain IDF
keyword match). With --scoped it only returns atoms of the query's holder observed
at or before `as_of`.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import defaultdict
from datetime import datetime

WORD = re.compile(r"\w\w+")
STOP = {"the", "and", "what", "when", "who", "how", "did", "does", "was", "were", "is", "are", "of", "to", "in", "on", "for", "a", "an", "with", "by", "at", "from", "as", "that", "this", "which", "do"}


def words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in STOP}


def load(path: str) -> tuple[list[dict], dict[str, list[int]]]:
    atoms: list[dict] = []
    index: dict[str, list[int]] = defaultdict(list)
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            atom = json.loads(line)
            atom["observed"] = datetime.fromisoformat(atom["observed_at"])
            for w in words(atom.get("text") or ""):
                index[w].append(len(atoms))
            atoms.append(atom)
    return atoms, index


def search(request: dict, atoms: list[dict], index: dict[str, list[int]], scoped: bool) -> list[dict]:
    as_of = datetime.fromisoformat(request["as_of"])
    holder = request["scope"].get("holder")
    scores: dict[int, float] = defaultdict(float)
    # sorted: a set's order follows the per-process string hash, and float sums in another
    # order differ in the last bit, which would reorder near-ties from run to run
    for w in sorted(words(request["question"])):
        postings = index.get(w, [])
        if postings:
            idf = math.log(1 + len(atoms) / len(postings))
            for i in postings:
                scores[i] += idf
    if scoped:
        scores = {i: s for i, s in scores.items() if atoms[i]["holder"] == holder and atoms[i]["observed"] <= as_of}
    ranked = sorted(scores.items(), key=lambda item: (-item[1], atoms[item[0]]["atom_id"]))[: request["k"]]
    return [{"atom_id": atoms[i]["atom_id"], "score": s} for i, s in ranked]


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: keyword_system.py ATOMS.jsonl [--scoped]", file=sys.stderr)
        return 2
    atoms, index = load(argv[0])
    scoped = "--scoped" in argv[1:]
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip():
            request = json.loads(line)
            hits = search(request, atoms, index, scoped)
            print(json.dumps({"id": request["id"], "hits": hits}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
