"""Extent measures (bench.evaluation.measures.extent): coverage/precision/IoU, the oracle ceiling, and the
whole-document trap on real MMLongBench-Doc documents."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.evaluation.cells import metric_cells
from bench.evaluation.measures.extent import RATIOS, atom_extents, atom_statistics, extent_columns
from bench.ingest.atom_codes import served_ids, to_codes
from bench.modalities import modalities


def _atoms_1d(spec: dict[str, tuple[float, float]], source: str = "s") -> pd.DataFrame:
    return pd.DataFrame([{"atom_id": a, "source_id": source, "part": "", "x0": lo, "x1": hi, "y0": 0.0, "y1": 1.0,
                          "extent": hi - lo, "modality": "video"} for a, (lo, hi) in spec.items()])


def _regions_1d(spec: list[tuple[str, int, float, float]], source: str = "s") -> pd.DataFrame:
    return pd.DataFrame([{"query_id": q, "gold_idx": i, "source_id": source, "part": "", "x0": lo, "x1": hi,
                          "y0": 0.0, "y1": 1.0, "extent": hi - lo} for q, i, lo, hi in spec])


def _run(rows: list[tuple[str, str, int]]) -> pd.DataFrame:
    return pd.DataFrame([{"query_id": q, "atom_id": a, "rank": r, "score": 10.0 - r} for q, a, r in rows])


def _extents(ent: pd.DataFrame, run: pd.DataFrame, gold: pd.DataFrame, regions: pd.DataFrame, atoms: pd.DataFrame,
             **options: object) -> pd.DataFrame:
    """extent_columns over run and gold that name atoms by id here: as codes (the row of `atoms`), as the stages hand them."""
    table = served_ids({"m": atoms})
    return extent_columns(ent, to_codes(run, table, "run"), to_codes(gold, table, "gold"), regions, atoms, **options)


def test_coverage_precision_iou_by_hand():
    # gold [10, 30); windows w0 [0, 20) and w1 [15, 35) overlap each other; w2 is elsewhere
    atoms = _atoms_1d({"w0": (0, 20), "w1": (15, 35), "w2": (50, 60)})
    regions = _regions_1d([("q", 0, 10, 30)])
    gold = pd.DataFrame({"query_id": ["q", "q"], "gold_idx": [0, 0], "atom_id": ["w0", "w1"]})
    run = _run([("q", "w0", 1), ("q", "w1", 2), ("q", "w2", 3)])
    ent = pd.DataFrame({"query_id": ["q"], "unanswerable": [False]})
    out = _extents(ent, run, gold, regions, atoms, k=10).iloc[0]
    assert out["gold_extent"] == 20
    assert out["covered@10"] == 20  # union of w0 and w1 inside gold, not 10 + 15
    assert out["retrieved_extent@10"] == 20 + 20 + 10  # each retrieved atom paid for
    assert out["coverage@10"] == 1.0
    assert out["precision@10"] == pytest.approx(20 / 50)
    assert out["iou@10"] == pytest.approx(20 / (20 + 50 - 20))
    # k = 1: only w0, covering [10, 20)
    one = _extents(ent, run, gold, regions, atoms, k=1).iloc[0]
    assert one["coverage@1"] == pytest.approx(0.5) and one["precision@1"] == pytest.approx(0.5)
    assert one["iou@1"] == pytest.approx(10 / 30)
    assert one["oracle_coverage@1"] == pytest.approx(15 / 20)  # w1 covers more of the gold


def test_oracle_is_one_when_atoms_coincide_with_gold():
    atoms = _atoms_1d({"a": (0, 10), "b": (10, 25), "c": (25, 40)})
    regions = _regions_1d([("q", 0, 10, 25), ("q", 1, 25, 40)])
    gold = pd.DataFrame({"query_id": ["q", "q"], "gold_idx": [0, 1], "atom_id": ["b", "c"]})
    run = _run([("q", "a", 1), ("q", "b", 2)])
    ent = pd.DataFrame({"query_id": ["q"], "unanswerable": [False]})
    out = _extents(ent, run, gold, regions, atoms, k=10).iloc[0]
    assert out["oracle_coverage@10"] == 1.0 and out["oracle_iou@10"] == 1.0
    assert out["coverage@10"] == pytest.approx(15 / 30)
    # a ceiling the chunker sets: one atom spanning gold and more cannot reach IoU 1
    big = _atoms_1d({"all": (0, 40)})
    g2 = pd.DataFrame({"query_id": ["q", "q"], "gold_idx": [0, 1], "atom_id": ["all", "all"]})
    out2 = _extents(ent, _run([("q", "all", 1)]), g2, regions, big, k=10).iloc[0]
    assert out2["oracle_coverage@10"] == 1.0 and out2["oracle_iou@10"] == pytest.approx(30 / 40)


def test_oracle_iou_prefers_fewer_atoms_when_one_costs_more_than_it_covers():
    # gold [0, 10); atom a = [0, 9) (covers 9, pays 9), atom b = [9, 100) (covers 1, pays 91)
    atoms = _atoms_1d({"a": (0, 9), "b": (9, 100)})
    regions = _regions_1d([("q", 0, 0, 10)])
    gold = pd.DataFrame({"query_id": ["q", "q"], "gold_idx": [0, 0], "atom_id": ["a", "b"]})
    ent = pd.DataFrame({"query_id": ["q"], "unanswerable": [False]})
    out = _extents(ent, _run([("q", "b", 1)]), gold, regions, atoms, k=10).iloc[0]
    assert out["oracle_iou@10"] == pytest.approx(0.9)  # {a} alone, better than {a, b} = 10/100
    assert out["oracle_coverage@10"] == 1.0


def test_unanswerable_and_failed_are_nan_and_count_zero():
    atoms = _atoms_1d({"a": (0, 10)})
    regions = _regions_1d([("q1", 0, 0, 10), ("q2", 0, 0, 10)])
    gold = pd.DataFrame({"query_id": ["q1", "q2"], "gold_idx": [0, 0], "atom_id": ["a", "a"]})
    ent = pd.DataFrame({"query_id": ["q1", "q2", "u"], "modality": "video", "unanswerable": [False, False, True]})
    out = _extents(ent, _run([("q1", "a", 1), ("q2", "a", 1)]), gold, regions, atoms, k=10, failed=["q2"])
    assert out.set_index("query_id").loc["q1", "iou@10"] == 1.0
    assert out.set_index("query_id")[["iou@10"]].loc[["q2", "u"]].isna().all().all()
    cells = metric_cells(out.merge(ent).assign(failed=lambda d: d["query_id"] == "q2"), k=10, families=("extent",))
    assert cells["by_modality"]["video"]["iou@10"] == {"value": 0.5, "n": 1, "denominator": 2}


def test_two_dimensional_boxes_union_is_exact():
    atoms = pd.DataFrame([{"atom_id": a, "source_id": "s", "part": "", "x0": x0, "x1": x1, "y0": y0, "y1": y1,
                           "extent": (x1 - x0) * (y1 - y0), "modality": "ui_screenshot"}
                          for a, (x0, y0, x1, y1) in {"l0": (0, 0, 10, 10), "l1": (5, 5, 15, 15)}.items()])
    regions = pd.DataFrame([{"query_id": "q", "gold_idx": 0, "source_id": "s", "part": "", "x0": 0.0, "x1": 20.0,
                             "y0": 0.0, "y1": 20.0, "extent": 400.0}])
    gold = pd.DataFrame({"query_id": ["q", "q"], "gold_idx": [0, 0], "atom_id": ["l0", "l1"]})
    out = _extents(pd.DataFrame({"query_id": ["q"], "unanswerable": [False]}),
                         _run([("q", "l0", 1), ("q", "l1", 2)]), gold, regions, atoms, k=10).iloc[0]
    assert out["covered@10"] == 175  # 100 + 100 - 25 overlap
    assert out["retrieved_extent@10"] == 200


def _covered(mod, region: dict, atoms: pd.DataFrame, segments: pd.DataFrame) -> pd.Series:
    """Per atom: the amount of the region's box (region_extent) its box (atom_extents) covers."""
    part, x0, x1, y0, y1 = mod.region_extent(region, segments)
    ext = mod.atom_extents(atoms)
    w = (ext["x1"].clip(upper=x1) - ext["x0"].clip(lower=x0)).clip(lower=0)
    h = (ext["y1"].clip(upper=y1) - ext["y0"].clip(lower=y0)).clip(lower=0)
    return (w * h).where(ext["part"] == part, 0.0)


def test_modality_extents_and_intersection():
    mods = modalities()
    video = pd.DataFrame({"t_start": [0.0, 5.0, 12.0], "t_end": [5.0, 12.0, 12.0]})
    assert _covered(mods["video"], {"t_start": 4.0, "t_end": 10.0}, video, pd.DataFrame()).tolist() == [1.0, 5.0, 0.0]
    ui = pd.DataFrame({"x0": [0.0, 50.0], "y0": [0.0, 0.0], "x1": [100.0, 60.0], "y1": [10.0, 5.0]})
    assert _covered(mods["ui_screenshot"], {"bbox": [90, 0, 200, 100]}, ui, pd.DataFrame()).tolist() == [100.0, 0.0]
    img = pd.DataFrame({"atom_id": ["x"]})
    assert _covered(mods["image"], {}, img, pd.DataFrame()).tolist() == [1.0]
    # pdf: the page with no text layer still has extent 1 and is covered by its page atom
    seg = pd.DataFrame({"source_id": "d", "dataset": "x", "modality": "pdf", "seq": [0, 1, 2], "page": [1, 2, 3],
                        "block": [0, 0, 0], "text": ["abc", "", "defg"], "holder": "h",
                        "observed_at": pd.Timestamp("2024-01-01", tz="UTC")})
    atoms = mods["pdf"].chunk(seg, "page", {})
    assert mods["pdf"].atom_extents(atoms)["x1"].sub(mods["pdf"].atom_extents(atoms)["x0"]).tolist() == [4, 1, 5]
    assert _covered(mods["pdf"], {"page": 2}, atoms, seg).tolist() == [0, 1, 0]
    whole = mods["pdf"].chunk(seg, "whole", {})
    assert _covered(mods["pdf"], {"page": 3}, whole, seg).tolist() == [5]


def _real_pdf_case(real_corpus: dict, strategy: str, n_docs: int = 10) -> pd.DataFrame:
    from bench.evaluation.per_query import per_query
    from bench.gold.resolve import resolve
    from bench.ingest.chunking import chunk_modality
    from bench.systems import build_system
    from tests.conftest import ROOT
    from tests.systems.python_system import run_python_system

    seg = real_corpus["segments"]
    seg = seg[seg["modality"] == "pdf"]
    entries = [json.loads(line) for line in (ROOT / "bench/sets/mmlongbench.jsonl").read_text().splitlines()]
    sources = set(seg["source_id"])
    entries = [e for e in entries if e["split"] == "dev" and not e["unanswerable"] and {g["source_id"] for g in e["gold"]} <= sources]
    by_doc = pd.Series([e["gold"][0]["source_id"] for e in entries]).value_counts()
    docs = set(sorted(by_doc.index, key=lambda d: (-by_doc[d], d))[:n_docs])
    entries = [e for e in entries if e["gold"][0]["source_id"] in docs]
    seg = seg[seg["source_id"].isin(docs)]
    atoms = chunk_modality("pdf", seg, {"strategy": strategy, "window_tokens": 200, "overlap_tokens": 50})
    gold, regions = resolve(entries, {"pdf": atoms}, seg)  # atoms as codes, regions typed and placed
    ran, _ = run_python_system(build_system("bm25", atoms), entries, 100)
    run = to_codes(ran, served_ids({"pdf": atoms}), "run")
    ent = pd.DataFrame({"query_id": [e["query_id"] for e in entries], "modality": "pdf", "unanswerable": False,
                        "as_of": pd.to_datetime([e["as_of"] for e in entries], utc=True),
                        "holder": [e["scope"]["holder"] for e in entries], "n_regions": [len(e["gold"]) for e in entries]})
    pq = per_query(ent, run, gold, atoms, k=10)
    fair = extent_columns(ent, run, gold, regions, atom_extents({"pdf": atoms}), k=10)
    return pq.merge(fair, on="query_id")


@pytest.fixture(scope="module")
def page_and_whole(real_corpus) -> tuple[pd.DataFrame, pd.DataFrame]:
    return _real_pdf_case(real_corpus, "page"), _real_pdf_case(real_corpus, "whole")


def test_whole_document_trap_on_real_mmlongbench(page_and_whole):
    page, whole = page_and_whole
    assert len(page) == len(whole) >= 100
    # the queries whose document BM25 finds at all (whole-document recall@10 = 1)
    found = whole.loc[whole["recall@10"] == 1.0, "query_id"]
    assert len(found) >= 0.5 * len(whole)
    m_page = page.set_index("query_id").loc[found].mean(numeric_only=True)
    m_whole = whole.set_index("query_id").loc[found].mean(numeric_only=True)
    # recall@10 looks perfect for whole documents and far better than for pages ...
    assert m_whole["recall@10"] == 1.0 and m_page["recall@10"] < 0.9
    assert m_whole["coverage@10"] == 1.0
    # ... but the reader pays for whole documents: precision and IoU collapse
    assert m_whole["precision@10"] < m_page["precision@10"] / 5
    assert m_whole["iou@10"] < m_page["iou@10"] / 5
    # and the chunker's own ceiling shows it: page atoms can reach IoU ~1, a whole document cannot
    assert m_page["oracle_iou@10"] > 0.99
    assert m_whole["oracle_iou@10"] < 0.2


def test_oracle_is_one_for_page_atoms_on_real_gold_pages(page_and_whole):
    page, _ = page_and_whole
    # gold regions are real pages: page atoms coincide with them, so the oracle reaches 1
    few = page[page["n_regions"] <= 10]
    assert len(few) >= 100
    assert (few["oracle_iou@10"] == 1.0).all() and (few["oracle_coverage@10"] == 1.0).all()


def test_atom_statistics():
    ext = pd.DataFrame({"modality": ["pdf"] * 4, "extent": [1.0, 2.0, 3.0, 100.0]})
    regions = pd.DataFrame({"modality": ["pdf", "pdf", "pdf"], "n_atoms": [1, 0, 2]})
    st = atom_statistics(ext, regions)["pdf"]
    assert st["unit"] == "chars" and st["atoms"] == 4 and st["median_extent"] == 2.5
    assert st["p95_extent"] == pytest.approx(np.percentile([1, 2, 3, 100], 95))
    assert st["unreached_regions"] == 1 and st["unreached_share"] == pytest.approx(1 / 3)


def test_cartridge_is_the_median_and_p95_of_the_top_k_extent_per_modality():
    """cartridge_p50@10 / cartridge_p95@10 by hand: numpy's linear percentile of retrieved_extent@10 over
    the answered answerable entries; the denominator is every answerable entry; no pooled value."""
    table = pd.DataFrame({
        "query_id": [f"q{i}" for i in range(7)],
        "modality": ["pdf"] * 5 + ["video"] * 2,
        "unanswerable": [False, False, False, False, True, False, False],
        "failed": [False, False, False, True, False, False, False],
        "retrieved_extent@10": [100.0, 300.0, 200.0, np.nan, np.nan, 12.5, 7.5],  # failed and unanswerable: NaN
    })
    for m in RATIOS:  # the share measures' columns, not read here
        table[m.at(10).column] = np.nan
    cells = metric_cells(table, k=10, families=("extent",))
    pdf = cells["by_modality"]["pdf"]
    assert pdf["cartridge_p50@10"] == {"value": 200.0, "n": 3, "denominator": 4}
    assert pdf["cartridge_p95@10"] == {"value": 290.0, "n": 3, "denominator": 4}  # 200 + 0.9 * (300 - 200)
    assert cells["by_modality"]["video"]["cartridge_p50@10"]["value"] == 10.0
    overall = cells["overall"]["cartridge_p50@10"]
    assert overall["value"] is None and overall["reason"].startswith("extents are in each modality's own unit (pdf, video)")


def _with_memory(atoms: pd.DataFrame, chars: float, boxes: list[tuple[float, float]]):
    """`atoms` with one memory after them (code len(atoms), id "m"): its row has no box and its
    text's length as extent; its credited units are `boxes` on source s."""
    from bench.evaluation.measures.extent import MemoryExtents

    first = len(atoms)
    row = pd.DataFrame([{"atom_id": "m", "source_id": "", "part": "", "x0": np.nan, "x1": np.nan, "y0": np.nan, "y1": np.nan,
                         "extent": chars, "modality": ""}])
    cover = pd.DataFrame({"atom": first, "source_id": "s", "part": "", "x0": [b[0] for b in boxes], "x1": [b[1] for b in boxes],
                          "y0": 0.0, "y1": 1.0})
    return pd.concat([atoms, row[list(atoms.columns)]], ignore_index=True), MemoryExtents(first, cover)


@pytest.mark.parametrize(("modality", "priced"), [("conversation", True), ("video", False)])
def test_a_memory_costs_its_text_and_covers_its_credited_units_where_the_unit_is_characters(modality, priced):
    """A memory hit (docs/systems.md, *Memory hits*): in a modality counted in characters it is paid its
    text (50) and covers the boxes of its credited units, [10, 20) and [40, 45); elsewhere (seconds) it
    neither costs nor covers, while the atom beside it counts as ever."""
    atoms, memories = _with_memory(_atoms_1d({"w0": (0, 25), "w1": (60, 70)}).assign(modality=modality), 50.0, [(10, 20), (40, 45)])
    regions = _regions_1d([("q", 0, 10, 30), ("q", 1, 40, 50)])
    gold = pd.DataFrame({"query_id": "q", "gold_idx": [0, 0, 1], "atom": [0, 2, 2]})  # codes: w0, m, m
    run = pd.DataFrame({"query_id": "q", "atom": [2, 1, 0], "rank": [1, 2, 3], "score": [3.0, 2.0, 1.0]})  # m, w1, w0
    ent = pd.DataFrame({"query_id": ["q"], "unanswerable": [False], "modality": [modality]})
    one, three = (extent_columns(ent, run, gold, regions, atoms, k=k, memories=memories).iloc[0] for k in (1, 3))
    assert one["gold_extent"] == 30
    if priced:
        assert (one["covered@1"], one["retrieved_extent@1"]) == (15, 50)
        assert one["precision@1"] == pytest.approx(15 / 50) and one["iou@1"] == pytest.approx(15 / (30 + 50 - 15))
        assert (three["covered@3"], three["retrieved_extent@3"]) == (20, 50 + 10 + 25)  # w0 adds [20, 25): [10, 20) is covered once
        assert three["oracle_coverage@3"] == pytest.approx(20 / 30)
    else:
        assert (one["covered@1"], one["retrieved_extent@1"]) == (0, 0)
        assert (three["covered@3"], three["retrieved_extent@3"]) == (15, 10 + 25)  # w1 and w0 only
    # without memories in the run, the same atoms give the same values as with the memory-free path
    plain = extent_columns(ent, run.iloc[1:], gold.iloc[[0]], regions, atoms, k=3, memories=memories).iloc[0]
    assert plain.equals(extent_columns(ent, run.iloc[1:], gold.iloc[[0]], regions, atoms, k=3).iloc[0])


def test_the_top_k_of_another_modality_is_not_paid_in_the_entrys_unit():
    """An unscoped system's top k mixes modalities: a video entry's retrieved extent sums only
    its video atoms' seconds; the characters of a conversation atom beside them are another
    unit and are left out (they never add to seconds), in cost, precision and IoU alike."""
    video = _atoms_1d({"v0": (0, 20), "v1": (100, 130)})
    chat = _atoms_1d({"t0": (0, 900)}, source="c").assign(modality="conversation")
    atoms = pd.concat([video, chat], ignore_index=True)
    regions = _regions_1d([("q", 0, 10, 30)])
    gold = pd.DataFrame({"query_id": ["q"], "gold_idx": [0], "atom_id": ["v0"]})
    run = _run([("q", "t0", 1), ("q", "v0", 2), ("q", "v1", 3)])
    ent = pd.DataFrame({"query_id": ["q"], "unanswerable": [False], "modality": ["video"]})
    out = _extents(ent, run, gold, regions, atoms, k=10).iloc[0]
    assert (out["covered@10"], out["retrieved_extent@10"]) == (10, 20 + 30)  # not 20 + 30 + 900
    assert out["precision@10"] == pytest.approx(10 / 50) and out["iou@10"] == pytest.approx(10 / (20 + 50 - 10))
    only_chat = _extents(ent, run.iloc[:1], gold, regions, atoms, k=10).iloc[0]
    assert (only_chat["retrieved_extent@10"], only_chat["precision@10"]) == (0, 0)  # nothing of its own unit retrieved


# --------------------------------------------------------------------------- one price


def test_a_memory_covers_at_most_what_its_text_costs():
    """capped_memory_boxes: a 21-character memory citing a 173-character turn covers its first 21
    characters; a memory citing two units spends its cost on the first in reading order."""
    from bench.evaluation.measures.extent import capped_memory_boxes

    boxes = pd.DataFrame({"atom": [7, 8, 8], "source_id": ["s", "s", "s"], "part": "", "x0": [100.0, 50.0, 0.0],
                          "x1": [273.0, 60.0, 30.0], "y0": 0.0, "y1": 1.0})
    out = capped_memory_boxes(boxes, pd.Series({7: 21.0, 8: 35.0}))
    assert out[["atom", "x0", "x1"]].values.tolist() == [[7, 100.0, 121.0], [8, 0.0, 30.0], [8, 50.0, 55.0]]
    assert capped_memory_boxes(boxes, pd.Series({7: 500.0, 8: 40.0}))[["x0", "x1"]].values.tolist() == [[100.0, 273.0], [0.0, 30.0],
                                                                                                              [50.0, 60.0]]
    assert len(capped_memory_boxes(boxes, pd.Series({7: 0.0, 8: 0.0}))) == 0


def _random_case(rng: np.random.Generator):
    from bench.evaluation.measures.extent import MemoryExtents, capped_memory_boxes

    n_atoms, n_mem = int(rng.integers(1, 6)), int(rng.integers(0, 4))
    lo = rng.integers(0, 80, n_atoms).astype(float)
    atoms = pd.DataFrame({"atom_id": [f"a{i}" for i in range(n_atoms)], "source_id": "s", "part": "", "x0": lo,
                          "x1": lo + rng.integers(1, 30, n_atoms), "y0": 0.0, "y1": 1.0, "modality": "conversation"})
    atoms["extent"] = atoms["x1"] - atoms["x0"]
    first = n_atoms
    mem_rows, cover = [], []
    for j in range(n_mem):
        mem_rows.append({"atom_id": f"m{j}", "source_id": "", "part": "", "x0": np.nan, "x1": np.nan, "y0": np.nan, "y1": np.nan,
                         "extent": float(rng.integers(1, 60)), "modality": ""})
        for _ in range(int(rng.integers(1, 4))):
            x0 = float(rng.integers(0, 100))
            cover.append({"atom": first + j, "source_id": "s", "part": "", "x0": x0, "x1": x0 + float(rng.integers(1, 50)), "y0": 0.0, "y1": 1.0})
    table = pd.concat([atoms, pd.DataFrame(mem_rows, columns=atoms.columns)], ignore_index=True)
    boxes = pd.DataFrame(cover, columns=["atom", "source_id", "part", "x0", "x1", "y0", "y1"])
    cost = pd.Series(table["extent"].to_numpy()[first:], index=np.arange(first, first + n_mem))
    regions = []
    for g in range(int(rng.integers(1, 4))):
        x0 = float(rng.integers(0, 100))
        regions.append({"query_id": "q", "gold_idx": g, "source_id": "s", "part": "", "x0": x0, "x1": x0 + float(rng.integers(1, 40)),
                        "y0": 0.0, "y1": 1.0})
    regions_frame = pd.DataFrame(regions)
    gold = [{"query_id": "q", "gold_idx": r["gold_idx"], "atom": c} for r in regions for c in range(first + n_mem)
            if (c < first and min(atoms["x1"][c], r["x1"]) > max(atoms["x0"][c], r["x0"]))
            or (c >= first and any(min(b["x1"], r["x1"]) > max(b["x0"], r["x0"]) for b in cover if b["atom"] == c))]
    order = rng.permutation(first + n_mem)
    run = pd.DataFrame({"query_id": "q", "atom": order, "rank": np.arange(1, len(order) + 1), "score": 0.0})
    return table, MemoryExtents(first, capped_memory_boxes(boxes, cost)), regions_frame, pd.DataFrame(gold, columns=["query_id", "gold_idx", "atom"]), run


def test_precision_lies_in_zero_one_for_random_atoms_memories_and_overlaps():
    """Property (150 random runs of atoms, memories citing overlapping units, gold regions): with
    the one price, precision@k, coverage@k and iou@k lie in [0, 1] and the covered extent never
    exceeds what the top k costs. 150 cases (500 before; each costs three evaluations): of them
    110 have memories, and 21 of the 450 (case, k) pairs reach precision 1 and 29 coverage 1 --
    the bounds are reached, not only approached."""
    rng = np.random.default_rng(35)
    ent = pd.DataFrame({"query_id": ["q"], "unanswerable": [False], "modality": ["conversation"]})
    for _ in range(150):
        table, memories, regions, gold, run = _random_case(rng)
        for k in (1, 3, 10):
            row = extent_columns(ent, run, gold, regions, table, k=k, memories=memories).iloc[0]
            assert 0.0 <= row[f"precision@{k}"] <= 1.0 + 1e-12 and 0.0 <= row[f"coverage@{k}"] <= 1.0 + 1e-12
            assert 0.0 <= row[f"iou@{k}"] <= 1.0 + 1e-12
            assert row[f"covered@{k}"] <= row[f"retrieved_extent@{k}"] + 1e-9
