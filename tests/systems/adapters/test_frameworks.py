"""The langchain and llamaindex adapters with the real libraries: what a retriever is asked, how its
documents / nodes become hits, scores, and every refusal (one line naming the query)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import time

import pytest

from bench.systems import MissingExtra
from bench.systems.adapters.frameworks import FRAMEWORKS, FrameworkAdapter, Item, ScoreMode, current_query, hit_of, wire_hits
from bench.systems.adapters.protocol import MalformedResponse
from bench.systems.config import check_system, make_adapter
from bench.systems.run import run_queries
from tests.extras import need
from tests.systems.conftest import entry, make_atoms

KNOWN = set(make_atoms()["atom_id"])
LANGCHAIN = "pip install -e '.[langchain]'"
LLAMAINDEX = "pip install -e '.[llamaindex]'"


@pytest.fixture
def fakes():
    need(f"{LANGCHAIN} and {LLAMAINDEX}", "langchain_core", "llama_index.core")
    from tests.systems import framework_fakes

    framework_fakes.SEEN.clear()
    return framework_fakes


def entries(*questions: str) -> list[dict]:
    return [entry(f"locomo:conv-1:q{i}", q) for i, q in enumerate(questions)]


def langchain_adapter(fakes, answer) -> FrameworkAdapter:
    return FrameworkAdapter(FRAMEWORKS["langchain"], fakes.ScriptedLangChain(answer=answer), "lc")


def llamaindex_adapter(fakes, answer) -> FrameworkAdapter:
    return FrameworkAdapter(FRAMEWORKS["llamaindex"], fakes.ScriptedLlamaIndex(answer), "li")


def doc(fakes, atom_id=None, text="t", **meta):
    from langchain_core.documents import Document

    return Document(page_content=text, metadata={**({"atom_id": atom_id} if atom_id else {}), **meta})


def node(atom_id, score, text="t", **meta):
    from llama_index.core.schema import NodeWithScore, TextNode

    return NodeWithScore(node=TextNode(text=text, metadata={**({"atom_id": atom_id} if atom_id else {}), **meta}), score=score)


def malformed(adapter, answer_entries=None) -> str:
    with pytest.raises(ValueError) as info:
        run_queries(adapter, answer_entries or entries("apples?"), 5, known_atoms=KNOWN)
    message = str(info.value)
    assert "\n" not in message and message.startswith("query locomo:conv-1:q0: malformed response: "), message
    return message.removeprefix("query locomo:conv-1:q0: malformed response: ")


# --------------------------------------------------------------------------- through the configuration


def test_entries_run_through_both_adapters_with_scope_and_rank_or_native_scores(fakes):
    atoms = make_atoms()
    for adapter, factory in (("langchain", "langchain_keyword"), ("llamaindex", "llamaindex_keyword")):
        cfg = check_system({"name": f"{adapter}-kw", "adapter": adapter, "entry": f"tests.systems.framework_fakes:{factory}"})
        built = make_adapter(cfg, atoms)
        assert (built.kind, built.name, built.isolation, built.abstains) == (adapter, f"{adapter}-kw", "none", False)
        result = run_queries(built, entries("turn 3 about apples", "pears number 5"), 4, warmup=1, known_atoms=KNOWN)
        assert result.failed == [] and result.info["adapter"] == adapter
        first = result.run[result.run["query_id"] == "locomo:conv-1:q0"]
        assert first["atom_id"].iloc[0] == "locomo:conv-1:session-1#t3" and len(first) == 4  # cut to k
        if adapter == "langchain":  # documents have no score: 1/rank
            assert first["score"].tolist() == [1.0, 0.5, 1 / 3, 0.25]
        else:  # the nodes' own scores
            assert first["score"].tolist()[0] == 4.0 and first["score"].is_monotonic_decreasing
    asked = fakes.SEEN[-1]
    assert (asked.question, asked.holder, asked.k, asked.as_of.isoformat()) == ("pears number 5", "locomo:conv-1", 4, "2023-05-02T00:00:00+00:00")


def test_current_query_is_set_only_during_a_call():
    with pytest.raises(RuntimeError, match="only while the harness waits"):
        current_query()


def test_adapter_names_are_accepted_and_cannot_be_required_in_a_sandbox():
    from bench.params import check_block

    for adapter in FRAMEWORKS:
        assert check_block("system", {"name": "x", "adapter": adapter, "entry": "m:f"}).adapter == adapter  # params.yaml's check
        assert check_system({"name": "x", "adapter": adapter, "entry": "m:f"}).adapter == adapter
        with pytest.raises(ValueError, match=f"system.sandbox: required, but the {adapter} adapter cannot be sandboxed"):
            check_system({"name": "x", "adapter": adapter, "entry": "m:f", "sandbox": "required"})
        with pytest.raises(ValueError, match="needs an entry"):
            check_system({"name": "x", "adapter": adapter})


@pytest.mark.parametrize("adapter", list(FRAMEWORKS))
def test_missing_extra_is_one_line_naming_the_pip_command(adapter, monkeypatch):
    real = importlib.util.find_spec
    module = FRAMEWORKS[adapter].module.partition(".")[0]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    cfg = check_system({"name": "x", "adapter": adapter, "entry": "tests.systems.framework_fakes:langchain_keyword"})
    with pytest.raises(MissingExtra) as info:
        make_adapter(cfg, make_atoms())
    assert str(info.value) == (f"the {adapter} adapter needs the optional extra '{adapter}' ({FRAMEWORKS[adapter].module} is not installed): "
                               f"pip install -e '.[{adapter}]'  ({FRAMEWORKS[adapter].pip.split('(')[1]}")


def test_a_factory_that_returns_no_retriever_is_refused(fakes):
    for adapter in FRAMEWORKS:
        cfg = check_system({"name": "x", "adapter": adapter, "entry": "tests.systems.framework_fakes:not_a_retriever"})
        with pytest.raises(ValueError) as info:
            make_adapter(cfg, make_atoms())
        assert str(info.value) == (f"system.entry: tests.systems.framework_fakes:not_a_retriever returned a dict, not a "
                                   f"{FRAMEWORKS[adapter].retriever_class} (the {adapter} adapter calls the retriever the factory returns)")


# --------------------------------------------------------------------------- scores


def test_langchain_metadata_score_is_used_when_every_document_has_one(fakes):
    adapter = langchain_adapter(fakes, lambda q: [doc(fakes, "locomo:conv-1:session-1#t2", score=0.9), doc(fakes, "locomo:conv-1:session-1#t1", score=0.4)])
    result = run_queries(adapter, entries("a?", "b?"), 5, known_atoms=KNOWN)
    assert result.run["score"].tolist() == [0.9, 0.4, 0.9, 0.4]


def test_scores_on_some_hits_only_are_malformed(fakes):
    adapter = llamaindex_adapter(fakes, lambda q: [node("locomo:conv-1:session-1#t2", 2.0), node("locomo:conv-1:session-1#t1", None)])
    assert malformed(adapter) == "node 2 has no score but node 1 has one; score every node of an answer or none"


def test_one_run_keeps_one_kind_of_score(fakes):
    answers = iter([[node("locomo:conv-1:session-1#t2", None)], [node("locomo:conv-1:session-1#t2", 1.5)]])
    adapter = llamaindex_adapter(fakes, lambda q: next(answers))
    with pytest.raises(ValueError, match=r"^query locomo:conv-1:q1: malformed response: this answer's nodes are scored, but earlier answers' were not scored"):
        run_queries(adapter, entries("a?", "b?"), 5, known_atoms=KNOWN)


@pytest.mark.parametrize("bad", [math.nan, math.inf, "high", True])
def test_a_score_that_is_not_a_finite_number_is_malformed(fakes, bad):
    adapter = langchain_adapter(fakes, lambda q: [doc(fakes, "locomo:conv-1:session-1#t2", score=bad)])
    assert malformed(adapter) == f"document 1: score must be a finite number, got {bad!r}"


def test_rising_native_scores_are_refused_by_the_protocol_check(fakes):
    adapter = llamaindex_adapter(fakes, lambda q: [node("locomo:conv-1:session-1#t2", 0.1), node("locomo:conv-1:session-1#t1", 0.2)])
    assert "is above the previous hit's" in malformed(adapter)


def test_empty_answers_fix_no_score_kind():
    mode = ScoreMode()
    assert mode.scores([], "node") == [] and mode.mode is None
    assert mode.scores([Item({}, "", None)] * 3, "node") == [1.0, 0.5, 1 / 3] and mode.mode == "rank"


# --------------------------------------------------------------------------- metadata


def test_missing_atom_id_is_malformed_naming_the_query_and_the_keys(fakes):
    adapter = langchain_adapter(fakes, lambda q: [doc(fakes, None, source="x.txt", id="3")])
    assert malformed(adapter) == "document 1: its metadata has neither atom_id nor memory_id (keys: ['id', 'source'])"


def test_an_unknown_atom_is_refused_by_the_protocol_check(fakes):
    adapter = llamaindex_adapter(fakes, lambda q: [node("locomo:conv-9:session-1#t1", 1.0)])
    assert malformed(adapter) == "hit 1: unknown atom id 'locomo:conv-9:session-1#t1' (not among the served atoms)"


@pytest.mark.parametrize(("meta", "message"), [
    ({"atom_id": ""}, "node 1: metadata atom_id must be a non-empty string, got ''"),
    ({"atom_id": 7}, "node 1: metadata atom_id must be a non-empty string, got '7'"),
    ({"atom_id": "a", "memory_id": "m1"}, "node 1: its metadata names both atom_id 'a' and memory_id 'm1'; a hit is one or the other"),
    ({"memory_id": "m1"}, "node 1 (memory m1): metadata provenance must be a non-empty list of {source_id, extent} (or its JSON text), got 'None'"),
    ({"memory_id": "m1", "provenance": []}, "node 1 (memory m1): metadata provenance must be a non-empty list of {source_id, extent} (or its JSON text), got '[]'"),
    ({"memory_id": "m1", "provenance": [{"source_id": "s"}]},
     "node 1 (memory m1): provenance 1 must be an object with exactly source_id and extent, got {'source_id': 's'}"),
    ({"memory_id": "m1", "provenance": [{"source_id": "s", "extent": 3}]},
     "node 1 (memory m1): provenance 1: extent must be an object (or its JSON text), got '3'"),
    ({"memory_id": "m1", "provenance": [{"source_id": "", "extent": {}}]}, "node 1 (memory m1): provenance 1: source_id must be a non-empty string, got ''"),
])
def test_invalid_metadata_is_malformed(meta, message):
    with pytest.raises(MalformedResponse) as info:
        hit_of(Item(meta, "Caroline went to a support group.", None), "node 1")
    assert str(info.value) == message


def test_a_memory_without_text_is_malformed():
    with pytest.raises(MalformedResponse, match=r"^document 1 \(memory m1\): its text must be a non-empty string, got ' '$"):
        hit_of(Item({"memory_id": "m1", "provenance": [{"source_id": "s", "extent": {"turn": 3}}]}, " ", None), "document 1")


def test_memories_become_memory_hits_with_provenance_as_list_or_json_text():
    cites = [{"source_id": "locomo:conv-26:session-1", "extent": {"turn": 3}},
             {"source_id": "locomo:conv-26:session-4", "extent": {"turn_start": 16, "turn_end": 17}}]
    as_list = Item({"memory_id": "m77", "provenance": cites}, "Caroline went to a support group on 7 May", 3.2)
    as_text = Item({"memory_id": "m78", "provenance": json.dumps([{**c, "extent": json.dumps(c["extent"])} for c in cites])}, "She began counselling", 1.0)
    atom = Item({"atom_id": "locomo:conv-26:session-1#t3", "other": 1}, "turn 3", 0.5)
    hits = wire_hits([as_list, as_text, atom], 10, "document", ScoreMode())
    assert hits == [
        {"memory_id": "m77", "text": "Caroline went to a support group on 7 May", "provenance": cites, "score": 3.2},
        {"memory_id": "m78", "text": "She began counselling", "provenance": cites, "score": 1.0},
        {"atom_id": "locomo:conv-26:session-1#t3", "score": 0.5},
    ]


def test_a_result_that_is_not_a_list_of_documents_is_malformed(fakes):
    assert malformed(langchain_adapter(fakes, lambda q: "locomo:conv-1:session-1#t2")) == \
        "the retriever returned a str, not a list of documents"
    assert malformed(langchain_adapter(fakes, lambda q: [doc(fakes, "locomo:conv-1:session-1#t2"), {"atom_id": "x"}])) == \
        "result 2 is a dict, not a langchain_core Document"


# --------------------------------------------------------------------------- failures


def test_a_raising_retriever_fails_its_query_and_a_slow_one_times_out(fakes):
    def answer(question: str):
        if question == "boom?":
            raise KeyError("index gone")
        if question == "slow?":
            time.sleep(1.0)
        return [doc(fakes, "locomo:conv-1:session-1#t2")]

    result = run_queries(langchain_adapter(fakes, answer), entries("boom?", "slow?", "fine?"), 5, timeout_s=0.3, known_atoms=KNOWN)
    kinds = dict(zip(result.failures["query_id"], result.failures["kind"]))
    assert kinds == {"locomo:conv-1:q0": "crash", "locomo:conv-1:q1": "timeout"}
    assert "the langchain retriever raised KeyError: 'index gone'" in result.failures["message"].iloc[0]
    assert result.run["query_id"].tolist() == ["locomo:conv-1:q2"]


# --------------------------------------------------------------------------- the step's one line


def step(cfg_block: dict, tmp_path) -> str:
    """The one line the retrieve stage prints (after `error: `) when opening the system fails."""
    from bench.systems.sandbox.workdir import protected_paths
    from bench.systems.step import StepError, SystemPlaces, run_system
    from tests.conftest import ROOT

    places = SystemPlaces(root=ROOT, store=tmp_path / "store", temp_root=tmp_path / "systems", protected=protected_paths(ROOT), host_env={})
    with pytest.raises(StepError) as info:
        run_system(check_system({"name": "fw", **cfg_block}), entries("apples?"), {"conversation": make_atoms()}, places=places,
                   segments=None, manifest_rows=[])
    assert "\n" not in str(info.value)
    return str(info.value)


def test_the_stage_names_the_missing_extra_and_the_bad_factory(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llama_index" else real(name, *a))
    assert step({"adapter": "llamaindex", "entry": "examples.llamaindex_bm25:build"}, tmp_path) == (
        "params.yaml system: the llamaindex adapter needs the optional extra 'llamaindex' (llama_index.core is not installed): "
        "pip install -e '.[llamaindex]'  (llama-index-core)")
    monkeypatch.undo()
    need(LANGCHAIN, "langchain_core")
    assert step({"adapter": "langchain", "entry": "tests.systems.framework_fakes:not_a_retriever"}, tmp_path) == (
        "system 'fw': system.entry: tests.systems.framework_fakes:not_a_retriever returned a dict, not a "
        "langchain_core.retrievers.BaseRetriever (the langchain adapter calls the retriever the factory returns)")


@pytest.mark.parametrize(("entry", "blocked", "extra"), [
    ("examples.llamaindex_bm25:build", "llama_index.retrievers.bm25", "example-llamaindex-bm25"),
    ("examples.qdrant_memory:build", "qdrant_client", "example-qdrant"),
])
def test_an_example_without_its_packages_names_its_extra(entry, blocked, extra, monkeypatch, tmp_path):
    need(f"{LANGCHAIN} and {LLAMAINDEX}", "langchain_core", "llama_index.core")
    monkeypatch.setitem(sys.modules, blocked, None)  # as if not installed
    monkeypatch.delitem(sys.modules, entry.partition(":")[0], raising=False)
    adapter = "llamaindex" if "llamaindex" in entry else "langchain"
    message = step({"adapter": adapter, "entry": entry}, tmp_path)
    assert message.startswith(f"params.yaml system: examples/{entry.partition(':')[0].split('.')[1]}.py needs {blocked}: "
                              f"pip install -e '.[{extra}]'"), message


def test_rank_derived_scores_leave_false_recall_not_measurable(fakes):
    """No scores, no confidence: every top-1 is 1, so no threshold can be calibrated (never a fake 0)."""
    from bench.evaluation.measures.false_recall import NOT_MEASURABLE, calibrate

    cfg = check_system({"name": "lc", "adapter": "langchain", "entry": "tests.systems.framework_fakes:langchain_keyword"})
    result = run_queries(make_adapter(cfg, make_atoms()), entries("turn 1 apples", "pears number 2", "turn 4"), 5, known_atoms=KNOWN)
    top1 = result.run.groupby("query_id", observed=True)["score"].max().to_numpy()
    rule = calibrate(top1, 0.9)
    assert len(top1) == 3 and rule.rule == NOT_MEASURABLE and "top-1 scores do not separate" in str(rule.reason)


@pytest.mark.parametrize("adapter", ["langchain", "llamaindex"])
def test_a_frameworks_memory_hits_are_checked_and_credited_by_provenance(fakes, adapter):
    """Documents / nodes naming memories become memory hits: their citations are checked against the corpus
    as the run goes, and the evaluation credits them through their supported citations only (the broad
    citation of a whole session for one turn's fact is credited with that turn)."""
    import pandas as pd

    from bench.acceptance.in_memory import evaluate_entries
    from bench.evaluation.evaluate import EvalOptions, RunDescription, no_failures
    from bench.systems.credit.provenance import CitationCheck
    from tests.gold.test_memories import entry as memory_entry
    from tests.gold.test_memories import segments
    from tests.ingest.chunks import chunk_all

    seg = segments()
    served = chunk_all(seg, {"conversation": {"strategy": "turn"}})
    atoms = pd.concat(list(served.values()), ignore_index=True)
    cfg = check_system({"name": "memory", "adapter": adapter, "entry": f"tests.systems.framework_fakes:{adapter}_memory"})
    asked = [{**memory_entry("q1", [("c:h1:s1", 1), ("c:h1:s2", 1)]), "question": "Who is Pixel the cat?"},
             {**memory_entry("q2", [("c:h1:s1", 4), ("c:h1:s1", 2)]), "question": "What does Bob learn, the cello?"}]
    result = run_queries(make_adapter(cfg, atoms), asked, 10, known_atoms=set(atoms["atom_id"]), check_memory=CitationCheck(lambda: seg))
    assert result.failed == [] and result.memories[["query_id", "memory_id"]].values.tolist() == [["q1", "pixel"], ["q2", "cello"]]
    desc = RunDescription(system="memory", depth=10, chunking={}, concurrency=1, warm=False, adapter=adapter, warmup_queries=0,
                          timeout_s=30, latency=None)
    options = EvalOptions(k=10, bootstrap_resamples=10, bootstrap_seed=0, calibration_recall=0.9)
    evaluated = evaluate_entries(asked, [], result, result.latency, no_failures(), served, seg, options, desc, in_core_rows=10**6, sha256={})
    table = evaluated.per_query.set_index("query_id")
    assert table.loc["q1", "recall@10"] == 1.0 and table.loc["q1", "mrr"] == 1.0  # both regions, by its supported citations
    assert table.loc["q2", "recall@10"] == 0.5  # turn 4 only: the session's other turns do not support the fact
    block = evaluated.document["memories"]["overall"]
    assert (block["memory_hits"], block["citations"], block["supported"], block["units"], block["units_credited"]) == (2, 4, 4, 7, 4)
    # a citation of a source the corpus lacks stops the run, naming the query and the memory
    bad = [{"source_id": "c:h1:s7", "extent": {"turn": 1}}]
    lying = FrameworkAdapter(FRAMEWORKS["langchain"], fakes.ScriptedLangChain(answer=lambda q: [doc(fakes, memory_id="m", provenance=bad)]), "lc")
    with pytest.raises(ValueError, match=r"^query q1: malformed response: hit 1 \(memory m\): citation 1: source c:h1:s7 is not a source"):
        run_queries(lying, asked[:1], 5, known_atoms=set(atoms["atom_id"]), check_memory=CitationCheck(lambda: seg))
