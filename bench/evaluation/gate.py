"""`bench gate BASE`: a regression gate for continuous integration.

The current run (the project folder's committed per-query table) is compared with BASE
(a folder, git revision or DVC experiment, as for ``bench compare``) by
:func:`bench.evaluation.compare.compare` on every mean measure of the verdict (recall@k,
recall@budget, MRR, nDCG@k, false recall, abstention rate, temporal and holder
correctness; per modality and overall; Holm-corrected across all of those rows). The
gate fails (exit 1) for every row where the current run is

* worse (lower where higher is better, higher for false recall and abstention rate),
* with a Holm-corrected p-value below ``alpha``,
* by more than ``min_effect`` (absolute difference of the means);

and for the overall latency p50 or p95 (the timed queries' per-query latencies) when it
exceeds BASE's by more than the factor ``max_latency_ratio``: two identical runs differ
in latency by machine noise, so latency fails on that limit alone, never on a p-value.
The AUROC (a verdict column without per-query values) is not gated. It passes (exit 0)
otherwise; a comparison bench compare refuses is refused (exit 2) with its one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.evaluation.compare import MAX_UNPAIRED, RunData, check_table, compare
from bench.evaluation.measures import measures
from bench.evaluation.measures.base import Mean, Measure

__all__ = ["MAX_LATENCY_RATIO", "GateResult", "gate", "gated"]

#: default --max-latency-ratio: twice BASE's p50 / p95. Noise between runs on one quiet machine stays under
#: it; runs measured on other or loaded machines can exceed it (docs/comparing.md, *A real sweep*)
MAX_LATENCY_RATIO = 2.0
LATENCY = (("p50", 50.0), ("p95", 95.0))


def gated(k: int) -> list[Measure]:
    """The verdict's mean measures (a verdict column and a per-query value)."""
    return [m for m in measures(k) if m.heading is not None and isinstance(m.reducer, Mean)]


@dataclass
class GateResult:
    reasons: list[str] = field(default_factory=list)  # one line per failure; empty: passed
    rows: int = 0  # rows tested
    latency: dict[str, float | None] = field(default_factory=dict)  # p50 / p95 ratio current / BASE

    @property
    def passed(self) -> bool:
        return not self.reasons


def _latency(run: RunData, common: set[str]) -> dict[str, float | None]:
    t = run.per_query
    if "latency_ms" not in t.columns:
        return {name: None for name, _ in LATENCY}
    keep = t["query_id"].astype(str).isin(common).to_numpy() & ~t["failed"].astype(bool).to_numpy()
    lat = t["latency_ms"].to_numpy(float)[keep]
    lat = lat[~np.isnan(lat)]
    return {name: (float(np.percentile(lat, q)) if len(lat) else None) for name, q in LATENCY}


def gate(base: RunData, current: RunData, *, k: int, alpha: float = 0.05, min_effect: float = 0.0,
         max_latency_ratio: float = MAX_LATENCY_RATIO, resamples: int = 1000, permutations: int = 10000, seed: int = 0,
         max_unpaired: float = MAX_UNPAIRED) -> GateResult:
    """Gate `current` against `base` (module docstring); CompareError when they cannot be compared."""
    check_table(base.per_query, base.label, k)
    check_table(current.per_query, current.label, k)
    result = compare(base.per_query, current.per_query, k=k, resamples=resamples, permutations=permutations, seed=seed,
                     alpha=alpha, max_unpaired=max_unpaired, tested=gated(k))
    out = GateResult(rows=len(result["rows"]))
    for r in result["rows"]:
        worse = r["diff"] < 0 if r["higher_is_better"] else r["diff"] > 0
        if r["significant"] and worse and abs(r["diff"]) > min_effect:
            lo, hi = r["ci95"]
            out.reasons.append(
                f"gate: {r['modality']} {r['metric']} is worse: {r['a']:.4f} -> {r['b']:.4f} ({r['diff']:+.4f}, 95% CI "
                f"[{_f(lo)}, {_f(hi)}], n {r['n']}, p_holm {r['p_holm']:.4f} < {alpha:g}, beyond --min-effect {min_effect:g})")
    common = set(base.per_query["query_id"].astype(str)) & set(current.per_query["query_id"].astype(str))
    before, after = _latency(base, common), _latency(current, common)
    for name, _ in LATENCY:
        a, b = before[name], after[name]
        ratio = None if a is None or b is None or a <= 0 else b / a
        out.latency[name] = ratio
        if ratio is not None and ratio > max_latency_ratio:
            out.reasons.append(f"gate: overall latency {name} is {ratio:.2f} x BASE's ({a:.1f} ms -> {b:.1f} ms), "
                               f"beyond --max-latency-ratio {max_latency_ratio:g}")
    return out


def _f(x: Any) -> str:
    return "—" if x is None else f"{x:+.4f}"


def summary(result: GateResult, base: str, alpha: float, min_effect: float, max_latency_ratio: float) -> str:
    """The one line of a passed gate."""
    lat = ", ".join(f"{name} x{r:.2f}" for name, r in result.latency.items() if r is not None) or "not recorded"
    return (f"gate: passed: no verdict metric is significantly worse than {base} ({result.rows} rows, Holm-corrected, "
            f"alpha {alpha:g}, min effect {min_effect:g}); latency {lat} within x{max_latency_ratio:g}")
