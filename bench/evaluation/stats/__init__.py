"""evaluation.stats: intervals, tests, power and the clusters they resample.

The names of the clusterings are declared here, in a module that imports nothing, so that `bench
--help` lists them without importing pandas (bench/cli.py); clusters.py computes them."""

from __future__ import annotations

from typing import Literal

Clustering = Literal["question", "source", "entry"]
#: what intervals and tests resample (bench.evaluation.stats.clusters): the default first
CLUSTERINGS: tuple[Clustering, ...] = ("question", "source", "entry")
