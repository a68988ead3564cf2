"""`bench leaderboard RUN [RUN ...]`: one table that decides a sweep.

The runs (folders, git revisions, DVC experiments: bench.comparison.compare.load_run) are
read from their committed per-query tables and compared with one baseline on the
queries every run shares, per modality and overall:

* each run's changed params (its params.yaml against the baseline's, ``executor`` left
  out: where work runs never changes a result) and its values: the objective and its two
  parts beside it (recall@budget on answerable entries, false recall on unanswerable ones),
  recall@k, MRR, nDCG@k, abstention rate (the mean
  measures, by the denominator rule of dev.json), latency p50 (its timed queries) and
  cartridge@k (the median extent of the top k over the answered answerable entries of a
  modality, in its unit; no pooled value overall);
* against the baseline, for every other run and mean measure: the paired difference
  with its bootstrap interval and the randomization p-value, exactly as ``bench compare
  BASELINE RUN`` computes them, then Holm-corrected across all runs x measures of the
  group (each modality's table, and overall, is one family); ``smallest_p_holm`` says
  how small a Holm-corrected p the sign flips can give at all (raise the permutations
  when it is not below alpha);
* a rank per run by ``rank_by`` (by default the one declared objective, ``ranks`` in
  bench.evaluation.measures: answering and abstaining judged together over all entries,
  so a run that abstains less rises only when its gain on answerable entries outweighs the
  false recalls it adds) with a 95% rank interval: the clusters of entries are resampled
  (bench.evaluation.stats.clusters; the same draw for every run) and each run's rank in
  each resample is recorded (rank 1 is the best; equal means share the better rank), the
  interval being the 2.5th and 97.5th percentiles of its ranks; runs whose intervals
  overlap are statistically tied;
* the Pareto frontier on quality against cost, differences within noise being ties: a
  run is dominated when another is no worse beyond noise on the objective (higher), its
  cost (lower) and latency p50 (lower) and better beyond noise on one. Quality: better
  beyond noise when the 95% paired bootstrap interval of the two runs' difference in
  the objective (clusters resampled, the same draw for every pair) lies above 0 and at
  least as many clusters differ as the sign-flip test needs, else
  tied. Latency: differences of at most ``latency_floor_ms`` (the gate's floor, 5 ms)
  are ties. Cost: what the budget measures pack, the mean per query of the per-query
  column :data:`PACKED` over the answered answerable entries of a modality, in its unit
  (the mean, not the median: an abstaining answer packs nothing, and a system that abstains
  on most entries would otherwise cost 0)
  (a mean over queries, so tied within noise as the quality is: every answer packs the whole
  budget, the cost moves only with the abstention rate, and compared exactly the run that
  abstains most was always on the frontier); a table without that column falls back to
  cartridge@k (the top k's extent, compared exactly) and the board says so. Overall, every modality's cost
  is an axis of its own. Each row lists the runs it is tied with on every axis and the
  runs that dominate it;
* the minimum detectable effect per modality of the objective, recall@k and recall@budget
  (bench.evaluation.stats.power: ``fewest`` and ``independent`` from the baseline's per-query
  values, ``typical`` from the median standard error of the runs' mean differences from
  the baseline; all over clusters, with how many clusters and entries they rest on).

Refusals are bench compare's (:class:`~bench.comparison.compare.CompareError`, one line):
a malformed table, values the paired tests would misread, query sets that differ beyond
the tolerance, different cut-offs k, and, as for k, different budgets; and runs evaluated
over different set files (their sha256 in dev.json: bench.comparison.compare.check_sets)
unless ``allow_different_sets``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.comparison.compare import check_sets, check_table, check_values, filled, paired_queries, paired_row
from bench.comparison.gate import LATENCY_FLOOR_MS
from bench.comparison.options import StatsOptions, options_of
from bench.comparison.resampling import paired_ties, rank_interval
from bench.comparison.runs import CompareError, LoadedRun, git
from bench.evaluation.measures import measures, ranking_measure
from bench.evaluation.measures.base import Measure, counted, in_denominator
from bench.evaluation.measures.budget import PACKED_COLUMN
from bench.evaluation.stats.clusters import cluster_codes, clusters_of
from bench.evaluation.stats.power import mde_measures, mde_of, standard_error
from bench.evaluation.stats.uncertainty import bootstrap_ci, holm, rng_for

__all__ = ["PACKED", "board_measures", "changed_params", "experiment_names", "flatten", "leaderboard", "pareto"]

#: params blocks that never change a result (left out of "changed params")
QUIET = ("executor",)
#: the per-query column of what the budget measures pack for an entry (the cartridge's extent,
#: in the entry's unit; NaN where nothing is packed for it): the frontier's cost when every
#: run's table has it, else cartridge@k
PACKED = PACKED_COLUMN  # what the budget measures pack per query (bench.evaluation.measures.budget)


def experiment_names(root: Path) -> list[str]:
    """The DVC experiments of HEAD (what `dvc exp show` lists): refs/exps/<baseline[:2]>/<baseline[2:]>/<name>."""
    head = git(root, "rev-parse", "HEAD")
    refs = git(root, "for-each-ref", "--format=%(refname)", "refs/exps")
    if not head or not refs:
        return []
    sha = head.decode().strip()
    prefix = f"refs/exps/{sha[:2]}/{sha[2:]}/"
    return sorted(line[len(prefix):] for line in refs.decode().splitlines() if line.startswith(prefix))


def board_measures(k: int) -> list[Measure]:
    """The leaderboard's mean measures: those with a verdict column that `bench compare` tests,
    the objective first and its parts (``in_objective``) beside it."""
    found = [m for m in measures(k) if m.compared and m.heading is not None]
    return sorted(found, key=lambda m: (not m.ranks, not m.in_objective))


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as dotted keys (lists kept as values)."""
    if not isinstance(node, Mapping):
        return {prefix.rstrip("."): node} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flatten(value, f"{prefix}{key}."))
    return out


def changed_params(params: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted params keys whose value differs from the baseline's (None: not set in this run)."""
    a, b = flatten(params), flatten(base)
    keys = sorted(k for k in set(a) | set(b) if not k.startswith(QUIET) and a.get(k) != b.get(k))
    return {k: a.get(k) for k in keys}


def _budget(run: LoadedRun) -> dict[str, Any] | None:
    block = run.metrics.get("run", {}) if isinstance(run.metrics.get("run"), dict) else {}
    budget = block.get("budget")
    return {m: (c or {}).get("amount") for m, c in budget.items()} if isinstance(budget, dict) else None


def _check_runs(runs: Sequence[LoadedRun], base: int, k: int, max_unpaired: float, allow_different_sets: bool = False) -> pd.Index:
    """Refuse what bench compare refuses, and runs over different set files (unless allowed);
    the query ids every run holds (sorted)."""
    for i, run in enumerate(runs):
        if i != base:
            check_sets(runs[base], run, allow_different=allow_different_sets)
    for run in runs:
        check_table(run.per_query, run.label, k)
        if run.k is not None and run.k != k:
            raise CompareError(f"the runs use different k ({runs[base].label}: {k}, {run.label}: {run.k}): compare runs with the same metrics.k")
    budgets = {run.label: b for run in runs if (b := _budget(run)) is not None}
    if len({tuple(sorted(b.items())) for b in budgets.values()}) > 1:
        first = next(iter(budgets))
        other = next(label for label, b in budgets.items() if b != budgets[first])
        raise CompareError(f"the runs use different budgets ({first}: {budgets[first]}, {other}: {budgets[other]}): "
                           "compare runs with the same metrics.budget")
    indexed = [r.per_query.assign(query_id=r.per_query["query_id"].astype(str)).set_index("query_id") for r in runs]
    common = indexed[base].index
    for i, run in enumerate(runs):
        if i != base:
            check_values(runs[base].per_query, run.per_query, k, labels=(runs[base].label, run.label))
            try:
                paired_queries(indexed[base], indexed[i], max_unpaired)
            except CompareError as exc:
                raise CompareError(f"{runs[base].label} and {run.label}: {exc}") from None
            common = common.intersection(indexed[i].index)
    union = indexed[base].index
    for frame in indexed:
        union = union.union(frame.index)
    if len(common) == 0 or (len(union) - len(common)) / len(union) > max_unpaired:
        raise CompareError(f"the runs share {len(common)} of {len(union)} queries ({(len(union) - len(common)) / len(union):.1%} "
                           f"unpaired, tolerance {max_unpaired:.1%}): compare runs over the same data sets and sets (or raise --max-unpaired)")
    return common.sort_values()


def _percentile(values: np.ndarray, q: float) -> float | None:
    v = values[~np.isnan(values)]
    return float(np.percentile(v, q)) if len(v) else None


def _costs(frame: pd.DataFrame, k: int, pooled: bool, cost: str) -> dict[str, float | None]:
    """latency p50 of the timed queries and (per modality) the p50 of cartridge@k and the
    frontier's cost -- the mean of :data:`PACKED`, or the p50 of cartridge@k it falls back to --
    over the answered answerable entries."""
    ok = ~frame["failed"].astype(bool).to_numpy()
    lat = frame["latency_ms"].to_numpy(float) if "latency_ms" in frame.columns else np.full(len(frame), np.nan)
    answered = ok & ~frame["unanswerable"].astype(bool).to_numpy()

    def p50(column: str) -> float | None:
        return None if pooled or column not in frame.columns else _percentile(frame[column].to_numpy(float)[answered], 50)

    def mean(column: str) -> float | None:  # what the budget packs per entry: an abstaining answer packs nothing, and counts
        if pooled or column not in frame.columns:
            return None
        v = frame[column].to_numpy(float)[answered]
        v = v[~np.isnan(v)]
        return float(v.mean()) if len(v) else None

    return {"latency_p50_ms": _percentile(lat[ok], 50), f"cartridge_p50@{k}": p50(f"retrieved_extent@{k}"),
            "cost": mean(cost) if cost == PACKED else p50(cost)}


def cost_of(runs: Sequence[LoadedRun], k: int) -> dict[str, Any]:
    """The frontier's cost: :data:`PACKED` when every run's table has it, else cartridge@k with a note."""
    if all(PACKED in r.per_query.columns for r in runs):
        return {"column": PACKED, "name": f"{PACKED} mean", "packed": True, "note": None}
    lacking = [r.label for r in runs if PACKED not in r.per_query.columns]
    return {"column": f"retrieved_extent@{k}", "name": f"cartridge_p50@{k}", "packed": False,
            "note": f"the per-query table of {', '.join(lacking)} has no {PACKED} column (what the budget measures pack): "
                    f"the frontier's cost is cartridge@{k}, the top {k}'s extent, which smaller atoms make cheaper whatever "
                    "the budget holds"}


def _contributions(frame: pd.DataFrame, m: Measure) -> np.ndarray | None:
    if m.column not in frame.columns:
        return None
    return counted(m, frame[m.column].to_numpy(float), frame["unanswerable"].to_numpy(bool), frame["failed"].to_numpy(bool))[0]


Tie = float | np.ndarray | None


def _axes(points: Sequence[Sequence[float | None]], better: Sequence[bool],
          ties: Sequence[Tie] | None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per axis (gain, tied): ``gain[j, i]`` how much point j is better than point i (a missing
    value the worst, two missing equal), ``tied[j, i]`` whether the axis calls them tied."""
    n, axes = len(points), len(better)
    arr = np.array([[(-np.inf if hb else np.inf) if v is None else float(v) for v, hb in zip(p, better, strict=True)]
                    for p in points], dtype=float).reshape(n, axes)
    signed = np.where(np.array(better, dtype=bool), arr, -arr)
    out = []
    for a in range(axes):
        with np.errstate(invalid="ignore"):
            gain = signed[:, a][:, None] - signed[:, a][None, :]
        gain = np.where(np.isnan(gain), 0.0, gain)
        tie = (ties or [None] * axes)[a]
        if tie is None:
            tied = gain == 0
        elif isinstance(tie, np.ndarray):
            tied = tie.astype(bool) | (gain == 0)
        else:
            tied = np.abs(gain) <= float(tie)
        out.append((gain, tied))
    return out


def dominance(points: Sequence[Sequence[float | None]], better: Sequence[bool], ties: Sequence[Tie] | None = None) -> np.ndarray:
    """``out[j, i]``: point j dominates point i, i.e. is at least as good on every axis and
    better on one, where a difference the axis calls a tie counts as equal. `better[a]`:
    higher is better on axis a; `ties[a]`: None (only equal values tie), a number (values
    at most that far apart tie) or a boolean points x points matrix (which pairs tie). A
    missing value counts as the worst (two missing values are equal)."""
    n = len(points)
    no_worse, better_on = np.ones((n, n), dtype=bool), np.zeros((n, n), dtype=bool)
    for gain, tied in _axes(points, better, ties):
        no_worse &= (gain > 0) | tied
        better_on |= (gain > 0) & ~tied
    out = no_worse & better_on
    np.fill_diagonal(out, False)
    return out


def tied_everywhere(points: Sequence[Sequence[float | None]], better: Sequence[bool], ties: Sequence[Tie] | None = None) -> np.ndarray:
    """``out[j, i]``: points j and i are tied on every axis (:func:`dominance`'s ties)."""
    n = len(points)
    out = np.ones((n, n), dtype=bool)
    for _, tied in _axes(points, better, ties):
        out &= tied
    return out


def pareto(points: Sequence[Sequence[float | None]], better: Sequence[bool], ties: Sequence[Tie] | None = None) -> list[bool]:
    """Which points no other point dominates (:func:`dominance`)."""
    return [not bool(col.any()) for col in dominance(points, better, ties).T]


def leaderboard(
    runs: Sequence[LoadedRun],
    *,
    base: int = 0,
    params: Sequence[Mapping[str, Any]] | None = None,
    k: int = 10,
    rank_by: str | None = None,
    latency_floor_ms: float = LATENCY_FLOOR_MS,
    allow_different_sets: bool = False,
    options: StatsOptions | None = None,
    **given: Any,
) -> dict[str, Any]:
    """The leaderboard of `runs` against ``runs[base]`` (module docstring); ``params``: each
    run's params.yaml (for its changed params); ``rank_by``: default the declared objective;
    ``options`` (or its fields given by name)."""
    opt = options_of(options, given)
    common = _check_runs(runs, base, k, opt.max_unpaired, allow_different_sets)
    cost = cost_of(runs, k)
    tables = [filled(r.per_query, k).assign(query_id=r.per_query["query_id"].astype(str)).set_index("query_id").loc[common] for r in runs]
    known = {m.name: m for m in board_measures(k)}
    quality = ranking_measure(k).name
    rank_by = rank_by or quality
    if rank_by not in known:
        raise CompareError(f"--rank-by {rank_by}: not a leaderboard measure ({', '.join(known)})")
    labels = [r.label for r in runs]
    modalities = sorted(tables[base]["modality"].astype(str).unique())
    groups: list[dict[str, Any]] = []
    for group in [*modalities, "overall"]:
        idx = tables[base].index if group == "overall" else tables[base].index[tables[base]["modality"].astype(str) == group]
        frames = [t.loc[idx] for t in tables]
        groups.append(_group(group, frames, runs, base, k, known, (rank_by, quality), opt, cost["column"]))
    for g in groups:  # one family per group's table: its runs x metrics
        for d, p in zip(g["diffs"], holm([d["p"] for d in g["diffs"]]), strict=True):
            d["p_holm"] = None if np.isnan(p) else float(p)
            d["significant"] = bool(d["p_holm"] is not None and d["p_holm"] < opt.alpha)
        # the smallest p a Monte Carlo sign-flip test can give, Holm-scaled over the family
        g["smallest_p_holm"] = min(1.0, len(g["diffs"]) * 2 / (opt.permutations + 1)) if g["diffs"] else None
    _frontiers(groups, [r.label for r in runs], latency_floor_ms, quality)
    given_params = list(params) if params is not None else [{} for _ in runs]
    return {
        "k": k, "baseline": labels[base], "alpha": opt.alpha, "resamples": opt.resamples, "permutations": opt.permutations,
        "seed": opt.seed, "max_unpaired": opt.max_unpaired, "rank_by": rank_by, "quality": quality, "frontier_quality": quality,
        "parts": [m.name for m in known.values() if m.in_objective],
        "clusters": {"clustering": opt.clusters, "over": clusters_of(tables[base], opt.clusters)},
        "budget": runs[base].metrics.get("run", {}).get("budget"), "cost": cost, "latency_floor_ms": latency_floor_ms,
        "sets": {r.label: check_sets(runs[base], r, allow_different=True, labels=("the baseline", "the run"))
                 for i, r in enumerate(runs) if i != base},
        "queries": {"common": int(len(common)), "left_out": {r.label: int(len(r.per_query) - len(common)) for r in runs}},
        "runs": [{"label": r.label, "describe": r.describe(), "changed": changed_params(given_params[i], given_params[base]) if i != base else {}}
                 for i, r in enumerate(runs)],
        "groups": groups,
        "mde": {g["group"]: g.pop("mde") for g in groups},
    }


def _group(group: str, frames: list[pd.DataFrame], runs: Sequence[LoadedRun], base: int, k: int, known: dict[str, Measure],
           ranked_by: tuple[str, str], opt: StatsOptions, cost: str) -> dict[str, Any]:
    """One group's rows (values, costs, rank interval), its differences from the baseline, which
    runs tie within noise on the frontier's quality (the objective) and its MDE; ``ranked_by``:
    (the rank's measure, the frontier's quality measure)."""
    rank_by, quality = ranked_by
    rules = [(r.metrics.get("run", {}).get("false_recall_rule") or {}).get(group, {}).get("rule") for r in runs]
    contributions = [{name: _contributions(f, m) for name, m in known.items()} for f in frames]
    codes = cluster_codes(frames[base], opt.clusters)
    unans = frames[base]["unanswerable"].to_numpy(bool)
    rows = []
    for i, (run, f) in enumerate(zip(runs, frames, strict=True)):
        values = {name: (None if c is None or not len(c) else float(c.mean())) for name, c in contributions[i].items()}
        rows.append({"run": run.label, "values": values, "false_recall_rule": rules[i], **_costs(f, k, group == "overall", cost)})
    ranked = [c for row in contributions if (c := row[rank_by]) is not None and len(c)]
    if len(ranked) == len(contributions):
        point, interval = rank_interval(np.stack(ranked, axis=1), known[rank_by].higher_is_better, opt.resamples,
                                         rng_for(opt.seed, "rank", group, rank_by), _scoped(codes, known[rank_by], unans))
        for row, p, (lo, hi) in zip(rows, point, interval, strict=True):
            row["rank"], row["rank_ci95"] = int(p), [int(lo), int(hi)]
        ranked_codes = _scoped(codes, known[rank_by], unans)
        for row, c in zip(rows, ranked, strict=True):  # the ranked measure's own 95% interval (the board's first table)
            ci = bootstrap_ci(c, resamples=opt.resamples, rng=rng_for(opt.seed, "primary", group, rank_by, row["run"]), clusters=ranked_codes)
            row["primary"] = {"name": rank_by, "value": float(c.mean()), "ci95": [ci[0], ci[1]] if ci else [None, None]}
    on = [c for row in contributions if (c := row.get(quality)) is not None and len(c)]
    ties = (paired_ties(np.stack(on, axis=1), opt.resamples, rng_for(opt.seed, "frontier", group, quality), opt.alpha,
                         _scoped(codes, known[quality], unans)) if len(on) == len(contributions) else None)
    diffs = []
    for i, run in enumerate(runs):
        if i == base:
            continue
        for m in known.values():
            d = paired_row(group, m, frames[base], frames[i], opt)
            if d is not None:
                diffs.append({"run": run.label, **d})
    base_lat = rows[base]["latency_p50_ms"]
    for row in rows:
        lat = row["latency_p50_ms"]
        row["latency_ratio"] = None if lat is None or not base_lat else lat / base_lat
    return {"group": group, "rows": rows, "diffs": diffs, "mde": _mde(contributions, base, k, codes, unans), "quality_ties": ties,
            "cost_ties": _cost_ties(frames, cost, group, opt, codes)}


def _cost_ties(frames: list[pd.DataFrame], cost: str, group: str, opt: StatsOptions, codes: np.ndarray) -> np.ndarray | None:
    """Which runs' frontier costs are tied within noise (bench.comparison.resampling.paired_ties)
    when the cost is the mean of :data:`PACKED`: a mean over the group's queries, so a sample
    estimate like the quality (an answer that abstains packs nothing: the cost moves with the
    abstention rate). Paired over the answerable entries every run answered, their clusters
    resampled; None (exact comparison) for the cartridge@k fallback, a median, and overall (its
    costs are the modalities')."""
    if group == "overall" or cost != PACKED or not all(PACKED in f.columns for f in frames):
        return None
    matrix = np.stack([f[PACKED].to_numpy(float) for f in frames], axis=1)
    keep = ~np.isnan(matrix).any(axis=1)
    if not keep.any():
        return None
    return paired_ties(matrix[keep], opt.resamples, rng_for(opt.seed, "frontier", group, PACKED), opt.alpha, codes[keep])


def _scoped(codes: np.ndarray, m: Measure, unanswerable: np.ndarray) -> np.ndarray:
    """The cluster codes of the entries in `m`'s denominator (the rows of its contributions)."""
    return codes[in_denominator(m.scope, unanswerable)]


def _mde(contributions: list[dict[str, np.ndarray | None]], base: int, k: int, codes: np.ndarray,
         unanswerable: np.ndarray) -> dict[str, Any]:
    """MDE of the objective, recall@k and recall@budget over clusters: from the baseline's
    contributions, and the typical pair's (the median standard error of the other runs' mean
    differences from the baseline)."""
    out = {}
    for m in mde_measures(k):
        own = contributions[base].get(m.name)
        if own is None or len(own) < 2:
            continue
        at = _scoped(codes, m, unanswerable)
        ses = [se for i, row in enumerate(contributions)
               if i != base and (c := row.get(m.name)) is not None and (se := standard_error(c - own, at) or 0.0) > 0]
        out[m.name] = mde_of(own, typical_se=float(np.median(ses)) if ses else None, clusters=at)
    return out


def _frontiers(groups: list[dict[str, Any]], labels: list[str], latency_floor_ms: float, quality: str) -> None:
    """Mark each row on the Pareto frontier of its group (`quality`, the objective, up; the frontier's cost
    and latency p50 down; overall: every modality's cost as an axis of its own), differences
    within noise being ties (module docstring); each row lists the runs it ties with on every
    axis (``tied_with``) and those that dominate it (``dominated_by``)."""
    per_modality = [g for g in groups if g["group"] != "overall"]
    cost_ties = {g["group"]: g.pop("cost_ties", None) for g in groups}  # a modality's cost: an axis of its own overall too
    for g in groups:
        if g["group"] == "overall":
            points = [[row["values"].get(quality), row["latency_p50_ms"], *(m["rows"][i]["cost"] for m in per_modality)]
                      for i, row in enumerate(g["rows"])]
            costs: list[Tie] = [cost_ties[m["group"]] for m in per_modality]
        else:
            points = [[row["values"].get(quality), row["latency_p50_ms"], row["cost"]] for row in g["rows"]]
            costs = [cost_ties[g["group"]]]
        better = [True] + [False] * (len(points[0]) - 1)
        ties: list[Tie] = [g.pop("quality_ties"), latency_floor_ms, *costs]
        dom = dominance(points, better, ties)
        same = tied_everywhere(points, better, ties)
        for i, row in enumerate(g["rows"]):
            row["frontier"] = not bool(dom[:, i].any())
            row["dominated_by"] = [labels[j] for j in np.flatnonzero(dom[:, i])]
            row["tied_with"] = [labels[j] for j in np.flatnonzero(same[:, i]) if j != i]
