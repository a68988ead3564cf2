"""One evaluation of a split's ranked results, for the dev stage (stages/evaluate.py) and
the acceptance stage (stages/accept.py) alike.

:func:`evaluate` takes what a run produced (the system's rankings, responses and
failures, the resolved gold, the served atoms) and returns the metrics document
(dev.json / test.json: the catalogue's cells with n, denominator and ci95, the run
block, atom statistics, ties) and the per-query frames behind it. It reads nothing and
writes nothing; the stages read their inputs (the loaders at the end take the paths
they are given) and write the results with bench.io's atomic helpers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from bench.evaluation.blocks import BlockSource, FrameBlocks
from bench.evaluation.catalogue import measures
from bench.evaluation.fair import atom_extents, atom_statistics, fair_cells, per_query_fair, region_extents, tied_positions
from bench.evaluation.metrics import aggregate, false_recall_rules, finish_per_query, query_block
from bench.evaluation.uncertainty import add_intervals
from bench.ingest.partitions import scan_files
from bench.ingest.store import segment_files
from bench.reporting.report import metrics_document

__all__ = ["EvalInputs", "EvalOptions", "EvalResult", "RunDescription", "curve_hits", "entries_frame", "evaluate", "evaluate_block",
           "failure_summary",
           "gold_segments", "no_failures", "select_gold_segments", "per_query_table"]

#: atom columns per_query reads (who holds an atom and when it was observed)
ATOM_COLUMNS = ["atom_id", "holder", "observed_at"]
#: per-query columns kept in the committed table besides the catalogue's (small: a few bytes per query and column)
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

    def blocks(self) -> BlockSource:
        if self.source is not None:
            return self.source
        if self.run is None or self.gold is None:
            raise ValueError("EvalInputs needs run and gold, or a source")
        return FrameBlocks(self.run, self.gold)


@dataclass(frozen=True)
class EvalOptions:
    """params `metrics` and how false recall is read."""

    k: int
    bootstrap_resamples: int = 1000
    bootstrap_seed: int = 0
    abstains: bool = False  # the system declared abstention
    calibration_recall: float = 0.9
    #: per modality the dev run's calibrated top-1 threshold; given (the acceptance), no calibration
    thresholds: dict[str, float | None] | None = None


@dataclass(frozen=True)
class RunDescription:
    """How the system ran, as the stage knows it; the document's ``run`` block."""

    system: str
    depth: Any
    chunking: Any
    concurrency: Any
    warm: Any
    adapter: Any
    warmup_queries: Any
    timeout_s: Any
    latency: Any
    isolation: Any = None  # recorded when the run recorded it
    split: str | None = None  # "test" for the acceptance


@dataclass(frozen=True)
class EvalResult:
    document: dict[str, Any]  # dev.json / test.json
    per_query: pd.DataFrame  # bench.evaluation.metrics.per_query
    full: pd.DataFrame  # + chunk-fair columns, tied@k, latency_ms
    atom_extents: pd.DataFrame
    region_extents: pd.DataFrame
    #: every run row that hits a gold atom, joined to its gold rows (query_id, gold_idx, atom_id, rank, score),
    #: failed queries left out: what the recall and threshold curves read of the run (O(gold rows))
    hits: pd.DataFrame
    blocks: int = 1  # query blocks the run was read in


def entries_frame(entries: list[dict[str, Any]], regions: pd.DataFrame) -> pd.DataFrame:
    """The entries as bench.evaluation.metrics.per_query reads them."""
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


def failure_summary(ent: pd.DataFrame, failures: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per modality: queries, failed, and failed by kind (timeout, crash)."""
    kinds = dict(zip(failures["query_id"].astype(str), failures["kind"].astype(str), strict=True))
    out: dict[str, dict[str, int]] = {}
    for qid, modality in zip(ent["query_id"], ent["modality"], strict=True):
        row = out.setdefault(str(modality), {"queries": 0, "failed": 0})
        row["queries"] += 1
        if qid in kinds:
            row["failed"] += 1
            row[kinds[qid]] = row.get(kinds[qid], 0) + 1
    return dict(sorted(out.items()))


def _run_block(d: RunDescription, options: EvalOptions, pq: pd.DataFrame, ent: pd.DataFrame, failures: pd.DataFrame) -> dict[str, Any]:
    out: dict[str, Any] = {"system": d.system, "depth": d.depth, "k": options.k}
    calibrating = options.thresholds is None  # the acceptance reuses the dev run's rule
    if calibrating:
        out["calibration_recall"] = options.calibration_recall
    out["false_recall_rule"] = false_recall_rules(pq)
    out["auroc_signal"] = str(pq["separation_signal"].iloc[0]) if len(pq) else None
    if calibrating:
        out["abstains_declared"] = options.abstains
    out.update({"chunking": d.chunking, "concurrency": d.concurrency, "warm": d.warm, "adapter": d.adapter,
                "warmup_queries": d.warmup_queries, "timeout_s": d.timeout_s, "latency": d.latency,
                "failures_by_modality": failure_summary(ent, failures)})
    if d.isolation is not None:
        out["isolation"] = d.isolation
    if d.split is not None:
        out["split"] = d.split
    out["bootstrap"] = {"resamples": options.bootstrap_resamples, "seed": options.bootstrap_seed, "method": "percentile",
                        "confidence": 0.95, "over": "queries"}
    return out


def evaluate(inputs: EvalInputs, options: EvalOptions, description: RunDescription) -> EvalResult:
    """Per-query metrics, chunk-fair metrics and ties, every catalogue cell per modality and
    overall with its 95% interval, and the metrics document (README, *Metrics*).

    The run and gold are read one query block at a time (``inputs.blocks()``: one block
    when they are in memory); each block gives its queries' per-query columns
    (:func:`evaluate_block`), and what needs every query -- the false-recall calibration,
    the AUROC signal, the cells and their intervals -- runs once on those O(queries) rows.
    So an evaluation in one block and one in many give the same result."""
    k = int(options.k)
    ent = entries_frame(inputs.entries, inputs.regions).sort_values("query_id", kind="stable").reset_index(drop=True)
    # failed queries (timeout, crash) stay in every denominator and count as the worst case
    # (bench.evaluation.catalogue: 0 for ranking metrics, 1 for false recall and abstention)
    failed = inputs.failures["query_id"].astype(str).tolist()
    # row i = atom code i (bench.evaluation.atom_codes: modalities in name order)
    atoms = pd.concat([inputs.served[m][ATOM_COLUMNS] for m in sorted(inputs.served)], ignore_index=True)
    aext = atom_extents(inputs.served)
    rext = region_extents(inputs.regions)  # placed once by resolve (bench.evaluation.placement): no decoding here
    source = inputs.blocks()
    parts = [evaluate_block(ent.iloc[b.start:b.stop], b.run, b.gold, atoms, aext, rext, k=k, failed=failed, responses=inputs.responses)
             for b in source.blocks(ent["query_id"].astype(str).tolist())]
    pq = finish_per_query(_concat([p[0] for p in parts]), k=k, abstains=options.abstains,
                          calibration_recall=options.calibration_recall, thresholds=options.thresholds)
    fair, ties, hits = (_concat([p[i] for p in parts]) for i in (1, 2, 3))
    cells = aggregate(pq, inputs.responses, failed, k=k)

    full = pq.merge(fair, on="query_id", how="left").merge(ties, on="query_id", how="left")
    full[f"tied@{k}"] = full[f"tied@{k}"].fillna(0).astype(int)
    latency = inputs.responses
    lat = latency.assign(query_id=latency["query_id"].astype(str)).set_index("query_id")["latency_ms"]
    full["latency_ms"] = full["query_id"].astype(str).map(lat).astype(float)
    full.loc[full["failed"].astype(bool), "latency_ms"] = float("nan")

    extra = fair_cells(full, k)
    report = {"by_modality": {m: {**block, **extra["by_modality"].get(m, {})} for m, block in cells["by_modality"].items()},
              "overall": {**cells["overall"], **extra["overall"]}}
    report = add_intervals(report, full, k=k, resamples=options.bootstrap_resamples, seed=options.bootstrap_seed)
    tie_summary = {}
    for m, g in [*full.groupby("modality", sort=True), ("overall", full)]:
        t = g[f"tied@{k}"]
        tie_summary[str(m)] = {"tied_positions": int(t.sum()), "queries_with_ties": int((t > 0).sum()), "queries": int(len(t))}
    doc = metrics_document(report, inputs.invalid, inputs.sha256, _run_block(description, options, pq, ent, inputs.failures))
    doc.update({"atom_stats": atom_statistics(aext, inputs.regions), "ties": tie_summary})
    return EvalResult(doc, pq, full, aext, rext, hits, source.block_count)


def evaluate_block(ent: pd.DataFrame, run: pd.DataFrame, gold: pd.DataFrame, atoms: pd.DataFrame, aext: pd.DataFrame,
                   rext: pd.DataFrame, *, k: int, failed: list[str], responses: pd.DataFrame) -> tuple[pd.DataFrame, ...]:
    """The per-query work of one block of entries (``ent``: :func:`entries_frame` rows) and
    its run and gold rows: (metrics.query_block rows, chunk-fair rows, ties, curve hits)."""
    part = query_block(ent, run, gold, atoms, k=k, failed=failed, responses=responses)
    fair = per_query_fair(ent, run, gold, rext, aext, k=k, failed=failed)
    ties = tied_positions(run, k)
    return part, fair, ties, curve_hits(run, gold, failed)


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


def per_query_table(full: pd.DataFrame, k: int) -> pd.DataFrame:
    """The committed per-query table (reports/per_query/<split>.parquet, read by `bench compare`):
    identification columns, every catalogue column with per-query values, and the other
    ``@k`` columns (covered and retrieved extent, ties), sorted by query_id."""
    named = {m.column for m in measures(k) if m.statistic != "auroc"} | {"gold_extent"}
    cols = [c for c in [*TABLE_COLUMNS, *(c for c in full.columns if "@" in c or c in named)] if c in full.columns]
    return full[list(dict.fromkeys(cols))].sort_values("query_id", kind="stable").reset_index(drop=True)


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

