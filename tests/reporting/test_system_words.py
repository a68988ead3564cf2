"""dev.md, dev.html and the acceptance's test.md say in words what the system does: its own
description (the built-in bm25's: scoped or not, when it abstains), recorded by the run."""

from __future__ import annotations

import html

from bench.reporting.html_report import render
from bench.reporting.report import acceptance_markdown, system_words
from bench.systems import build_system
from tests.systems.builtin.test_bm25 import atoms


def test_the_description_the_run_recorded_is_said_on_every_page():
    words = build_system("bm25-scoped", atoms(), abstain_below=0.35).description
    run = {"system": "bm25-scoped", "depth": 100, "k": 10, "chunking": {}, "description": words}
    doc = {"run": run, "overall": {}, "by_modality": {}}
    assert system_words(run) == f"What it does: {words}"
    assert html.escape(words, quote=True) in render(doc, {}, {"k": 10, "queries": []})
    assert words in acceptance_markdown(doc, 1, "abc")


def test_a_system_without_a_description_is_said_to_give_none():
    assert system_words({"system": "x"}).startswith("It gives no description of itself")
