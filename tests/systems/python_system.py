"""A test helper: a Python System sent entries through the Python adapter, failures raised."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.systems.adapters.external import PythonAdapter
from bench.systems.run import run_queries


def run_python_system(system: Any, entries: list[dict], k: int, **options: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(run, latency) of `system` over `entries` at depth `k`; RuntimeError naming the first failed query."""
    result = run_queries(PythonAdapter(system, getattr(system, "name", "system")), entries, k, **options)
    if len(result.failures):
        row = result.failures.iloc[0]
        raise RuntimeError(f"query {row.query_id}: {row.kind}: {row.message}")
    return result.run, result.latency
