"""One evaluation of a split's ranked results, for the dev stage (stages/evaluate.py) and
the acceptance stage (stages/accept.py) alike.

:func:`evaluate` takes what a run produced (the system's rankings, responses and
failures, the resolved gold, the served atoms) and returns the metrics document
(dev.json / test.json: every measure's cell with n, denominator and ci95, the run
block, atom statistics, ties) and the per-query frames behind it. It reads nothing and
writes nothing; the stages read their inputs (the loaders at the end take the paths
they are given) and write the results with bench.io's atomic helpers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from bench.evaluation.blocks import BlockSource, FrameBlocks
from bench.evaluation.cells import metric_cells
from bench.evaluation.measures import measures
from bench.evaluation.measures.extent import amount_columns, atom_extents, atom_statistics, extent_columns
from bench.evaluation.measures.false_recall import false_recall_rules
from bench.evaluation.measures.scores import tied_column, tied_positions
from bench.evaluation.memory_report import MemoryInputs, memory_block
from bench.evaluation.per_query import finish_per_query, query_block
from bench.evaluation.placement import region_extents
from bench.evaluation.uncertainty import add_intervals
from bench.ingest.partitions import scan_files
from bench.ingest.store import segment_files
from bench.reporting.report import metrics_document

__all__ = ["EvalInputs", "EvalOptions", "EvalResult", "RunDescription", "curve_hits", "entries_frame", "evaluate_block", "evaluate_run",
           "failure_summary",
           "gold_segments", "no_failures", "select_gold_segments", "per_query_table"]

#: the atom columns the per-query table reads (who holds an atom and when it was observed)
PER_QUERY_ATOM_COLUMNS = ["atom_id", "holder", "observed_at"]
#: per-query columns kept in the committed table besides the measures' (small: a few bytes per query and column)
TABLE_COLUMNS = ["query_id", "modality", "unanswerable", "failed", "n_regions", "n_returned", "first_hit_rank"]


@dataclass(frozen=True)
class EvalInputs:
    """What one run over the valid entries of a split produced."""

    entries: list[dict[str, Any]]  # valid entries (schema b-2 rows)
    run: pd.DataFrame | None  # query_id, atom_id, rank, score (None: read block by block from `source`)
    gold: pd.DataFrame | None  # resolved gold: query_id, gold_idx, atom_id (None: from `source`)
    regions: pd.DataFrame  # resolved regions (bench.evaluation.resolve)
    responses: pd.DataFrame  # query_id, latency_ms, abstain, confidence of every answered query
    failures: pd.DataFrame  # query_id, kind (timeout, crash) of every failed query
    served: dict[str, pd.DataFrame]  # modality -> the atoms the system was served
    gold_segments: dict[str, pd.DataFrame]  # source_id -> segments of the gold sources (pictures in the reports only)
    invalid: list[dict[str, Any]]  # invalid entries of the split (counted apart)
    sha256: dict[str, Any]  # manifest, sets and split lock the run used
    #: where run and gold are read block by block (bench.evaluation.blocks); None: `run` and `gold` as one block
    source: BlockSource | None = None
    #: the run's memories (bench.evaluation.memory_report): more rows of the atom table, after the served atoms
    memories: MemoryInputs | None = None

    def blocks(self) -> BlockSource:
        if self.source is not None:
            return self.source
        if self.run is None or self.gold is None:
            raise ValueError("EvalInputs needs run and gold, or a source")
        return FrameBlocks(self.run, self.gold)


@dataclass(frozen=True)
class EvalOptions:
    """params `metrics` and how false recall is read; the defaults here are the only ones."""

    k: int
    bootstrap_resamples: int = 1000
    bootstrap_seed: int = 0
    abstains: bool = False  # the system declared abstention
    calibration_recall: float = 0.9
    #: per modality the dev run's calibrated top-1 threshold; given (the acceptance), no calibration
    thresholds: dict[str, float | None] | None = None

    @classmethod
    def from_params(cls, metrics: Mapping[str, Any], **given: Any) -> EvalOptions:
        """params `metrics` (k, calibration_recall, bootstrap_resamples, bootstrap_seed) and
        `given` fields; a key params leave out keeps its default here."""
        kinds = {"k": int, "calibration_recall": float, "bootstrap_resamples": int, "bootstrap_seed": int}
        return cls(**{name: kind(metrics[name]) for name, kind in kinds.items() if name in metrics}, **given)


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
    latency: Mapping[str, Any] | None  # bench.evaluation.retrieve.latency_percentiles
    isolation: str | None = None  # the sandbox's isolation, when the run recorded it
    split: str | None = None  # "test" for the acceptance
    #: a replayed run: events sent and ingest_ms percentiles per modality (bench.evaluation.retrieve_step.replay_record)
    replay: Mapping[str, Any] | None = None

    @classmethod
    def from_record(cls, system: Mapping[str, Any], chunking: Mapping[str, Any]) -> RunDescription:
        """From the retrieve stage's record of the run (data/runs/system.json); a field an
        older record lacks gets the value the run had then."""
        return cls(system=system["name"], depth=system["depth"], chunking=chunking, concurrency=system.get("concurrency", 1),
                   warm=system.get("warm", True), adapter=system.get("adapter", "builtin"),
                   warmup_queries=system.get("warmup_queries", 0), timeout_s=system.get("timeout_s"),
                   latency=system.get("latency"), isolation=system.get("isolation"),
                   replay={"events": system.get("events", 0), "ingest_ms": system.get("ingest", {})} if system.get("replay") else None)


@dataclass(frozen=True)
class EvalResult:
    document: dict[str, Any]  # dev.json / test.json
    per_query: pd.DataFrame  # bench.evaluation.per_query.per_query's table
    #: every per-query column: per_query's, the extent measures and amounts, tied@k, latency_ms
    query_table: pd.DataFrame
    atom_extents: pd.DataFrame
    region_extents: pd.DataFrame
    #: every run row that hits a gold atom, joined to its gold rows (query_id, gold_idx, atom_id, rank, score),
    #: failed queries left out: what the recall and threshold curves read of the run (O(gold rows))
    hits: pd.DataFrame
    blocks: int = 1  # query blocks the run was read in


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


def failure_summary(entries: pd.DataFrame, failures: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per modality: queries, failed, and failed by kind (timeout, crash)."""
    kinds = dict(zip(failures["query_id"].astype(str), failures["kind"].astype(str), strict=True))
    out: dict[str, dict[str, int]] = {}
    for qid, modality in zip(entries["query_id"], entries["modality"], strict=True):
        row = out.setdefault(str(modality), {"queries": 0, "failed": 0})
        row["queries"] += 1
        if qid in kinds:
            row["failed"] += 1
            row[kinds[qid]] = row.get(kinds[qid], 0) + 1
    return dict(sorted(out.items()))


def _run_block(d: RunDescription, options: EvalOptions, table: pd.DataFrame, entries: pd.DataFrame, failures: pd.DataFrame) -> dict[str, Any]:
    out: dict[str, Any] = {"system": d.system, "depth": d.depth, "k": options.k}
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
    out["bootstrap"] = {"resamples": options.bootstrap_resamples, "seed": options.bootstrap_seed, "method": "percentile",
                        "confidence": 0.95, "over": "queries"}
    return out


def evaluate_run(inputs: EvalInputs, options: EvalOptions, description: RunDescription) -> EvalResult:
    """Per-query metrics, chunk-fair metrics and ties, every measure's cell per modality and
    overall with its 95% interval, and the metrics document (README, *Metrics*).

    The run and gold are read one query block at a time (``inputs.blocks()``: one block
    when they are in memory); each block gives its queries' per-query columns
    (:func:`evaluate_block`), and what needs every query -- the false-recall calibration,
    the AUROC signal, the cells and their intervals -- runs once on those O(queries) rows.
    So an evaluation in one block and one in many give the same result."""
    k = int(options.k)
    entries = entries_frame(inputs.entries, inputs.regions).sort_values("query_id", kind="stable").reset_index(drop=True)
    # failed queries (timeout, crash) stay in every denominator and count as the worst case
    # (bench.evaluation.measures.base: 0 for ranking metrics, 1 for false recall and abstention)
    failed = inputs.failures["query_id"].astype(str).tolist()
    # row i = atom code i (bench.evaluation.atom_codes: modalities in name order)
    atoms = pd.concat([inputs.served[m][PER_QUERY_ATOM_COLUMNS] for m in sorted(inputs.served)], ignore_index=True)
    served_ext = atom_ext = atom_extents(inputs.served)
    if inputs.memories:  # memory codes follow the served atoms' (bench.evaluation.provenance)
        atoms = pd.concat([atoms, inputs.memories.atoms()], ignore_index=True)
        atom_ext = pd.concat([atom_ext, inputs.memories.extents()], ignore_index=True)
    region_ext = region_extents(inputs.regions)  # placed once by resolve (bench.evaluation.placement): no decoding here
    source = inputs.blocks()
    parts = [evaluate_block(entries.iloc[b.start:b.stop], b.run, b.gold, atoms, atom_ext, region_ext, k=k, failed=failed,
                            responses=inputs.responses)
             for b in source.blocks(entries["query_id"].astype(str).tolist())]
    per_query = finish_per_query(_concat([p[0] for p in parts]), k=k, abstains=options.abstains,
                                 calibration_recall=options.calibration_recall, thresholds=options.thresholds)
    extents, ties, hits = (_concat([p[i] for p in parts]) for i in (1, 2, 3))

    table = per_query.merge(extents, on="query_id", how="left").merge(ties, on="query_id", how="left")
    table[tied_column(k)] = table[tied_column(k)].fillna(0).astype(int)
    latency = inputs.responses
    latency_by_query = latency.assign(query_id=latency["query_id"].astype(str)).set_index("query_id")["latency_ms"]
    table["latency_ms"] = table["query_id"].astype(str).map(latency_by_query).astype(float)
    table.loc[table["failed"].astype(bool), "latency_ms"] = float("nan")

    report = add_intervals(metric_cells(table, k), table, k=k, resamples=options.bootstrap_resamples, seed=options.bootstrap_seed)
    tie_summary = {}
    for m, g in [*table.groupby("modality", sort=True), ("overall", table)]:
        t = g[tied_column(k)]
        tie_summary[str(m)] = {"tied_positions": int(t.sum()), "queries_with_ties": int((t > 0).sum()), "queries": int(len(t))}
    doc = metrics_document(report, inputs.invalid, inputs.sha256, _run_block(description, options, per_query, entries, inputs.failures))
    doc.update({"atom_stats": atom_statistics(served_ext, inputs.regions), "ties": tie_summary})
    if inputs.memories:
        doc["memories"] = memory_block(inputs.memories, entries, k)
    return EvalResult(doc, per_query, table, atom_ext, region_ext, hits, source.block_count)


def evaluate_block(entries: pd.DataFrame, run: pd.DataFrame, gold: pd.DataFrame, atoms: pd.DataFrame, atom_ext: pd.DataFrame,
                   region_ext: pd.DataFrame, *, k: int, failed: list[str], responses: pd.DataFrame) -> tuple[pd.DataFrame, ...]:
    """The per-query work of one block of entries (:func:`entries_frame` rows) and its run
    and gold rows: (per_query.query_block rows, extent rows, ties, curve hits)."""
    part = query_block(entries, run, gold, atoms, k=k, failed=failed, responses=responses)
    extents = extent_columns(entries, run, gold, region_ext, atom_ext, k=k, failed=failed)
    ties = tied_positions(run, k)
    return part, extents, ties, curve_hits(run, gold, failed)


def curve_hits(run: pd.DataFrame, gold: pd.DataFrame, failed: list[str]) -> pd.DataFrame:
    """Gold rows joined to the run rows of the same (query, atom), failed queries left out:
    query_id, gold_idx, atom_id, rank, score (bench.reporting.plots' curves read only these)."""
    r = run[["query_id", "atom_id", "rank", "score"]].astype({"query_id": str, "atom_id": str})
    r = r.loc[~r["query_id"].isin(set(failed))]
    g = gold[["query_id", "gold_idx", "atom_id"]].astype({"query_id": str, "atom_id": str})
    return g.merge(r, on=["query_id", "atom_id"])


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Block frames in block order (one block: itself, untouched)."""
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def per_query_table(table: pd.DataFrame, k: int) -> pd.DataFrame:
    """The committed per-query table (reports/per_query/<split>.parquet, read by `bench compare`):
    identification columns, the per-query column of every measure whose interval resamples
    per-query values (not the AUROC's signal), the extent amounts and the tied positions,
    in `table`'s column order, sorted by query_id."""
    named = {m.column for m in measures(k) if m.family != "auroc"} | {*amount_columns(k), tied_column(k)}
    cols = [c for c in [*TABLE_COLUMNS, *(c for c in table.columns if c in named)] if c in table.columns]
    return table[list(dict.fromkeys(cols))].sort_values("query_id", kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- loaders (paths from the stage)


def gold_segments(regions: pd.DataFrame, segments_dir: Path) -> dict[str, pd.DataFrame]:
    """Segments of the gold sources only, scanned file by file (segments_dir: data/segments,
    ``<modality>/<key>.parquet``) keeping only gold sources' rows (bench.ingest.partitions.scan_sources)."""
    wanted = pa.array(sorted(set(regions["source_id"].astype(str))), type=pa.string())
    return select_gold_segments(regions, [scan_files(segment_files(segments_dir), wanted)])


def select_gold_segments(regions: pd.DataFrame, frames: Iterable[pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """source_id -> segments, for the gold sources of `regions`, out of segment frames."""
    wanted = set(regions["source_id"].astype(str))
    kept = [seg for f in frames if len(seg := f[f["source_id"].astype(str).isin(wanted)])]
    seg = pd.concat(kept, ignore_index=True) if kept else pd.DataFrame(columns=["source_id"])
    return {str(s): g for s, g in seg.groupby("source_id", sort=False)}


def no_failures() -> pd.DataFrame:
    """The failures table of a run in which no query failed."""
    return pd.DataFrame(columns=["query_id", "kind"])

