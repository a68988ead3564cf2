"""dev.html opens with dev.md's isolation heading (a banner before anything else)."""

from __future__ import annotations

import pytest

from bench.reporting.html_report import render
from bench.reporting.report import isolation_heading


@pytest.mark.parametrize(("isolation", "kind"), [("none", "not-isolated"), ("process", "not-isolated"), ("bwrap", "isolated"),
                                                  ("landlock", "isolated"), (None, "not-isolated")])
def test_dev_html_carries_the_isolation_banner_of_dev_md_at_its_top(isolation, kind):
    run = {"system": "s", "depth": 10, "k": 10} | ({"isolation": isolation} if isolation else {})
    page = render({"run": run, "overall": {}, "by_modality": {}}, {}, {"k": 10, "queries": []})
    heading = isolation_heading(run)  # dev.md's line: **Isolation: x** — words.
    bold, _, rest = heading.removeprefix("**").partition("**")
    banner = page.index("<p class='isolation")
    assert page.index("<h1>") < banner < page.index("<h2>")  # right under the title, before the verdict
    line = page[banner:page.index("</p>", banner)]
    assert f"class='isolation {kind}'" in line and f"<strong>{bold}</strong>" in line
    assert rest.replace("'", "&#x27;") in line
    if kind == "not-isolated":
        assert "NOT ISOLATED" in line or "not recorded" in line
