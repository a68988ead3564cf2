"""`bench gate BASE`: a regression gate for continuous integration.

The current run (the project folder's committed per-query table) is compared with BASE
(a folder, git revision or DVC experiment, as for ``bench compare``) on the queries both
hold, per modality and overall, with bench compare's paired statistics
(:func:`bench.comparison.compare.paired_row`: the paired difference, its bootstrap interval,
the sign-flip p-value, wins and losses).

What is gated
-------------
Only the **primary** measures (declared ``primary`` in bench.evaluation.measures: the
objective, which judges answering and abstaining together -- recall@budget on answerable
entries, no false recall on unanswerable ones --, holder and temporal correctness), each per
modality and overall. Both parts of the objective are reported beside it. Holm runs over
those rows only, and among them over the rows where at least one query differs: a row
where none differs has p = 1 under every sign flip and can never be worse, so counting
it would only weaken the others (Tarone's argument for discrete tests). The gate fails
(exit 1) for a primary row where the current run is

* worse (lower where higher is better, higher for false recall),
* with a Holm-corrected p-value below ``alpha``,
* by more than ``min_effect`` (absolute difference of the means);

for a primary row that has a value in BASE and none in the current run (a per-query
value NaN where the query is in the measure's denominator, or the column missing: for
example a system that answers nothing has no calibrated false recall), with its reason;
and for latency (below). Every other mean measure of the verdict (recall@budget, false
recall, recall@k, MRR, nDCG@k, abstention rate, ...) is **reported**, Holm-corrected as a
family of its own, and never fails the gate: its significant losses are printed as notes.
A primary row that has no value in BASE is not gated and said so. Intervals and p-values
resample and permute clusters of entries (``options.clusters``; bench.evaluation.stats.clusters):
four questions lost at both of their askings weigh as four losses, not eight.

Latency
-------
The overall latency p50 and p95 (the timed, not failed queries both runs hold) fail the
gate only when the current run is slower beyond noise on both scales: the lower end of
the current percentile's 95% bootstrap interval exceeds the upper end of BASE's by more
than ``latency_floor_ms`` (default 5 ms) **and** by more than the factor
``max_latency_ratio`` (default 2). Two identical runs differ in latency by machine noise
(a sub-millisecond system's p95 moves several times over between reruns on a loaded
machine), which the floor absorbs; a percentile resting on a handful of slow queries has
a wide interval, which the bounds absorb. Latency is never judged by a p-value.

What is refused
---------------
Refusals (exit 2, one line, :class:`~bench.comparison.compare.CompareError`) are only for
comparisons that cannot be made: a malformed table, values outside [0, 1], query sets
that differ beyond the unpaired tolerance, different unanswerable flags, different cut-offs,
and runs evaluated over different set files (their sha256 in dev.json) unless
``allow_different_sets``. The one line of a passed or failed gate names the queries
compared and every unpaired count (only in BASE, only in the current run, per modality).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from bench.comparison import LATENCY_FLOOR_MS, MAX_LATENCY_RATIO
from bench.comparison.compare import check_sets, check_table, check_values, filled, paired_queries, paired_row, unpaired
from bench.comparison.options import StatsOptions, options_of
from bench.comparison.runs import CompareError, LoadedRun
from bench.evaluation.measures import measures
from bench.evaluation.measures.base import Mean, Measure, counted, in_denominator
from bench.evaluation.stats.clusters import Clustering, cluster_codes
from bench.evaluation.stats.uncertainty import bootstrap_ci, holm, rng_for
from bench.numbers import number, p_value

__all__ = ["LATENCY_FLOOR_MS", "MAX_LATENCY_RATIO", "GateResult", "LatencyCheck", "gate", "latency_check",
           "primary", "reported", "summary"]

LATENCY = (("p50", 50.0), ("p95", 95.0))
BASE, CURRENT = "BASE", "the current run"


def primary(k: int) -> list[Measure]:
    """The primary measures: those the catalogue declares ``primary``; ValueError when one is not
    a mean measure of the verdict (a declaration the gate cannot read)."""
    out = [m for m in measures(k) if m.primary]
    for m in out:
        if m.heading is None or not isinstance(m.reducer, Mean):
            raise ValueError(f"gate: primary measure {m.name!r} is not a mean measure of the verdict in bench.evaluation.measures")
    if not out:
        raise ValueError("gate: no measure of bench.evaluation.measures is declared primary")
    return out


def reported(k: int) -> list[Measure]:
    """The verdict's other mean measures: compared and reported by the gate, never gated."""
    names = {m.name for m in primary(k)}
    return [m for m in measures(k) if m.heading is not None and isinstance(m.reducer, Mean) and m.name not in names]


@dataclass(frozen=True)
class LatencyCheck:
    """One latency percentile of both runs with its 95% bootstrap interval, and whether it fails."""

    name: str  # p50 / p95
    base: float | None
    current: float | None
    base_ci: tuple[float, float] | None
    current_ci: tuple[float, float] | None
    failed: bool

    @property
    def ratio(self) -> float | None:
        return None if self.base is None or self.current is None or self.base <= 0 else self.current / self.base


@dataclass
class GateResult:
    reasons: list[str] = field(default_factory=list)  # one line per failure; empty: passed
    notes: list[str] = field(default_factory=list)  # reported, not gated
    rows: list[dict[str, Any]] = field(default_factory=list)  # the primary rows (bench compare's, with p_holm)
    reported: list[dict[str, Any]] = field(default_factory=list)  # the other verdict measures' rows
    family: int = 0  # primary rows in the Holm family (at least one query differs)
    primary: list[str] = field(default_factory=list)  # the gated measures' names
    clusters: str = "question"  # what intervals and p-values resampled and permuted
    latency: list[LatencyCheck] = field(default_factory=list)
    queries: dict[str, Any] = field(default_factory=dict)  # bench.comparison.compare.unpaired
    sets: str = ""  # what the set-file check found

    @property
    def passed(self) -> bool:
        return not self.reasons


def latency_check(base_ms: np.ndarray, current_ms: np.ndarray, *, name: str, q: float, max_ratio: float = MAX_LATENCY_RATIO,
                  floor_ms: float = LATENCY_FLOOR_MS, resamples: int = 1000, seed: int = 0,
                  clusters: tuple[np.ndarray, np.ndarray] | None = None) -> LatencyCheck:
    """The q-th latency percentile of both runs (NaN left out) and the gate's rule (module
    docstring, *Latency*): failed when the current interval's lower end is above BASE's upper
    end by more than `floor_ms` and by more than the factor `max_ratio`. ``clusters``: each
    run's cluster code per latency (the intervals resample clusters)."""
    a, b = (np.asarray(x, dtype=float) for x in (base_ms, current_ms))
    ka, kb = (np.arange(len(a)), np.arange(len(b))) if clusters is None else (np.asarray(c) for c in clusters)
    ka, kb = ka[~np.isnan(a)], kb[~np.isnan(b)]
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if not len(a) or not len(b):
        return LatencyCheck(name, _pct(a, q), _pct(b, q), None, None, False)
    stat = f"p{q:g}"
    ca = bootstrap_ci(a, resamples=resamples, rng=rng_for(seed, "gate", "latency", "base", stat), statistic=stat, clusters=ka)
    cb = bootstrap_ci(b, resamples=resamples, rng=rng_for(seed, "gate", "latency", "current", stat), statistic=stat, clusters=kb)
    if ca is None or cb is None:  # fewer than two clusters: no interval, no verdict beyond noise
        return LatencyCheck(name, _pct(a, q), _pct(b, q), ca, cb, False)
    lower, upper = cb[0], ca[1]
    failed = lower - upper > floor_ms and lower > max_ratio * upper
    return LatencyCheck(name, _pct(a, q), _pct(b, q), ca, cb, bool(failed))


def _pct(x: np.ndarray, q: float) -> float | None:
    return float(np.percentile(x, q)) if len(x) else None


def _timed(frame: pd.DataFrame, clustering: Clustering) -> tuple[np.ndarray, np.ndarray]:
    """The latencies of the answered queries and their cluster codes."""
    if "latency_ms" not in frame.columns:
        return np.array([], dtype=float), np.array([], dtype=np.int64)
    ok = ~frame["failed"].astype(bool).to_numpy()
    return frame["latency_ms"].to_numpy(float)[ok], cluster_codes(frame, clustering)[ok]


def _unmeasurable(frame: pd.DataFrame, m: Measure, run: LoadedRun) -> str | None:
    """Why `m` has no value over `frame` (one group's paired queries of `run`); None when it has
    (or when no query of the group is in its denominator: then there is no row at all)."""
    if m.column not in frame.columns:
        return f"its per-query table has no {m.column} column"
    keep = in_denominator(m.scope, frame["unanswerable"].astype(bool).to_numpy()) & ~frame["failed"].astype(bool).to_numpy()
    undefined = np.isnan(frame[m.column].to_numpy(float)) & keep
    if not undefined.any():
        return None
    mods = sorted(set(frame["modality"].astype(str).to_numpy()[undefined]))
    recorded = _recorded_reasons(run, m, mods)
    first = str(frame.index[np.flatnonzero(undefined)[0]])
    return (f"no value for {int(undefined.sum())} of its {int(keep.sum())} queries (NaN; first {first})"
            + (f": {recorded}" if recorded else ""))


#: where dev.json's ``run`` block records, per modality, why a measure has no value
RECORDED = {"false_recall": "false_recall_rule"}


def _recorded_reasons(run: LoadedRun, m: Measure, mods: Sequence[str]) -> str:
    """Why `m` has no value in `mods`: the measure's own rule where the table carries what it
    reads, else the reasons `run`'s dev.json records for them ("modality: reason; ...")."""
    if m.unmeasurable is not None:
        try:
            why = m.unmeasurable(run.per_query.loc[run.per_query["modality"].astype(str).isin(mods)])
        except KeyError:  # the table lacks a column the rule reads (a compact per-query table)
            why = None
        if why:
            return why
    block = run.metrics.get("run")
    # what dev.json records for the measure, or for the parts of the objective (declared in_objective)
    names = [m.name] + ([p.name for p in measures(m.k or 10) if p.in_objective] if m.ranks else [])
    found = []
    for name in names:
        rules = block.get(RECORDED.get(name, "")) if isinstance(block, dict) else None
        if isinstance(rules, dict):
            found += [(mod, why) for mod in mods if isinstance(rule := rules.get(mod), dict) and (why := rule.get("reason"))]
    return "; ".join(f"{mod}: {why}" for mod, why in found)


def _mean(frame: pd.DataFrame, m: Measure) -> tuple[float | None, int]:
    if m.column not in frame.columns:
        return None, 0
    x = counted(m, frame[m.column].to_numpy(float), frame["unanswerable"].astype(bool).to_numpy(),
                frame["failed"].astype(bool).to_numpy())[0]
    return (float(x.mean()) if len(x) else None), len(x)


def _family(tested: Sequence[Measure], groups: list[tuple[str, pd.DataFrame, pd.DataFrame]], base: LoadedRun, current: LoadedRun,
            opt: StatsOptions) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(bench compare's rows of `tested` per group, Holm-corrected over those where a query
    differs; the (group, measure) pairs one run has no value for, with why)."""
    rows, lost = [], []
    for group, ga, gb in groups:
        for m in tested:
            why_a, why_b = _unmeasurable(ga, m, base), _unmeasurable(gb, m, current)
            if why_a or why_b:
                value, n = _mean(ga, m)
                lost.append({"modality": group, "metric": m.name, "base": why_a, "current": why_b, "base_value": value, "n": n})
                continue
            row = paired_row(group, m, ga, gb, opt)
            if row is not None:
                rows.append(row)
    moved = [r for r in rows if r["wins"] + r["losses"]]
    for r in rows:
        r["p_holm"], r["significant"] = 1.0, False
        r["worse"] = bool(r["diff"] < 0 if r["higher_is_better"] else r["diff"] > 0)
    for r, p in zip(moved, holm([r["p"] for r in moved]), strict=True):
        r["p_holm"] = None if np.isnan(p) else float(p)
        r["significant"] = bool(r["p_holm"] is not None and r["p_holm"] < opt.alpha)
    return rows, lost


def gate(base: LoadedRun, current: LoadedRun, *, k: int, min_effect: float = 0.0, max_latency_ratio: float = MAX_LATENCY_RATIO,
         latency_floor_ms: float = LATENCY_FLOOR_MS, allow_different_sets: bool = False, options: StatsOptions | None = None,
         **given: Any) -> GateResult:
    """Gate `current` against `base` (module docstring); ``options`` (or its fields given by name);
    CompareError when they cannot be compared."""
    opt = options_of(options, given)
    alpha = opt.alpha
    base, current = (replace(run, per_query=filled(run.per_query, k)) for run in (base, current))
    tested = [*primary(k), *reported(k)]
    check_table(base.per_query, BASE, k, tested)
    check_table(current.per_query, CURRENT, k, tested)
    out = GateResult(sets=check_sets(base, current, allow_different=allow_different_sets, labels=(BASE, CURRENT)))
    check_values(base.per_query, current.per_query, k, (BASE, CURRENT), tested=tested, undefined_ok=True)
    a, b = (r.per_query.assign(query_id=r.per_query["query_id"].astype(str)).set_index("query_id") for r in (base, current))
    common, _, _ = paired_queries(a, b, opt.max_unpaired, labels=(BASE, CURRENT))
    out.queries = unpaired(base.per_query, current.per_query)
    pa, pb = a.loc[common], b.loc[common]
    mods = sorted(pa["modality"].astype(str).unique())
    groups = [(m, pa[pa["modality"].astype(str) == m], pb[pa["modality"].astype(str) == m]) for m in mods]
    groups.append(("overall", pa, pb))
    out.primary, out.clusters = [m.name for m in primary(k)], opt.clusters
    out.rows, lost = _family(primary(k), groups, base, current, opt)
    out.reported, lost_reported = _family(reported(k), groups, base, current, opt)
    out.family = sum(1 for r in out.rows if r["wins"] + r["losses"])
    if not out.rows and not any(x["base"] is None for x in lost):
        raise CompareError(f"no primary measure ({', '.join(out.primary)}) has a value in BASE on the {len(common)} paired queries: "
                           "nothing to gate")
    out.reasons += [_worse(r, alpha, min_effect) for r in out.rows if r["significant"] and r["worse"] and abs(r["diff"]) > min_effect]
    out.reasons += [_lost(x) for x in lost if x["base"] is None]
    out.notes += [f"gate: not gated: {x['modality']} {x['metric']} has no value in BASE: {x['base']}" for x in lost if x["base"]]
    out.notes += [_worse(r, alpha, None) for r in out.reported if r["significant"] and r["worse"]]
    out.notes += [f"gate: reported, not gated: {_lost(x)[len('gate: '):]}" for x in lost_reported if x["base"] is None]
    for name, q in LATENCY:
        (ta, ca), (tb, cb) = _timed(pa, opt.clusters), _timed(pb, opt.clusters)
        check = latency_check(ta, tb, name=name, q=q, max_ratio=max_latency_ratio, floor_ms=latency_floor_ms,
                              resamples=opt.resamples, seed=opt.seed, clusters=(ca, cb))
        out.latency.append(check)
        if check.failed:
            out.reasons.append(_slower(check, max_latency_ratio, latency_floor_ms))
    return out


def _worse(r: dict[str, Any], alpha: float, min_effect: float | None) -> str:
    lo, hi = r["ci95"]
    head = "gate: " if min_effect is not None else "gate: reported, not gated: "
    beyond = f", beyond --min-effect {min_effect:g}" if min_effect is not None else ""
    return (f"{head}{r['modality']} {r['metric']} is worse: {number(r['a'])} -> {number(r['b'])} ({number(r['diff'], sign=True)}, 95% CI "
            f"[{number(lo, sign=True)}, {number(hi, sign=True)}], n {r['n']} in {r.get('clusters', r['n'])} clusters, {r['wins']} wins / {r['losses']} losses, p_holm {p_value(r['p_holm'])} < {alpha:g}{beyond})")


def _lost(x: dict[str, Any]) -> str:
    return f"gate: {x['modality']} {x['metric']} has no value in the current run (BASE {number(x['base_value'])}, n {x['n']}): {x['current']}"


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g} ms"


def _slower(c: LatencyCheck, ratio: float, floor: float) -> str:
    assert c.base_ci is not None and c.current_ci is not None
    return (f"gate: overall latency {c.name} is slower beyond noise: {_ms(c.base)} -> {_ms(c.current)} (x{c.ratio:.2f}; 95% "
            f"intervals [{_ms(c.base_ci[0])}, {_ms(c.base_ci[1])}] -> [{_ms(c.current_ci[0])}, {_ms(c.current_ci[1])}]), "
            f"beyond both --max-latency-ratio {ratio:g} and --latency-floor-ms {floor:g}")


def _queries(q: dict[str, Any]) -> str:
    def alone(side: str, label: str) -> str:
        by = q[f"only_{side}_by_modality"]
        return f"{q[f'only_{side}']} only in {label}" + (f" ({', '.join(f'{m} {n}' for m, n in by.items())})" if by else "")
    return f"queries: {q['both']} paired, {alone('a', BASE)}, {alone('b', CURRENT)}"


def summary(result: GateResult, base: str, alpha: float, min_effect: float, max_latency_ratio: float,
            latency_floor_ms: float = LATENCY_FLOOR_MS) -> str:
    """The one line of a passed or failed gate: its verdict, what was gated, latency, the
    queries compared with every unpaired count, and the set files."""
    lat = ", ".join(f"{c.name} {_ms(c.base)} -> {_ms(c.current)}" for c in result.latency if c.base is not None and c.current is not None)
    head = ("gate: passed: no primary measure is significantly worse than " if result.passed else
            f"gate: failed: {len(result.reasons)} reason{'s' if len(result.reasons) != 1 else ''} against ")
    return (f"{head}{base} ({', '.join(result.primary)} per modality and overall: {len(result.rows)} rows, Holm over the {result.family} "
            f"where a query differs, alpha {alpha:g}, min effect {min_effect:g}, clusters of entries by {result.clusters}; "
            f"{len(result.reported)} other rows reported, not gated); "
            f"latency {lat or 'not recorded'} (fails only beyond x{max_latency_ratio:g} and +{latency_floor_ms:g} ms); "
            f"{_queries(result.queries)}; {result.sets}")
