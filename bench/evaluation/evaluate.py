"""One evaluation of a split's ranked results, for the dev stage (stages/evaluate.py) and
the acceptance stage (stages/accept.py) alike.

:func:`evaluate_run` takes what a run produced (the system's rankings, responses and
failures, the resolved gold and regions, the served atoms) and returns the metrics
document (dev.json / test.json: every measure's cell with n, denominator and ci95, the
run block, atom statistics, ties) and the per-query frames behind it. Atoms are integer
codes throughout (bench.ingest.atom_codes) and query ids stay as the stages write
them; nothing here turns a code back into an atom id. It reads nothing and writes
nothing: the stages read their inputs and write the results with bench.io's atomic helpers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bench.evaluation.blocks import BlockSource, query_positions
from bench.evaluation.cells import metric_cells
from bench.evaluation.document import metrics_document
from bench.evaluation.measures import families, measures
from bench.evaluation.measures.base import BlockRows, Columns, RunRecord, run_family
from bench.evaluation.measures.budget import PACKED_COLUMN, budgets
from bench.evaluation.measures.extent import MemoryExtents, amount_columns, atom_extents, atom_statistics
from bench.evaluation.measures.false_recall import false_recall_rules
from bench.evaluation.measures.scores import tied_column
from bench.evaluation.memory_report import MemoryInputs, memory_block
from bench.evaluation.per_query import finish_per_query, query_block
from bench.evaluation.reused import ModalityAtoms, reuse_block
from bench.evaluation.stats.clusters import COLUMNS as CLUSTER_COLUMNS
from bench.evaluation.stats.clusters import entry_clusters
from bench.evaluation.stats.power import mde_block
from bench.evaluation.stats.uncertainty import add_intervals
from bench.ingest.atom_codes import ATOM_CODE
from bench.memo import Memo
from bench.modalities import modalities

if TYPE_CHECKING:
    from bench.params import MetricsParams

__all__ = ["EvalInputs", "EvalOptions", "EvalResult", "RunDescription", "curve_hits", "entries_frame", "evaluate_block", "evaluate_run",
           "failure_summary", "no_failures", "per_query_table"]

#: the atom columns the per-query table reads (who holds an atom and when it was observed)
PER_QUERY_ATOM_COLUMNS = ["holder", "observed_at"]
#: per-query columns kept in the committed table besides the measures' (small: a few bytes per query and column)
TABLE_COLUMNS = ["query_id", "modality", "unanswerable", "failed", "n_regions", "n_returned", "first_hit_rank", *CLUSTER_COLUMNS.values()]


@dataclass(frozen=True)
class EvalInputs:
    """What one run over the valid entries of a split produced."""

    entries: list[dict[str, Any]]  # valid entries (schema b-2 rows)
    #: the run (query_id, atom code, rank, score) and resolved gold (query_id, gold_idx, atom code), read one
    #: block of queries at a time (bench.evaluation.blocks: FrameBlocks in core, DuckDBBlocks out of core)
    source: BlockSource
    regions: pd.DataFrame  # resolved regions, typed and placed (bench.gold.table)
    responses: pd.DataFrame  # query_id, latency_ms, abstain, confidence of every answered query
    failures: pd.DataFrame  # query_id, kind (timeout, crash) of every failed query
    served: dict[str, pd.DataFrame]  # modality -> the atoms the system was served (row i of them in name order: code i)
    gold_segments: dict[str, pd.DataFrame]  # source_id -> segments of the gold sources (the report's pictures only)
    invalid: list[dict[str, Any]]  # invalid entries of the split (counted apart)
    sha256: dict[str, Any]  # manifest, sets and split lock the run used
    #: the run's memories (bench.evaluation.memory_report): more rows of the atom table, after the served atoms
    memories: MemoryInputs | None = None


@dataclass(frozen=True)
class EvalOptions:
    """params `metrics` (their defaults: bench.params.MetricsParams) and how false recall is read."""

    k: int
    bootstrap_resamples: int
    bootstrap_seed: int
    calibration_recall: float
    abstains: bool = False  # the system declared abstention
    #: per modality the dev run's calibrated top-1 threshold; given (the acceptance), no calibration
    thresholds: dict[str, float | None] | None = None
    #: params `metrics.budget` as written (modality -> amount); a modality left out: its `Modality.budget`
    budget: Mapping[str, float | None] | None = None

    @classmethod
    def from_params(cls, metrics: MetricsParams, **given: Any) -> EvalOptions:
        """The typed `metrics` block and the `given` fields (abstains, thresholds)."""
        return cls(k=metrics.k, bootstrap_resamples=metrics.bootstrap_resamples, bootstrap_seed=metrics.bootstrap_seed,
                   calibration_recall=metrics.calibration_recall, budget=metrics.budget, **given)

    def budgets(self) -> dict[str, float | None]:
        """Every modality's budget (bench.evaluation.measures.budget.budgets)."""
        return budgets(self.budget)


@dataclass(frozen=True)
class RunDescription:
    """How the system ran, as the stage knows it; the document's ``run`` block."""

    system: str
    depth: int  # ranked atoms asked per query
    chunking: Mapping[str, Any]  # params chunking: modality -> strategy and options
    concurrency: int
    warm: bool
    adapter: str
    warmup_queries: int
    timeout_s: float | None
    latency: Mapping[str, Any] | None  # bench.systems.run.latency_percentiles
    isolation: str | None = None  # the sandbox's isolation, when the run recorded it
    split: str | None = None  # "test" for the acceptance
    abstains: bool = False  # the system abstained or declared it can (the record's; false recall reads it)
    #: a replayed run: events sent and ingest_ms percentiles per modality (bench.systems.step.replay_record)
    replay: Mapping[str, Any] | None = None
    #: what the system does, in its own words (a Python system's `description`: scoped or not, when it abstains)
    description: str | None = None
    #: per run id, how many queries' latency that run measured (bench.systems.partwise: a reused
    #: answer keeps the latency of the run that computed it)
    latency_measured_in: Mapping[str, int] | None = None

    @classmethod
    def from_record(cls, system: Mapping[str, Any], chunking: Mapping[str, Any]) -> RunDescription:
        """From the retrieve stage's record of the run (data/runs/system.json); a field an
        older record lacks gets the value the run had then."""
        return cls(system=system["name"], depth=system["depth"], chunking=chunking, concurrency=system.get("concurrency", 1),
                   warm=system.get("warm", True), adapter=system.get("adapter", "builtin"),
                   warmup_queries=system.get("warmup_queries", 0), timeout_s=system.get("timeout_s"),
                   latency=system.get("latency"), isolation=system.get("isolation"), abstains=bool(system.get("abstains", False)),
                   description=system.get("description"),
                   replay={"events": system.get("events", 0), "ingest_ms": system.get("ingest", {}), **system.get("replay_facts", {})}
                   if system.get("replay") else None,
                   latency_measured_in=system.get("latency_measured_in"))


@dataclass(frozen=True)
class EvalResult:
    document: dict[str, Any]  # dev.json / test.json
    per_query: pd.DataFrame  # bench.evaluation.per_query.per_query's table
    #: every per-query column: per_query's, the extent measures and amounts, tied@k, latency_ms
    query_table: pd.DataFrame
    atom_extents: pd.DataFrame  # row i: the atom of code i
    #: every run row that hits a gold atom, joined to its gold rows (query_id, gold_idx, atom, rank, score),
    #: failed queries left out: what the recall and threshold curves read of the run (O(gold rows))
    hits: pd.DataFrame
    blocks: int = 1  # query blocks the run was read in
    reused_queries: int = 0  # queries whose per-query columns an earlier evaluation had computed (bench.evaluation.reused)


def entries_frame(entries: list[dict[str, Any]], regions: pd.DataFrame) -> pd.DataFrame:
    """The entries as bench.evaluation.per_query reads them."""
    n_regions = regions.groupby("query_id").size()
    return pd.DataFrame(
        {
            "query_id": [e["query_id"] for e in entries],
            "modality": [e["modality"] for e in entries],
            "unanswerable": [bool(e["unanswerable"]) for e in entries],
            "as_of": pd.to_datetime([e["as_of"] for e in entries], utc=True, format="ISO8601"),
            "holder": [e["scope"]["holder"] for e in entries],
            "n_regions": [int(n_regions.get(e["query_id"], 0)) for e in entries],
        }
    )


def failure_summary(entries: pd.DataFrame, failures: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per modality: queries, failed, failed by kind (timeout, crash), and ``errors``: each distinct
    failure message once with its count, the most frequent first (at most 5)."""
    kinds = dict(zip(failures["query_id"].astype(str), failures["kind"].astype(str), strict=True))
    said = dict(zip(failures["query_id"].astype(str), failures["message"].astype(str), strict=True)) if "message" in failures else {}
    out: dict[str, dict[str, Any]] = {}
    errors: dict[str, dict[str, int]] = {}
    for qid, modality in zip(entries["query_id"], entries["modality"], strict=True):
        row = out.setdefault(str(modality), {"queries": 0, "failed": 0})
        row["queries"] += 1
        if qid in kinds:
            row["failed"] += 1
            row[kinds[qid]] = row.get(kinds[qid], 0) + 1
            if qid in said:
                mine = errors.setdefault(str(modality), {})
                mine[said[qid]] = mine.get(said[qid], 0) + 1
    for modality, mine in errors.items():
        out[modality]["errors"] = [{"message": m, "count": n} for m, n in sorted(mine.items(), key=lambda x: (-x[1], x[0]))[:5]]
    return dict(sorted(out.items()))


def _run_block(d: RunDescription, options: EvalOptions, table: pd.DataFrame, entries: pd.DataFrame, failures: pd.DataFrame) -> dict[str, Any]:
    out: dict[str, Any] = {"system": d.system, "depth": d.depth, "k": options.k}
    if d.description is not None:
        out["description"] = d.description
    calibrating = options.thresholds is None  # the acceptance reuses the dev run's rule
    if calibrating:
        out["calibration_recall"] = options.calibration_recall
    out["false_recall_rule"] = false_recall_rules(table)
    out["auroc_signal"] = str(table["auroc_signal_source"].iloc[0]) if len(table) else None
    if calibrating:
        out["abstains_declared"] = options.abstains
    out.update({"chunking": d.chunking, "concurrency": d.concurrency, "warm": d.warm, "adapter": d.adapter,
                "warmup_queries": d.warmup_queries, "timeout_s": d.timeout_s, "latency": d.latency,
                "failures_by_modality": failure_summary(entries, failures)})
    if d.isolation is not None:
        out["isolation"] = d.isolation
    if d.split is not None:
        out["split"] = d.split
    if d.replay is not None:  # temporal correctness is 1.0 by construction for what it was sent (docs/systems.md, Replay)
        out["replay"] = dict(d.replay)
    if d.latency_measured_in is not None:
        out["latency_measured_in"] = dict(d.latency_measured_in)
    out["bootstrap"] = {"resamples": options.bootstrap_resamples, "seed": options.bootstrap_seed, "method": "percentile",
                        "confidence": 0.95, "over": "clusters of entries asking the same question (bench.evaluation.stats.clusters)"}
    return out


def evaluate_run(inputs: EvalInputs, options: EvalOptions, description: RunDescription, memo: Memo | None = None) -> EvalResult:
    """Per-query metrics, chunk-fair metrics and ties, every measure's cell per modality and
    overall with its 95% interval, and the metrics document (docs/measuring.md).

    The run and gold are read one query block at a time (``inputs.source``: one block
    when they are in memory); each block gives its queries' per-query columns
    (:func:`evaluate_block`), and what needs every query -- the false-recall calibration,
    the AUROC signal, the cells and their intervals -- runs once on those O(queries) rows.
    So an evaluation in one block and one in many give the same result. ``memo``
    (bench.memo): intervals reused by the content they resample."""
    k = int(options.k)
    entries = entries_frame(inputs.entries, inputs.regions).sort_values("query_id", kind="stable").reset_index(drop=True)
    # failed queries (timeout, crash) stay in every denominator and count as the worst case
    # (bench.evaluation.measures.base: 0 for ranking metrics, 1 for false recall and abstention)
    failed = inputs.failures["query_id"].astype(str).tolist()
    # row i = atom code i (bench.ingest.atom_codes: modalities in name order)
    atoms = pd.concat([inputs.served[m][PER_QUERY_ATOM_COLUMNS] for m in sorted(inputs.served)], ignore_index=True)
    served_ext = atom_ext = atom_extents(inputs.served)
    memories = None
    if inputs.memories:  # memory codes follow the served atoms' (bench.systems.credit.provenance)
        atoms, atom_ext, memories = inputs.memories.joined(atoms, atom_ext)
    source = inputs.source
    budget = options.budgets()
    abstained = abstained_queries(inputs.responses)  # they hand over nothing (measures.base.run_family)
    block_args: dict[str, Any] = {"k": k, "failed": failed, "responses": inputs.responses, "budget": budget, "memories": memories,
                                  "abstained": abstained}
    # each modality's per-query columns reused by content (bench.evaluation.reused); not with memories (codes past the atoms)
    by_modality = None if memo is None or memo.root is None or memories is not None else ModalityAtoms(atoms, atom_ext)
    parts, reused = [], 0
    for b in source.blocks(entries["query_id"].astype(str).tolist()):
        block = entries.iloc[b.start:b.stop]
        if by_modality is None:
            parts.append(evaluate_block(block, b.run, b.gold, atoms, atom_ext, inputs.regions, **block_args))
            continue
        part, fams, n = reuse_block(memo, block, b.run, b.gold, regions=inputs.regions, responses=inputs.responses,  # type: ignore[arg-type]
                                    failed=failed, abstained=abstained, atoms=by_modality, settings=[k, dict(budget)],
                                    compute=lambda e, r, g: evaluate_block(e, r, g, atoms, atom_ext, inputs.regions, **block_args)[:2])
        parts.append((part, fams, curve_hits(b.run, b.gold, failed)))
        reused += n
    per_query = finish_per_query(_concat([p[0] for p in parts]), k=k, abstains=options.abstains,
                                 calibration_recall=options.calibration_recall, thresholds=options.thresholds)
    hits = _concat([p[2] for p in parts])
    table = per_query
    for frames in zip(*(p[1] for p in parts), strict=True):  # each family of phase block, in registry order
        table = table.merge(_concat(list(frames)), on="query_id", how="left")
    for family in families("run"):
        table = table.assign(**run_family(family, RunRecord(table=table, responses=inputs.responses, k=k)))
    for family in families("combined"):  # from the other families' columns: the objective
        table = table.assign(**run_family(family, Columns(table=table, k=k)))
    labels = entry_clusters(inputs.entries).set_index("query_id").reindex(table["query_id"].astype(str).to_numpy())
    table = table.assign(**{c: labels[c].to_numpy() for c in CLUSTER_COLUMNS.values()})  # who asks the same question

    report = add_intervals(metric_cells(table, k), table, k=k, resamples=options.bootstrap_resamples, seed=options.bootstrap_seed,
                           memo=memo)
    tie_summary = {}
    for m, g in [*table.groupby("modality", sort=True), ("overall", table)]:
        t = g[tied_column(k)]
        tie_summary[str(m)] = {"tied_positions": int(t.sum()), "queries_with_ties": int((t > 0).sum()), "queries": int(len(t))}
    run_block = _run_block(description, options, per_query, entries, inputs.failures)
    run_block["budget"] = budget_record(budget, entries["modality"])
    doc = metrics_document(report, inputs.invalid, inputs.sha256, run_block)
    doc.update({"atom_stats": atom_statistics(served_ext, inputs.regions), "ties": tie_summary, "mde": mde_block(table, k)})
    if inputs.memories:
        doc["memories"] = memory_block(inputs.memories, entries, k, hits)
    return EvalResult(doc, per_query, table, atom_ext, hits, source.block_count, reused)


def evaluate_block(entries: pd.DataFrame, run: pd.DataFrame, gold: pd.DataFrame, atoms: pd.DataFrame, atom_ext: pd.DataFrame,
                   regions: pd.DataFrame, *, k: int, failed: list[str], responses: pd.DataFrame,
                   budget: Mapping[str, float | None] | None = None, memories: MemoryExtents | None = None,
                   abstained: list[str] | None = None) -> tuple[pd.DataFrame, list[pd.DataFrame], pd.DataFrame]:
    """The per-query work of one block of entries (:func:`entries_frame` rows) and its run
    and gold rows (atoms as codes): (per_query.query_block rows, the frame of each family of
    phase ``block`` in registry order -- extent, ties, budget --, curve hits). ``budget``:
    modality -> amount (None: the modalities' defaults); ``memories``: the run's memories,
    their codes after the served atoms' (their rows of `atoms` and `atom_ext` too);
    ``abstained``: the queries whose answer abstained (None: read from `responses`)."""
    part = query_block(entries, run, gold, atoms, k=k, failed=failed, responses=responses)
    rows = BlockRows(entries=entries, run=run, gold=gold, regions=regions, atom_ext=atom_ext, k=k, failed=failed,
                     budget=budgets() if budget is None else budget, memories=memories,
                     abstained=frozenset(abstained_queries(responses) if abstained is None else abstained))
    return part, [run_family(family, rows) for family in families("block")], curve_hits(run, gold, failed)


def abstained_queries(responses: pd.DataFrame | None) -> list[str]:
    """The queries whose answer abstained (``"abstain": true``): they hand the reader nothing."""
    if responses is None or "abstain" not in responses.columns or not len(responses):
        return []
    return responses.loc[responses["abstain"].fillna(False).astype(bool).to_numpy(), "query_id"].astype(str).tolist()


def curve_hits(run: pd.DataFrame, gold: pd.DataFrame, failed: list[str]) -> pd.DataFrame:
    """Gold rows joined to the run rows of the same (query, atom code), failed queries left
    out: query_id, gold_idx, atom, rank, score (bench.reporting.plots' curves read only these).
    Joined on one integer key per (query, atom); only the gold's query ids become strings."""
    ids = pd.Index(sorted(set(gold["query_id"].astype(str)) - {str(q) for q in failed}))
    q_gold, q_run = query_positions(gold["query_id"], ids), query_positions(run["query_id"], ids)
    a_gold, a_run = gold[ATOM_CODE].to_numpy(np.int64), run[ATOM_CODE].to_numpy(np.int64)
    span = int(max(a_gold.max(initial=0), a_run.max(initial=0))) + 1
    kept_gold, kept_run = np.flatnonzero(q_gold >= 0), np.flatnonzero(q_run >= 0)
    both = pd.DataFrame({"key": q_gold[kept_gold] * span + a_gold[kept_gold], "row": kept_gold}).merge(
        pd.DataFrame({"key": q_run[kept_run] * span + a_run[kept_run], "pos": kept_run}), on="key")
    rows, pos = both["row"].to_numpy(), both["pos"].to_numpy()
    return pd.DataFrame({"query_id": pd.Series(ids.to_numpy(dtype=object)[q_gold[rows]], dtype="str"),
                         "gold_idx": gold["gold_idx"].to_numpy(np.int64)[rows], ATOM_CODE: a_gold[rows],
                         "rank": run["rank"].to_numpy()[pos], "score": run["score"].to_numpy(float)[pos]})


def budget_record(budget: Mapping[str, float | None], modality: pd.Series) -> dict[str, dict[str, Any]]:
    """dev.json's ``run.budget``: the budget of each modality of the entries, with its unit."""
    mods = modalities()
    return {m: {"amount": budget.get(m), "unit": mods[m].extent_unit if m in mods else "units"}
            for m in sorted(set(modality.astype(str)))}


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Block frames in block order (one block: itself, untouched)."""
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def per_query_table(table: pd.DataFrame, k: int) -> pd.DataFrame:
    """The committed per-query table (reports/per_query/<split>.parquet, read by `bench compare`):
    identification columns, the per-query column of every measure whose interval resamples
    per-query values (not the AUROC's signal), the extent amounts, what the budget packs
    (``cartridge@budget``: the leaderboard's cost) and the tied positions,
    in `table`'s column order, sorted by query_id."""
    named = {m.column for m in measures(k) if m.family != "auroc"} | {*amount_columns(k), tied_column(k), PACKED_COLUMN}
    cols = [c for c in [*TABLE_COLUMNS, *(c for c in table.columns if c in named)] if c in table.columns]
    return table[list(dict.fromkeys(cols))].sort_values("query_id", kind="stable").reset_index(drop=True)


def no_failures() -> pd.DataFrame:
    """The failures table of a run in which no query failed."""
    return pd.DataFrame(columns=["query_id", "kind"])

