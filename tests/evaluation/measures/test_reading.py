"""Ranking measures that read content (bench.evaluation.measures.reading): content_ndcg@k and
content_mrr against a reference written differently (cartridges of every slot packed character
by character, or pixel by pixel, as sets), against pytrec_eval and ir_measures where the
definitions coincide (every atom one slot, every region one atom), unchanged by cutting and
merging the ranked content, and bought by neither fragments nor bigger atoms."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bench.evaluation.measures.base import BlockRows, run_family
from bench.evaluation.measures.reading import FAMILY, SLOTS, reading_columns
from bench.ingest.atom_codes import ATOM_CODE
from tests.evaluation.measures.test_budget import BOXES, LINE, _args, _overlap, cases, frames, pieces

K = 10
MRR, NDCG = (m.at(K).column for m in FAMILY.measures)


def read(f: dict[str, pd.DataFrame], amount: float, modality: str, k: int = K) -> tuple[float, float]:
    """(content_mrr, content_ndcg@k) of the one query of `f` at budget `amount`."""
    out = reading_columns(**_args(f), budget={modality: amount}, k=k).iloc[0]
    return float(out[MRR]), float(out[f"content_ndcg@{k}"])


def reference(atoms: dict[str, tuple], ranking: list[str], regions: list[tuple], amount: int, k: int, cuttable: bool) -> tuple[float, float]:
    """The definitions cell by cell: the cartridge of j slots filled cell by cell in rank order
    (an uncuttable atom whole or not at all, ending the filling), each region's held cells of
    its gold atoms over min(|r|, B); the ideal from the regions' sizes; E = min(C, I)."""
    def cells(box: tuple) -> list[tuple]:
        s, x0, x1, y0, y1 = box
        return [(s, x, y) for y in range(int(y0), int(y1)) for x in range(int(x0), int(x1))]

    gold_sets = [{a for a, box in atoms.items() if _overlap(box, r)} for r in regions]
    slot = amount / SLOTS

    def credit(t: float) -> float:
        left, taken = t, []
        for a in ranking:
            own = cells(atoms[a])
            if left <= 0:
                break
            if len(own) <= left:
                taken.append((a, set(own)))
                left -= len(own)
            else:
                if cuttable:
                    taken.append((a, set(own[:int(left)])))
                break
        total = 0.0
        for r, members in zip(regions, gold_sets, strict=True):
            inside = set(cells(r))
            mine = set().union(*(part for a, part in taken if a in members)) if taken else set()
            total += min(1.0, len(mine & inside) / min(len(inside), amount))
        return total

    costs = sorted(min(len(cells(r)), amount) for r in regions)
    before = np.cumsum([0, *costs[:-1]])

    def ideal(t: float) -> float:  # the regions back to back, cheapest first: cut, or each whole once it fits
        if not cuttable:
            return float(sum(b + c <= t for b, c in zip(before, costs, strict=True)))
        return float(sum(min(1.0, max(0.0, (t - b) / c)) for b, c in zip(before, costs, strict=True)))

    total = sum(len(cells(atoms[a])) for a in ranking) + sum(costs)
    last = max(k, int(math.ceil(total / slot)) + 2)
    got = [0.0] + [min(credit(j * slot), ideal(j * slot)) for j in range(1, last + 1)]
    best = [0.0] + [ideal(j * slot) for j in range(1, last + 1)]
    disc = [0.0] + [1 / math.log2(j + 1) for j in range(1, last + 1)]
    dcg = sum((got[j] - got[j - 1]) * disc[j] for j in range(1, k + 1))
    idcg = sum((best[j] - best[j - 1]) * disc[j] for j in range(1, k + 1))
    rr = sum((min(1, got[j]) - min(1, got[j - 1])) / j for j in range(1, last + 1))
    irr = sum((min(1, best[j]) - min(1, best[j - 1])) / j for j in range(1, last + 1))
    return rr / irr if irr else 0.0, dcg / idcg if idcg else 0.0


# --------------------------------------------------------------------------- by hand


def test_session_and_turn_atoms_handing_the_same_turns_first_score_the_same() -> None:
    """Six 10-character turns; gold: the fourth. A "session" atom of all six ranked first and the
    six turn atoms ranked in their order read the same content: the gold turn begins after 30
    characters, in slot 4 at a 100-character budget (slots of 10) -- atom ranks would say rank 1
    for the session and rank 4 for the turns."""
    turns = {f"t{i}": ("s", 10 * i, 10 * i + 10, 0, 1) for i in range(6)}
    region = [("s", 30, 40, 0, 1)]
    by_turn = read(frames(turns, list(turns), region, LINE), 100, LINE)
    by_session = read(frames({"session": ("s", 0, 60, 0, 1)}, ["session"], region, LINE), 100, LINE)
    assert by_turn == pytest.approx(by_session)
    assert by_turn == pytest.approx((1 / 4, 1 / math.log2(5)))
    ranked_first = read(frames(turns, ["t3", "t0", "t1", "t2", "t4", "t5"], region, LINE), 100, LINE)
    assert ranked_first == (1.0, 1.0)


def test_a_region_read_across_slots_gains_in_each() -> None:
    """A 20-character gold region at a 100-character budget (slots of 10) read from character 5
    of the stream: half a region's worth in slot 1... its credit grows 0.25, 0.5, 0.25 over slots
    1 to 3; the ideal reads it in slots 1 and 2."""
    f = frames({"a": ("s", 0, 40, 0, 1)}, ["a"], [("s", 5, 25, 0, 1)], LINE)
    d = [1 / math.log2(j + 1) for j in (1, 2, 3)]
    mrr, ndcg = read(f, 100, LINE)
    assert ndcg == pytest.approx((0.25 * d[0] + 0.5 * d[1] + 0.25 * d[2]) / (0.5 * d[0] + 0.5 * d[1]))
    assert mrr == pytest.approx((0.25 / 1 + 0.5 / 2 + 0.25 / 3) / (0.5 / 1 + 0.5 / 2))


def test_a_fragment_earns_its_share_at_its_slot_never_the_region() -> None:
    """A 1-character fragment of the gold turn ranked first, then the turn itself after three other
    turns (stream: the fragment, then t0, t1, t2 from character 1, t3 from 31): the fragment earns a
    tenth of the region in slot 1, t3's next 8 characters in slot 4 (by character 40), its last in
    slot 5 -- never the whole region at the fragment's position, which counting a region met at its
    first character would give (MRR 1)."""
    turns = {f"t{i}": ("s", 10 * i, 10 * i + 10, 0, 1) for i in range(4)}
    f = frames({"frag": ("s", 30, 31, 0, 1), **turns}, ["frag", "t0", "t1", "t2", "t3"], [("s", 30, 40, 0, 1)], LINE)
    mrr, ndcg = read(f, 100, LINE)
    assert mrr == pytest.approx(0.1 / 1 + 0.8 / 4 + 0.1 / 5)
    assert ndcg == pytest.approx(0.1 + 0.8 / math.log2(5) + 0.1 / math.log2(6))


def test_a_bigger_uncut_atom_is_read_when_it_fits_whole() -> None:
    """Screenshot boxes cannot be cut: a gold box of area 40 at a budget of 100 (slots of 10) is
    read in slot 4, when it fits whole, whatever atom carries it."""
    f = frames({"box": ("s", 0, 10, 0, 4)}, ["box"], [("s", 0, 10, 0, 4)], BOXES)
    assert read(f, 100, BOXES) == pytest.approx((1.0, 1.0))  # the ideal reads it in slot 4 too
    g = frames({"x": ("s", 20, 30, 0, 1), "box": ("s", 0, 10, 0, 4)}, ["x", "box"], [("s", 0, 10, 0, 4)], BOXES)
    assert read(g, 100, BOXES) == pytest.approx((4 / 5, math.log2(5) / math.log2(6)))  # slot 5: after 10 more


def test_unanswerable_failed_and_no_budget_entries_and_abstention() -> None:
    f = frames({"g": ("s", 0, 10, 0, 1)}, ["g"], [("s", 0, 10, 0, 1)], LINE)
    two = {**f, "entries": pd.concat([f["entries"], f["entries"].assign(query_id="u", unanswerable=True)], ignore_index=True)}
    out = reading_columns(**_args(two), budget={LINE: 100}, k=K).set_index("query_id")
    assert out.loc["q", [MRR, NDCG]].tolist() == [1.0, 1.0] and out.loc["u"].isna().all()
    assert reading_columns(**_args(f), budget={LINE: 100}, k=K, failed=["q"]).iloc[0][[MRR, NDCG]].isna().all()
    assert reading_columns(**_args(f), budget={LINE: None}, k=K).iloc[0][[MRR, NDCG]].isna().all()
    assert reading_columns(**_args(f), budget={LINE: 0}, k=K).iloc[0][[MRR, NDCG]].tolist() == [0.0, 0.0]
    given = {**_args(f), "k": K, "failed": [], "budget": {LINE: 100}}
    assert run_family(FAMILY, BlockRows(**given, abstained=frozenset({"q"}))).iloc[0][[MRR, NDCG]].tolist() == [0.0, 0.0]


# --------------------------------------------------------------------------- against the reference


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(two_d=False), st.integers(1, 6), st.integers(2, 12))
def test_a_line_agrees_with_the_character_by_character_reference(case, slot, k) -> None:
    atoms, ranking, regions, _ = case
    amount = slot * SLOTS
    got = read(frames(atoms, ranking, regions, LINE), amount, LINE, k=k)
    assert got == pytest.approx(reference(atoms, ranking, regions, amount, k, cuttable=True), abs=1e-9)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(two_d=True), st.integers(1, 6))
def test_boxes_agree_with_the_pixel_by_pixel_reference(case, slot) -> None:
    atoms, ranking, regions, _ = case
    amount = slot * SLOTS
    got = read(frames(atoms, ranking, regions, BOXES), amount, BOXES)
    assert got == pytest.approx(reference(atoms, ranking, regions, amount, K, cuttable=False), abs=1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces(), st.integers(1, 6))
def test_cutting_the_ranked_content_into_pieces_or_merging_them_back_changes_neither(case, slot) -> None:
    """The same content in the same order, cut into any pieces (or the pieces merged back):
    content_mrr and content_ndcg@k are unchanged."""
    atoms, ranking, regions, _, cut_atoms, cut_rank = case
    whole = read(frames(atoms, ranking, regions, LINE), slot * SLOTS, LINE)
    cut = read(frames(cut_atoms, cut_rank, regions, LINE), slot * SLOTS, LINE)
    assert cut == pytest.approx(whole, abs=1e-12)


def _block(parts: list[dict[str, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
    """Several one-query cases as one block (queries q0, q1, ..., codes offset), with an
    unanswerable entry and an answerable one without gold regions (scored by the budget
    family, not by the reading family)."""
    out: dict[str, list[pd.DataFrame]] = {name: [] for name in ("entries", "run", "gold", "region_ext", "atom_ext")}
    offset = 0
    for i, f in enumerate(parts):
        q = f"q{i}"
        out["atom_ext"].append(f["atom_ext"])
        out["entries"].append(f["entries"].assign(query_id=q))
        out["run"].append(f["run"].assign(query_id=q, **{ATOM_CODE: f["run"][ATOM_CODE] + offset}))
        out["gold"].append(f["gold"].assign(query_id=q, **{ATOM_CODE: f["gold"][ATOM_CODE] + offset}))
        out["region_ext"].append(f["region_ext"].assign(query_id=q))
        offset += len(f["atom_ext"])
    first = out["entries"][0]
    out["entries"] += [first.assign(query_id="u", unanswerable=True), first.assign(query_id="z", n_regions=0)]
    out["run"] += [out["run"][0].assign(query_id=q) for q in ("u", "z")]
    return {name: pd.concat(frames, ignore_index=True) for name, frames in out.items()}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(cases(two_d=False), min_size=1, max_size=4), st.integers(0, 6), st.booleans())
@example([({"a0": ("s", 0, 8, 0, 1), "a1": ("s", 20, 40, 0, 1)}, ["a0", "a1"], [("s", 20, 40, 0, 1)], 0)], 1, False)
def test_the_reading_order_shared_with_the_budget_family_gives_what_its_own_gives(many, slot, fail_first) -> None:
    """The budget and reading families of one block read one reading order (BlockRows.shared);
    the reading family keeps its own queries of it. Both columns equal those each family
    computes from a reading order of its own queries. The example: the gold atom is cut at the
    budget, and the reader reaches the region's whole only past it (MRR reads the whole list)."""
    from bench.evaluation.measures import budget

    f = _block([frames(atoms, ranking, regions, LINE) for atoms, ranking, regions, _ in many])
    failed = ["q0"] if fail_first else []
    given_rows = {**_args(f), "k": K, "failed": failed, "budget": {LINE: float(slot * SLOTS)}}
    rows = BlockRows(**given_rows)
    shared_budget, shared_reading = run_family(budget.FAMILY, rows), run_family(FAMILY, rows)
    assert "reading_order" in rows._shared
    own = {**_args(f), "budget": {LINE: float(slot * SLOTS)}, "failed": failed}
    pd.testing.assert_frame_equal(shared_budget, budget.budget_columns(**own))
    pd.testing.assert_frame_equal(shared_reading, reading_columns(**own, k=K))


# --------------------------------------------------------------------------- oracles


@pytest.fixture(scope="module")
def unit_case() -> dict:
    """300 queries over atoms of one slot each (extent 1 at a budget of 10), every gold region
    one atom: the content measures must be trec_eval's region measures."""
    rng = np.random.default_rng(11)
    atom_rows, run_rows, gold_rows, region_rows, entry_rows = [], [], [], [], []
    for i in range(300):
        q, pool = f"q{i:03d}", int(rng.integers(20, 60))
        codes = len(atom_rows) + np.arange(pool)
        atom_rows += [{"atom_id": f"{q}_a{j}", "modality": LINE, "source_id": q, "part": "", "x0": float(j), "x1": j + 1.0,
                       "y0": 0.0, "y1": 1.0, "extent": 1.0} for j in range(pool)]
        depth = int(rng.integers(5, pool))
        order = rng.permutation(pool)[:depth]
        run_rows += [{"query_id": q, ATOM_CODE: int(codes[j]), "rank": r + 1, "score": float(depth - r)} for r, j in enumerate(order)]
        rel = rng.choice(pool, size=int(rng.integers(1, 6)), replace=False)  # some beyond the depth
        gold_rows += [{"query_id": q, "gold_idx": g, ATOM_CODE: int(codes[j])} for g, j in enumerate(rel)]
        region_rows += [{"query_id": q, "gold_idx": g, "source_id": q, "part": "", "x0": float(j), "x1": j + 1.0, "y0": 0.0, "y1": 1.0}
                        for g, j in enumerate(rel)]
        entry_rows.append({"query_id": q, "modality": LINE, "unanswerable": False, "n_regions": len(rel)})
    frames_ = {"entries": pd.DataFrame(entry_rows), "run": pd.DataFrame(run_rows), "gold": pd.DataFrame(gold_rows),
               "regions": pd.DataFrame(region_rows), "atom_ext": pd.DataFrame(atom_rows)}
    ours = reading_columns(**frames_, budget={LINE: float(SLOTS)}, k=K).set_index("query_id")
    names = frames_["atom_ext"]["atom_id"].to_numpy()
    qrels = {q: {names[a]: 1 for a in g[ATOM_CODE]} for q, g in frames_["gold"].groupby("query_id")}
    run = {q: {names[a]: s for a, s in zip(g[ATOM_CODE], g["score"], strict=True)} for q, g in frames_["run"].groupby("query_id")}
    return {"ours": ours, "qrels": qrels, "run": run}


def test_one_slot_atoms_give_pytrec_evals_ndcg_and_recip_rank(unit_case: dict) -> None:
    import pytrec_eval

    res = pytrec_eval.RelevanceEvaluator(unit_case["qrels"], {"recip_rank", "ndcg_cut.10"}).evaluate(unit_case["run"])
    ours = unit_case["ours"]
    assert len(res) == 300 and (ours[MRR] > 0).sum() > 200 and (ours[NDCG] > 0).sum() > 50
    for q, m in res.items():
        assert ours.loc[q, MRR] == pytest.approx(m["recip_rank"], abs=1e-9), q
        assert ours.loc[q, NDCG] == pytest.approx(m["ndcg_cut_10"], abs=1e-9), q


def test_one_slot_atoms_give_ir_measures_ndcg_and_rr(unit_case: dict) -> None:
    import ir_measures
    from ir_measures import RR, nDCG

    seen = 0
    for m in ir_measures.iter_calc([RR, nDCG @ 10], unit_case["qrels"], unit_case["run"]):
        assert unit_case["ours"].loc[m.query_id, MRR if m.measure == RR else NDCG] == pytest.approx(m.value, abs=1e-9)
        seen += 1
    assert seen == 600
