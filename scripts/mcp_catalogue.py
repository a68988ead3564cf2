#!/usr/bin/env python3
"""The catalogue of MCP memory servers: every params file of examples/mcp/ run on a LoCoMo slice,
and its section of docs/systems.md written from what was measured (docs/systems.md, *The catalogue*).

    python scripts/mcp_catalogue.py            # measure every server, print the section
    python scripts/mcp_catalogue.py --write    # ... and rewrite the section of docs/systems.md
    python scripts/mcp_catalogue.py --check    # exit 1 when docs/systems.md says other numbers

The slice: the dev questions of two LoCoMo conversations (SLICE) and the stream of their
sessions, replayed through each server's own tools (sandboxed, as `dvc repro` runs it), then
resolved and evaluated in memory as the resolve and evaluate stages do
(bench.acceptance.in_memory.evaluate_entries). A new server is one more params file: its
`system:` block (what params.yaml takes) and a `catalogue:` block (package, registry, version,
install command, what its search does). tests/systems/adapters/test_mcp_catalogue.py runs the same
measure in CI and checks the section against it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the checkout's bench first

CATALOGUE = ROOT / "examples" / "mcp"
DOC = ROOT / "docs" / "systems.md"
START, END = "<!-- mcp-catalogue:start (scripts/mcp_catalogue.py --write) -->", "<!-- mcp-catalogue:end -->"
#: the questions asked (dev), and the conversations whose turns are replayed: the asker's and one more
#: (a test-split conversation: its turns are sent in every dev run, its questions never), so that a
#: server that keeps no holder apart can hand over another conversation's turns
ASKED = ("locomo:conv-30",)
SLICE = ("locomo:conv-26", "locomo:conv-30")
K = 10


@dataclass(frozen=True)
class Slice:
    segments: pd.DataFrame  # the slice's sessions
    entries: list[dict]  # their valid dev entries
    served: dict[str, pd.DataFrame]  # the harness's turn atoms of them (what resolve resolves gold to)


def slice_of(segments: pd.DataFrame, manifest: Any) -> Slice:
    """The slice of LoCoMo's segments (every data set's, or LoCoMo's alone) and their validated dev entries."""
    from bench.annotations.validate import validate
    from bench.ingest.chunking import chunk_modality

    checked = validate([ROOT / "bench" / "sets" / "locomo.jsonl"], manifest, segments, root=ROOT)
    entries = [e for e in checked.split("dev") if e["scope"]["holder"] in ASKED]
    seg = segments.loc[segments["holder"].isin(SLICE)].reset_index(drop=True)
    return Slice(seg, entries, {"conversation": chunk_modality("conversation", seg, {"strategy": "turn"})})


def load_slice(mirror: Path, work: Path) -> Slice:
    """LoCoMo fetched from `mirror` into `work` and parsed (no OCR: conversations only)."""
    from bench.corpus_sources import datasets
    from bench.ingest.corpus import Manifest, extract_all
    from bench.ingest.fetch import FetchLog, fetch_dataset, sort_manifest
    from bench.io import write_jsonl

    rows = fetch_dataset(datasets()["locomo"], work / "store", [mirror], False, FetchLog())
    write_jsonl(work / "manifest.jsonl", sort_manifest(rows))
    manifest = Manifest.load(work / "manifest.jsonl")
    frames = extract_all(manifest, work / "store", ocr_cache=work / "ocr-cache", options={})
    return slice_of(pd.concat(frames.values(), ignore_index=True), manifest)


def servers() -> list[Path]:
    return sorted(CATALOGUE.glob("*.yaml"))


def measure(path: Path, piece: Slice, tmp: Path) -> dict[str, Any]:
    """One params file run on the slice: its cells, what it handed over, how long it took."""
    from bench.acceptance.in_memory import evaluate_entries
    from bench.evaluation.evaluate import EvalOptions, RunDescription
    from bench.systems.config import check_system
    from bench.systems.credit.provenance import CitationCheck
    from bench.systems.replay import event_stream
    from bench.systems.run import run_queries
    from bench.systems.sandbox.workdir import protected_paths
    from bench.systems.session import open_system

    block = yaml.safe_load(path.read_text(encoding="utf-8"))
    cfg = check_system(block["system"])
    sources = sorted(piece.segments["source_id"].astype(str).unique())
    start = time.perf_counter()
    with open_system(cfg, {}, pd.DataFrame(), segments=piece.segments, manifest_rows=[], store=tmp / "store", root=ROOT,
                     temp_root=tmp / "systems", protected=protected_paths(ROOT), host_env=dict(os.environ)) as opened:
        ran = run_queries(opened.adapter, piece.entries, cfg.depth, timeout_s=cfg.timeout_s, events=lambda: event_stream(piece.segments, sources),
                          check_memory=CitationCheck(lambda: piece.segments))
        isolation = opened.info["isolation"]
    seconds = time.perf_counter() - start
    desc = RunDescription(system=cfg.name, depth=cfg.depth, chunking={}, concurrency=1, warm=False, adapter="mcp", warmup_queries=0,
                          timeout_s=cfg.timeout_s, latency=None)
    doc = evaluate_entries(piece.entries, [], ran, ran.latency, ran.failures, piece.served, piece.segments,
                           EvalOptions(k=K, bootstrap_resamples=10, bootstrap_seed=0, calibration_recall=0.9), desc,
                           in_core_rows=10**8, sha256={}).document
    cells = {m: doc["overall"][m] for m in (f"recall@{K}", "recall@budget", "mrr", f"ndcg@{K}", "holder_correctness", "false_recall")}
    kinds = (doc.get("memories") or {}).get("overall", {}).get("by_kind", {})
    turns = {str(t).strip() for t in piece.segments["text"]}
    verbatim = int(ran.memories["text"].astype(str).str.strip().isin(turns).sum()) if len(ran.memories) else 0
    return {"file": path.name, "catalogue": block.get("catalogue", {}), "name": cfg.name, "cells": cells, "isolation": isolation,
            "questions": len(piece.entries), "answered": int(ran.memories["query_id"].nunique()) if len(ran.memories) else 0,
            "failed": len(ran.failures), "facts": ran.info.get("replay_facts", {}),
            "attributed_recall": (kinds.get("attributed") or {}).get(f"recall@{K}"), "verbatim": verbatim, "seconds": round(seconds, 1),
            "ran": ran}


def _cell(cell: dict[str, Any]) -> str:
    from bench.numbers import number

    if cell.get("value") is None:
        return "not measurable" if cell.get("reason") else "—"
    return f"{number(cell['value'])} ({cell['n']}/{cell['denominator']})"


def matches(piece: Slice) -> dict[str, int]:
    """Questions of the slice whose whole text is a substring of some turn, and whose words occur in
    order in some turn (SQL LIKE '%w1%w2%…%'): all a substring search can ever find."""
    turns = [str(t).lower() for t in piece.segments["text"]]
    questions = [str(e["question"]).lower() for e in piece.entries]
    substring = sum(any(q in t for t in turns) for q in questions)
    ordered = [re.compile(".*".join(re.escape(w) for w in re.split(r"[\s_-]+", q) if w), re.S) for q in questions]
    return {"questions": len(questions), "substring": substring, "in_order": sum(any(p.search(t) for t in turns) for p in ordered)}


def section(results: list[dict[str, Any]], piece: Slice) -> str:
    """The catalogue's section of docs/systems.md (between START and END)."""
    answerable = sum(not e["unanswerable"] for e in piece.entries)
    found = matches(piece)
    lines = [START, "", f"On the slice — the LoCoMo dev questions of {' and '.join(f'`{h}`' for h in ASKED)} ({len(piece.entries)} "
             f"questions, {answerable} answerable), and the {len(piece.segments)} turns of {' and '.join(f'`{h}`' for h in SLICE)} "
             "replayed as events — with n / denominator (every question in each; a failed question counts 0); memory hits are "
             "counted over all answers:", "",
             f"| server | registry, version | recall@{K} | recall@budget | MRR | nDCG@{K} | holder correctness | false recall "
             "| questions with a memory | memory hits: cited / attributed / unattributed | failed | empty at start |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---|---:|---|"]
    for r in results:
        c, mem, start = r["cells"], r["facts"].get("memories", {}), r["facts"].get("start_empty", {})
        lines.append(f"| [`{r['name']}`](../examples/mcp/{r['file']}) | {r['catalogue'].get('registry')} "
                     f"`{r['catalogue'].get('package')}` {r['catalogue'].get('version')} | {_cell(c[f'recall@{K}'])} | "
                     f"{_cell(c['recall@budget'])} | {_cell(c['mrr'])} | {_cell(c[f'ndcg@{K}'])} | {_cell(c['holder_correctness'])} | "
                     f"{_cell(c['false_recall'])} | {r['answered']} of {r['questions']} | {mem.get('cited', 0)} / "
                     f"{mem.get('attributed', 0)} / {mem.get('unattributed', 0)} | {r['failed']} | "
                     f"{'yes' if start.get('empty') else 'NO' if start.get('checked') else 'not checked'} |")
    lines += ["", f"Of the {found['questions']} questions, {found['substring']} is a substring of some turn of the slice "
              f"(lower-cased) and {found['in_order']} have their words in order in some turn (`LIKE '%w1%w2%…%'`).", ""]
    for r in results:
        lines += [why(r, found), ""]
    return "\n".join([*lines, END])


def why(r: dict[str, Any], found: dict[str, int]) -> str:
    """The paragraph "why these numbers" of one server: what its search does and what it handed over."""
    from bench.numbers import number

    mem, scores = r["facts"].get("memories", {}), r["facts"].get("scores")
    text = f"**`{r['name']}`** — {r['catalogue'].get('search', 'its search tool')}. "
    if not mem.get("returned"):
        text += (f"It handed over nothing on all {r['questions']} questions: a LoCoMo question is a sentence, and the whole of it "
                 f"is a piece of a turn for {found['substring']} of them, its words in order for {found['in_order']}; its holder "
                 "and temporal correctness are met only by handing nothing over. The server is a store an agent navigates with "
                 "keywords it picks itself; asked the question as it is, it finds nothing: the harness measures the server, "
                 "not an agent in front of it.")
        return text
    rec = r["attributed_recall"] or {}
    holder = r["cells"]["holder_correctness"]
    text += (f"It answered {r['answered']} of {r['questions']} questions with {mem['returned']} memory hits; none cites its source, so "
             f"each is attributed to the sent turns that support it ({mem['attributed']} attributed, {mem['unattributed']} supported by "
             f"no turn; {mem.get('tied', 0)} on a tie, {mem.get('tied_holders', 0)} of them between holders). {r['verbatim']} of its "
             f"{len(r['ran'].memories)} memory hits are a turn verbatim, which attribution finds as an atom of it would be found: "
             f"recall@{K} by attributed memories "
             f"{number(rec.get('value'))} ({rec.get('n')}/{rec.get('denominator')}). It keeps no holder apart: holder correctness "
             f"{_cell(holder)} counts the other conversation's turns it returns.")
    if scores in ("rank", "own and rank"):
        text += (" It sends no scores: its memories are ranked in its order (1/rank), every answer's top memory scores 1, so "
                 "the calibrated false recall is not measurable.")
    return text


def replace_section(doc: str, new: str) -> str:
    if START not in doc or END not in doc:
        raise SystemExit(f"{DOC}: the markers {START!r} and {END!r} are missing")
    return doc[: doc.index(START)] + new + doc[doc.index(END) + len(END):]


def main(argv: list[str]) -> int:
    mirror = ROOT.parent / "shared" / "mirror"
    with tempfile.TemporaryDirectory(prefix="mcp-catalogue-") as tmp:
        piece = load_slice(mirror, Path(tmp) / "corpus")
        results = []
        for path in servers():
            results.append(measure(path, piece, Path(tmp) / path.stem))
            print(f"{path.name}: {results[-1]['seconds']} s, {json.dumps(results[-1]['cells'][f'recall@{K}'])}", file=sys.stderr)
        new = section(results, piece)
    doc = DOC.read_text(encoding="utf-8")
    if "--check" in argv:
        current = doc[doc.index(START): doc.index(END) + len(END)] if START in doc else ""
        if current != new:
            print(f"{DOC.relative_to(ROOT)}: the MCP catalogue differs from what was measured; run python scripts/mcp_catalogue.py --write")
            return 1
        return 0
    if "--write" in argv:
        from bench.io import write_text

        write_text(DOC, replace_section(doc, new))
    print(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
