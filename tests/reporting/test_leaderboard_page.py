"""The leaderboard page and Markdown lead with the decision: the ranked table first (rank with its
interval, what differs from the baseline, the primary measure with its interval, cost, verdict,
◆), pictures whose filled markers and line are the table's ◆ and whose markers never cover one
another, the full parameter strings last; on runs made from the committed per-query table."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.comparison.leaderboard import leaderboard
from bench.comparison.runs import LoadedRun
from bench.reporting.leaderboard_figures import SEPARATION, side_by_side
from bench.reporting.leaderboard_page import change_label, figures_html, markdown, page

REAL = Path(__file__).resolve().parents[2] / "reports" / "per_query" / "dev.parquet"
BUDGET = {"conversation": {"amount": 1700, "unit": "chars"}, "pdf": {"amount": 16000, "unit": "chars"}}


def table() -> pd.DataFrame:
    t = pd.read_parquet(REAL)
    t = t.drop(columns=[c for c in ("cluster", "source_cluster", "objective") if c in t.columns])  # the objective computed
    return t[t["modality"].isin(["pdf", "conversation"])].reset_index(drop=True)  # again from the parts the tests change


def run_of(label: str, frame: pd.DataFrame, strategy: str = "turn") -> LoadedRun:
    doc = {"run": {"k": 10, "system": "bm25", "chunking": {"conversation": {"strategy": strategy}}, "budget": BUDGET,
                   "false_recall_rule": {"conversation": {"rule": "abstention"}, "pdf": {"rule": "abstention"}}}}
    return LoadedRun(label, frame, doc)


def lose(frame: pd.DataFrame, share: float, seed: int = 0) -> pd.DataFrame:
    """`frame` with `share` of its recall@budget hits lost."""
    out = frame.copy()
    hit = np.flatnonzero((out["recall@budget"] > 0).to_numpy())
    pick = np.random.default_rng(seed).choice(hit, size=int(share * len(hit)), replace=False)
    out.loc[pick, ["recall@budget", "recall@10", "mrr", "ndcg@10"]] = 0.0
    return out


def abstain(frame: pd.DataFrame, modality: str, n: int) -> pd.DataFrame:
    """`frame` whose answer abstains on `n` more answerable `modality` entries: it packs nothing for them."""
    out = frame.copy()
    at = out.index[(out["modality"] == modality) & ~out["unanswerable"] & (out["abstained"] == 0) & (out["recall@budget"] == 0)][:n]
    out.loc[at, ["abstained", "cartridge@budget"]] = [1.0, 0.0]
    return out


@pytest.fixture(scope="module")
def board() -> dict:
    base = table()
    runs = [run_of("base", base), run_of("copy", base.copy()), run_of("worse", abstain(lose(base, 0.3), "pdf", 4), "session")]
    params = [{"chunking": {"conversation": {"strategy": s, "window_turns": 5}}} for s in ("turn", "turn", "session")]
    params[2]["chunking"]["conversation"]["window_turns"] = 3
    return leaderboard(runs, params=params, k=10, resamples=200, permutations=2000, seed=3)


def test_change_labels_name_only_what_differs():
    assert change_label({}) == "same params"
    assert change_label({"chunking.conversation.strategy": "window"}) == "conversation=window"
    assert change_label({"chunking.conversation.strategy": "window", "chunking.conversation.window_turns": 3,
                         "system.name": "dense"}) == "conversation=window(window_turns=3), system.name=dense"
    assert change_label({"chunking.pdf.window_tokens": 150}) == "pdf(window_tokens=150)"


def test_markdown_leads_with_the_ranked_table(board):
    md = markdown(board)
    lines = md.splitlines()
    assert lines[0] == "# Leaderboard: 3 runs against base (k = 10)"
    ranked = board["rank_by"]  # the objective by default (bench.evaluation.measures.objective)
    assert lines[2].startswith(f"| rank (95%) | run: what differs from the baseline | {ranked} (95% CI) | cartridge@budget mean |")
    rows = {line.split(" | ")[1]: line for line in lines[4:7]}
    assert set(rows) == {"**baseline** (base)", "**same params** (copy)", "**conversation=session(window_turns=3)** (worse)"}
    worse = next(r for r in board["groups"][-1]["rows"] if r["run"] == "worse")
    lo, hi = worse["primary"]["ci95"]
    assert lo < worse["primary"]["value"] < hi and worse["primary"]["value"] == pytest.approx(worse["values"][ranked])
    assert f"{worse['primary']['value']:.4f} [{lo:.4f}, {hi:.4f}]" in rows["**conversation=session(window_turns=3)** (worse)"]
    assert "**worse** " in rows["**conversation=session(window_turns=3)** (worse)"] and "(baseline)" in rows["**baseline** (base)"]
    assert re.search(r"conversation \d+ chars, pdf \d+ chars", rows["**baseline** (base)"])
    order = [md.index(x) for x in ("| rank (95%) | run: what differs", "- ◆: on the Pareto frontier", "## conversation", "## overall",
                                   "## Minimum detectable effects", "## Runs in full")]
    assert order == sorted(order)
    assert "`chunking.conversation.strategy=session`" in md[md.index("## Runs in full"):]


def test_the_worst_run_does_not_carry_the_diamond_for_abstaining_a_little_more(board):
    """Every answer packs the whole budget, so the cost (the mean packed) moves with abstention: a
    run that loses 30% of its hits and abstains on 4 more pdf entries is cheaper, but within noise
    (fewer entries differ than the sign-flip test needs), so the baseline dominates it."""
    pdf = {r["run"]: r for r in next(g for g in board["groups"] if g["group"] == "pdf")["rows"]}
    assert pdf["worse"]["cost"] < pdf["base"]["cost"]  # cheaper, by abstaining
    assert not pdf["worse"]["frontier"] and "base" in pdf["worse"]["dominated_by"]
    assert pdf["base"]["frontier"] and pdf["base"]["tied_with"] == ["copy"]


def test_the_pictures_fill_the_table_s_diamonds_and_draw_no_latency_noise(board):
    html = figures_html(board)
    figures = re.findall(r"<figure>(.*?)</figure>", html, re.S)
    assert len(figures) == 2 and "No overall latency picture" in html  # the runs' latency p50 differ by < 5 ms
    for g, svg in zip([g for g in board["groups"] if g["group"] != "overall"], figures, strict=True):
        front = {r["run"] for r in g["rows"] if r["frontier"]}
        filled = set()
        for i, r in enumerate(board["runs"]):
            marker = re.search(rf'<g id="run-{i}">(.*?)</g>', svg, re.S).group(1)
            if "fill: #ffffff" not in marker:
                filled.add(r["label"])
        assert filled == front, g["group"]
        line = re.search(r'<g id="frontier">\s*<path d="([^"]+)"', svg)
        assert line and len(re.findall(r"[ML] ", line.group(1))) == len(front), g["group"]  # one vertex per ◆ run
        assert "side by side" in svg + html and "base = copy" in html
    assert page(board).index("id=ranked") < page(board).index("<figure>") < page(board).index("id=runs-in-full")


def test_markers_closer_than_a_marker_are_drawn_side_by_side():
    centres = [(100.0, 50.0), (100.0, 50.0), (104.0, 52.0), (300.0, 50.0), (100.0, 200.0)]
    shift, rows = side_by_side(centres)
    moved = [(x + dx, y) for (x, y), dx in zip(centres, shift, strict=True)]
    for i, (xa, ya) in enumerate(moved):
        for xb, yb in moved[i + 1:]:
            assert abs(xa - xb) >= SEPARATION - 1e-9 or abs(ya - yb) >= SEPARATION
    assert rows == [[0, 1, 2]] and shift[3] == shift[4] == 0.0  # the far ones stay where their values are
