"""bench.numbers: the one number format of reports, pages and the gate's lines."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.numbers import NO_VALUE, number, p_value
from bench.reporting.report import metric_table


@pytest.mark.parametrize(("value", "digits", "text"), [
    (None, 4, "—"), (float("nan"), 4, "—"), (np.float32("nan"), 4, "—"), (np.float64("nan"), 1, "—"),
    (math.inf, 4, "∞"), (-math.inf, 4, "-∞"),
    (0.41666666, 4, "0.4167"), (np.float64(0.5), 3, "0.500"), (-0.00004, 4, "-0.0000"),
    (999.99994, 4, "999.9999"), (1234.56, 4, "1234.6"), (25000.0, 0, "25000"), (np.float32(1500.25), 3, "1500.2"),
    (3, 4, "3"), (np.int64(500), 4, "500"), (True, 4, "True"), ("n/a", 4, "n/a"),
])
def test_number(value, digits, text):
    assert number(value, digits) == text


def test_signed_differences():
    assert [number(x, sign=True) for x in (0.012, -0.004, 0.0, None, 2)] == ["+0.0120", "-0.0040", "+0.0000", NO_VALUE, "+2"]


@pytest.mark.parametrize(("p", "text"), [(None, "—"), (float("nan"), "—"), (0.0, "<0.0001"), (9.9e-5, "<0.0001"), (1e-4, "0.0001"),
                                         (0.04999, "0.0500"), (1.0, "1.0000")])
def test_p_value(p, text):
    assert p_value(p) == text


def test_the_reports_write_a_cell_without_value_as_a_dash():
    """A modality whose measure has no denominator (dev.json writes value null) and a latency in ms."""
    block = {"recall@10": {"value": 0.41666, "n": 5, "denominator": 12}, "false_recall": {"value": None, "n": 0, "denominator": 0},
             "latency_p50_ms": {"value": 1234.5678, "n": 12, "denominator": 12}}
    assert metric_table(block)[2:] == ["| recall@10 | 0.4167 | 5 | 12 |", "| false_recall | — | 0 | 0 |", "| latency_p50_ms | 1234.6 | 12 | 12 |"]
