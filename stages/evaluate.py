"""DVC stage evaluate: metrics per modality (reports/metrics/dev.json) and reports/dev.md."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pandas as pd

from bench.evaluation.atom_codes import served_ids, with_atom_ids
from bench.evaluation.metrics import aggregate, false_recall_rules, per_query
from bench.ingest.corpus import load_segments
from bench.io import iter_jsonl, write_json, write_parquet, write_text
from bench.modalities import unreadable_gold
from bench.reporting.report import markdown, metrics_document
from stages import evaluate_fair
from stages.common import ATOMS, REPORTS, RESOLVED, ROOT, RUNS, SEGMENTS, SERVED, SETS_DIR, VALID_DIR, local_datasets, params, read_json


def entries_frame(entries: list[dict], regions: pd.DataFrame) -> pd.DataFrame:
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


@click.command()
def main() -> None:
    cfg = params()
    local_datasets()  # pictures of local data sets come from their files in data/corpus/
    k = int(cfg["metrics"]["k"])
    entries = [e for _, e in iter_jsonl(VALID_DIR / "dev.jsonl")]
    invalid = [r for _, r in iter_jsonl(VALID_DIR / "invalid.jsonl")]
    summary = read_json(VALID_DIR / "summary.json")
    regions = pd.read_parquet(RESOLVED / "regions.parquet")
    latency = pd.read_parquet(RUNS / "latency.parquet")
    system = read_json(RUNS / "system.json")
    served = {p.stem: pd.read_parquet(p, columns=["atom_id", "holder", "observed_at"]) for p in sorted(SERVED.glob("*.parquet"))}
    atoms = pd.concat([served[m] for m in sorted(served)], ignore_index=True)  # row = atom code
    # run and gold name atoms by integer code (row of `atoms`); the ids are added for the reports
    table = served_ids(served)
    gold = with_atom_ids(pd.read_parquet(RESOLVED / "gold.parquet"), table)
    run = with_atom_ids(pd.read_parquet(RUNS / "dev.parquet"), table)
    ent = entries_frame(entries, regions)
    # failed queries (timeout, crash) stay in every denominator and count as the worst case
    # (0 for ranking metrics, 1 for false recall and abstention; bench.evaluation.metrics.WORST)
    failures = pd.read_parquet(RUNS / "failures.parquet") if (RUNS / "failures.parquet").exists() else pd.DataFrame(columns=["query_id", "kind"])
    failed = failures["query_id"].astype(str).tolist()
    # false recall: the system's own abstention, else a threshold calibrated on these dev entries
    share = float(cfg["metrics"]["calibration_recall"])
    pq = per_query(ent, run, gold, atoms, k=k, failed=failed, responses=latency,
                   abstains=bool(system.get("abstains", False)), calibration_recall=share)
    agg = aggregate(pq, latency, failed, k=k)
    imports = {p.stem: read_json(p) for p in sorted((SETS_DIR / "imports").glob("*.json"))}
    run_info = {
        "system": system["name"],
        "depth": system["depth"],
        "k": k,
        "calibration_recall": share,
        "false_recall_rule": false_recall_rules(pq),
        "auroc_signal": str(pq["separation_signal"].iloc[0]) if len(pq) else None,
        "abstains_declared": bool(system.get("abstains", False)),
        "chunking": cfg["chunking"],
        "concurrency": system.get("concurrency", 1),
        "warm": system.get("warm", True),
        "adapter": system.get("adapter", "builtin"),
        "warmup_queries": system.get("warmup_queries", 0),
        "timeout_s": system.get("timeout_s"),
        "latency": system.get("latency"),
        "failures_by_modality": failure_summary(ent, failures),
    }
    if "isolation" in system:
        run_info["isolation"] = system["isolation"]
    doc = metrics_document(agg, invalid, summary["sha256"], run_info)
    # chunk-fair metrics, 95% intervals on every cell, atom statistics, ties (stages/evaluate_fair.py)
    doc, full, fair_ctx = evaluate_fair.extend(doc, pq, ent, run, gold, regions, latency, failed, cfg)
    write_parquet(ROOT / "data" / "eval" / "per_query.parquet", pq)
    json.dumps(doc, allow_nan=False)  # strict JSON: a NaN or infinity stops the stage before anything is written
    write_json(REPORTS / "metrics" / "dev.json", doc)
    stats = read_json(ATOMS / "stats.json")
    enabled = {Path(p).stem for p in summary["sha256"]["sets"]}
    segments = load_segments(SEGMENTS)  # answerable entries left without text: each modality's Modality.unreadable_gold
    textless = unreadable_gold(entries, segments) if segments is not None else None
    write_text(REPORTS / "dev.md", markdown(doc, entries, invalid, regions, {k_: v for k_, v in imports.items() if k_ in enabled}, summary, stats, textless))
    evaluate_fair.write_outputs(doc, full, fair_ctx, entries, run, gold, regions, cfg)
    o = doc["overall"]
    click.echo(f"evaluate: recall@{k} {o[f'recall@{k}']['value']:.4f} (n={o[f'recall@{k}']['n']}), mrr {o['mrr']['value']:.4f}, invalid {doc['invalid_entries']}")


if __name__ == "__main__":
    main()
