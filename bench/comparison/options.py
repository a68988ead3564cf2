"""The statistics options every comparison command shares (``bench compare``, ``bench gate``,
``bench leaderboard``), declared once: the bootstrap resamples, the sign flips, the seed, the
significance level, the unpaired tolerance and how entries are clustered. The commands'
click options are made from :data:`FIELDS` (bench.cli), and every comparison function takes
one :class:`StatsOptions`."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from bench.evaluation.stats import CLUSTERINGS, Clustering  # not .clusters: `bench --help` reads this module

__all__ = ["FIELDS", "MAX_UNPAIRED", "StatsOptions", "options_of"]

#: default share of all queries (union of A and B) that may be in only one run
MAX_UNPAIRED = 0.01


@dataclass(frozen=True, kw_only=True)
class StatsOptions:
    """How two runs' per-query values are compared (docs/comparing.md)."""

    resamples: int = 1000  # bootstrap resamples (the commands' default: params metrics.bootstrap_resamples)
    permutations: int = 10000  # sign flips of the randomization test
    seed: int = 0  # the seed of every draw (the commands' default: params metrics.bootstrap_seed)
    alpha: float = 0.05  # significance level after Holm's correction
    max_unpaired: float = MAX_UNPAIRED  # share of all queries that may be in only one run
    #: what is resampled and permuted (bench.evaluation.stats.clusters): clusters of entries asking the same
    #: question (default), of entries reading the same source, or entries as if independent
    clusters: Clustering = "question"

    def __post_init__(self) -> None:
        if self.clusters not in CLUSTERINGS:
            raise ValueError(f"clusters {self.clusters!r} is not one of {', '.join(CLUSTERINGS)}")
        if self.resamples < 1 or self.permutations < 1:
            raise ValueError("resamples and permutations must be >= 1")


#: the options' help texts, for the commands' click options (bench.cli)
FIELDS: dict[str, str] = {
    "resamples": "bootstrap resamples (default params metrics.bootstrap_resamples)",
    "permutations": "sign flips of the randomization test",
    "seed": "default params metrics.bootstrap_seed",
    "alpha": "significance level after Holm correction",
    "max_unpaired": "share of all queries that may be missing from a run (then only shared queries are compared)",
    "clusters": "what intervals and tests resample: clusters of entries asking the same question (question), reading the "
                "same source (source), or entries as if independent (entry)",
}
assert set(FIELDS) == {f.name for f in fields(StatsOptions)}


def options_of(options: StatsOptions | None, given: dict[str, Any]) -> StatsOptions:
    """`options` (default: the defaults) with the fields named in `given` replaced; TypeError for another name."""
    unknown = sorted(set(given) - set(FIELDS))
    if unknown:
        raise TypeError(f"unknown statistics option {unknown[0]!r} (options: {', '.join(FIELDS)})")
    return replace(options or StatsOptions(), **given)
