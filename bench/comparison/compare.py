"""`bench compare A B`: is run B better than run A, per modality and metric, honestly?

A run is found from its committed per-query table ``reports/per_query/dev.parquet``
(written by the evaluate stage, cache: false, so it is in git with every commit and
every DVC experiment) plus ``reports/metrics/dev.json`` for its description. A and
B may each be

* a folder (a project checkout or a copy of its ``reports/``), or the parquet file;
* a git revision (``HEAD``, ``main~1``, a commit hash) of the project's repository;
* a DVC experiment name (as ``dvc exp show`` lists it; found under ``refs/exps``).

For every (modality, metric) -- and ``overall`` -- the comparison pairs the
queries present in both runs (by query_id) that are in the metric's denominator,
with the same rules as dev.json (a failed query counts 0), and reports

* mean of A, mean of B and the paired difference B - A with its 95% bootstrap
  interval (clusters of entries resampled in pairs: bench.evaluation.stats.clusters;
  ``options.clusters``, by default entries asking the same question);
* a two-sided paired randomization (sign-flip) test p-value, each cluster flipped as
  one, and its Holm-adjusted value across every row compared (all modalities and
  metrics together); how many clusters and entries the row rests on;
* beside them (``beside``), the interval and p-value under the other clustering: by
  source (conversation, document, video, repository) when the default clusters by
  question, by question otherwise;
* win / tie / loss counts over queries (a win is B better than A on that query:
  higher, or lower for false_recall);
* where the difference comes from (``abstention``): the part of B - A from entries
  where one run handed nothing over and the other answered (abstention changed), the
  part from entries both runs answered (with their own mean difference) and from
  entries neither answered -- the three parts sum to the difference;
* "significant" only when the Holm-adjusted p is below alpha; otherwise the text
  says plainly that the difference is not significant.
The number of tied score positions (``tied@k``) of each run is reported as well.
The statistics options are one :class:`~bench.comparison.options.StatsOptions`.

Comparisons that cannot mean anything are refused with one line (`CompareError`):
a malformed per-query table (no rows, a required column missing, a duplicated or
empty query_id, non-boolean flags, non-numeric or infinite metric values), two
runs whose query sets differ by more than `max_unpaired` (a share of all queries
seen; default 1%: the same system over 8 versus 2 data sets differs in every BM25
score because the corpus differs, so its "differences" say nothing about a change),
and zero paired queries in every metric's denominator. Within the tolerance only
the shared queries are compared, and the report's first line says so. Metrics the
tables do not both carry are skipped, so tables with extra columns (for example
`abstention_rate`) or without some metric compare fine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from bench.comparison.options import MAX_UNPAIRED, StatsOptions, options_of
from bench.comparison.runs import CompareError, LoadedRun, set_files
from bench.evaluation.measures import CATALOGUE, measures, ranking_measure
from bench.evaluation.measures.base import Measure, counted, hands_nothing, in_denominator
from bench.evaluation.measures.objective import objective_column
from bench.evaluation.measures.scores import tied_column
from bench.evaluation.stats.clusters import COLUMNS as CLUSTER_COLUMNS
from bench.evaluation.stats.clusters import Clustering, cluster_codes, clusters_of
from bench.evaluation.stats.uncertainty import bootstrap_ci, holm, paired_randomization_test, rng_for

__all__ = ["MAX_UNPAIRED", "REQUIRED", "abstention_split", "check_sets", "check_table", "check_values", "compare", "compared",
           "filled", "nothing_handed", "pair_codes", "paired_queries", "paired_row", "unpaired"]


def compared(k: int) -> list[Measure]:
    """The measures `bench compare` tests: those where higher is better first,
    then those where lower is better (bench.evaluation.measures)."""
    return sorted((m for m in measures(k) if m.compared), key=lambda m: not m.higher_is_better)


REQUIRED = ("query_id", "modality", "unanswerable", "failed")
#: the clustering shown beside each one (``beside``)
BESIDE: dict[str, Clustering] = {"question": "source", "source": "question", "entry": "question"}


def filled(table: pd.DataFrame, k: int) -> pd.DataFrame:
    """`table` with the objective's per-query column computed from its parts (bench.evaluation.measures.objective)
    when a table evaluated before the objective lacks it and holds both parts; else `table` itself."""
    column = ranking_measure(k).column
    if not isinstance(table, pd.DataFrame) or column in table.columns or "unanswerable" not in table.columns:
        return table
    found = objective_column(table, k, CATALOGUE)
    return table if found is None else table.assign(**{column: found})


def check_table(df: Any, label: str, k: int, tested: Sequence[Measure] | None = None) -> None:
    """Refuse a per-query table the comparison cannot read honestly (one line); ``tested``:
    the measures whose columns must hold numbers (default: those bench compare tests)."""
    if not isinstance(df, pd.DataFrame):
        raise CompareError(f"{label}: not a per-query table")
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise CompareError(f"{label}: malformed per-query table: no column {missing[0]!r} (needs {', '.join(REQUIRED)})")
    if len(df) == 0:
        raise CompareError(f"{label}: per-query table has no rows: nothing to compare")
    qid = df["query_id"]
    if qid.isna().any() or (qid.astype(str).str.strip() == "").any():
        raise CompareError(f"{label}: malformed per-query table: an empty query_id (row {int(np.flatnonzero(qid.isna() | (qid.astype(str).str.strip() == ''))[0])})")
    dup = qid.astype(str).duplicated()
    if dup.any():
        raise CompareError(f"{label}: malformed per-query table: query_id {qid.astype(str)[dup].iloc[0]!r} appears more than once")
    for col in ("unanswerable", "failed"):
        values = df[col]
        if values.isna().any() or not values.map(lambda v: isinstance(v, (bool, np.bool_)) or v in (0, 1)).all():
            raise CompareError(f"{label}: malformed per-query table: column {col!r} must hold true/false only")
    first = measures(k)[0].column
    if first not in df.columns:
        raise CompareError(f"{label}: per-query table has no {first} column (k = {k})")
    _check_measure_values(df, label, compared(k) if tested is None else tested)


def _check_measure_values(df: pd.DataFrame, label: str, tested: Sequence[Measure]) -> None:
    """Refuse a tested measure's column holding a non-number or an infinite value."""
    qid = df["query_id"]
    for m in tested:
        col = m.column
        if col not in df.columns:
            continue
        numeric = pd.to_numeric(df[col], errors="coerce")
        bad = numeric.isna() & df[col].notna()
        if bad.any():
            raise CompareError(f"{label}: malformed per-query table: {col} holds a non-number ({df[col][bad].iloc[0]!r}, query {qid[bad].iloc[0]})")
        inf = np.isinf(numeric.to_numpy(dtype=float))
        if inf.any():
            raise CompareError(f"{label}: malformed per-query table: {col} holds an infinite value (query {qid[inf].iloc[0]})")


def check_values(a: pd.DataFrame, b: pd.DataFrame, k: int, labels: tuple[str, str] = ("A", "B"), *,
                 tested: Sequence[Measure] | None = None, undefined_ok: bool = False) -> None:
    """Refuse per-query values the paired tests would read wrongly, naming table, row and column.

    Every measure `bench compare` tests (``tested``: those given instead) is a per-query
    share: its values lie in [0, 1]; NaN (undefined) is allowed only where the query is
    outside the measure's denominator or failed (it then counts the worst case), never
    where the denominator rule would silently read it as 0 (``undefined_ok``: the caller
    leaves such a measure's rows out itself, as ``bench gate`` does, see :func:`undefined`).
    A query in both tables must carry the same modality (the groups are formed from it).
    Rows are numbered from 0, as the parquet file's rows."""
    for label, df in zip(labels, (a, b), strict=True):
        failed = df["failed"].astype(bool).to_numpy()
        for m in compared(k) if tested is None else tested:
            if m.column not in df.columns:
                continue
            values = pd.to_numeric(df[m.column], errors="coerce").to_numpy(dtype=float)
            outside = np.flatnonzero(~np.isnan(values) & ((values < 0) | (values > 1)))
            undefined = np.flatnonzero(np.isnan(values) & in_denominator(m.scope, df["unanswerable"].astype(bool).to_numpy())
                                       & ~failed)
            if outside.size:
                i = int(outside[0])
                raise CompareError(f"{label}: per-query table row {i} (query {df['query_id'].iloc[i]}): column {m.column}: "
                                   f"{float(values[i])} is outside [0, 1]")
            if undefined.size and not undefined_ok:
                i = int(undefined[0])
                raise CompareError(f"{label}: per-query table row {i} (query {df['query_id'].iloc[i]}): column {m.column}: NaN where "
                                   f"the query is in the denominator ({m.scope}, not failed); it would count as 0")
    mod_a = pd.Series(a["modality"].astype(str).to_numpy(), index=a["query_id"].astype(str))
    mod_b = pd.Series(b["modality"].astype(str).to_numpy(), index=b["query_id"].astype(str))
    both = mod_a.index.intersection(mod_b.index)
    differ = np.flatnonzero(mod_a.loc[both].to_numpy() != mod_b.loc[both].to_numpy())
    if differ.size:
        q = str(both[int(differ[0])])
        row = int(np.flatnonzero(mod_b.index == q)[0])
        raise CompareError(f"{labels[1]}: per-query table row {row} (query {q}): column modality: {mod_b[q]!r} where "
                           f"{labels[0]} has {mod_a[q]!r} for the same query: the tables disagree (edited?)")


def check_sets(a: LoadedRun, b: LoadedRun, *, allow_different: bool = False, labels: tuple[str, str] | None = None) -> str:
    """Refuse two runs evaluated over different set files (a file whose sha256 differs, or that
    only one run read) with one line naming each, unless ``allow_different``; what the
    comparison's one line says of the set files otherwise. Runs whose dev.json records no
    digests cannot be checked: the text says so."""
    la, lb = labels or (a.label, b.label)
    sa, sb = set_files(a), set_files(b)
    if sa is None or sb is None:
        lost = " and ".join(label for label, s in ((la, sa), (lb, sb)) if s is None)
        return f"set files not checked (no sha256 of them in the dev.json of {lost})"
    paths = sorted(set(sa) | set(sb))
    differ = [p for p in paths if sa.get(p) != sb.get(p)]
    if not differ:
        return f"the same {len(paths)} set files (sha256)" if len(paths) > 1 else f"the same set file {paths[0]} (sha256)"
    what = "; ".join(_set_change(p, sa.get(p), sb.get(p), la, lb) for p in differ)
    if not allow_different:
        raise CompareError(f"{la} and {lb} were evaluated over different set files ({len(differ)} of {len(paths)}: {what}): "
                           "their queries differ by more than a change of system; pass --allow-different-sets to compare the "
                           "queries both hold")
    return f"different set files, allowed ({what})"


def _set_change(path: str, x: str | None, y: str | None, la: str, lb: str) -> str:
    if x is None:
        return f"{path} only in {lb}"
    if y is None:
        return f"{path} only in {la}"
    return f"{path} sha256 {x[:12]}… in {la}, {y[:12]}… in {lb}"


def unpaired(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, Any]:
    """How many queries of each table the other lacks, in all and per modality (modalities
    with none left out): ``both``, ``only_a``, ``only_b``, ``only_a_by_modality``, ``only_b_by_modality``."""
    ia, ib = pd.Index(a["query_id"].astype(str)), pd.Index(b["query_id"].astype(str))
    out: dict[str, Any] = {"both": int(len(ia.intersection(ib)))}
    for name, frame, own, other in (("a", a, ia, ib), ("b", b, ib, ia)):
        alone = ~own.isin(other)
        out[f"only_{name}"] = int(alone.sum())
        counts = frame.loc[alone, "modality"].astype(str).value_counts()
        out[f"only_{name}_by_modality"] = {str(m): int(n) for m, n in sorted(counts.items())}
    return out


def compare(
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    k: int = 10,
    options: StatsOptions | None = None,
    tested: list[Measure] | None = None,
    **given: Any,
) -> dict[str, Any]:
    """Paired comparison of two per-query tables evaluated at cut-off `k` (see the module docstring);
    ``options`` (or its fields given by name); ``tested``: the mean measures compared (default:
    those the catalogue marks ``compared``)."""
    opt = options_of(options, given)
    a, b = filled(a, k), filled(b, k)
    check_table(a, "A", k)
    check_table(b, "B", k)
    check_values(a, b, k)
    a = a.assign(query_id=a["query_id"].astype(str)).set_index("query_id")
    b = b.assign(query_id=b["query_id"].astype(str)).set_index("query_id")
    common, only_a, only_b = paired_queries(a, b, opt.max_unpaired)
    paired_a, paired_b = a.loc[common], b.loc[common]
    groups = [(str(m), paired_a.index[paired_a["modality"] == m]) for m in sorted(paired_a["modality"].astype(str).unique())]
    groups.append(("overall", paired_a.index))
    rows = [row for group, idx in groups for m in (compared(k) if tested is None else tested)
            if (row := paired_row(group, m, paired_a.loc[idx], paired_b.loc[idx], opt, beside=BESIDE[opt.clusters])) is not None]
    if not rows:
        raise CompareError(f"no metric has a paired query in its denominator ({len(common)} paired queries): nothing to compare")
    adjusted = holm([r["p"] for r in rows])
    for r, p_holm in zip(rows, adjusted, strict=True):
        r["p_holm"] = None if np.isnan(p_holm) else float(p_holm)
        r["significant"] = bool(r["p_holm"] is not None and r["p_holm"] < opt.alpha)
        r["verdict"] = _verdict(r)
    return {
        "k": k,
        "alpha": opt.alpha,
        "resamples": opt.resamples,
        "permutations": opt.permutations,
        "seed": opt.seed,
        "max_unpaired": opt.max_unpaired,
        "clusters": {"clustering": opt.clusters, "over": clusters_of(paired_a, opt.clusters), "beside": BESIDE[opt.clusters],
                     "beside_over": clusters_of(paired_a, BESIDE[opt.clusters])},
        "queries": {"both": int(len(common)), "only_a": only_a, "only_b": only_b},
        "ties": _ties(a, b, k),
        "rows": rows,
    }


def paired_queries(a: pd.DataFrame, b: pd.DataFrame, max_unpaired: float,
                    labels: tuple[str, str] = ("A", "B")) -> tuple[pd.Index, int, int]:
    """The query ids of both runs (sorted) and the counts only in A and only in B; refuses
    runs over different query sets or different unanswerable flags."""
    la, lb = labels
    common = a.index.intersection(b.index).sort_values()
    only_a, only_b = len(a.index.difference(b.index)), len(b.index.difference(a.index))
    union = len(common) + only_a + only_b
    if len(common) == 0:
        raise CompareError(f"{la} and {lb} share no query_id ({len(a)} and {len(b)} queries): zero paired queries, nothing to compare")
    if (only_a + only_b) / union > max_unpaired:
        raise CompareError(
            f"{la} and {lb} were evaluated on different query sets: {only_a} of {la}'s {len(a)} queries are not in {lb} and "
            f"{only_b} of {lb}'s {len(b)} are not in {la} ({(only_a + only_b) / union:.1%} of {union} unpaired, tolerance "
            f"{max_unpaired:.1%}); compare runs over the same data sets and sets (or raise --max-unpaired)")
    if (a.loc[common, "unanswerable"].astype(bool) != b.loc[common, "unanswerable"].astype(bool)).any():
        raise CompareError("the two runs disagree on which queries are unanswerable: different sets")
    return common, only_a, only_b


def pair_codes(ga: pd.DataFrame, gb: pd.DataFrame, clustering: Clustering) -> np.ndarray:
    """The cluster code of each paired row (A's labels; B's when A's table has none; every row its own without either)."""
    column = CLUSTER_COLUMNS.get(clustering)
    return cluster_codes(gb if column is not None and column not in ga.columns else ga, clustering)


def nothing_handed(frame: pd.DataFrame) -> np.ndarray | None:
    """Per row, whether the run handed nothing over (abstained or returned no hit): the table's
    ``handed_nothing``, else what older tables hold of it (``abstained`` where defined, ``n_returned``
    0); None when the table says neither."""
    failed = frame["failed"].astype(bool).to_numpy() if "failed" in frame.columns else np.zeros(len(frame), dtype=bool)
    if "handed_nothing" in frame.columns:  # a failed query handed nothing over (its value is undefined: NaN)
        return (frame["handed_nothing"].to_numpy(dtype=float) == 1) | failed
    if "abstained" not in frame.columns and "n_returned" not in frame.columns:
        return None
    said = frame["abstained"].to_numpy(dtype=float) == 1 if "abstained" in frame.columns else np.zeros(len(frame), dtype=bool)
    returned = frame["n_returned"].to_numpy(dtype=float) if "n_returned" in frame.columns else np.ones(len(frame))
    return hands_nothing(said, np.nan_to_num(returned, nan=1.0)) | failed


def abstention_split(d: np.ndarray, nothing_a: np.ndarray, nothing_b: np.ndarray) -> dict[str, Any]:
    """B - A (the mean of `d` over its n entries) as the sum of three parts, each sum(d over the part) / n:
    entries where abstention changed (one run handed nothing over, the other answered: ``a_only``
    A handed nothing, ``b_only`` B did), entries both runs answered (with their own mean
    difference) and entries neither answered."""
    n = len(d)
    changed, both = nothing_a != nothing_b, ~nothing_a & ~nothing_b

    def part(rows: np.ndarray) -> dict[str, Any]:
        return {"entries": int(rows.sum()), "part": float(d[rows].sum() / n) if n else 0.0}

    return {"changed": {**part(changed), "a_only": int((changed & nothing_a).sum()), "b_only": int((changed & nothing_b).sum())},
            "answered": {**part(both), "mean": float(d[both].mean()) if both.any() else None},
            "neither": part(nothing_a & nothing_b)}


def paired_row(group: str, m: Measure, ga: pd.DataFrame, gb: pd.DataFrame, options: StatsOptions,
               beside: Clustering | None = None) -> dict[str, Any] | None:
    """One (group, measure) row of the comparison; None when a table lacks the measure or its
    denominator is empty. Intervals and p-values over ``options.clusters`` (and, given `beside`,
    under that clustering too)."""
    metric, col, higher = m.name, m.column, m.higher_is_better
    if col not in ga.columns or col not in gb.columns:
        return None
    unans = ga["unanswerable"].astype(bool).to_numpy()
    # the same denominator rule as dev.json: a failed query counts its worst case
    xa = counted(m, ga[col].to_numpy(dtype=float), unans, ga["failed"].astype(bool).to_numpy())[0]
    xb = counted(m, gb[col].to_numpy(dtype=float), unans, gb["failed"].astype(bool).to_numpy())[0]
    n = len(xa)
    if n == 0:
        return None
    keep = in_denominator(m.scope, unans)
    d = xb - xa
    better = d > 0 if higher else d < 0
    worse = d < 0 if higher else d > 0

    def tested(clustering: Clustering, *labels: str) -> tuple[int, list[float | None], float]:
        codes = pair_codes(ga, gb, clustering)[keep]
        ci = bootstrap_ci(d, resamples=options.resamples, rng=rng_for(options.seed, "compare", group, metric, *labels), clusters=codes)
        p = paired_randomization_test(d, resamples=options.permutations, rng=rng_for(options.seed, "perm", group, metric, *labels),
                                      clusters=codes)
        return int(len(np.unique(codes))), [ci[0], ci[1]] if ci else [None, None], p

    clusters, ci95, p = tested(options.clusters)
    row = {
        "modality": group, "metric": metric, "n": n, "clusters": clusters, "higher_is_better": higher,
        "a": float(xa.mean()), "b": float(xb.mean()), "diff": float(d.mean()),
        "ci95": ci95, "p": p, "wins": int(better.sum()), "ties": int((d == 0).sum()), "losses": int(worse.sum()),
    }
    if beside is not None:
        other, ci_other, p_other = tested(beside, beside)
        row["beside"] = {"clustering": beside, "clusters": other, "ci95": ci_other, "p": p_other}
    na, nb = nothing_handed(ga), nothing_handed(gb)
    if na is not None and nb is not None:
        row["abstention"] = abstention_split(d, na[keep], nb[keep])
    return row


def _ties(a: pd.DataFrame, b: pd.DataFrame, k: int) -> dict[str, dict[str, int]]:
    """Tied score positions in the top k of each run that records them."""
    ties = {}
    column = tied_column(k)
    for name, frame in (("a", a), ("b", b)):
        if column in frame.columns:
            t = frame[column].fillna(0).astype(int)
            ties[name] = {"tied_positions": int(t.sum()), "queries_with_ties": int((t > 0).sum()), "queries": int(len(t))}
    return ties


def _verdict(r: dict[str, Any]) -> str:
    if not r["significant"]:
        return "not significant"
    good = (r["diff"] > 0) == r["higher_is_better"]
    return "B better" if good else "B worse"
