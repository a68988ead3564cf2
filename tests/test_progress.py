"""Progress on stderr: plain periodic lines off a terminal, a rich bar on one, nothing in outputs."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import pandas as pd
import pytest

from bench import progress
from tests.conftest import MIRROR, ROOT

DOC = MIRROR / "mmlongbench-doc/data/documents/698bba535087fa9a7f9009e172a7f763.pdf"


@pytest.fixture(autouse=True)
def _reset_progress():
    yield
    progress.configure(interval_s=progress.DEFAULT_INTERVAL_S, enabled=True, stream=sys.stderr, terminal=None)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_at_most_one_per_interval():
    out = io.StringIO()
    progress.configure(interval_s=5.0, stream=out)
    clock = Clock()
    with progress.scope("extract mmlongbench"):
        bar = progress.Bar(10, "ocr", "pages", clock=clock)
    for _ in range(10):
        clock.now += 1.0
        bar.advance()
    bar.close()
    bar.close()  # closing twice prints nothing more
    lines = out.getvalue().splitlines()
    assert lines[0] == "extract mmlongbench: ocr: 0/10 pages (started)"
    # one line at 5 s, none at 10 s (that is the end), then the closing line
    assert lines[1] == "extract mmlongbench: ocr: 5/10 pages (50%), 1.00 pages/s, ~5s left"
    assert lines[2] == "extract mmlongbench: ocr: 10/10 pages in 10s (1.00 pages/s)"
    assert len(lines) == 3


def test_failed_counts_and_switching_off():
    out = io.StringIO()
    progress.configure(interval_s=0.0, stream=out)
    clock = Clock()
    with progress.Bar(3, "retrieve: queries", "queries", count_failed=True, clock=clock) as bar:
        for failed in (0, 1, 0):
            clock.now += 2.0
            bar.advance(failed=failed)
    assert out.getvalue().splitlines()[-1] == "retrieve: queries: 3/3 queries in 6s (0.50 queries/s), 1 failed"
    assert "~2s left, 1 failed" in out.getvalue()
    quiet = io.StringIO()
    progress.configure(enabled=False, stream=quiet)
    with progress.bar(3, "x") as bar:
        bar.advance(3)
    assert quiet.getvalue() == ""
    with pytest.raises(ValueError, match="interval"):
        progress.configure(interval_s=-1)


def test_terminal_gets_a_rich_bar():
    out = io.StringIO()
    progress.configure(stream=out, terminal=True)
    with progress.bar(4, "ocr screenshots", "images") as bar:
        bar.advance(4)
    text = out.getvalue()
    assert "ocr screenshots" in text and "4/4" in text and "images" in text


def test_retrieve_reports_queries_and_failures():
    from bench.systems import Hit
    from bench.systems.adapters.external import PythonAdapter
    from bench.systems.run import run_queries

    class Flaky:
        name = "flaky"

        def search(self, query):
            if "fail" in query.question:
                raise RuntimeError("boom")
            return [Hit("a1", 1.0)]

    entries = [{"query_id": f"q{i}", "modality": "pdf", "question": "fail" if i == 2 else f"question {i}",
                "as_of": "2024-01-01T00:00:00+00:00", "scope": {"holder": "owner"}} for i in range(5)]
    out = io.StringIO()
    progress.configure(interval_s=0.0, stream=out)
    result = run_queries(PythonAdapter(Flaky(), "flaky"), entries, 10, known_atoms={"a1"})
    assert result.failed == ["q2"]
    last = out.getvalue().splitlines()[-1]
    assert re.fullmatch(r"retrieve: queries: 5/5 queries in \d+s( \([\d.]+ queries/s\))?, 1 failed", last)


@pytest.mark.skipif(not DOC.is_file(), reason=f"MMLongBench-Doc document absent ({DOC})")
def test_small_extraction_off_a_terminal_prints_periodic_lines(tmp_path):
    """A real extraction (text layer + OCR of its text-less pages) in a child whose stderr is a pipe."""
    out_file = tmp_path / "segments.parquet"
    script = (
        "from pathlib import Path\n"
        "from bench import progress\n"
        "from bench.modalities.pdf.mmlongbench import MMLongBench\n"
        "progress.configure(interval_s=0.0)\n"
        f"seg = MMLongBench().extract({{'data/documents/{DOC.name}': Path({str(DOC)!r})}})\n"
        f"seg.to_parquet({str(out_file)!r})\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""  # progress goes to stderr only
    lines = proc.stderr.splitlines()
    assert "pdf text layer: 0/1 files (started)" in lines
    took = r"(?:\d+s|\d+m\d{2}s|\d+h\d{2}m)"  # bench.progress's durations: a loaded machine may take minutes
    assert any(re.fullmatch(rf"pdf text layer: 1/1 files in {took}( \([\d.]+ files/s\))?", x) for x in lines)
    assert "ocr text-less pdf pages: 0/3 pages (started)" in lines
    periodic = [x for x in lines if re.fullmatch(r"ocr text-less pdf pages: [12]/3 pages \(\d+%\), [\d.]+ pages/s, ~\S+ left", x)]
    assert len(periodic) == 2
    assert any(re.fullmatch(rf"ocr text-less pdf pages: 3/3 pages in {took}( \([\d.]+ pages/s\))?", x) for x in lines)
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr  # no redraws or colours off a terminal
    seg = pd.read_parquet(out_file)
    assert len(seg) == 20 and seg["text"].map(lambda t: "pages" not in t).all()


def test_dense_index_embeds_in_steps_with_progress_and_keeps_order():
    import numpy as np

    from bench.systems.builtin import dense

    class LengthEncoder:
        """Deterministic 2-d vectors from the text itself (the packaged model is an optional extra)."""

        def __init__(self) -> None:
            self.calls: list[int] = []

        def encode(self, texts: list[str]) -> np.ndarray:
            self.calls.append(len(texts))
            return np.asarray([[len(t), sum(map(ord, t)) % 97] for t in texts], dtype=np.float32).reshape(-1, 2)

    texts = [f"atom text {i} " * (i % 7 + 1) for i in range(dense.PROGRESS_STEP * 2 + 5)]
    out = io.StringIO()
    progress.configure(interval_s=0.0, stream=out)
    enc = LengthEncoder()
    vectors = dense.encode_with_progress(enc, texts)
    np.testing.assert_array_equal(vectors, LengthEncoder().encode(texts))
    assert enc.calls == [dense.PROGRESS_STEP, dense.PROGRESS_STEP, 5]
    n_batches = -(-len(texts) // dense.BATCH)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"dense: embedding atoms: 0/{n_batches} batches (started)"
    assert re.fullmatch(rf"dense: embedding atoms: {n_batches}/{n_batches} batches in \d+s( \([\d.]+ batches/s\))?", lines[-1])
    assert len(lines) == 4  # start, two steps, end
