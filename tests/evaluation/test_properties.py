"""Property-based tests (hypothesis): the validator never crashes, region overlap keeps
its rules, metrics stay in [0, 1] whatever the ranks, ties and row order."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.annotations.validate import FAILURE_COLUMNS, validate
from bench.evaluation.per_query import per_query, query_measures
from bench.modalities import modalities
from bench.modalities.textspan import intersects
from bench.modalities.ui_screenshot.modality import intersection_area
from bench.modalities.video.modality import overlaps
from bench.systems import Query
from bench.systems.builtin.bm25 import BM25System
from tests.conftest import ROOT

PROPS = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# --------------------------------------------------------------------------- validator

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)


def _dev_entry(key: str) -> dict:
    for line in (ROOT / "bench" / "sets" / f"{key}.jsonl").read_text(encoding="utf-8").splitlines():
        e = json.loads(line)
        if e["split"] == "dev" and not e["unanswerable"] and e["gold"]:
            return e  # only dev entries are ever read here
    raise AssertionError("no dev entry")


def _paths(obj, prefix=()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(entry: dict, path: tuple, action: str, value, extra_key: str) -> dict:
    e = copy.deepcopy(entry)
    parent = e
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    if action == "delete":
        del parent[last]
    elif action == "replace":
        parent[last] = value
    elif isinstance(parent, dict):
        parent[extra_key] = value
    return e


def _assert_clean_outcome(result) -> None:
    if result.ok:
        return
    rows = result.errors.to_dict("records")
    assert rows and list(result.errors.columns) == FAILURE_COLUMNS
    for r in rows:
        assert r["file"] and isinstance(r["line"], int) and isinstance(r["check"], str) and r["check"]
    assert result.entries == []


@pytest.fixture(scope="module")
def valid_entries(real_corpus):
    return {"pdf": _dev_entry("mmlongbench"), "conversation": _dev_entry("locomo")}


@pytest.fixture(scope="module")
def corpus(real_corpus, valid_entries):
    """The manifest and only the segments of the two entries' sources (fast to group)."""
    sources = {g["source_id"] for e in valid_entries.values() for g in e["gold"]}
    segs = real_corpus["segments"]
    return real_corpus["manifest"], segs[segs["source_id"].isin(sources)].reset_index(drop=True)


@settings(max_examples=60, **PROPS)
@given(data=st.data(), which=st.sampled_from(["pdf", "conversation"]), action=st.sampled_from(["delete", "replace", "add"]),
       value=json_values, extra_key=st.text(min_size=1, max_size=8))
def test_validator_mutations_are_accepted_or_rejected_never_crash(tmp_path_factory, corpus, valid_entries, data, which, action, value, extra_key):
    entry = valid_entries[which]
    path = data.draw(st.sampled_from(_paths(entry)))
    bad = _mutate(entry, path, action, value, extra_key)
    folder = tmp_path_factory.mktemp("mut")
    f = folder / "set.jsonl"
    f.write_text(json.dumps(bad, allow_nan=True) + "\n", encoding="utf-8")
    result = validate([f], *corpus, root=folder)
    _assert_clean_outcome(result)
    if bad == entry:
        assert result.ok


@settings(max_examples=40, **PROPS)
@given(blob=st.binary(max_size=200))
def test_validator_on_arbitrary_bytes_never_crashes(tmp_path_factory, corpus, blob):
    folder = tmp_path_factory.mktemp("bytes")
    f = folder / "set.jsonl"
    f.write_bytes(blob)
    _assert_clean_outcome(validate([f], *corpus, root=folder))


# --------------------------------------------------------------------------- region overlap

coord = st.integers(0, 50)


@st.composite
def interval(draw):
    a = draw(coord)
    return a, a + draw(st.integers(1, 20))


@given(interval(), interval())
def test_interval_overlap_is_symmetric_and_touching_never_overlaps(a, b):
    for fn in (overlaps, intersects):  # video time spans; pdf/code/text char spans
        ab = bool(fn(np.array([a[0]], float), np.array([a[1]], float), *b)[0])
        ba = bool(fn(np.array([b[0]], float), np.array([b[1]], float), *a)[0])
        assert ab == ba
        assert ab == (max(a[0], b[0]) < min(a[1], b[1]))
        if a[1] == b[0] or b[1] == a[0]:
            assert not ab


@given(interval(), st.integers(0, 80))
def test_video_modality_overlap_uses_the_same_rule(a, start):
    mod = modalities()["video"]
    region = {"t_start": a[0], "t_end": a[1]}
    atoms = pd.DataFrame({"t_start": [float(start), float(a[1]), float(a[0] - 5)], "t_end": [float(start + 3), float(a[1] + 4), float(a[0])]})
    got = mod.overlap(region, atoms, pd.DataFrame())
    assert got[0] == (max(a[0], start) < min(a[1], start + 3))
    assert not got[1] and not got[2]  # touching on either side


@st.composite
def box(draw):
    x0, y0 = draw(coord), draw(coord)
    return [x0, y0, x0 + draw(st.integers(1, 30)), y0 + draw(st.integers(1, 30))]


def _boxes(*bs) -> pd.DataFrame:
    return pd.DataFrame([dict(zip(("x0", "y0", "x1", "y1"), map(float, b))) for b in bs])


@given(box(), box())
def test_box_overlap_symmetric_touching_never_overlaps(a, b):
    mod = modalities()["ui_screenshot"]
    ab = mod.overlap({"bbox": a}, _boxes(b), pd.DataFrame())[0]
    ba = mod.overlap({"bbox": b}, _boxes(a), pd.DataFrame())[0]
    assert ab == ba
    assert intersection_area(a, _boxes(b))[0] == pytest.approx(intersection_area(b, _boxes(a))[0])
    right = [a[2], a[1], a[2] + 5, a[3]]  # shares a's right edge
    below = [a[0], a[3], a[2], a[3] + 5]  # shares a's bottom edge
    corner = [a[2], a[3], a[2] + 3, a[3] + 3]  # touches a corner
    assert not mod.overlap({"bbox": a}, _boxes(right, below, corner), pd.DataFrame()).any()
    assert mod.overlap({"bbox": a}, _boxes(a), pd.DataFrame())[0]


@given(st.integers(0, 40), st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5)), min_size=1, max_size=8))
def test_turn_overlap_is_containment_and_neighbours_never_overlap(turn, spans):
    mod = modalities()["conversation"]
    atoms = pd.DataFrame({"turn_start": [s for s, _ in spans], "turn_end": [s + n for s, n in spans]})
    got = mod.overlap({"turn": turn}, atoms, pd.DataFrame())
    assert got.tolist() == [s <= turn <= s + n for s, n in spans]
    neighbours = pd.DataFrame({"turn_start": [turn + 1, max(turn - 3, 0)], "turn_end": [turn + 2, turn - 1]})
    assert not mod.overlap({"turn": turn}, neighbours, pd.DataFrame()).any()


# --------------------------------------------------------------------------- metrics and ties

T0 = pd.Timestamp("2024-01-01", tz="UTC")


@st.composite
def ranked(draw):
    n = draw(st.integers(1, 8))
    ids = [f"a{i}" for i in range(n)]
    atoms = pd.DataFrame({"atom_id": ids, "holder": "h", "observed_at": T0})
    entries, run, gold = [], [], []
    for q in range(draw(st.integers(1, 5))):
        qid = f"q{q}"
        unans = draw(st.booleans())
        n_regions = 0 if unans else draw(st.integers(1, 3))
        entries.append({"query_id": qid, "modality": "pdf", "unanswerable": unans, "holder": "h", "as_of": T0, "n_regions": n_regions})
        for g in range(n_regions):
            gold += [(qid, g, a) for a in draw(st.lists(st.sampled_from(ids), max_size=2, unique=True))]
        returned = draw(st.permutations(ids))[: draw(st.integers(0, n))]
        run += [(qid, a, r + 1, float(draw(st.integers(0, 3)))) for r, a in enumerate(returned)]  # many tied scores
    return (pd.DataFrame(entries), pd.DataFrame(run, columns=["query_id", "atom_id", "rank", "score"]),
            pd.DataFrame(gold, columns=["query_id", "gold_idx", "atom_id"]), atoms, draw(st.integers(1, 5)), draw(st.integers(0, 2**31)))


@settings(max_examples=50, **PROPS)
@given(ranked())
def test_metrics_depend_on_rank_not_on_scores_or_row_order(case):
    entries, run, gold, atoms, k, seed = case
    base = per_query(entries, run, gold, atoms, k=k)
    rng = np.random.default_rng(seed)
    rescored = run.assign(score=rng.random(len(run))).sample(frac=1, random_state=seed)
    other = per_query(entries.sample(frac=1, random_state=seed), rescored, gold.sample(frac=1, random_state=seed), atoms.sample(frac=1, random_state=seed), k=k)
    cols = [c for c in (m.column for m in query_measures(k)) if c != "false_recall"]
    pd.testing.assert_frame_equal(base[cols], other[cols])
    for c in cols:
        vals = base[c].dropna()
        assert ((vals >= 0) & (vals <= 1)).all()


@settings(max_examples=40, **PROPS)
@given(texts=st.lists(st.sampled_from(["apple pie", "apple tart", "pear", "apple apple pie"]), min_size=2, max_size=10), seed=st.integers(0, 2**31))
def test_ties_break_by_atom_id_ascending_whatever_the_atom_order(texts, seed):
    atoms = pd.DataFrame({"atom_id": [f"s:{i:03d}" for i in range(len(texts))], "text": texts, "holder": "h", "observed_at": T0})
    query = Query(question="apple pie", as_of=T0, holder="h", session=None, scenario=None, k=20)
    hits = BM25System(atoms, scoped=False).search(query)
    shuffled = BM25System(atoms.sample(frac=1, random_state=seed), scoped=False).search(query)
    assert hits == shuffled
    keys = [(-h.score, h.atom_id) for h in hits]
    assert keys == sorted(keys)  # score descending, then atom_id ascending (docs/measuring.md, bench/systems/builtin/bm25.py)
    assert len({h.atom_id for h in hits}) == len(hits)
