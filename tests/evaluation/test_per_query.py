"""The per-query table and its cells (bench.evaluation.per_query, bench.evaluation.cells): hand-computed
cases, properties, the integer-code engine's edge cases."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.evaluation.cells import aggregate
from bench.evaluation.per_query import per_query, query_measures
from tests.evaluation.frames import T0
from tests.evaluation.frames import entries_of as _entries
from tests.evaluation.frames import gold_of as _gold
from tests.evaluation.frames import run_of as _run

LATER = pd.Timestamp("2025-01-01", tz="UTC")
K = 3
STRONG = 0.8
LOG3 = math.log2(3)


@pytest.fixture()
def case() -> dict:
    """Nine entries covering every edge case; k = 3; false recall at the given threshold 0.8."""
    atoms = pd.DataFrame(
        {
            "atom_id": [f"a{i}" for i in range(1, 9)],
            "holder": ["owner"] * 7 + ["other"],
            "observed_at": [T0 - pd.Timedelta(days=1)] * 6 + [LATER, T0],
        }
    )
    entries = _entries(
        [
            ("q1", "pdf", False, "owner", 2),  # partial hit, first hit at rank 2
            ("q2", "pdf", False, "owner", 3),  # a6 overlaps 2 regions; region 2 has no atom; a7 future leak
            ("q3", "pdf", True, "owner", 0),  # unanswerable, strong evidence; foreign atom below k
            ("q4", "image", True, "owner", 0),  # unanswerable, weak evidence; foreign atom in top-k
            ("q5", "image", False, "owner", 1),  # absent from run
            ("q6", "image", False, "owner", 1),  # failed (its run rows must be ignored)
            ("q7", "conversation", False, "owner", 1),  # answerable, no resolvable region
            ("q8", "conversation", True, "owner", 0),  # unanswerable + failed
            ("q9", "code", False, "owner", 1),  # first hit below k
        ]
    )
    run = _run(
        [
            ("q1", "a4", 1, 0.9), ("q1", "a2", 2, 0.8), ("q1", "a5", 3, 0.7), ("q1", "a1", 4, 0.6),
            ("q2", "a6", 1, 0.9), ("q2", "a7", 2, 0.5),
            ("q3", "a4", 1, 0.9), ("q3", "a1", 2, 0.3), ("q3", "a2", 3, 0.2), ("q3", "a3", 4, 0.1),
            ("q3", "a8", 5, 0.05),
            ("q4", "a4", 1, 0.5), ("q4", "a8", 2, 0.4),
            ("q6", "a1", 1, 0.99),
            ("q7", "a1", 1, 0.9),
            ("q9", "a4", 1, 0.9), ("q9", "a5", 2, 0.8), ("q9", "a2", 3, 0.7), ("q9", "a3", 4, 0.6),
            ("zz", "a1", 1, 0.9),  # not an evaluated entry: ignored
        ]
    )
    gold = _gold(
        [
            ("q1", 0, "a1"), ("q1", 1, "a2"), ("q1", 1, "a3"),
            ("q2", 0, "a6"), ("q2", 1, "a6"),
            ("q5", 0, "a1"),
            ("q6", 0, "a1"),
            ("q9", 0, "a3"),
            ("zz", 0, "a1"),  # not an evaluated entry: ignored
        ]
    )
    latency = pd.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4", "q6", "q9", "zz"],
            "latency_ms": [100.0, 200.0, 300.0, 50.0, 999.0, 10.0, 1.0],
        }
    )
    return {"entries": entries, "run": run, "gold": gold, "atoms": atoms, "latency": latency, "failed": {"q6", "q8"}}


def _pq(c: dict, **kw) -> pd.DataFrame:
    kw.setdefault("failed", c["failed"])
    kw.setdefault("thresholds", dict.fromkeys(["code", "conversation", "image", "pdf"], STRONG))
    return per_query(c["entries"], c["run"], c["gold"], c["atoms"], k=K, **kw)


def _row(df: pd.DataFrame, qid: str) -> pd.Series:
    return df.set_index("query_id").loc[qid]


# --------------------------------------------------------------------------- per-query, by hand


def test_partial_hit(case: dict) -> None:
    r = _row(_pq(case), "q1")
    assert r["recall@3"] == pytest.approx(0.5)  # region 1 via a2; region 0 (a1) only at rank 4
    assert r["atom_recall@3"] == pytest.approx(1 / 3)
    assert r["mrr"] == pytest.approx(0.5)
    assert r["ndcg@3"] == pytest.approx((1 / LOG3) / (1 + 1 / LOG3))  # regions: region 1 at rank 2 of an ideal 2
    assert r["atom_ndcg@3"] == pytest.approx((1 / LOG3) / (1 + 1 / LOG3 + 0.5))  # atoms: a2 at rank 2 of an ideal 3
    assert (r["first_hit_rank"], r["n_returned"], r["n_gold_atoms"]) == (2, 4, 3)
    assert (r["temporal_ok"], r["holder_ok"]) == (1.0, 1.0)
    assert math.isnan(r["false_recall"])


def test_duplicate_overlap_empty_region_and_temporal_leak(case: dict) -> None:
    r = _row(_pq(case), "q2")
    assert r["recall@3"] == pytest.approx(2 / 3)  # a6 covers regions 0 and 1; region 2 has no atom
    assert r["atom_recall@3"] == 1.0
    assert r["mrr"] == 1.0
    assert r["ndcg@3"] == pytest.approx((1 + 1 / LOG3) / (1 + 1 / LOG3 + 0.5))  # a6 finds regions 0 and 1 at rank 1: slots 1, 2
    assert r["atom_ndcg@3"] == pytest.approx(1.0)
    assert r["n_gold_atoms"] == 1
    assert r["temporal_ok"] == 0.0  # a7 observed after as_of
    assert r["holder_ok"] == 1.0


def test_unanswerable(case: dict) -> None:
    df = _pq(case)
    q3, q4 = _row(df, "q3"), _row(df, "q4")
    for r in (q3, q4):
        assert all(math.isnan(r[c]) for c in ["recall@3", "atom_recall@3", "mrr", "ndcg@3"])
    assert q3["false_recall"] == 1.0
    assert q4["false_recall"] == 0.0
    assert q3["holder_ok"] == 1.0  # foreign a8 is at rank 5 > k
    assert q4["holder_ok"] == 0.0  # foreign a8 is at rank 2 <= k


def test_given_threshold_is_inclusive_on_the_top1_score() -> None:
    entries = _entries([("u", "pdf", True, "h", 0)])
    atoms = pd.DataFrame({"atom_id": ["a", "b"], "holder": "h", "observed_at": T0})
    run = _run([("u", "a", 1, 0.8), ("u", "b", 50, 0.1)])
    out = per_query(entries, run, _gold([]), atoms, k=3, thresholds={"pdf": 0.8})
    assert out.loc[0, "false_recall"] == 1.0 and out.loc[0, "false_recall_rule"] == "calibrated"
    out = per_query(entries, run, _gold([]), atoms, k=3, thresholds={"pdf": 0.80001})
    assert out.loc[0, "false_recall"] == 0.0
    out = per_query(entries, run, _gold([]), atoms, k=3, thresholds={"image": 0.5})  # never recalibrated
    assert out.loc[0, "false_recall_rule"] == "not measurable" and math.isnan(out.loc[0, "false_recall"])


def test_absent_from_run(case: dict) -> None:
    r = _row(_pq(case), "q5")
    assert [r[c] for c in ["recall@3", "atom_recall@3", "mrr", "ndcg@3"]] == [0.0] * 4
    assert (r["temporal_ok"], r["holder_ok"], r["n_returned"]) == (1.0, 1.0, 0)
    assert math.isnan(r["first_hit_rank"]) and not r["failed"]


def test_failed_is_nan_and_ignores_run_rows(case: dict) -> None:
    df = _pq(case)
    r = _row(df, "q6")
    assert r["failed"] and r["n_returned"] == 0
    assert all(math.isnan(r[c]) for c in (m.column for m in query_measures(K)))
    assert _row(df, "q8")["failed"]


def test_answerable_without_resolvable_region(case: dict) -> None:
    r = _row(_pq(case), "q7")
    assert [r[c] for c in ["recall@3", "atom_recall@3", "mrr", "ndcg@3"]] == [0.0] * 4
    assert r["n_gold_atoms"] == 0


def test_mrr_uses_whole_list(case: dict) -> None:
    r = _row(_pq(case), "q9")
    assert r["mrr"] == pytest.approx(0.25)
    assert r["recall@3"] == 0.0 and r["atom_recall@3"] == 0.0 and r["ndcg@3"] == 0.0


def test_rank_column_is_authoritative() -> None:
    entries = _entries([("q", "pdf", False, "h", 1)])
    atoms = pd.DataFrame({"atom_id": ["a", "b", "c"], "holder": "h", "observed_at": T0})
    # equal scores, rows out of order: only `rank` decides
    run = _run([("q", "c", 3, 0.5), ("q", "a", 1, 0.5), ("q", "b", 2, 0.5)])
    out = per_query(entries, run, _gold([("q", 0, "b")]), atoms, k=10)
    assert out.loc[0, "mrr"] == 0.5
    assert out.loc[0, "ndcg@10"] == pytest.approx(1 / LOG3)


def test_output_is_one_row_per_entry_sorted(case: dict) -> None:
    df = _pq(case)
    assert list(df["query_id"]) == [f"q{i}" for i in range(1, 10)]
    assert df["failed"].tolist() == [q in {"q6", "q8"} for q in df["query_id"]]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c["entries"].__setitem__("query_id", ["q1"] * 9), "unique"),
        (lambda c: c.__setitem__("gold", _gold([("q3", 0, "a1")])), "unanswerable"),
        (lambda c: c.__setitem__("run", _run([("q1", "zz", 1, 1.0)])), "missing"),
        (lambda c: c.__setitem__("run", _run([("q1", "a1", 1, 1.0), ("q1", "a2", 1, 0.5)])), "rank"),
        (lambda c: c.__setitem__("gold", _gold([("q5", 0, "a1"), ("q5", 1, "a2")])), "n_regions"),
    ],
)
def test_invalid_inputs_raise(case: dict, mutate, message: str) -> None:
    mutate(case)
    with pytest.raises(ValueError, match=message):
        _pq(case)


# --------------------------------------------------------------------------- aggregation


def _cell(value, n: int, d: int) -> dict:
    return {"value": value, "n": n, "denominator": d}


def _assert_cell(got: dict, value, n: int, d: int) -> None:
    assert (got["n"], got["denominator"]) == (n, d)
    if value is None:
        assert got["value"] is None
    else:
        assert type(got["value"]) is float and got["value"] == pytest.approx(value)


def test_aggregate_shape_and_values(case: dict) -> None:
    rep = aggregate(_pq(case), case["latency"], failed=case["failed"], k=K)
    assert list(rep) == ["by_modality", "overall"]
    assert list(rep["by_modality"]) == ["code", "conversation", "image", "pdf"]
    expected_keys = [
        "recall@3", "atom_recall@3", "mrr", "ndcg@3", "ranked_recall@3", "atom_ndcg@3", "false_recall", "abstention_rate", "handed_nothing",
        "auroc_unanswerable",
        "temporal_correctness", "holder_correctness", "latency_p50_ms", "latency_p95_ms",
    ]
    for group in [*rep["by_modality"].values(), rep["overall"]]:
        assert list(group) == expected_keys
    json.dumps(rep, allow_nan=False)

    pdf, image = rep["by_modality"]["pdf"], rep["by_modality"]["image"]
    conv, code = rep["by_modality"]["conversation"], rep["by_modality"]["code"]
    _assert_cell(pdf["recall@3"], (0.5 + 2 / 3) / 2, 2, 2)
    _assert_cell(pdf["false_recall"], 1.0, 1, 1)
    _assert_cell(pdf["temporal_correctness"], 2 / 3, 3, 3)
    _assert_cell(pdf["holder_correctness"], 1.0, 3, 3)
    _assert_cell(pdf["latency_p50_ms"], 200.0, 3, 3)
    _assert_cell(pdf["latency_p95_ms"], 290.0, 3, 3)

    _assert_cell(image["recall@3"], 0.0, 1, 2)  # failed q6 stays in the denominator
    _assert_cell(image["false_recall"], 0.0, 1, 1)
    _assert_cell(image["temporal_correctness"], 2 / 3, 2, 3)  # failed -> 0
    _assert_cell(image["holder_correctness"], 1 / 3, 2, 3)
    _assert_cell(image["latency_p50_ms"], 50.0, 1, 3)  # failed q6's latency excluded

    _assert_cell(conv["false_recall"], 1.0, 0, 1)  # failed unanswerable counts as the worst case
    _assert_cell(conv["latency_p95_ms"], None, 0, 2)
    _assert_cell(code["false_recall"], None, 0, 0)  # no unanswerable entry
    _assert_cell(code["mrr"], 0.25, 1, 1)

    ov = rep["overall"]
    _assert_cell(ov["recall@3"], (0.5 + 2 / 3) / 6, 5, 6)
    _assert_cell(ov["atom_recall@3"], (1 / 3 + 1) / 6, 5, 6)
    _assert_cell(ov["mrr"], (0.5 + 1 + 0.25) / 6, 5, 6)
    ndcg_q1, ndcg_q2 = (1 / LOG3) / (1 + 1 / LOG3), (1 + 1 / LOG3) / (1 + 1 / LOG3 + 0.5)
    _assert_cell(ov["ndcg@3"], (ndcg_q1 + ndcg_q2) / 6, 5, 6)
    _assert_cell(ov["atom_ndcg@3"], ((1 / LOG3) / (1 + 1 / LOG3 + 0.5) + 1) / 6, 5, 6)
    _assert_cell(ov["false_recall"], 2 / 3, 2, 3)
    _assert_cell(ov["abstention_rate"], 2 / 6, 5, 6)  # nobody abstained; q5 returned nothing (an empty answer is one); failed q6 the worst case
    _assert_cell(ov["temporal_correctness"], 6 / 9, 7, 9)
    _assert_cell(ov["holder_correctness"], 6 / 9, 7, 9)
    _assert_cell(ov["latency_p50_ms"], 100.0, 5, 9)
    _assert_cell(ov["latency_p95_ms"], 280.0, 5, 9)


def test_failed_only_given_to_aggregate_is_equivalent(case: dict) -> None:
    want = aggregate(_pq(case), case["latency"], failed=case["failed"], k=K)
    got = aggregate(_pq(case, failed=None), case["latency"], failed=pd.Series(sorted(case["failed"])), k=K)
    assert got == want


def test_default_k_keys_and_no_latency() -> None:
    entries = _entries([("q", "pdf", False, "h", 1)])
    atoms = pd.DataFrame({"atom_id": ["a"], "holder": "h", "observed_at": T0})
    df = per_query(entries, _run([("q", "a", 1, 1.0)]), _gold([("q", 0, "a")]), atoms)
    rep = aggregate(df, None)
    assert list(rep["overall"])[:4] == ["recall@10", "atom_recall@10", "mrr", "ndcg@10"]
    assert rep["overall"]["recall@10"] == _cell(1.0, 1, 1)
    assert rep["overall"]["latency_p50_ms"] == _cell(None, 0, 1)


def test_empty_inputs() -> None:
    entries = _entries([("q", "pdf", False, "h", 2), ("u", "pdf", True, "h", 0)])
    atoms = pd.DataFrame({"atom_id": pd.Series([], dtype=str), "holder": pd.Series([], dtype=str),
                          "observed_at": pd.Series([], dtype="datetime64[ns, UTC]")})
    df = per_query(entries, _run([]), _gold([]), atoms)
    rep = aggregate(df, pd.DataFrame({"query_id": [], "latency_ms": []}))
    assert rep["overall"]["recall@10"] == _cell(0.0, 1, 1)
    # nothing returned at all: no threshold can be calibrated, said so
    fr = rep["overall"]["false_recall"]
    assert fr["value"] is None and (fr["n"], fr["denominator"]) == (1, 1) and "not measurable" in fr["reason"]
    assert rep["overall"]["temporal_correctness"] == _cell(1.0, 2, 2)



# --------------------------------------------------------------------------- properties


@st.composite
def scenarios(draw) -> dict:
    n_atoms = draw(st.integers(1, 8))
    atom_ids = [f"a{i}" for i in range(n_atoms)]
    atoms = pd.DataFrame(
        {
            "atom_id": atom_ids,
            "holder": draw(st.lists(st.sampled_from(["h1", "h2"]), min_size=n_atoms, max_size=n_atoms)),
            "observed_at": [T0 + pd.Timedelta(days=d) for d in draw(
                st.lists(st.integers(0, 4), min_size=n_atoms, max_size=n_atoms))],
        }
    )
    entries, run, gold = [], [], []
    qids = [f"q{i}" for i in range(draw(st.integers(1, 6)))]
    for qid in qids:
        unans = draw(st.booleans())
        n_regions = 0 if unans else draw(st.integers(0, 4))
        entries.append({
            "query_id": qid, "modality": draw(st.sampled_from(["pdf", "image", "code"])),
            "unanswerable": unans, "holder": draw(st.sampled_from(["h1", "h2"])),
            "n_regions": n_regions, "as_of": T0 + pd.Timedelta(days=draw(st.integers(0, 4))),
        })
        for g in range(n_regions):
            for a in draw(st.lists(st.sampled_from(atom_ids), max_size=3, unique=True)):
                gold.append((qid, g, a))
        returned = draw(st.permutations(atom_ids))[: draw(st.integers(0, n_atoms))]
        scores = sorted(draw(st.lists(st.floats(0, 1), min_size=len(returned), max_size=len(returned))),
                        reverse=True)
        run += [(qid, a, r + 1, s) for r, (a, s) in enumerate(zip(returned, scores))]
    timed = draw(st.lists(st.sampled_from(qids), unique=True))
    return {
        "entries": pd.DataFrame(entries), "run": _run(run), "gold": _gold(gold), "atoms": atoms,
        "latency": pd.DataFrame({"query_id": timed, "latency_ms": [float(draw(st.integers(1, 1000))) for _ in timed]}),
        "failed": draw(st.sets(st.sampled_from(qids))),
        "k": draw(st.integers(1, 5)), "strong": draw(st.floats(0, 1)), "seed": draw(st.integers(0, 2**31)),
    }


def _evaluate(s: dict, frames: dict, failed) -> tuple[pd.DataFrame, dict]:
    df = per_query(frames["entries"], frames["run"], frames["gold"], frames["atoms"],
                   k=s["k"], failed=failed)
    return df, aggregate(df, frames["latency"], failed=failed, k=s["k"])


FRAMES = ("entries", "run", "gold", "atoms", "latency")
PROPS = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@settings(max_examples=40, **PROPS)
@given(scenarios())
def test_metrics_in_unit_interval_and_n_le_denominator(s: dict) -> None:
    df, rep = _evaluate(s, {f: s[f] for f in FRAMES}, s["failed"])
    for col in (m.column for m in query_measures(s["k"])):
        vals = df[col].dropna()
        assert ((vals >= 0) & (vals <= 1)).all(), col
    for group in [*rep["by_modality"].values(), rep["overall"]]:
        for name, cell in group.items():
            assert 0 <= cell["n"] <= cell["denominator"]
            if cell["denominator"] == 0:
                assert cell["value"] is None
            if cell["value"] is not None and not name.startswith("latency"):
                assert 0.0 <= cell["value"] <= 1.0
    json.dumps(rep, allow_nan=False)


@settings(max_examples=30, **PROPS)
@given(scenarios())
def test_row_order_does_not_matter(s: dict) -> None:
    base_df, base_rep = _evaluate(s, {f: s[f] for f in FRAMES}, s["failed"])
    shuffled = {f: s[f].sample(frac=1, random_state=s["seed"] + i) for i, f in enumerate(FRAMES)}
    df, rep = _evaluate(s, shuffled, sorted(s["failed"], reverse=True))
    pd.testing.assert_frame_equal(df, base_df)
    assert rep == base_rep
    rep2 = aggregate(base_df.sample(frac=1, random_state=s["seed"]), s["latency"], failed=s["failed"], k=s["k"])
    assert rep2 == base_rep


# --------------------------------------------------------------------------- integer-code engine edge cases


def _reference_row(s: dict, qid: str) -> dict[str, float]:
    """Plain-Python per-query metrics of one answerable, non-failed entry (module docstring)."""
    k = s["k"]
    e = s["entries"].set_index("query_id").loc[qid]
    run = s["run"].loc[s["run"]["query_id"] == qid].sort_values("rank")
    gold = s["gold"].loc[s["gold"]["query_id"] == qid]
    gold_atoms = set(gold["atom_id"])
    top = run.loc[run["rank"] <= k]
    hits = [r for a, r in zip(run["atom_id"], run["rank"]) if a in gold_atoms]
    dcg = sum(1 / math.log2(r + 1) for a, r in zip(top["atom_id"], top["rank"]) if a in gold_atoms)
    idcg = sum(1 / math.log2(r + 1) for r in range(1, min(len(gold_atoms), k) + 1))
    # regions: each region found at the first top-k rank of one of its atoms, the i-th found no better than slot i
    first = {g: min(r for a, r in zip(top["atom_id"], top["rank"]) if a in set(grp["atom_id"]))
             for g, grp in gold.groupby("gold_idx") if set(grp["atom_id"]) & set(top["atom_id"])}
    r_dcg = sum(1 / math.log2(max(r, i) + 1) for i, r in enumerate(sorted(first.values()), start=1) if max(r, i) <= k)
    r_idcg = sum(1 / math.log2(r + 1) for r in range(1, min(int(e["n_regions"]), k) + 1))
    covered = set(gold.loc[gold["atom_id"].isin(set(top["atom_id"])), "gold_idx"])
    return {
        f"recall@{k}": len(covered) / e["n_regions"] if e["n_regions"] else 0.0,
        f"atom_recall@{k}": len(gold_atoms & set(top["atom_id"])) / len(gold_atoms) if gold_atoms else 0.0,
        "mrr": 1 / hits[0] if hits else 0.0,
        f"atom_ndcg@{k}": dcg / idcg if idcg else 0.0,
        f"ndcg@{k}": r_dcg / r_idcg if r_idcg else 0.0,
        f"ranked_recall@{k}": len(covered) / e["n_regions"] if e["n_regions"] else 0.0,
    }


@settings(max_examples=40, **PROPS)
@given(scenarios())
def test_ranking_metrics_equal_plain_python_reference(s: dict) -> None:
    df = per_query(s["entries"], s["run"], s["gold"], s["atoms"], k=s["k"]).set_index("query_id")
    for qid in df.index[~df["unanswerable"].to_numpy()]:
        for col, want in _reference_row(s, qid).items():
            assert df.loc[qid, col] == pytest.approx(want, abs=1e-12), (qid, col)


def test_gold_atom_absent_from_atoms_counts_but_never_hits() -> None:
    entries = _entries([("q", "pdf", False, "h", 2)])
    atoms = pd.DataFrame({"atom_id": ["a", "b"], "holder": "h", "observed_at": T0})
    gold = _gold([("q", 0, "a"), ("q", 1, "ghost"), ("q", 1, "ghost2")])
    out = per_query(entries, _run([("q", "b", 1, 0.9), ("q", "a", 2, 0.5)]), gold, atoms, k=3)
    row = out.iloc[0]
    assert row["n_gold_atoms"] == 3 and row["first_hit_rank"] == 2.0
    assert row["recall@3"] == 0.5 and row["atom_recall@3"] == pytest.approx(1 / 3)


def test_missing_holder_never_matches() -> None:
    entries = _entries([("q", "pdf", True, None, 0)])
    atoms = pd.DataFrame({"atom_id": ["a"], "holder": [None], "observed_at": T0})
    out = per_query(entries, _run([("q", "a", 1, 0.1)]), _gold([]), atoms, k=3)
    assert out.loc[0, "holder_ok"] == 0.0


def test_duplicate_atom_ids_and_missing_atoms_are_reported() -> None:
    entries = _entries([("q", "pdf", False, "h", 1), ("r", "pdf", False, "h", 1)])
    atoms = pd.DataFrame({"atom_id": ["a", "a"], "holder": "h", "observed_at": T0})
    with pytest.raises(ValueError, match="atoms.atom_id must be unique"):
        per_query(entries, _run([("q", "a", 1, 0.1)]), _gold([]), atoms, k=3)
    atoms = pd.DataFrame({"atom_id": ["a"], "holder": "h", "observed_at": T0})
    run = _run([("r", "z", 1, 0.1), ("q", "y", 2, 0.1), ("q", "x", 1, 0.1), ("q", "a", 3, 0.1)])
    with pytest.raises(ValueError, match=r"missing from atoms: \['x', 'y', 'z'\]"):  # in (query_id, rank) order
        per_query(entries, run, _gold([]), atoms, k=3)


def test_non_string_ids_are_compared_as_strings() -> None:
    entries = _entries([(1, "pdf", False, "h", 1), (10, "pdf", False, "h", 1)])
    atoms = pd.DataFrame({"atom_id": [5, 6], "holder": "h", "observed_at": T0})
    run = _run([("10", 6, 1, 0.5), (1, "5", 1, 0.5)])
    out = per_query(entries, run, _gold([(10, 0, "6"), ("1", 0, 5)]), atoms, k=3)
    assert out["query_id"].tolist() == ["1", "10"] and out["mrr"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("ids", [["a", "b", "b"], ["b", "a", "b"], ["a", None, None]])
def test_duplicate_atom_ids_raise_sorted_or_not(ids: list) -> None:
    entries = _entries([("q", "pdf", True, "h", 0)])
    atoms = pd.DataFrame({"atom_id": ids, "holder": "h", "observed_at": T0})
    with pytest.raises(ValueError, match="atoms.atom_id must be unique"):
        per_query(entries, _run([("q", "a", 1, 0.1)]), _gold([]), atoms, k=3)
