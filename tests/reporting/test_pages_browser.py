"""The pages in a real browser (Debian's chromium driven by selenium, headless and offline):
`bench compare --html` over two runs of the session's reproduced two-data-set project (A: as
committed; B: its clone where `dvc exp run` chunked conversations in windows, so B's workspace
holds that run and B's repository the experiment), the leaderboard page in B's repository with
its A/B pages (HEAD against the experiment: by commit, cartridges from the DVC cache), dev.html's drill-down,
the refusal of a folder whose per-query table and data/ outputs are from different runs, and
`dvc plots show` with the vendored Vega template."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from bench.cli import cli
from bench.io import iter_jsonl
from bench.project.layout import PER_QUERY
from bench.reporting.cartridges import PACK_BEYOND, PACK_CUT, PACK_WHOLE
from bench.reporting.compare_page import outcome_measures, outcomes
from tests.project_copy import clone_project, project_env, run
from tests.reporting.browser import chromium, chromium_missing

pytestmark = pytest.mark.e2e
#: the statistics are bench compare's own tests' business: few resamples keep this module cheap
STATS = ["--resamples", "50", "--permutations", "200"]
EXPERIMENT = "windows"


def bench(cwd: Path, *args: str) -> Any:
    with contextlib.chdir(cwd):
        return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory, reproduced: Path, browser: Any) -> dict[str, Any]:
    """A (the reproduced project), B (its clone with conversation windows, run as an experiment),
    C (a clone of A: the same run twice), the A/B page by folder, and the leaderboard of HEAD, the
    experiment and C in B's repository with its A/B pages (HEAD against the experiment: by commit)."""
    out = tmp_path_factory.mktemp("pages")
    env = project_env(out / "site-cache")
    b = clone_project(reproduced, out / "B", memo=True)  # the windows re-run only the conversation answers
    started = time.monotonic()
    run(["dvc", "exp", "run", "-n", EXPERIMENT, "-S", "chunking.conversation.strategy=window"], b, env)
    c = clone_project(reproduced, out / "C")
    seconds = {"exp run": time.monotonic() - started}
    started = time.monotonic()
    res = bench(reproduced, "compare", str(reproduced), str(b), "--html", str(out / "ab.html"), *STATS)
    assert res.exit_code == 0, res.output
    seconds["compare folders"] = time.monotonic() - started
    started = time.monotonic()  # in B's repository: HEAD (A's run) against the experiment and C, each A/B page beside it
    res = bench(b, "leaderboard", "--baseline", "HEAD", EXPERIMENT, str(c), "--label", f"copy={c}", "--html", str(out / "board.html"),
                *STATS)
    assert res.exit_code == 0, res.output
    seconds["leaderboard"] = time.monotonic() - started
    print("pages fixture seconds:", {k: round(v, 1) for k, v in seconds.items()})
    a_pq, b_pq = pd.read_parquet(reproduced / PER_QUERY), pd.read_parquet(b / PER_QUERY)
    entries = {e["query_id"]: e for _, e in iter_jsonl(reproduced / "data" / "sets" / "dev.jsonl")}
    return {"a": a_pq, "b": b_pq, "ab": out / "ab.html", "ab-exp": out / f"board.{EXPERIMENT}.html", "board": out / "board.html",
            "board-md": res.output, "entries": entries, "A": reproduced, "B": b, "C": c, "out": out, "env": env}


def embedded(path: Path, name: str) -> Any:
    """The JSON a page embeds (``data``: its per-query rows, ``detail``: every query's detail)."""
    text = path.read_text(encoding="utf-8")
    return json.loads(re.search(rf"<script type='application/json' id={name}>(.*?)</script>", text, re.S).group(1))


@pytest.fixture(scope="module")
def browser() -> Any:
    """Skipped on a machine without chromium (in CI, where .ci/run installs it, a failure)."""
    missing = chromium_missing()
    if missing:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must install the browser its tests need: {missing}", pytrace=False)
        pytest.skip(missing)
    with chromium() as driver:
        yield driver


def errors(driver: Any) -> list[dict]:
    """The console's errors since the last call (a warning is not an error)."""
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def open_page(driver: Any, path: Path, fragment: str = "") -> None:
    driver.get(path.as_uri() + fragment)
    driver.execute_script("return document.readyState")


def shown(driver: Any) -> list[str]:
    return driver.execute_script("return window.benchCompare.shown()")


def choose(driver: Any, element: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", element)).select_by_value(value)


def test_the_ab_page_loads_offline_with_every_query_and_no_console_error(pages, browser):
    open_page(browser, pages["ab"])
    both = set(pages["a"]["query_id"].astype(str)) & set(pages["b"]["query_id"].astype(str))
    assert len(both) == len(pages["a"]) and set(pages["a"]["modality"]) == {"pdf", "conversation"}
    assert sorted(shown(browser)) == sorted(both)
    assert browser.find_element("id", "count").text == f"{len(both)} of {len(both)} queries"
    assert errors(browser) == []
    text = pages["ab"].read_text()
    assert not re.search(r"""(src|href)=["']?https?:""", text)  # nothing is fetched


def test_filters_by_modality_outcome_and_text(pages, browser):
    open_page(browser, pages["ab"])
    a = pages["a"].assign(query_id=pages["a"]["query_id"].astype(str)).set_index("query_id").sort_index()
    b = pages["b"].assign(query_id=pages["b"]["query_id"].astype(str)).set_index("query_id").loc[a.index]
    choose(browser, "f-mod", "1")  # modalities in name order: conversation, pdf
    assert set(shown(browser)) == set(a.index[a["modality"] == "pdf"])
    choose(browser, "f-mod", "")
    budget = outcome_measures(10)[0]
    got = outcomes(a.reset_index(), b.reset_index(), budget)
    losses = set(a.index[got == "loss"])
    choose(browser, "f-eq", "loss")
    assert losses and set(shown(browser)) == losses  # B (conversation windows) loses some conversation queries
    choose(browser, "f-eq", "")
    choose(browser, "f-ans", "u")
    assert set(shown(browser)) == set(a.index[a["unanswerable"]])
    choose(browser, "f-ans", "")
    qid, entry = next((q, e) for q, e in pages["entries"].items() if e["modality"] == "conversation")
    words = entry["question"][:40]
    box = browser.find_element("id", "f-text")
    box.send_keys(words)
    found = shown(browser)
    assert qid in found and all(words.lower() in (q + " " + pages["entries"][q]["question"]).lower() for q in found)
    assert errors(browser) == []


def test_keyboard_moves_through_the_list_and_the_fragment_follows(pages, browser):
    from selenium.webdriver.common.keys import Keys

    open_page(browser, pages["ab"])
    order = shown(browser)
    body = browser.find_element("tag name", "body")
    assert browser.execute_script("return window.benchCompare.selected()") == order[0]
    body.send_keys("j")
    body.send_keys("j")
    assert browser.execute_script("return window.benchCompare.selected()") == order[2]
    body.send_keys(Keys.ARROW_UP)
    assert browser.execute_script("return window.benchCompare.selected()") == order[1]
    body.send_keys("k")
    body.send_keys("k")  # stays on the first
    assert browser.execute_script("return window.benchCompare.selected()") == order[0]
    assert browser.current_url.endswith("#q=" + order[0].replace(":", "%3A"))
    assert errors(browser) == []


def test_a_permalink_opens_its_query_with_both_cartridges(pages, browser):
    from urllib.parse import quote

    a = pages["a"]
    qid = str(a.loc[~a["unanswerable"] & (a["modality"] == "pdf"), "query_id"].iloc[5])
    open_page(browser, pages["ab"], "#q=" + quote(qid, safe=""))
    assert browser.execute_script("return window.benchCompare.selected()") == qid
    assert browser.find_element("id", "question").text == pages["entries"][qid]["question"]
    for side in ("side-a", "side-b"):
        rows = browser.find_elements("css selector", f"#{side} table tr:not(.cutline)")
        assert len(rows) - 1 == 10  # the top k, header aside
    assert errors(browser) == []


def test_an_experiment_has_its_cartridges_from_the_dvc_cache(pages, browser):
    """HEAD against the experiment, both named by commit: every query's two cartridges are there, and
    the experiment's are the ones its run handed the reader (B's workspace holds that run)."""
    by_commit, by_folder = embedded(pages["ab-exp"], "detail"), embedded(pages["ab"], "detail")
    assert "cartridges are not shown" not in pages["ab-exp"].read_text()
    sides = [(q, by_commit["queries"][q]["b"], by_folder["queries"][q]["b"]) for q in by_commit["queries"]]
    assert all(mine is not None and len(mine) == len(theirs) for _, mine, theirs in sides)
    atom = lambda table, hit: table["atoms"][hit[2]]["id"]  # noqa: E731
    for q, mine, theirs in sides:
        assert [(h[0], atom(by_commit, h), h[3], h[4:]) for h in mine] == [(h[0], atom(by_folder, h), h[3], h[4:]) for h in theirs], q
    a = pages["a"]
    qid = str(a.loc[~a["unanswerable"] & (a["modality"] == "conversation"), "query_id"].iloc[3])
    open_page(browser, pages["ab-exp"], "#q=" + qid.replace(":", "%3A"))
    for side in ("side-a", "side-b"):
        assert len(browser.find_elements("css selector", f"#{side} table tr:not(.cutline)")) - 1 == 10
        assert "No cartridge" not in browser.find_element("id", side).text
    assert errors(browser) == []


def test_an_abstained_answer_says_so_beside_its_hits_with_the_ranking_s_value(pages, browser):
    """A query A's answer abstained on though its ranking held the gold: recall@10 0 beside the
    ranking's 1, and the words beside A's hits; dev.html's drill-down says the same."""
    a = pages["a"]
    held = a.loc[(a["abstained"] == 1) & (a["ranked_recall@10"] == 1) & ~a["unanswerable"]]
    assert len(held), "no abstained answer whose ranking held the gold"
    qid = str(held["query_id"].iloc[0])
    open_page(browser, pages["ab"], "#q=" + qid.replace(":", "%3A"))
    note = browser.find_element("id", "abstained-a").text
    assert note.startswith("A abstained: hands over nothing.")
    # right under A's heading: above its pictures ("returned at rank 1") and its hits
    assert browser.execute_script("const n = document.getElementById('abstained-a'); return [...n.parentNode.children].indexOf(n)") == 1
    metrics = browser.find_element("css selector", "table.metrics").text
    assert "recall@10 0.0000 ranking 1.0000" in metrics and "abstained yes: hands over nothing" in metrics
    assert errors(browser) == []
    open_page(browser, pages["A"] / "reports" / "dev.html")
    tags = browser.execute_script("return [...document.querySelectorAll('.tag.abst')].map(t => t.closest('details')"
                                  ".querySelector('summary code').textContent)")
    assert tags and set(tags) <= set(a.loc[a["abstained"] == 1, "query_id"].astype(str))
    shown_ids = browser.execute_script("return [...document.querySelectorAll('summary code')].map(c => c.textContent)")
    assert set(shown_ids) & set(a.loc[a["abstained"] == 1, "query_id"].astype(str)) == set(tags)  # every abstained one shown says so
    assert errors(browser) == []


def test_the_budget_cut_is_marked_where_recall_at_budget_s_packing_stops(pages, browser):
    """Each answerable query's hits are marked packed, cut or beyond the budget, the packed ones a
    prefix of the ranking, and the marks agree with the per-query budget measures: a query whose
    one gold region some packed atom touches (touch_recall@budget 1) or holds (recall@budget 1)
    has a packed hit covering gold (or packing went past rank k); one where none touches (0) has
    no whole packed hit covering gold. The line sits after the last packed rank."""
    data, detail = embedded(pages["ab"], "data"), embedded(pages["ab"], "detail")
    b = pages["b"].assign(query_id=pages["b"]["query_id"].astype(str)).set_index("query_id")
    checked = {"touched": 0, "untouched": 0}
    for q in data["ids"]:
        hits, cut = detail["queries"][q]["b"], (detail["queries"][q].get("cut") or [None, None])[1]
        row = b.loc[q]
        if row["unanswerable"] or row["failed"] or row["n_regions"] != 1 or cut is None:
            continue
        packed = [h[0] for h in hits if h[4] in (PACK_WHOLE, PACK_CUT)]
        beyond = [h[0] for h in hits if h[4] == PACK_BEYOND]
        assert not packed or not beyond or max(packed) < min(beyond), q  # the cartridge is a prefix of the ranking
        cuts = [h[0] for h in hits if h[4] == PACK_CUT]
        assert len(cuts) <= 1 and (not cuts or cuts[0] == max(packed)), q  # only the boundary atom is cut
        spent, last, past = cut  # what the cartridge packs, its last rank, whether packing went past rank k
        assert all(h[0] <= last for h in hits if h[4] in (PACK_WHOLE, PACK_CUT)) and spent >= 0, q
        if row["abstained"] == 1:
            continue  # its budget measures count 0 whatever the packing says
        if row["touch_recall@budget"] == 1 or row["recall@budget"] == 1:
            assert any(h[3] and h[4] in (PACK_WHOLE, PACK_CUT) for h in hits) or past, q
            checked["touched"] += 1
        elif row["touch_recall@budget"] == 0:
            assert not any(h[3] and h[4] == PACK_WHOLE for h in hits), q
            checked["untouched"] += 1
    assert checked["touched"] > 50 and checked["untouched"] > 50, checked
    budget = json.loads((pages["B"] / "reports" / "metrics" / "dev.json").read_text())["run"]["budget"]
    assert detail["budget"][1] == {m: [budget[m]["amount"], budget[m]["unit"]] for m in ("conversation", "pdf")}
    q = next(q for q in data["ids"] if (c := (detail["queries"][q].get("cut") or [None, None])[1]) and 1 <= c[1] < 10
             and not data["abstained"][data["ids"].index(q)][1])
    open_page(browser, pages["ab"], "#q=" + q.replace(":", "%3A"))
    rows = browser.find_elements("css selector", "#side-b table tr")
    line = next(i for i, r in enumerate(rows) if "cutline" in r.get_attribute("class"))
    last = detail["queries"][q]["cut"][1][1]
    assert rows[line - 1].find_element("css selector", "td.r").text == str(last)
    assert "budget spent" in rows[line].text and "beyond the budget" in rows[line + 1].text
    assert errors(browser) == []


def test_the_leaderboard_page_leads_with_the_ranked_table_and_draws_markers_apart(pages, browser):
    open_page(browser, pages["board"])
    first = browser.execute_script("return document.querySelector('h1').nextElementSibling.id")
    assert first == "ranked"
    ranked = browser.find_element("id", "ranked").text
    assert f"conversation=window ({EXPERIMENT})" in ranked and "baseline (HEAD)" in ranked and "same params (copy)" in ranked
    assert str(pages["C"]) not in ranked  # short labels; the full strings are in the details section
    widths = browser.execute_script("return [...document.querySelectorAll('figure svg')].map(s => s.getBoundingClientRect().width)")
    assert len(widths) == 2 and min(widths) >= 600  # conversation, pdf: no sub-millisecond latency picture
    assert "No overall latency picture" in browser.find_element("tag name", "body").text
    boxes = browser.execute_script(
        "return [...document.querySelectorAll('figure svg')].map(s => [...s.querySelectorAll('g[id^=run-]')].map(g => {"
        "const r = g.getBoundingClientRect(); return [g.id, r.left, r.top, r.right, r.bottom]; }))")
    for figure in boxes:
        assert len(figure) == 3  # the baseline, the experiment and the baseline's copy: the copy's values are the baseline's
        for i, (na, *ra) in enumerate(figure):
            for nb, *rb in figure[i + 1:]:
                apart = ra[2] <= rb[0] or rb[2] <= ra[0] or ra[3] <= rb[1] or rb[3] <= ra[1]
                assert apart, (na, ra, nb, rb)
    captions = browser.execute_script("return [...document.querySelectorAll('figcaption')].map(c => c.textContent)")
    assert all("side by side" in c and "copy" in c for c in captions)
    link = browser.find_element("link text", f"{EXPERIMENT} vs HEAD")
    target = pages["board"].parent / link.get_attribute("href").rsplit("/", 1)[-1]
    assert target == pages["ab-exp"] and "every query" in target.read_text()[:2000]
    md = pages["board-md"]
    assert md.index("| rank (95%) | run: what differs") < md.index("## conversation") < md.index("## Runs in full")
    assert errors(browser) == []


def test_a_folder_whose_table_and_data_are_from_different_runs_is_refused(pages, tmp_path):
    """B's workspace holds the window run; restoring the committed baseline files (params, dvc.lock,
    reports) without `dvc repro` leaves its data/ outputs the window run's: one line, exit 1, no page."""
    stale = clone_project(pages["B"], tmp_path / "stale")
    run(["git", "checkout", "--", "."], stale, pages["env"])
    res = bench(stale, "compare", str(stale), str(pages["A"]), "--html", str(tmp_path / "ab.html"), *STATS)
    assert res.exit_code == 1 and not (tmp_path / "ab.html").exists()
    line = res.output.strip()
    assert "\n" not in line and "its per-query table and its cartridge files are not from the same run" in line, line
    assert "data/runs" in line and "run `dvc repro`" in line


def test_dvc_plots_show_renders_offline_with_the_vendored_template(pages, browser, tmp_path):
    out = tmp_path / "plots"
    run(["dvc", "plots", "show", "-o", str(out)], pages["A"], project_env(tmp_path / "site-cache"))
    text = (out / "index.html").read_text()
    assert "cdn.jsdelivr" not in text and "vega-embed" in text
    open_page(browser, out / "index.html")
    assert browser.execute_script("return document.querySelectorAll('.vega-embed svg, .vega-embed canvas').length") >= 4
    assert errors(browser) == []
