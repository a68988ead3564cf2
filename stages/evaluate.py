"""DVC stage evaluate: metrics per modality (reports/metrics/dev.json), reports/dev.md,
reports/dev.html, the per-query table and the plot tables.

Reads the dev run's files and the resolve step's (bench.gold.table), hands them to
the evaluation step (bench.evaluation.blocks.run_blocks, bench.evaluation.evaluate.evaluate_run:
the same as the acceptance stage's) and writes the results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pandas as pd

from bench.evaluation.blocks import run_blocks
from bench.evaluation.evaluate import EvalInputs, EvalOptions, RunDescription, evaluate_run, no_failures, per_query_table
from bench.evaluation.memory_report import load_memory_inputs
from bench.gold.table import GOLD_FILE, SEGMENTS, read_regions
from bench.ingest.corpus import Manifest
from bench.ingest.partitions import read_modalities
from bench.io import atomic_outputs, iter_jsonl, sha256_bytes, sha256_file, write_outputs
from bench.memo import Memo
from bench.numbers import number
from bench.params import Params
from bench.project.layout import DEV_METRICS, ROOT, fail, memo_dir, read_json
from bench.project.layout import HERE as at
from bench.project.reuse import evaluate_key, with_chunking
from bench.project.selection import config, local_datasets
from bench.reporting.outputs import dev_report
from bench.reporting.report import markdown
from bench.reporting.thumbnails import CorpusFiles


@click.command()
def main() -> None:
    cfg = config()
    memo = Memo(memo_dir(ROOT))
    key = evaluate_key(memo, cfg, at, Path(__file__))  # the outputs reused by content (bench/project/reuse.py)
    stored = memo.files("evaluate", key)
    outputs = evaluate(cfg, memo) if stored is None else with_chunking(stored, cfg.chunking_written)
    if stored is not None:
        click.echo("evaluate: inputs, params and code as in an earlier evaluation: its outputs reused, run.chunking as params.yaml's", err=True)
    doc, k = outputs[DEV_METRICS], cfg.metrics.k
    json.dumps(doc, allow_nan=False)  # strict JSON: a NaN or infinity stops the stage before anything is written
    with atomic_outputs(on_disk_full=fail):  # every output changes together or not at all
        write_outputs(ROOT, outputs)
    if stored is None:
        memo.put_files("evaluate", key, ROOT, list(outputs))
    memo.prune()  # the least recently used reusable results beyond bench.memo.MAX_BYTES
    o, recall = doc["overall"], f"recall@{k}"
    click.echo(f"evaluate: {recall} {number(o[recall]['value'])} (n={o[recall]['n']}), mrr {number(o['mrr']['value'])}, invalid {doc['invalid_entries']}")


def evaluate(cfg: Params, memo: Memo) -> dict[str, Any]:
    """Every output (path relative to ROOT -> frame, JSON document or text), evaluated."""
    local_datasets()  # pictures of local data sets come from their files in data/corpus/
    entries, invalid = ([e for _, e in iter_jsonl(at.valid_dir / name)] for name in ("dev.jsonl", "invalid.jsonl"))
    summary = read_json(at.valid_dir / "summary.json")
    resolved = read_regions(at.resolved)  # typed and placed regions, the gold sources' segments, unreadable gold
    failures = at.runs / "failures.parquet"
    description = RunDescription.from_record(read_json(at.runs / "system.json"), cfg.chunking_written)
    # false recall: the system's own abstention, else a threshold calibrated on these dev entries
    options = EvalOptions.from_params(cfg.metrics, abstains=description.abstains)
    with run_blocks(at.runs / "dev.parquet", at.resolved / GOLD_FILE, len(entries), cfg.executor.in_core_rows) as run:
        inputs = EvalInputs(entries=entries, regions=resolved.regions, responses=pd.read_parquet(at.runs / "latency.parquet"),
                            failures=pd.read_parquet(failures) if failures.exists() else no_failures(), served=read_modalities(at.served),
                            memories=load_memory_inputs(at.resolved), gold_segments=resolved.segments_by_source(), invalid=invalid,
                            sha256=summary["sha256"], source=run.source)  # memory hits: codes after the served atoms'
        result = evaluate_run(inputs, options, description, memo)  # intervals reused by content (bench/memo.py)
        report = dev_report(result, inputs, k=options.k, max_k=cfg.system.depth, calibration_recall=options.calibration_recall,
                            corpus=CorpusFiles.from_manifest(Manifest.load(at.manifest), at.store), memo=memo,
                            content=sha256_bytes(f"{sha256_file(at.manifest)} {sha256_file(at.resolved / SEGMENTS)}".encode()))
        if (line := run.describe(cfg.executor.in_core_rows)) is not None:
            click.echo(f"evaluate: {line} (DuckDB)", err=True)
    click.echo(f"evaluate: per-query columns of {result.reused_queries} of {len(entries)} queries reused; {memo.summary()}", err=True)
    doc, k = result.document, options.k
    imports = {p.stem: read_json(p) for p in sorted((at.sets_dir / "imports").glob("*.json"))}
    enabled = {Path(p).stem for p in summary["sha256"]["sets"]}
    return {"data/eval/per_query.parquet": result.per_query, DEV_METRICS: doc, "reports/per_query/dev.parquet": per_query_table(result.query_table, k),
            "reports/dev.md": markdown(doc, entries, invalid, resolved.regions, {key: v for key, v in imports.items() if key in enabled},
                                       summary, read_json(at.atoms / "stats.json"), resolved.unreadable),
            **{f"reports/plots/{name}": text for name, text in report.plots.items()}, "reports/dev.html": report.html}


if __name__ == "__main__":
    main()
