"""The pages in a real browser (Debian's chromium driven by selenium, headless and offline):
`bench compare --html` over two runs of the session's reproduced two-data-set project (A: as
committed; B: conversations chunked in windows, retrieve onwards re-run), the leaderboard page
and `dvc plots show` with the vendored Vega template."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from bench.cli import cli
from bench.io import iter_jsonl
from bench.project.layout import PER_QUERY
from bench.reporting.compare_page import outcome_measures, outcomes
from tests.project_copy import clone_project, project_env, run
from tests.reporting.browser import chromium, chromium_missing

pytestmark = pytest.mark.e2e
#: the statistics are bench compare's own tests' business: few resamples keep this module cheap
STATS = ["--resamples", "50", "--permutations", "200"]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory, reproduced: Path, browser: Any) -> dict[str, Any]:
    """A (the reproduced project), B (its clone with conversation windows), the A/B page and the leaderboard page."""
    out = tmp_path_factory.mktemp("pages")
    b = clone_project(reproduced, out / "B")
    params = yaml.safe_load((b / "params.yaml").read_text())
    params["chunking"]["conversation"]["strategy"] = "window"
    (b / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run(["dvc", "repro"], b, project_env(out / "site-cache"))
    with contextlib.chdir(reproduced):
        res = CliRunner().invoke(cli, ["compare", str(reproduced), str(b), "--html", str(out / "ab.html"), *STATS])
        assert res.exit_code == 0, res.output
        res = CliRunner().invoke(cli, ["leaderboard", "--baseline", str(reproduced), str(b), "--label", f"windows={b}",
                                       "--html", str(out / "board.html"), *STATS])
        assert res.exit_code == 0, res.output
    a_pq, b_pq = pd.read_parquet(reproduced / PER_QUERY), pd.read_parquet(b / PER_QUERY)
    entries = {e["query_id"]: e for _, e in iter_jsonl(reproduced / "data" / "sets" / "dev.jsonl")}
    return {"a": a_pq, "b": b_pq, "ab": out / "ab.html", "board": out / "board.html", "entries": entries, "A": reproduced}


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
        rows = browser.find_elements("css selector", f"#{side} table tr")
        assert len(rows) - 1 == 10  # the top k, header aside
    assert errors(browser) == []


def test_the_leaderboard_page_draws_wide_pictures_and_links_the_ab_page(pages, browser):
    open_page(browser, pages["board"])
    widths = browser.execute_script("return [...document.querySelectorAll('figure svg')].map(s => s.getBoundingClientRect().width)")
    assert len(widths) == 3 and min(widths) >= 600  # conversation, pdf, overall
    legend = browser.execute_script("return document.querySelector('figure svg').textContent")
    assert "windows" in legend and str(pages["A"]) not in legend  # short labels
    link = browser.find_element("link text", f"windows vs {pages['A'].name}")
    target = pages["board"].parent / link.get_attribute("href").rsplit("/", 1)[-1]
    assert target.is_file() and "every query" in target.read_text()[:2000]
    assert errors(browser) == []


def test_dvc_plots_show_renders_offline_with_the_vendored_template(pages, browser, tmp_path):
    out = tmp_path / "plots"
    run(["dvc", "plots", "show", "-o", str(out)], pages["A"], project_env(tmp_path / "site-cache"))
    text = (out / "index.html").read_text()
    assert "cdn.jsdelivr" not in text and "vega-embed" in text
    open_page(browser, out / "index.html")
    assert browser.execute_script("return document.querySelectorAll('.vega-embed svg, .vega-embed canvas').length") >= 4
    assert errors(browser) == []
