"""The locked acceptance stage (bench/test/dvc.yaml): the only reader of test entries.

It refuses to run unless `bench accept` called it (a single-use token in the
environment and in data/.accept-token) and never inside `dvc exp run`. It validates
the sets again (schema, corpus and split lock), checks that manifest, sets and lock
are the files the dev run recorded, then evaluates the valid test entries with the
same code as the dev stages: the atoms the dev run served (data/served), the system
of params `system` through its adapter (bench.evaluation.retrieve.run_queries), bench.evaluation.resolve,
bench.evaluation.metrics, bench.reporting.report and the evaluate stage's extra cells (stages/evaluate_fair).

Writes reports/metrics/test.json (the shape of dev.json) and appends one row to
reports/acceptance.jsonl. Both are `persist` outputs, so a refused or failed run
leaves the previous ones untouched.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

import click
import pandas as pd

from bench.accept import (
    AUDIT,
    DEV_METRICS,
    SUMMARY,
    TEST_METRICS,
    TOKEN_FILE,
    append_audit,
    audit_problem,
    audit_row,
    describe,
    dev_thresholds,
    git_commit,
    last_line_sha256,
    preflight,
    read_audit,
    recorded_hash_mismatch,
    stage_refusal,
)
from bench.annotations.splits import load_lock
from bench.evaluation.atom_codes import served_ids, with_atom_ids
from bench.evaluation.metrics import aggregate, false_recall_rules, per_query
from bench.evaluation.resolve import resolve
from bench.evaluation.retrieve import run_queries
from bench.ingest.corpus import Manifest, load_segments
from bench.io import LineError, sha256_file, write_json
from bench.reporting.report import metrics_document
from bench.systems import MissingExtra
from bench.systems.adapters import SystemCrash
from bench.systems.config import system_config
from bench.systems.sandbox import protected_paths, system_temp_root
from bench.systems.session import open_system
from bench.validate_sets import format_table, validate
from stages import evaluate_fair
from stages.common import MANIFEST, PARAMS, ROOT, SEGMENTS, SERVED, SPLIT_LOCK, STORE, fail, params, read_json, set_files
from stages.evaluate import entries_frame, failure_summary
from stages.retrieve import COMMON, percentiles


@click.command()
def main() -> None:
    token_file = ROOT / TOKEN_FILE
    reason = stage_refusal(os.environ, token_file, ROOT)
    if reason:
        fail(f"accept: refused: {reason}")
    token_file.unlink()  # single use
    cfg = params()
    paths = set_files()
    # every check `bench accept` made, made again here: a hand-made token opens nothing
    try:
        reason = preflight(ROOT, os.environ, paths, cfg, in_stage=True)
    except (RuntimeError, LineError, ValueError) as exc:
        reason = str(exc)
    if reason:
        fail(f"accept: refused: {reason}")
    try:
        manifest = Manifest.load(MANIFEST)
        lock = load_lock(SPLIT_LOCK, SPLIT_LOCK.relative_to(ROOT).as_posix())
    except LineError as exc:
        fail(str(exc))
    summary = read_json(ROOT / SUMMARY)
    dev_doc = read_json(ROOT / DEV_METRICS)
    mismatch = recorded_hash_mismatch(ROOT, paths, summary, dev_doc, SPLIT_LOCK)
    if mismatch:
        fail(f"accept: refused: {mismatch}")
    segments = load_segments(SEGMENTS)
    if segments is None:
        fail("no segments; run the dev pipeline (`dvc repro`) first")
    result = validate(paths, manifest, segments, root=ROOT, lock=lock)
    if not result.ok:
        click.echo(format_table(result.errors), err=True)
        fail(f"{len(result.errors)} problems in {result.errors['file'].nunique()} file(s); nothing written")
    test = result.split("test")
    invalid = [r for r in result.invalid if r["split"] == "test"]
    if not test:
        fail("no valid test entries in the enabled sets; nothing to accept")

    k = int(cfg["metrics"]["k"])
    try:
        sys_cfg = system_config(cfg["system"])
    except ValueError as exc:
        fail(f"params.yaml {exc}")
    # the atoms the dev run served (data/served, written by the dev retrieve stage)
    frames = sorted(SERVED.glob("*.parquet"))
    if not frames:
        fail("no served atoms in data/served; run the dev pipeline (`dvc repro`) first")
    atoms = pd.concat([pd.read_parquet(p, columns=COMMON) for p in frames], ignore_index=True)
    served = {p.stem: pd.read_parquet(p) for p in frames}
    try:  # the same sandbox as the dev run (bench/systems/session.py): never the sets, the token or DVC_*
        with open_system(sys_cfg, served, atoms, segments=segments, manifest_rows=list(manifest.rows), store=STORE, root=ROOT,
                         temp_root=system_temp_root(ROOT), protected=protected_paths(ROOT), host_env=os.environ) as opened:
            ran = run_queries(opened.adapter, test, sys_cfg.depth, timeout_s=sys_cfg.timeout_s, concurrency=sys_cfg.concurrency,
                              warmup=sys_cfg.warmup, known_atoms=set(atoms["atom_id"].astype(str)))
    except (ValueError, RuntimeError, MissingExtra, SystemCrash) as exc:  # malformed results name the query
        fail(f"system {sys_cfg.name!r}: {exc}")
    fresh = {p.stem: pd.read_parquet(p) for p in frames}
    gold, regions = resolve(test, fresh, segments)
    gold = with_atom_ids(gold, served_ids(fresh))  # atom codes (rows of `atoms`) and their ids, as evaluate reads them
    ent = entries_frame(test, regions)
    failed = ran.failures["query_id"].astype(str).tolist()
    # false recall: the dev run's rule; its calibrated thresholds are reused, never recalibrated on test
    abstains, thresholds = dev_thresholds(dev_doc)
    pq = per_query(ent, ran.run, gold, atoms[["atom_id", "holder", "observed_at"]], k=k, failed=failed, responses=ran.latency,
                   abstains=abstains, thresholds=thresholds)
    agg = aggregate(pq, ran.latency, failed, k=k)
    run_info = {
        "system": sys_cfg.name,
        "depth": sys_cfg.depth,
        "k": k,
        "false_recall_rule": false_recall_rules(pq),
        "auroc_signal": str(pq["separation_signal"].iloc[0]),
        "chunking": cfg["chunking"],
        "concurrency": sys_cfg.concurrency,
        "warm": ran.info["warm"],
        "adapter": sys_cfg.adapter,
        "warmup_queries": ran.info["warmup_queries"],
        "timeout_s": sys_cfg.timeout_s,
        "latency": percentiles(ran.latency["latency_ms"]),
        "failures_by_modality": failure_summary(ent, ran.failures),
        "split": "test",
    }
    doc = metrics_document(agg, invalid, summary["sha256"], run_info)
    # the dev report's extra cells (chunk-fair metrics, intervals, atom statistics, ties)
    doc, _, _ = evaluate_fair.extend(doc, pq, ent, ran.run, gold, regions, ran.latency, failed, cfg)

    audit = ROOT / AUDIT
    try:
        earlier = read_audit(audit)
    except LineError as exc:
        fail(f"{exc}; the audit file is never rewritten: repair it from git")
    broken = audit_problem(ROOT)  # again, right before the append
    if broken:
        fail(f"accept: refused: {broken}")
    row = audit_row(
        earlier,
        utc=datetime.now(UTC).isoformat(timespec="seconds"),
        git_commit=git_commit(ROOT),
        params_sha256=sha256_file(PARAMS),
        sha256=summary["sha256"],
        dev_metrics_sha256=sha256_file(ROOT / DEV_METRICS),
        doc=doc,
        test_entries=len(test),
        prev_sha256=last_line_sha256(audit),
    )
    write_json(ROOT / TEST_METRICS, doc)
    append_audit(audit, row)
    click.echo(f"accept: {describe(row, k)}")


if __name__ == "__main__":
    main()
