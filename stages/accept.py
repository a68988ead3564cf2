"""The locked acceptance stage (bench/test/dvc.yaml): the only reader of test entries.

It refuses to run unless `bench accept` called it (a single-use token in the
environment and in data/.accept-token) and never inside `dvc exp run`. It validates
the sets again (schema, corpus and split lock), checks that manifest, sets and lock
are the files the dev run recorded, then evaluates the valid test entries with the
same code as the dev stages: the atoms the dev run served (data/served), the system
of params `system` through its adapter (bench.evaluation.retrieve.run_queries),
bench.evaluation.resolve, and the evaluate stage's evaluation (bench.evaluation.evaluate).

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
from bench.evaluation.atom_codes import load_served, served_ids, with_atom_ids
from bench.evaluation.blocks import FrameBlocks, queries_per_block
from bench.evaluation.evaluate import EvalInputs, EvalOptions, RunDescription, evaluate, select_gold_segments
from bench.evaluation.placement import place_regions
from bench.evaluation.resolve import resolve
from bench.evaluation.retrieve import SYSTEM_COLUMNS, latency_percentiles, run_queries
from bench.ingest.corpus import Manifest, load_segments
from bench.io import LineError, sha256_file, write_json
from bench.params import ParamsError, check_executor
from bench.project.layout import (
    AUDIT,
    DEV_METRICS,
    MANIFEST,
    PARAMS,
    ROOT,
    SEGMENTS,
    SERVED,
    SPLIT_LOCK,
    STORE,
    SUMMARY,
    TEST_METRICS,
    fail,
    read_json,
)
from bench.project.selection import checked_params, set_files
from bench.systems import MissingExtra
from bench.systems.adapters import SystemCrash
from bench.systems.config import system_config
from bench.systems.sandbox import protected_paths, system_temp_root
from bench.systems.session import open_system
from bench.validate_sets import format_table, validate


@click.command()
def main() -> None:
    token_file = ROOT / TOKEN_FILE
    reason = stage_refusal(os.environ, token_file, ROOT)
    if reason:
        fail(f"accept: refused: {reason}")
    token_file.unlink()  # single use
    cfg = checked_params()
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
    served = load_served(SERVED)
    if not served:
        fail("no served atoms in data/served; run the dev pipeline (`dvc repro`) first")
    atoms = pd.concat([f[SYSTEM_COLUMNS] for f in served.values()], ignore_index=True)
    try:  # the same sandbox as the dev run (bench/systems/session.py): never the sets, the token or DVC_*
        with open_system(sys_cfg, served, atoms, segments=segments, manifest_rows=list(manifest.rows), store=STORE, root=ROOT,
                         temp_root=system_temp_root(ROOT), protected=protected_paths(ROOT), host_env=os.environ) as opened:
            ran = run_queries(opened.adapter, test, sys_cfg.depth, timeout_s=sys_cfg.timeout_s, concurrency=sys_cfg.concurrency,
                              warmup=sys_cfg.warmup, known_atoms=set(atoms["atom_id"].astype(str)))
    except (ValueError, RuntimeError, MissingExtra, SystemCrash) as exc:  # malformed results name the query
        fail(f"system {sys_cfg.name!r}: {exc}")
    gold, regions = resolve(test, served, segments)
    regions = place_regions(regions, segments)  # each region placed once, as the dev resolve stage does
    gold = with_atom_ids(gold, served_ids(served))  # atom codes (rows of the served atoms) and their ids, as evaluate reads them
    # false recall: the dev run's rule; its calibrated thresholds are reused, never recalibrated on test
    abstains, thresholds = dev_thresholds(dev_doc)
    # the evaluate stage's switch (params executor.in_core_rows): above it the run is evaluated
    # block by block; the test run is in memory already, so its blocks are cut from its frames
    try:
        in_core_rows = check_executor(cfg.get("executor")).in_core_rows
    except ParamsError as exc:
        fail(str(exc))
    per_block = queries_per_block(len(ran.run), len(test), in_core_rows)
    inputs = EvalInputs(entries=test, run=ran.run, gold=gold, regions=regions, responses=ran.latency, failures=ran.failures,
                        served=served, gold_segments=select_gold_segments(regions, [segments]), invalid=invalid, sha256=summary["sha256"],
                        source=None if per_block is None else FrameBlocks(ran.run, gold, per_block))
    options = EvalOptions(k=k, bootstrap_resamples=int(cfg["metrics"].get("bootstrap_resamples", 1000)),
                          bootstrap_seed=int(cfg["metrics"].get("bootstrap_seed", 0)), abstains=abstains, thresholds=thresholds)
    description = RunDescription(
        system=sys_cfg.name, depth=sys_cfg.depth, chunking=cfg["chunking"], concurrency=sys_cfg.concurrency, warm=ran.info["warm"],
        adapter=sys_cfg.adapter, warmup_queries=ran.info["warmup_queries"], timeout_s=sys_cfg.timeout_s,
        latency=latency_percentiles(ran.latency["latency_ms"]), split="test",
    )
    doc = evaluate(inputs, options, description).document

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
