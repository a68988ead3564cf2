"""Budget measures (bench.evaluation.measures.budget): recall@budget (held credit),
coverage@budget and the half and touch diagnostics against a reference written differently
(a cartridge packed character by character, or pixel by pixel, as sets), the properties the
issues name (an unlimited budget gives recall@depth under the touch rule, cutting an atom
moves coverage only at the boundary, a budget of 0 gives 0, cutting and merging change
nothing, truncating every unit to a fraction f earns f of what the whole units earn at the
budget that buys them), and the real run: bigger atoms no longer buy recall at equal cost."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.acceptance.in_memory import evaluate_entries
from bench.evaluation.evaluate import EvalOptions, RunDescription
from bench.evaluation.measures.base import BlockRows, run_family
from bench.evaluation.measures.budget import FAMILY, MEASURES, budget_columns, budgets, no_budget, packed_atoms
from bench.ingest.atom_codes import ATOM_CODE
from bench.modalities import modalities
from bench.modalities.boxes import leading_interval

LINE = "pdf"  # a modality whose atoms are cut (characters in document order)
BOXES = "ui_screenshot"  # a modality whose atoms are never cut
RECALL, COVERAGE, HALF, TOUCH = (m.column for m in MEASURES)


# --------------------------------------------------------------------------- frames


def frames(atoms: dict[str, tuple], ranking: list[str], regions: list[tuple], modality: str) -> dict[str, pd.DataFrame]:
    """One query "q": atoms id -> (source, x0, x1, y0, y1); regions (source, x0, x1, y0, y1);
    the resolved gold set of a region = the atoms whose box overlaps it with positive area.
    Atoms are named by code (their position in `atoms`), as the evaluation reads them."""
    code = {a: i for i, a in enumerate(atoms)}
    atom_ext = pd.DataFrame([{"atom_id": a, "modality": modality, "source_id": s, "part": "", "x0": x0, "x1": x1, "y0": y0,
                              "y1": y1, "extent": (x1 - x0) * (y1 - y0)} for a, (s, x0, x1, y0, y1) in atoms.items()])
    region_ext = pd.DataFrame([{"query_id": "q", "gold_idx": i, "source_id": s, "part": "", "x0": x0, "x1": x1, "y0": y0,
                                "y1": y1, "extent": (x1 - x0) * (y1 - y0)} for i, (s, x0, x1, y0, y1) in enumerate(regions)])
    gold = pd.DataFrame([{"query_id": "q", "gold_idx": i, ATOM_CODE: code[a]} for i, r in enumerate(regions)
                         for a, box in atoms.items() if _overlap(box, r)], columns=["query_id", "gold_idx", ATOM_CODE])
    run = pd.DataFrame({"query_id": "q", ATOM_CODE: [code[a] for a in ranking], "rank": np.arange(1, len(ranking) + 1), "score": 0.0})
    entries = pd.DataFrame({"query_id": ["q"], "modality": [modality], "unanswerable": [False], "n_regions": [len(regions)]})
    return {"entries": entries, "run": run, "gold": gold, "region_ext": region_ext, "atom_ext": atom_ext}


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and min(a[2], b[2]) > max(a[1], b[1]) and min(a[4], b[4]) > max(a[3], b[3])


def measured(f: dict[str, pd.DataFrame], amount: float, modality: str) -> dict[str, float]:
    """recall@budget, coverage@budget and the touch and half diagnostics of the one query of `f`, by column."""
    out = budget_columns(f["entries"], f["run"], f["gold"], f["region_ext"], f["atom_ext"], budget={modality: amount}).iloc[0]
    return {column: float(out[column]) for column in (RECALL, COVERAGE, TOUCH, HALF)}


def measure(f: dict[str, pd.DataFrame], amount: float, modality: str, touch: bool = False, half: bool = False) -> tuple[float, float]:
    """(recall@budget -- or the touch or half diagnostic --, coverage@budget) of the one query of `f`."""
    out = measured(f, amount, modality)
    return out[TOUCH if touch else HALF if half else RECALL], out[COVERAGE]


def reference(atoms: dict[str, tuple], ranking: list[str], regions: list[tuple], amount: int, cuttable: bool) -> tuple[float, float]:
    """The cartridge as a set of unit cells (characters, or pixels), filled cell by cell in
    rank order; an uncuttable atom goes in whole or stops the filling."""
    def cells(box: tuple) -> list[tuple]:
        s, x0, x1, y0, y1 = box
        return [(s, x, y) for y in range(int(y0), int(y1)) for x in range(int(x0), int(x1))]  # reading order: rows, then x

    gold_sets = [{a for a, box in atoms.items() if _overlap(box, r)} for r in regions]
    left, taken = amount, []  # (atom, its packed cells, whole)
    for a in ranking:
        own = cells(atoms[a])
        if left <= 0:
            break
        if len(own) <= left:
            taken.append((a, set(own), True))
            left -= len(own)
        else:
            if cuttable:
                taken.append((a, set(own[:left]), False))
            break
    credit = halves = touched = 0.0
    for r, members in zip(regions, gold_sets, strict=True):
        inside = set(cells(r))
        if any(a in members and (whole or part & inside) for a, part, whole in taken):
            touched += 1
        mine = set().union(*(part for a, part, _ in taken if a in members)) if taken else set()
        credit += min(1.0, len(mine & inside) / min(len(inside), amount)) if amount > 0 else 0.0  # each cell worth 1 / min(|r|, B)
        if mine & inside and len(mine & inside) >= 0.5 * min(len(inside), amount):  # the half rule
            halves += 1
    gold = set().union(*(cells(r) for r in regions)) if regions else set()
    packed = set().union(*(part for a, part, _ in taken if any(a in m for m in gold_sets))) if taken else set()
    TOUCHED[0] = touched / len(regions) if regions else 0.0
    HALVED[0] = halves / len(regions) if regions else 0.0
    return credit / len(regions) if regions else 0.0, len(gold & packed) / len(gold) if gold else 0.0


TOUCHED = [0.0]  # the reference's touch rule of its last call (touch_recall@budget)
HALVED = [0.0]  # and its half rule (half_recall@budget)


# --------------------------------------------------------------------------- by hand


def test_packing_by_hand_on_a_line() -> None:
    # gold [10, 30) and [100, 110); ranked: a [0, 20) (gold), b [40, 90) (not gold), c [95, 120) (gold)
    atoms = {"a": ("s", 0, 20, 0, 1), "b": ("s", 40, 90, 0, 1), "c": ("s", 95, 120, 0, 1)}
    f = frames(atoms, ["a", "b", "c"], [("s", 10, 30, 0, 1), ("s", 100, 110, 0, 1)], LINE)
    assert measure(f, 20, LINE) == (pytest.approx(0.25), pytest.approx(10 / 30))  # a whole, then spent: half of gold 1
    assert measure(f, 75, LINE) == (pytest.approx(0.25), pytest.approx(10 / 30))  # c's leading 5: [95, 100) misses gold 2
    assert measure(f, 76, LINE) == (pytest.approx(0.30), pytest.approx(11 / 30))  # c's leading 6 reaches [100, 101): 1 of its 10
    assert measure(f, 80, LINE) == (pytest.approx(0.50), pytest.approx(15 / 30))  # c's leading 10 holds [100, 105): half of gold 2
    assert measure(f, 1000, LINE) == (pytest.approx(0.75), pytest.approx(20 / 30))  # [20, 30) is in no atom
    assert measure(f, 0, LINE) == (0.0, 0.0)
    # the half rule (a diagnostic): a region counts once half of it is held
    assert [measure(f, b, LINE, half=True)[0] for b in (20, 76, 80, 1000)] == [0.5, 0.5, 1.0, 1.0]


def test_an_uncut_boundary_atom_is_left_out_and_packing_stops() -> None:
    atoms = {"big": ("s", 0, 10, 0, 10), "small": ("s", 20, 22, 0, 2)}  # areas 100 and 4
    f = frames(atoms, ["big", "small"], [("s", 20, 22, 0, 2)], BOXES)
    assert measure(f, 99, BOXES) == (0.0, 0.0)  # big does not fit: the budget ends there, small is never read
    assert measure(f, 104, BOXES) == (1.0, 1.0)
    assert modalities()[BOXES].cut(np.zeros((1, 4)), np.ones(1)) is None


def test_atoms_of_another_modality_and_unanswerable_or_failed_entries() -> None:
    atoms = {"x": ("s", 0, 10, 0, 1), "g": ("s", 10, 20, 0, 1)}
    f = frames(atoms, ["x", "g"], [("s", 10, 20, 0, 1)], LINE)
    f["atom_ext"].loc[0, "modality"] = "conversation"  # x is paid from its own modality's budget
    assert measure(f, 10, LINE) == (1.0, 1.0)
    two = {**f, "entries": pd.concat([f["entries"], f["entries"].assign(query_id="u", unanswerable=True)], ignore_index=True)}
    out = budget_columns(two["entries"], two["run"], two["gold"], two["region_ext"], two["atom_ext"], budget={LINE: 10},
                         failed=["q"]).set_index("query_id")
    assert out[[RECALL, COVERAGE]].isna().all().all()  # failed and unanswerable: no value (a cell counts a failed one 0)
    assert out.loc["q", "budget"] == 10


def test_a_modality_without_a_budget_has_no_value_and_says_why() -> None:
    f = frames({"g": ("s", 0, 5, 0, 1)}, ["g"], [("s", 0, 5, 0, 1)], LINE)
    out = budget_columns(f["entries"], f["run"], f["gold"], f["region_ext"], f["atom_ext"], budget={LINE: None})
    assert out[[RECALL, COVERAGE]].isna().all().all()
    table = out.assign(modality=LINE, unanswerable=False, failed=False)
    cell = MEASURES[0].reducer.cell(MEASURES[0], table)
    assert cell["value"] is None and "metrics.budget" in cell["reason"] and no_budget(table.assign(budget=1.0)) is None


def test_every_modality_declares_a_budget_and_a_line_is_cut_at_its_leading_part() -> None:
    for name, mod in modalities().items():
        assert mod.budget is not None and 0 < mod.budget.default <= mod.budget.high, name
    assert budgets({LINE: 5})[LINE] == 5.0
    assert leading_interval(np.array([[10.0, 30.0, 0.0, 1.0]]), np.array([4.0])).tolist() == [[10.0, 14.0, 0.0, 1.0]]


# --------------------------------------------------------------------------- against the reference


@st.composite
def cases(draw: st.DrawFn, two_d: bool) -> tuple[dict, list[str], list[tuple], int]:
    n = draw(st.integers(1, 7))
    atoms = {}
    for i in range(n):
        s = draw(st.sampled_from(["s", "t"]))
        x0 = draw(st.integers(0, 30))
        y0 = draw(st.integers(0, 6)) if two_d else 0
        atoms[f"a{i}"] = (s, x0, x0 + draw(st.integers(1, 12)), y0, y0 + (draw(st.integers(1, 4)) if two_d else 1))
    ranking = draw(st.permutations(sorted(atoms)))
    regions = []
    for _ in range(draw(st.integers(1, 3))):
        s, x0 = draw(st.sampled_from(["s", "t"])), draw(st.integers(0, 35))
        y0 = draw(st.integers(0, 6)) if two_d else 0
        regions.append((s, x0, x0 + draw(st.integers(1, 10)), y0, y0 + (draw(st.integers(1, 4)) if two_d else 1)))
    return atoms, list(ranking), regions, draw(st.integers(0, 60))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(two_d=False))
def test_a_line_agrees_with_the_character_by_character_reference(case) -> None:
    atoms, ranking, regions, amount = case
    got = measured(frames(atoms, ranking, regions, LINE), amount, LINE)  # every column of one evaluation
    assert (got[RECALL], got[COVERAGE]) == pytest.approx(reference(atoms, ranking, regions, amount, cuttable=True))
    assert got[TOUCH] == pytest.approx(TOUCHED[0])
    assert got[HALF] == pytest.approx(HALVED[0])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(two_d=True))
def test_boxes_agree_with_the_pixel_by_pixel_reference(case) -> None:
    atoms, ranking, regions, amount = case
    got = measured(frames(atoms, ranking, regions, BOXES), amount, BOXES)  # every column of one evaluation
    assert (got[RECALL], got[COVERAGE]) == pytest.approx(reference(atoms, ranking, regions, amount, cuttable=False))
    assert got[TOUCH] == pytest.approx(TOUCHED[0])
    assert got[HALF] == pytest.approx(HALVED[0])


# --------------------------------------------------------------------------- properties


@settings(max_examples=25, deadline=None)
@given(cases(two_d=False))
def test_an_unlimited_budget_gives_recall_at_depth_and_a_zero_budget_gives_zero(case) -> None:
    """At an unlimited budget the touch rule is recall at depth, and recall@budget is the
    mean share of each region the whole ranking holds; a budget of 0 gives 0."""
    atoms, ranking, regions, _ = case
    f = frames(atoms, ranking, regions, LINE)
    # recall at depth: a region counts when any returned atom is in its gold set
    gold = f["gold"]
    ranked = set(f["run"][ATOM_CODE])
    depth = sum(1 for i in range(len(regions)) if set(gold.loc[gold["gold_idx"] == i, ATOM_CODE]) & ranked) / len(regions)
    unlimited = measured(f, math.inf, LINE)
    assert unlimited[TOUCH] == pytest.approx(depth)
    held = 0.0
    for r in regions:
        cells = {x for a in ranking for x in range(atoms[a][1], atoms[a][2]) if atoms[a][0] == r[0]} & set(range(r[1], r[2]))
        held += len(cells) / (r[2] - r[1])
    assert unlimited[RECALL] == pytest.approx(held / len(regions))
    assert measure(f, 0, LINE) == (0.0, 0.0)


def _boundary(atoms: dict, ranking: list[str], amount: float) -> str | None:
    left = amount
    for a in ranking:
        s, x0, x1, y0, y1 = atoms[a]
        if left <= 0:
            return None
        if (x1 - x0) * (y1 - y0) > left:
            return a
        left -= (x1 - x0) * (y1 - y0)
    return None


@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(two_d=True), st.data())
def test_cutting_an_atom_moves_coverage_only_at_the_boundary(case, data) -> None:
    """An atom cut into two pieces that take its place in the ranking (in either order):
    coverage@budget is unchanged unless it was the boundary atom, and then moves by no more
    than the gold inside it; for a line cut in reading order it does not move at all."""
    atoms, ranking, regions, amount = case
    for modality, two_d in ((BOXES, True), (LINE, False)):
        flat = {a: (s, x0, x1, 0, 1) if not two_d else (s, x0, x1, y0, y1) for a, (s, x0, x1, y0, y1) in atoms.items()}
        regs = [(s, x0, x1, 0, 1) if not two_d else (s, x0, x1, y0, y1) for s, x0, x1, y0, y1 in regions]
        victim = data.draw(st.sampled_from(ranking))
        s, x0, x1, y0, y1 = flat[victim]
        if x1 - x0 < 2:
            continue
        at = data.draw(st.integers(x0 + 1, x1 - 1))
        first, second = (s, x0, at, y0, y1), (s, at, x1, y0, y1)
        swap = data.draw(st.booleans())
        pieces = {victim + "_1": second if swap else first, victim + "_2": first if swap else second}
        split_atoms = {**{a: b for a, b in flat.items() if a != victim}, **pieces}
        split_rank = [p for a in ranking for p in ([*pieces] if a == victim else [a])]
        before = measure(frames(flat, ranking, regs, modality), amount, modality)[1]
        after = measure(frames(split_atoms, split_rank, regs, modality), amount, modality)[1]
        if _boundary(flat, ranking, amount) != victim or (modality == LINE and not swap):
            assert after == pytest.approx(before), (modality, victim)
        else:
            gold_cells = {(r[0], x, y) for r in regs for x in range(r[1], r[2]) for y in range(r[3], r[4])}
            inside = sum(1 for x in range(x0, x1) for y in range(y0, y1) if (s, x, y) in gold_cells)
            total = len(gold_cells)
            assert abs(after - before) <= inside / total + 1e-12, (modality, victim)


def test_the_cartridges_are_prefixes_of_the_rankings() -> None:
    atoms = {a: ("s", i * 10, i * 10 + 10, 0, 1) for i, a in enumerate("abc")}
    f = frames(atoms, ["a", "b", "c"], [("s", 0, 30, 0, 1)], LINE)
    which = pd.DataFrame({"query_id": ["q"], "entry_modality": [LINE], "amount": [20.0]})
    assert [list(atoms)[c] for c in packed_atoms(f["run"], f["atom_ext"], which)[ATOM_CODE]] == ["a", "b"]
    cut = packed_atoms(f["run"], f["atom_ext"], which.assign(amount=25.0))
    assert cut["whole"].tolist() == [True, True, False] and cut[["x0", "x1"]].iloc[-1].tolist() == [20.0, 25.0]


def with_memory(f: dict[str, pd.DataFrame], chars: float, boxes: list[tuple], ranking: list[str], gold_idx: list[int]):
    """`f` with a memory "m" after its atoms (code len(atoms)): its extent row has no box and its text's
    length (`chars`); its credited units' `boxes` (source, x0, x1, y0, y1); it is in the gold of the
    regions `gold_idx`; the run is `ranking` (atom ids and "m")."""
    from bench.evaluation.measures.extent import MemoryExtents

    atoms = f["atom_ext"]
    first = len(atoms)
    code = {**{a: i for i, a in enumerate(atoms["atom_id"])}, "m": first}
    row = {"atom_id": "m", "modality": "", "source_id": "", "part": "", "x0": np.nan, "x1": np.nan, "y0": np.nan, "y1": np.nan,
           "extent": chars}
    cover = pd.DataFrame([{"atom": first, "source_id": s, "part": "", "x0": x0, "x1": x1, "y0": y0, "y1": y1} for s, x0, x1, y0, y1 in boxes])
    gold = pd.concat([f["gold"], pd.DataFrame({"query_id": "q", "gold_idx": gold_idx, ATOM_CODE: first})], ignore_index=True)
    run = pd.DataFrame({"query_id": "q", ATOM_CODE: [code[a] for a in ranking], "rank": np.arange(1, len(ranking) + 1), "score": 0.0})
    out = {**f, "atom_ext": pd.concat([atoms, pd.DataFrame([row])], ignore_index=True), "gold": gold, "run": run}
    return out, MemoryExtents(first, cover)


def measure_with(f: dict[str, pd.DataFrame], memories, amount: float, modality: str) -> tuple[float, float]:
    out = budget_columns(f["entries"], f["run"], f["gold"], f["region_ext"], f["atom_ext"], budget={modality: amount},
                         memories=memories).iloc[0]
    return float(out[RECALL]), float(out[COVERAGE])


def test_a_memory_is_paid_its_text_whole_and_counts_through_its_credited_units() -> None:
    """A memory hit in a modality counted in characters: 30 characters of text, its credited unit [100, 110)
    in gold region 1 (bench/evaluation/measures/budget.py, *Memory hits*). Packed whole from the budget,
    never cut: a memory at the boundary is left out and ends the cartridge, as an atom that cannot be cut."""
    atoms = {"a": ("s", 0, 20, 0, 1), "g": ("s", 10, 30, 0, 1)}  # a: not gold of region 1; g: gold of region 0
    f = frames(atoms, ["a"], [("s", 10, 30, 0, 1), ("s", 100, 110, 0, 1)], LINE)
    f, memories = with_memory(f, 30, [("s", 100, 110, 0, 1)], ["m", "a", "g"], [1])
    assert measure_with(f, memories, 30, LINE) == (0.5, pytest.approx(10 / 30))  # m alone: region 1, its 10 characters
    assert measure_with(f, memories, 29, LINE) == (0.0, 0.0)  # m does not fit: never cut, nothing after it is read
    assert measure_with(f, memories, 70, LINE) == (1.0, pytest.approx(30 / 30))  # m, a, g whole: gold [10, 30) by a and g
    which = pd.DataFrame({"query_id": ["q"], "entry_modality": [LINE], "amount": [50.0]})
    packed = packed_atoms(f["run"], f["atom_ext"], which, memories)
    assert packed[ATOM_CODE].tolist() == [2, 0] and packed["whole"].tolist() == [True, True]  # a is whole within 50 - 30; g is never read
    cut = packed_atoms(f["run"], f["atom_ext"], which.assign(amount=40.0), memories)
    assert cut["whole"].tolist() == [True, False] and cut[["x0", "x1"]].iloc[-1].tolist() == [0.0, 10.0]  # a cut, m never


def test_a_memory_where_the_unit_is_not_characters_is_left_out_and_costs_nothing() -> None:
    """In a modality whose unit is pixel area, a memory's text has no price: it is left out of the cartridge
    (it counts for nothing there, even in the gold) and packing goes on past it."""
    atoms = {"g": ("s", 20, 22, 0, 2)}  # area 4, gold
    f = frames(atoms, ["g"], [("s", 20, 22, 0, 2), ("s", 0, 5, 0, 5)], BOXES)
    f, memories = with_memory(f, 1000, [("s", 0, 5, 0, 5)], ["m", "g"], [1])
    assert measure_with(f, memories, 4, BOXES) == (0.5, pytest.approx(4 / 29))  # g only: the memory covers nothing here


def test_a_run_without_memory_hits_packs_as_before() -> None:
    atoms = {a: ("s", i * 10, i * 10 + 10, 0, 1) for i, a in enumerate("abc")}
    f = frames(atoms, ["c", "a", "b"], [("s", 0, 15, 0, 1)], LINE)
    g, memories = with_memory(f, 5, [("s", 0, 15, 0, 1)], ["c", "a", "b"], [0])  # a memory in the gold, not in the run
    for amount in (0, 5, 15, 25, 100):
        assert measure_with(g, memories, amount, LINE) == measure(f, amount, LINE)


# --------------------------------------------------------------------------- the real run


@pytest.fixture(scope="module")
def real_budget(real_run: dict) -> dict:
    """The real run (bm25, page/turn atoms) evaluated at k = depth with an unlimited
    budget and with the default budgets."""
    params, segments, entries = real_run["params"], real_run["segments"], real_run["entries"]
    served, cfg, ran = real_run["served"], real_run["cfg"], real_run["ran"]
    description = RunDescription(system=cfg.name, depth=cfg.depth, chunking=params["chunking"], concurrency=1, warm=False,
                                 adapter=cfg.adapter, warmup_queries=0, timeout_s=cfg.timeout_s, latency=None)

    def evaluate(k: int, budget: dict | None) -> pd.DataFrame:
        options = EvalOptions(k=k, bootstrap_resamples=20, bootstrap_seed=0, calibration_recall=0.9, abstains=True, budget=budget)
        return evaluate_entries(entries, [], ran.run, ran.latency, pd.DataFrame(columns=["query_id", "kind"]), served, segments,
                                options, description, in_core_rows=10**9, sha256={})

    unlimited = evaluate(cfg.depth, {m: math.inf for m in modalities()})
    return {"unlimited": unlimited, "default": evaluate(10, None), "depth": cfg.depth}


def test_on_the_real_run_an_unlimited_budget_is_recall_at_depth(real_budget: dict) -> None:
    table = real_budget["unlimited"].query_table
    ans = table.loc[~table["unanswerable"].astype(bool)]
    assert len(ans) > 1000
    assert (ans.loc[ans["abstained"] == 1, [RECALL, COVERAGE, HALF, TOUCH]] == 0).all().all()  # an abstaining answer hands over nothing
    ans = ans.loc[ans["abstained"] == 0]  # the others: their whole ranking
    assert len(ans) > 500
    assert np.allclose(ans[TOUCH], ans[f"recall@{real_budget['depth']}"])
    assert (ans[RECALL] <= ans[TOUCH] + 1e-12).all() and ans[RECALL].mean() > 0.9 * ans[TOUCH].mean()
    assert np.allclose(ans[COVERAGE], ans[f"coverage@{real_budget['depth']}"])


def test_on_the_real_run_the_default_budgets_are_recorded_with_their_units(real_budget: dict) -> None:
    doc = real_budget["default"].document
    mods = modalities()
    assert doc["run"]["budget"] == {m: {"amount": mods[m].budget.default, "unit": mods[m].extent_unit} for m in ("conversation", "pdf")}
    table = real_budget["default"].query_table.set_index("query_id")
    deep = real_budget["unlimited"].query_table.set_index("query_id").loc[table.index]
    ans = ~table["unanswerable"].astype(bool)
    assert (table.loc[ans, RECALL] <= deep.loc[ans, RECALL] + 1e-12).all()  # a budget only takes away
    for m in ("conversation", "pdf"):
        cell = doc["by_modality"][m][RECALL]
        assert cell["n"] == cell["denominator"] == int((ans & (table["modality"] == m)).sum()) and cell["ci95"][0] is not None


def _real_pdf_budget(real_corpus: dict, strategy: str, n_docs: int = 10) -> pd.DataFrame:
    """recall@10 and recall@budget (the default pdf budget) of bm25 over the real documents
    with the most dev questions, chunked by `strategy`."""
    import json

    from bench.evaluation.measures.extent import atom_extents
    from bench.evaluation.per_query import per_query
    from bench.gold.resolve import resolve
    from bench.ingest.atom_codes import served_ids, to_codes
    from bench.ingest.chunking import chunk_modality
    from bench.systems import build_system
    from tests.conftest import ROOT
    from tests.systems.python_system import run_python_system

    seg = real_corpus["segments"]
    seg = seg[seg["modality"] == LINE]
    entries = [json.loads(line) for line in (ROOT / "bench/sets/mmlongbench.jsonl").read_text().splitlines()]
    entries = [e for e in entries if e["split"] == "dev" and not e["unanswerable"] and {g["source_id"] for g in e["gold"]} <= set(seg["source_id"])]
    by_doc = pd.Series([e["gold"][0]["source_id"] for e in entries]).value_counts()
    docs = set(sorted(by_doc.index, key=lambda d: (-by_doc[d], d))[:n_docs])
    entries = [e for e in entries if e["gold"][0]["source_id"] in docs]
    seg = seg[seg["source_id"].isin(docs)]
    atoms = chunk_modality(LINE, seg, {"strategy": strategy, "window_tokens": 200, "overlap_tokens": 50})
    gold, regions = resolve(entries, {LINE: atoms}, seg)  # atoms as codes, regions typed and placed
    ran, _ = run_python_system(build_system("bm25", atoms), entries, 100)
    run = to_codes(ran, served_ids({LINE: atoms}), "run")
    ent = pd.DataFrame({"query_id": [e["query_id"] for e in entries], "modality": LINE, "unanswerable": False,
                        "as_of": pd.to_datetime([e["as_of"] for e in entries], utc=True),
                        "holder": [e["scope"]["holder"] for e in entries], "n_regions": [len(e["gold"]) for e in entries]})
    pq = per_query(ent, run, gold, atoms, k=10)
    budgeted = budget_columns(ent, run, gold, regions, atom_extents({LINE: atoms}), budget=budgets())
    return pq.merge(budgeted, on="query_id")


def test_whole_documents_no_longer_buy_recall_at_equal_cost(real_corpus: dict) -> None:
    """The issue's trap on real MMLongBench-Doc documents: whole documents find every gold
    page in the top 10, but in the default pdf budget a whole document is cut to its
    first pages, and pages are ahead."""
    page, whole = _real_pdf_budget(real_corpus, "page"), _real_pdf_budget(real_corpus, "whole")
    assert len(page) == len(whole) >= 100
    assert whole["recall@10"].mean() > page["recall@10"].mean() + 0.2  # bought by atom size
    assert whole[RECALL].mean() < whole["recall@10"].mean() - 0.3  # not at equal cost
    assert page[RECALL].mean() > whole[RECALL].mean()


# --------------------------------------------------------------------------- content, not atoms


@st.composite
def pieces(draw: st.DrawFn) -> tuple[dict, list[str], list[tuple], int, dict, list[str]]:
    """A line case and the same content cut into pieces: every atom of the ranking cut at
    random points into consecutive pieces that take its place in reading order."""
    atoms, ranking, regions, amount = draw(cases(two_d=False))
    cut_atoms: dict[str, tuple] = {}
    cut_rank: list[str] = []
    for a in ranking:
        s, x0, x1, _, _ = atoms[a]
        points = sorted(draw(st.sets(st.integers(x0 + 1, x1 - 1), max_size=4)) if x1 - x0 > 1 else [])
        bounds = [x0, *points, x1]
        for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            cut_atoms[f"{a}.{i}"] = (s, lo, hi, 0, 1)
            cut_rank.append(f"{a}.{i}")
    return atoms, ranking, regions, amount, cut_atoms, cut_rank


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces())
def test_cutting_the_ranked_content_into_pieces_or_merging_them_back_changes_no_budget_measure(case) -> None:
    """Content-invariance (issue 35): the same content in the same order, cut into any pieces
    (or, read the other way, pieces merged back into their atom), gives the same
    recall@budget, coverage@budget and cartridge@budget -- only the touch diagnostic may move."""
    atoms, ranking, regions, amount, cut_atoms, cut_rank = case
    whole = budget_columns(**_args(frames(atoms, ranking, regions, LINE)), budget={LINE: amount}).iloc[0]
    cut = budget_columns(**_args(frames(cut_atoms, cut_rank, regions, LINE)), budget={LINE: amount}).iloc[0]
    for column in (RECALL, COVERAGE, HALF, "cartridge@budget"):
        assert cut[column] == pytest.approx(whole[column]), column
    assert cut[TOUCH] >= whole[TOUCH] - 1e-12  # the touch rule can be bought by fragments, never held credit


# --------------------------------------------------------------------------- truncation


@st.composite
def aligned(draw: st.DrawFn) -> tuple[dict, list[str], list[tuple], list[str]]:
    """A line in which every gold region is one ranked unit and no other unit overlaps it:
    gold and other units of random sizes laid out apart on one source, ranked in any order."""
    n_gold, n_other = draw(st.integers(1, 4)), draw(st.integers(0, 4))
    atoms, x = {}, 0
    for i in range(n_gold + n_other):
        size = draw(st.integers(1, 12))
        atoms[f"{'g' if i < n_gold else 'o'}{i}"] = ("s", x, x + size, 0, 1)
        x += size + draw(st.integers(0, 3))
    gold = [a for a in atoms if a.startswith("g")]
    return atoms, list(draw(st.permutations(sorted(atoms)))), [atoms[a] for a in gold], gold


def truncated(atoms: dict[str, tuple], f: float) -> dict[str, tuple]:
    """Every unit replaced by its leading fraction f (the gold regions stay whole)."""
    return {a: (s, x0, x0 + f * (x1 - x0), y0, y1) for a, (s, x0, x1, y0, y1) in atoms.items()}


FRACTIONS = st.sampled_from([0.25, 0.5, 0.55, 2 / 3, 0.75, 0.9])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(aligned(), FRACTIONS, st.integers(0, 40))
def test_handing_a_fraction_of_every_unit_earns_that_fraction_of_what_the_whole_units_earn(case, f, extra) -> None:
    """Exactly (module docstring, *Held credit*): each gold region one ranked unit, no region
    larger than the budget B. The leading fraction f of every unit at budget B earns f times
    what the whole units earn at B / f -- the budget that buys the same units: the reader gets f
    of each unit it pays for, nothing more (the half rule earned all of it)."""
    atoms, ranking, regions, _ = case
    amount = max(r[2] - r[1] for r in regions) + extra
    whole = measure(frames(atoms, ranking, regions, LINE), amount / f, LINE)[0]
    part = measure(frames(truncated(atoms, f), ranking, regions, LINE), amount, LINE)[0]
    assert part == pytest.approx(f * whole, abs=1e-9)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(aligned(), FRACTIONS, st.integers(0, 40))
def test_truncation_never_raises_recall_at_budget_when_credit_per_unit_of_cost_does_not_grow_with_depth(case, f, extra) -> None:
    """Uniform truncation to f never raises recall@budget at equal cost on a ranking whose credit
    per unit of cost does not grow with depth (here: the gold units first, smallest -- worth most
    per character -- first, then the others): the identity above and V(x) / x non-increasing."""
    atoms, _, regions, gold = case
    ranking = sorted(gold, key=lambda a: (atoms[a][2] - atoms[a][1], a)) + sorted(a for a in atoms if a not in gold)
    amount = max(r[2] - r[1] for r in regions) + extra
    full = measure(frames(atoms, ranking, regions, LINE), amount, LINE)[0]
    assert measure(frames(truncated(atoms, f), ranking, regions, LINE), amount, LINE)[0] <= full + 1e-9


def test_truncation_can_raise_recall_at_budget_only_by_reading_deeper() -> None:
    """Why "never raises" needs its condition: a unit outside the gold ranked before a gold one.
    At budget 10 the whole units hand over the first only (0); half of each hands over half of
    the gold unit (0.5) -- exactly half of what the whole units earn at budget 20. The half rule
    counts that half as the whole region: 1.0 at 10 characters for what costs 20 whole."""
    atoms = {"o": ("s", 0, 10, 0, 1), "g": ("s", 20, 30, 0, 1)}
    regions = [("s", 20, 30, 0, 1)]
    full, half = frames(atoms, ["o", "g"], regions, LINE), frames(truncated(atoms, 0.5), ["o", "g"], regions, LINE)
    assert (measure(full, 10, LINE)[0], measure(half, 10, LINE)[0], measure(full, 20, LINE)[0]) == (0.0, 0.5, 1.0)
    assert measure(half, 10, LINE, half=True)[0] == 1.0 == measure(full, 20, LINE, half=True)[0]
    one = frames({"g": ("s", 0, 10, 0, 1)}, ["g"], [("s", 0, 10, 0, 1)], LINE)
    lead = frames(truncated({"g": ("s", 0, 10, 0, 1)}, 0.6), ["g"], [("s", 0, 10, 0, 1)], LINE)
    assert measure(lead, 10, LINE)[0] == pytest.approx(0.6 * measure(one, 10 / 0.6, LINE)[0])  # f of it, at f of its cost
    assert measure(lead, 6, LINE, half=True)[0] == 1.0  # the half rule: all of it, at 60% of its cost


def _args(f: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    return {"entries": f["entries"], "run": f["run"], "gold": f["gold"], "regions": f["region_ext"], "atom_ext": f["atom_ext"]}


def test_fragments_that_touch_every_region_earn_what_their_characters_are_worth() -> None:
    """The trap the touch rule fell into: one 2-character fragment of each of ten 100-character
    gold regions fits a 20-character budget and touches all ten. Held credit: each region is
    larger than the budget, so a character of it is worth 1/20 of it -- the ten fragments earn
    exactly what 20 characters of one region earn (0.1), never more."""
    atoms = {f"f{i}": ("s", i * 100, i * 100 + 2, 0, 1) for i in range(10)}
    regions = [("s", i * 100, i * 100 + 100, 0, 1) for i in range(10)]
    f = frames(atoms, list(atoms), regions, LINE)
    assert measure(f, 20, LINE, touch=True)[0] == 1.0 and measure(f, 20, LINE, half=True)[0] == 0.0
    assert measure(f, 20, LINE) == (pytest.approx(0.1), pytest.approx(20 / 1000))
    one = frames({"p": ("s", 0, 20, 0, 1)}, ["p"], regions, LINE)
    assert measure(one, 20, LINE)[0] == pytest.approx(0.1)  # the budget spent on one region: the same credit
    half, less = ({"p": ("s", 0, n, 0, 1)} for n in (50, 49))
    assert measure(frames(half, ["p"], [("s", 0, 100, 0, 1)], LINE), 1000, LINE)[0] == pytest.approx(0.5)  # half of the region
    assert measure(frames(less, ["p"], [("s", 0, 100, 0, 1)], LINE), 1000, LINE)[0] == pytest.approx(0.49)
    assert [measure(frames(x, ["p"], [("s", 0, 100, 0, 1)], LINE), 1000, LINE, half=True)[0] for x in (half, less)] == [1.0, 0.0]
    huge = frames({"r0": ("s", 0, 10_000, 0, 1)}, ["r0"], [("s", 0, 10_000, 0, 1)], LINE)
    assert measure(huge, 300, LINE)[0] == 1.0  # a region bigger than the budget: wholly held when the whole budget is of it
    assert measure(huge, 300, LINE, half=True)[0] == 1.0


def test_a_point_region_is_held_when_a_packed_part_touches_it() -> None:
    """A region of zero extent has credit 1 when the cartridge's packed part of one of its gold
    atoms contains it, else 0 (cut off by the boundary, it is not held)."""
    f = frames({"a": ("s", 0, 10, 0, 1)}, ["a"], [("s", 6, 6, 0, 1)], LINE)
    f["gold"] = pd.DataFrame({"query_id": "q", "gold_idx": [0], ATOM_CODE: [0]})  # the point resolves to the atom containing it
    assert [measure(f, b, LINE)[0] for b in (10, 7, 6, 0)] == [1.0, 1.0, 0.0, 0.0]  # [0, 6) does not contain 6
    assert [measure(f, b, LINE, half=True)[0] for b in (10, 7, 6)] == [1.0, 1.0, 0.0]


def test_an_abstaining_answer_hands_over_an_empty_cartridge() -> None:
    """The one rule of abstention (bench.evaluation.measures.base.run_family): the family's
    measures declared ``abstained_nothing`` and its cartridge count 0 for the query."""
    f = frames({"g": ("s", 0, 10, 0, 1)}, ["g"], [("s", 0, 10, 0, 1)], LINE)
    given = {**_args(f), "k": 10, "failed": [], "budget": {LINE: 100}}
    out = run_family(FAMILY, BlockRows(**given, abstained=frozenset({"q"}))).iloc[0]
    assert (out[RECALL], out[COVERAGE], out[HALF], out[TOUCH], out["cartridge@budget"]) == (0.0, 0.0, 0.0, 0.0, 0.0)
    out = run_family(FAMILY, BlockRows(**given)).iloc[0]
    assert (out[RECALL], out[TOUCH]) == (1.0, 1.0) and out["cartridge@budget"] == 10.0
