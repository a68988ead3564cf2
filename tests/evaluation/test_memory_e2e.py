"""End to end on LoCoMo: the consolidating example memory, replayed, evaluated by provenance.

Two conversations' dev questions, the stream of their sessions. The harness's recall@10 is
recomputed here from the system's recorded responses and the set file's gold with an
independent implementation of the documented support rule (docs/systems.md, *Support*);
dishonest variants of the same memory gain nothing; a memory citing another holder's
session is a holder leak; `bench eval` on the run and qrels gives the harness's numbers."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
import Stemmer
from bm25s.stopwords import STOPWORDS_EN_PLUS

from bench.acceptance.in_memory import evaluate_entries, memory_inputs
from bench.annotations.validate import validate
from bench.evaluation.evaluate import EvalOptions, RunDescription, no_failures
from bench.systems.config import check_system, make_adapter
from bench.systems.replay import event_stream
from bench.systems.run import SYSTEM_COLUMNS, run_queries
from bench.trec.files import trec_qrels, trec_run
from bench.trec.trec_eval import evaluate as trec_evaluate
from bench.trec.trec_eval import read_qrels, read_run
from tests.conftest import ROOT
from tests.ingest.chunks import chunk_all

pytestmark = pytest.mark.e2e

HOLDERS = ("locomo:conv-30", "locomo:conv-41")
K = 10


@pytest.fixture(scope="module")
def locomo(real_corpus: dict) -> dict[str, Any]:
    segments = real_corpus["segments"]
    segments = segments.loc[segments["holder"].isin(HOLDERS)].reset_index(drop=True)
    checked = validate([ROOT / "bench" / "sets" / "locomo.jsonl"], real_corpus["manifest"], real_corpus["segments"], root=ROOT)
    entries = [e for e in checked.split("dev") if e["scope"]["holder"] in HOLDERS]
    served = chunk_all(segments, {"conversation": {"strategy": "turn"}})
    return {"segments": segments, "entries": entries, "served": served, "runs": {}}


def run(locomo: dict, entry: str) -> dict[str, Any]:
    """The system replayed over the two conversations, evaluated as the stages do (cached per entry point)."""
    if entry in locomo["runs"]:
        return locomo["runs"][entry]
    seg, entries, served = locomo["segments"], locomo["entries"], locomo["served"]
    atoms = pd.concat([f[SYSTEM_COLUMNS] for f in served.values()], ignore_index=True)
    adapter = make_adapter(check_system({"name": "memory", "adapter": "python", "entry": entry}), atoms)
    sources = sorted(seg["source_id"].unique())
    from bench.systems.credit.provenance import CitationCheck

    ran = run_queries(adapter, entries, 100, warmup=0, timeout_s=120, known_atoms=set(atoms["atom_id"]),
                      events=lambda: event_stream(seg, sources), check_memory=CitationCheck(lambda: seg))
    desc = RunDescription(system="memory", depth=100, chunking={}, concurrency=1, warm=False, adapter="python", warmup_queries=0,
                          timeout_s=120, latency=None)
    result = evaluate_entries(entries, [], ran, ran.latency, no_failures(), served, seg, EvalOptions(k=K, bootstrap_resamples=10, bootstrap_seed=0, calibration_recall=0.9), desc,
                              in_core_rows=10**8, sha256={})
    locomo["runs"][entry] = {"ran": ran, "result": result}
    return locomo["runs"][entry]


# --------------------------------------------------------------------------- the rule, written again from its documentation

_STEM = Stemmer.Stemmer("english")
_STOP = frozenset(STOPWORDS_EN_PLUS)


def stems(text: str) -> set[str]:
    return set(_STEM.stemWords([w for w in re.findall(r"(?u)\b\w\w+\b", text.lower()) if w not in _STOP]))


def credited_turns(text: str, provenance: list[dict], turns: dict[str, dict[int, tuple[str, pd.Timestamp]]]) -> list[tuple]:
    """(source, turn, observed_at) of the units the rule credits."""
    units: list[tuple[str, int]] = []
    for cite in provenance:
        ext, sid = cite["extent"], cite["source_id"]
        lo, hi = (ext["turn"], ext["turn"]) if "turn" in ext else (ext["turn_start"], ext["turn_end"])
        units += [(sid, t) for t in sorted(turns[sid]) if lo <= t <= hi and (sid, t) not in units]
    mem = stems(text)
    judged, ok, share = [], [], []
    for sid, t in units:
        s = stems(turns[sid][t][0])
        shared = len(s & mem)
        judged.append(len(s) >= 2)
        share.append(shared / min(len(s), len(mem)) if judged[-1] and mem else 0.0)
        ok.append(shared >= 2 and share[-1] >= 0.6 if judged[-1] else len(units) == 1)
    if 2 * sum(o and j for o, j in zip(ok, judged, strict=True)) < sum(judged):
        best = [i for i in range(len(units)) if ok[i]]
        ok = [False] * len(units)
        if best:
            ok[max(best, key=lambda i: (share[i], -i))] = True
    return [(sid, t, turns[sid][t][1]) for (sid, t), good in zip(units, ok, strict=True) if good]


def recompute_recall(locomo: dict, memories: pd.DataFrame) -> pd.Series:
    seg = locomo["segments"]
    turns: dict[str, dict[int, tuple[str, pd.Timestamp]]] = {}
    for sid, t, text, seen in zip(seg["source_id"], seg["turn"], seg["text"], seg["observed_at"], strict=True):
        turns.setdefault(sid, {})[int(t)] = (text, pd.Timestamp(seen))
    top = memories.loc[memories["rank"] <= K]
    by_query = {q: g for q, g in top.groupby("query_id")}
    out = {}
    for e in locomo["entries"]:
        if e["unanswerable"]:
            continue
        found: set[tuple[str, int]] = set()
        as_of = pd.Timestamp(e["as_of"])
        for h in by_query.get(e["query_id"], pd.DataFrame(columns=top.columns)).itertuples():
            found |= {(s, t) for s, t, seen in credited_turns(h.text, json.loads(h.provenance), turns) if seen <= as_of}
        gold = [(g["source_id"], g["region"]["turn"]) for g in e["gold"]]
        out[e["query_id"]] = sum(g in found for g in gold) / len(gold)
    return pd.Series(out).sort_index()


# --------------------------------------------------------------------------- the tests

HONEST = "examples.consolidating_memory:build"


def test_recall_by_provenance_agrees_with_an_independent_recomputation(locomo):
    honest = run(locomo, HONEST)
    table = honest["result"].per_query.set_index("query_id")
    ours = table.loc[~table["unanswerable"].astype(bool), f"recall@{K}"].astype(float).sort_index()
    theirs = recompute_recall(locomo, honest["ran"].memories)
    assert len(ours) == len(theirs) > 200
    pd.testing.assert_series_equal(ours, theirs.reindex(ours.index), check_names=False)
    doc = honest["result"].document
    assert doc["overall"][f"recall@{K}"]["value"] == pytest.approx(ours.mean()) and ours.mean() > 0.5
    assert doc["overall"]["temporal_correctness"]["value"] == 1.0 and doc["overall"]["holder_correctness"]["value"] == 1.0
    mem = doc["memories"]["overall"]
    assert mem["unsupported"] == 0 and mem["no_supported_citation"]["n"] == 0 and mem["memory_hits"] == len(honest["ran"].memories)
    # what it handed over by kind: all cited, so recall@k by cited memories alone is its recall@k (same n, same denominator)
    kinds = mem["by_kind"]
    assert kinds["cited"]["memory_hits"] == mem["memory_hits"] and kinds["attributed"]["memory_hits"] == kinds["unattributed"]["memory_hits"] == 0
    assert kinds["cited"][f"recall@{K}"]["value"] == pytest.approx(doc["overall"][f"recall@{K}"]["value"])
    assert kinds["cited"][f"recall@{K}"]["denominator"] == doc["overall"][f"recall@{K}"]["denominator"] and kinds["attributed"][f"recall@{K}"]["value"] == 0
    from bench.reporting.memories import memories_section

    shown = "\n".join(memories_section({**doc, "run": {"k": K}}))
    value = kinds["cited"][f"recall@{K}"]
    assert f"| overall | cited | {mem['memory_hits']} | {kinds['cited']['memories']} | {value['value']:.4f} | {value['n']} / {value['denominator']} |" in shown
    from bench.reporting.memories import memory_html

    page = memory_html({**doc, "run": {"k": K}})  # dev.html says the same
    assert f"<td>overall</td><td>cited</td><td>{mem['memory_hits']}</td>" in page and "<h2>Memory hits (gold by provenance)</h2>" in page


@pytest.mark.parametrize("variant", ["EveryTurn", "WholeSession"])
def test_citing_more_than_the_memory_holds_gains_nothing(locomo, variant):
    honest = run(locomo, HONEST)["result"].document["overall"][f"recall@{K}"]["value"]
    cheat = run(locomo, f"tests.systems.memory_variants:{variant}")["result"].document
    assert cheat["overall"][f"recall@{K}"]["value"] <= honest
    assert cheat["memories"]["overall"]["units"] > 3 * run(locomo, HONEST)["result"].document["memories"]["overall"]["units"]


def test_citing_another_holders_session_is_a_holder_leak(locomo):
    other = run(locomo, "tests.systems.memory_variants:OtherHolder")
    honest = run(locomo, HONEST)["result"].document
    # a query with a memory in its top 10 citing the other conversation (once it was sent) is a holder leak; the others are not
    mem = other["ran"].memories
    holder = {e["query_id"]: e["scope"]["holder"] for e in locomo["entries"]}
    named = {q for q, r, p in zip(mem["query_id"], mem["rank"], mem["provenance"], strict=True)
             if r <= K and any(not c["source_id"].startswith(holder[q] + ":") for c in json.loads(p))}
    table = other["result"].per_query.set_index("query_id")
    assert named and (table.loc[sorted(named), "holder_ok"] == 0).all() and (table.drop(index=sorted(named))["holder_ok"] == 1).all()
    assert honest["overall"]["holder_correctness"]["value"] == 1.0
    assert other["result"].document["overall"][f"recall@{K}"]["value"] == honest["overall"][f"recall@{K}"]["value"]  # it finds nothing


def test_bench_eval_on_the_run_and_qrels_gives_the_harness_numbers(locomo, real_corpus, tmp_path):
    from bench.gold.resolve import resolve_frames
    from bench.ingest.atom_codes import served_ids, with_atom_ids

    honest = run(locomo, HONEST)
    ran, served, seg, entries = honest["ran"], locomo["served"], locomo["segments"], locomo["entries"]
    found = resolve_frames(entries, served, seg)
    coded, gold, mem = memory_inputs(ran, entries, found, served, seg)  # the resolve step's gold, as dev.qrels is written from it
    named = with_atom_ids(gold, served_ids(served, mem.ids))  # the memories' ids after the served atoms', as the writers name them
    (tmp_path / "dev.run").write_text(trec_run(ran.run, "memory"))
    (tmp_path / "dev.qrels").write_text(trec_qrels(named))
    ev = trec_evaluate(read_qrels(tmp_path / "dev.qrels"), read_run(tmp_path / "dev.run")).per_query
    ours = honest["result"].per_query.set_index("query_id")
    # trec_eval breaks score ties by doc id descending, the memory by id ascending: compare the questions whose
    # relevance pattern (top 10, and the first relevant rank) is the same in both orders
    relevant = set(zip(named["query_id"].astype(str), named["atom_id"].astype(str), strict=True))

    def pattern(ids: list[str], q: str) -> tuple:
        rel = [(q, x) in relevant for x in ids]
        return tuple(rel[:K]), rel.index(True) if any(rel) else None

    same = [q for q, g in ran.run.groupby("query_id") if pattern(g.sort_values("rank")["atom_id"].tolist(), q)
            == pattern(g.sort_values(["score", "atom_id"], ascending=False)["atom_id"].tolist(), q)]
    both = sorted(set(ev.index) & set(same))
    assert len(both) > 200, len(both)
    for theirs, harness in (("recip_rank", "mrr"), ("ndcg_cut_10", f"atom_ndcg@{K}"), ("recall_10", f"atom_recall@{K}")):
        np.testing.assert_allclose(ev.loc[both, theirs].to_numpy(float), ours.loc[both, harness].to_numpy(float), atol=1e-12)
    # region recall equals trec_eval's recall_10 where relevant documents and gold regions are one to one
    pairs = gold.assign(query_id=gold["query_id"].astype(str))
    one_to_one = [q for q in both if (g := pairs.loc[pairs["query_id"] == q]).groupby("atom").size().max() == 1
                  and g["gold_idx"].nunique() == len(g) == ours.loc[q, "n_regions"]]
    assert len(one_to_one) >= 20, len(one_to_one)
    np.testing.assert_allclose(ev.loc[one_to_one, "recall_10"].to_numpy(float), ours.loc[one_to_one, f"recall@{K}"].to_numpy(float))
