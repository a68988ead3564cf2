"""DVC stage evaluate: metrics per modality (reports/metrics/dev.json), reports/dev.md,
reports/dev.html, the per-query table and the plot tables.

Reads the dev run's files, calls bench.evaluation.evaluate.evaluate (the same evaluation
as the acceptance stage) and writes the results."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import click
import pandas as pd

from bench.evaluation.atom_codes import load_served, served_ids, with_atom_ids
from bench.evaluation.blocks import DuckDBBlocks, parquet_rows, queries_per_block
from bench.evaluation.evaluate import (
    EvalInputs,
    EvalOptions,
    RunDescription,
    evaluate,
    gold_segments,
    no_failures,
    per_query_table,
)
from bench.ingest.corpus import Manifest
from bench.io import iter_jsonl, write_json, write_parquet, write_text
from bench.params import ParamsError, check_executor
from bench.project.layout import (
    ATOMS,
    MANIFEST,
    REPORTS,
    RESOLVED,
    ROOT,
    RUNS,
    SEGMENTS,
    SERVED,
    SETS_DIR,
    STORE,
    VALID_DIR,
    fail,
    read_json,
)
from bench.project.selection import checked_params, local_datasets
from bench.reporting.outputs import dev_report
from bench.reporting.report import markdown
from bench.reporting.thumbnails import CorpusFiles

#: DuckDB's memory bound when the run is read out of core (it spills to a temporary folder beyond it)
DUCKDB_MEMORY = "2GB"


@click.command()
def main() -> None:
    cfg = checked_params()
    try:
        in_core_rows = check_executor(cfg.get("executor")).in_core_rows  # not a DVC param: it never changes a result
    except ParamsError as exc:
        fail(str(exc))
    local_datasets()  # pictures of local data sets come from their files in data/corpus/
    entries = [e for _, e in iter_jsonl(VALID_DIR / "dev.jsonl")]
    invalid = [r for _, r in iter_jsonl(VALID_DIR / "invalid.jsonl")]
    summary = read_json(VALID_DIR / "summary.json")
    regions = pd.read_parquet(RESOLVED / "regions.parquet")
    system = read_json(RUNS / "system.json")
    served = load_served(SERVED)
    # run and gold name atoms by integer code (row of the served atoms, modalities in name
    # order: bench.evaluation.atom_codes); the ids are added for the reports
    table = served_ids(served)
    run_path, gold_path = RUNS / "dev.parquet", RESOLVED / "gold.parquet"
    run_rows = parquet_rows(run_path)
    per_block = queries_per_block(run_rows, len(entries), in_core_rows)
    with contextlib.ExitStack() as stack:
        if per_block is None:  # in core: run and gold read whole, evaluated as one block
            run, gold, source = with_atom_ids(pd.read_parquet(run_path), table), with_atom_ids(pd.read_parquet(gold_path), table), None
        else:  # out of core: DuckDB hands the run and gold over one query block at a time
            run, gold = None, None
            source = stack.enter_context(DuckDBBlocks(run_path, gold_path, per_block, memory_limit=DUCKDB_MEMORY,
                                                      prepare=lambda f: with_atom_ids(f, table)))
        _evaluate(cfg, entries, invalid, summary, regions, system, served, run, gold, source)
        if source is not None:
            click.echo(f"evaluate: out of core: {run_rows} run rows > executor.in_core_rows {in_core_rows}: "
                       f"{source.block_count} query blocks of <= {per_block} queries (DuckDB)", err=True)


def _evaluate(cfg: dict, entries: list, invalid: list, summary: dict, regions: pd.DataFrame, system: dict, served: dict,
              run: pd.DataFrame | None, gold: pd.DataFrame | None, source: DuckDBBlocks | None) -> None:
    k = int(cfg["metrics"]["k"])
    inputs = EvalInputs(
        entries=entries,
        run=run,
        gold=gold,
        regions=regions,
        responses=pd.read_parquet(RUNS / "latency.parquet"),
        failures=pd.read_parquet(RUNS / "failures.parquet") if (RUNS / "failures.parquet").exists() else no_failures(),
        served=served,
        gold_segments=gold_segments(regions, SEGMENTS),
        invalid=invalid,
        sha256=summary["sha256"],
        source=source,
    )
    # false recall: the system's own abstention, else a threshold calibrated on these dev entries
    options = EvalOptions(
        k=k,
        bootstrap_resamples=int(cfg["metrics"].get("bootstrap_resamples", 1000)),
        bootstrap_seed=int(cfg["metrics"].get("bootstrap_seed", 0)),
        abstains=bool(system.get("abstains", False)),
        calibration_recall=float(cfg["metrics"]["calibration_recall"]),
    )
    description = RunDescription(
        system=system["name"], depth=system["depth"], chunking=cfg["chunking"], concurrency=system.get("concurrency", 1),
        warm=system.get("warm", True), adapter=system.get("adapter", "builtin"), warmup_queries=system.get("warmup_queries", 0),
        timeout_s=system.get("timeout_s"), latency=system.get("latency"), isolation=system.get("isolation"),
    )
    result = evaluate(inputs, options, description)
    doc = result.document
    write_parquet(ROOT / "data" / "eval" / "per_query.parquet", result.per_query)
    json.dumps(doc, allow_nan=False)  # strict JSON: a NaN or infinity stops the stage before anything is written
    write_json(REPORTS / "metrics" / "dev.json", doc)

    imports = {p.stem: read_json(p) for p in sorted((SETS_DIR / "imports").glob("*.json"))}
    stats = read_json(ATOMS / "stats.json")
    enabled = {Path(p).stem for p in summary["sha256"]["sets"]}
    textless = read_json(RESOLVED / "unreadable_gold.json")  # found by the resolve stage (Modality.unreadable_gold)
    write_text(REPORTS / "dev.md", markdown(doc, entries, invalid, regions, {k_: v for k_, v in imports.items() if k_ in enabled}, summary, stats, textless))

    write_parquet(REPORTS / "per_query" / "dev.parquet", per_query_table(result.full, k))
    report = dev_report(result, inputs, k=k, max_k=int(cfg["system"].get("depth", 100)),
                        calibration_recall=options.calibration_recall, corpus=CorpusFiles.from_manifest(Manifest.load(MANIFEST), STORE))
    for name, text in report.plots.items():
        write_text(REPORTS / "plots" / name, text)
    write_text(REPORTS / "dev.html", report.html)
    o = doc["overall"]
    click.echo(f"evaluate: recall@{k} {o[f'recall@{k}']['value']:.4f} (n={o[f'recall@{k}']['n']}), mrr {o['mrr']['value']:.4f}, invalid {doc['invalid_entries']}")


if __name__ == "__main__":
    main()
