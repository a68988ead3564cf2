"""The locked acceptance stage (bench/test/dvc.yaml): the only reader of test entries.

Only `bench accept`'s single-use token opens it (never `dvc exp run`); every check `bench accept` made is
made again. The dev stages' steps run the system (bench.systems.step.run_system: the same sandbox) over the valid test entries on
the atoms the dev run served and resolve and evaluate them (in_memory.evaluated). Writes reports/metrics/test.json, reports/test.md,
the test run's bundle (bundled.acceptance_bundle, signed with params bundle.sign_key) and one more row of reports/acceptance.jsonl,
together (`persist`: a refused or failed run leaves the previous ones)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import click

from bench.acceptance import report as acceptance
from bench.acceptance.bundled import acceptance_bundle, signing_key
from bench.acceptance.in_memory import evaluated, test_run_options
from bench.annotations.splits import load_lock
from bench.annotations.validate import format_table, validate
from bench.bundle.signing import BundleError
from bench.ingest.corpus import Manifest, load_segments
from bench.ingest.partitions import read_modalities
from bench.io import LineError, atomic_outputs
from bench.project.layout import DEV_METRICS, MANIFEST, PARAMS, ROOT, SEGMENTS, SERVED, SPLIT_LOCK, STORE, SUMMARY, fail, read_json
from bench.project.selection import config, mirror_roots, set_files
from bench.systems.config import check_system
from bench.systems.step import StepError, SystemPlaces, run_system

T = TypeVar("T")


def _refuse(reason: str | None) -> None:
    if reason:
        fail(f"accept: refused: {reason}")


def _or_fail(call: Callable[[], T], errors: type[Exception] | tuple[type[Exception], ...], say: Callable[[Exception], str] = str) -> T:
    try:
        return call()
    except errors as exc:
        fail(say(exc))


@click.command()
def main() -> None:
    token_file = ROOT / acceptance.TOKEN_FILE
    _refuse(acceptance.stage_refusal(os.environ, token_file, ROOT))
    token_file.unlink()  # single use
    cfg, paths = config(), set_files()
    # every check `bench accept` made, made again here: a hand-made token opens nothing
    _refuse(_or_fail(lambda: acceptance.preflight(ROOT, os.environ, paths, cfg, in_stage=True), (RuntimeError, LineError, ValueError),
                     lambda exc: f"accept: refused: {exc}"))
    manifest = _or_fail(lambda: Manifest.load(MANIFEST), LineError)
    lock = _or_fail(lambda: load_lock(SPLIT_LOCK, SPLIT_LOCK.relative_to(ROOT).as_posix()), LineError)
    summary, dev_doc = read_json(ROOT / SUMMARY), read_json(ROOT / DEV_METRICS)
    _refuse(acceptance.recorded_hash_mismatch(ROOT, paths, summary, dev_doc, SPLIT_LOCK))
    key = _or_fail(lambda: signing_key(cfg.bundle.sign_key, ROOT), BundleError, lambda exc: f"accept: refused: {exc}")  # before any work
    if (segments := load_segments(SEGMENTS)) is None:
        fail("no segments; run the dev pipeline (`dvc repro`) first")
    result = validate(paths, manifest, segments, root=ROOT, lock=lock)
    if not result.ok:
        click.echo(format_table(result.errors), err=True)
        fail(f"{len(result.errors)} problems in {result.errors['file'].nunique()} file(s); nothing written")
    if not (test := result.split("test")):
        fail("no valid test entries in the enabled sets; nothing to accept")
    sys_cfg = _or_fail(lambda: check_system(cfg.system), ValueError)
    if not (served := read_modalities(SERVED)):  # the atoms the dev run served (data/served)
        fail("no served atoms in data/served; run the dev pipeline (`dvc repro`) first")
    places = SystemPlaces.of_project(ROOT, STORE, os.environ, mirror_roots(list(cfg.fetch.mirror_dirs), os.environ, ROOT),
                                     list(cfg.local_datasets))
    # the dev retrieve stage's step: the same sandbox, declared code and refusals (bench/systems/step.py)
    ran_system = _or_fail(lambda: run_system(sys_cfg, test, served, places=places, segments=segments, manifest_rows=list(manifest.rows)),
                          StepError)
    ran = ran_system.result  # evaluated with the dev run's false-recall rule, never recalibrated on test (in_memory.test_run_options)
    options, description = test_run_options(cfg.metrics, cfg.chunking_written, sys_cfg, ran_system, dev_doc)
    evaluation, evidence = evaluated(test, [r for r in result.invalid if r["split"] == "test"], ran, ran.latency, ran.failures, served,
                                     segments, options, description, in_core_rows=cfg.executor.in_core_rows, sha256=summary["sha256"])
    doc = evaluation.document
    row = _or_fail(lambda: acceptance.acceptance_row(ROOT, doc, summary=summary, test_entries=len(test), params_path=PARAMS), ValueError)
    bundle = _or_fail(lambda: acceptance_bundle(ROOT, evaluation, evidence, row=row, system=ran_system.info, key=key, params=PARAMS,
                                                manifest=MANIFEST, split_lock=SPLIT_LOCK), BundleError, lambda exc: f"accept: {exc}")
    with atomic_outputs(on_disk_full=fail):  # test.json, test.md, the bundle and the audit row change together or not at all
        acceptance.write_acceptance(ROOT, doc, row, bundle)
    click.echo(f"accept: {acceptance.describe(row, cfg.metrics.k)}")


if __name__ == "__main__":
    main()
