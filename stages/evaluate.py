"""DVC stage evaluate: metrics per modality (reports/metrics/dev.json), reports/dev.md,
reports/dev.html, the per-query table and the plot tables.

Reads the dev run's files and the resolve stage's (bench.gold.table), hands them to
the evaluation step (bench.evaluation.blocks.run_blocks, bench.evaluation.evaluate.evaluate_run:
the same as the acceptance stage's) and writes the results."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pandas as pd

from bench.evaluation.blocks import run_blocks
from bench.evaluation.evaluate import EvalInputs, EvalOptions, RunDescription, evaluate_run, no_failures, per_query_table
from bench.evaluation.memory_report import load_memory_inputs
from bench.gold.table import GOLD_FILE, SEGMENTS, read_regions
from bench.ingest.corpus import Manifest
from bench.ingest.partitions import read_modalities
from bench.io import atomic_outputs, iter_jsonl, sha256_bytes, sha256_file, write_json, write_parquet, write_text
from bench.memo import Memo
from bench.numbers import number
from bench.project.layout import (
    ATOMS,
    MANIFEST,
    REPORTS,
    RESOLVED,
    ROOT,
    RUNS,
    SERVED,
    SETS_DIR,
    STORE,
    VALID_DIR,
    fail,
    memo_dir,
    read_json,
)
from bench.project.selection import config, local_datasets
from bench.reporting.outputs import dev_report
from bench.reporting.report import markdown
from bench.reporting.thumbnails import CorpusFiles


@click.command()
def main() -> None:
    cfg = config()
    in_core_rows = cfg.executor.in_core_rows  # not a DVC param: it never changes a result
    local_datasets()  # pictures of local data sets come from their files in data/corpus/
    entries = [e for _, e in iter_jsonl(VALID_DIR / "dev.jsonl")]
    invalid = [r for _, r in iter_jsonl(VALID_DIR / "invalid.jsonl")]
    summary = read_json(VALID_DIR / "summary.json")
    resolved = read_regions(RESOLVED)  # typed and placed regions, the gold sources' segments, unreadable gold
    served = read_modalities(SERVED)  # row i of the modalities in name order is atom code i
    failures = RUNS / "failures.parquet"
    description = RunDescription.from_record(read_json(RUNS / "system.json"), cfg.chunking_written)
    # false recall: the system's own abstention, else a threshold calibrated on these dev entries
    options = EvalOptions.from_params(cfg.metrics, abstains=description.abstains)
    memories = load_memory_inputs(RESOLVED)  # memory hits: codes after the served atoms' (bench/evaluation/memory_report.py)
    with run_blocks(RUNS / "dev.parquet", RESOLVED / GOLD_FILE, len(entries), in_core_rows) as run:
        inputs = EvalInputs(entries=entries, regions=resolved.regions, responses=pd.read_parquet(RUNS / "latency.parquet"),
                            failures=pd.read_parquet(failures) if failures.exists() else no_failures(), served=served, memories=memories,
                            gold_segments=resolved.segments_by_source(), invalid=invalid, sha256=summary["sha256"], source=run.source)
        result = evaluate_run(inputs, options, description, memo := Memo(memo_dir(ROOT)))  # intervals reused by content (bench/memo.py)
        report = dev_report(result, inputs, k=options.k, max_k=cfg.system.depth, calibration_recall=options.calibration_recall,
                            corpus=CorpusFiles.from_manifest(Manifest.load(MANIFEST), STORE), memo=memo,
                            content=sha256_bytes(f"{sha256_file(MANIFEST)} {sha256_file(RESOLVED / SEGMENTS)}".encode()))
        if (line := run.describe(in_core_rows)) is not None:
            click.echo(f"evaluate: {line} (DuckDB)", err=True)
    doc, k = result.document, options.k
    with atomic_outputs(on_disk_full=fail):  # every output below changes together or not at all
        write_parquet(ROOT / "data" / "eval" / "per_query.parquet", result.per_query)
        json.dumps(doc, allow_nan=False)  # strict JSON: a NaN or infinity stops the stage before anything is written
        write_json(REPORTS / "metrics" / "dev.json", doc)
        imports = {p.stem: read_json(p) for p in sorted((SETS_DIR / "imports").glob("*.json"))}
        enabled = {Path(p).stem for p in summary["sha256"]["sets"]}
        write_text(REPORTS / "dev.md", markdown(doc, entries, invalid, resolved.regions, {key: v for key, v in imports.items() if key in enabled},
                                                summary, read_json(ATOMS / "stats.json"), resolved.unreadable))
        write_parquet(REPORTS / "per_query" / "dev.parquet", per_query_table(result.query_table, k))
        for name, text in report.plots.items():
            write_text(REPORTS / "plots" / name, text)
        write_text(REPORTS / "dev.html", report.html)
    memo.prune()  # the least recently used reusable results beyond bench.memo.MAX_BYTES
    o, recall = doc["overall"], f"recall@{k}"
    click.echo(f"evaluate: {recall} {number(o[recall]['value'])} (n={o[recall]['n']}), mrr {number(o['mrr']['value'])}, invalid {doc['invalid_entries']}")


if __name__ == "__main__":
    main()
