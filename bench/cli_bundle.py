"""`bench bundle`, `bench keys new`, `bench verify`: a result anyone can verify (bench.bundle; docs/acceptance.md).

`bench bundle` reads the dev run's files as the evaluate stage does (the same evidence it evaluated),
adds the acceptance's test bundle when there is one, checks the bundle by recomputing it and writes it;
`bench verify` checks a bundle with the verifier's own key and recomputes every number. pandas and the
harness are imported when a command runs, so `bench --help` imports neither."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from bench.bundle.signing import BundleError
from bench.project.layout import AUDIT, DEV_BUNDLE, DEV_METRICS, PER_QUERY, SPLIT_LOCK_FILE, TEST_BUNDLE, Layout, find_root, read_json


def _checks(**more: Any) -> Any:
    """What the verifier brings: the verdict rule and the installed harness's code (bench.project.layout.HERE)."""
    from bench.bundle.code import harness_files
    from bench.bundle.verify import Checks
    from bench.project.layout import HERE
    from bench.reporting.report import verdict

    return Checks(verdict=verdict, harness_files=harness_files(HERE.root), split_lock=SPLIT_LOCK_FILE, **more)


def dev_evidence(at: Layout) -> Any:
    """The dev run's evidence, read as the evaluate stage reads it (stages/evaluate.py)."""
    import pandas as pd

    from bench.bundle.evidence import Evidence
    from bench.evaluation.evaluate import EvalOptions, RunDescription, no_failures
    from bench.evaluation.memory_report import load_memory_inputs
    from bench.gold.table import GOLD_FILE, REGIONS
    from bench.ingest.partitions import read_modalities
    from bench.io import iter_jsonl
    from bench.project.selection import config

    cfg = config(at)
    needed = [at.valid_dir / "dev.jsonl", at.valid_dir / "summary.json", at.runs / "dev.parquet", at.runs / "system.json",
              at.resolved / GOLD_FILE, at.resolved / REGIONS, at / DEV_METRICS, at / PER_QUERY]
    missing = [p for p in needed if not p.is_file()]
    if missing:
        raise BundleError(f"{missing[0].relative_to(at.root)}: missing; run `dvc repro` first")
    description = RunDescription.from_record(read_json(at.runs / "system.json"), cfg.chunking_written)
    failures = at.runs / "failures.parquet"
    return Evidence(split="dev", entries=[e for _, e in iter_jsonl(at.valid_dir / "dev.jsonl")],
                    invalid=[r for _, r in iter_jsonl(at.valid_dir / "invalid.jsonl")], run=pd.read_parquet(at.runs / "dev.parquet"),
                    gold=pd.read_parquet(at.resolved / GOLD_FILE), regions=pd.read_parquet(at.resolved / REGIONS),
                    responses=pd.read_parquet(at.runs / "latency.parquet"),
                    failures=pd.read_parquet(failures) if failures.exists() else no_failures(), served=read_modalities(at.served),
                    memories=load_memory_inputs(at.resolved), sha256=read_json(at.valid_dir / "summary.json")["sha256"],
                    options=EvalOptions.from_params(cfg.metrics, abstains=description.abstains), description=description)


def _accepted(at: Layout) -> dict[str, bytes]:
    """The acceptance's test bundle and the audit chain, when the project was accepted with one."""
    from bench.bundle.verify import AUDIT_CHAIN, NESTED

    if not (at / TEST_BUNDLE).is_file() or not (at / AUDIT).is_file():
        if (at / AUDIT).is_file():
            click.echo(f"bench bundle: accepted, but no {TEST_BUNDLE} (accepted before test bundles): the test result is left out; "
                       "`bench accept` again bundles the test run", err=True)
        return {}
    return {NESTED: (at / TEST_BUNDLE).read_bytes(), AUDIT_CHAIN: (at / AUDIT).read_bytes()}


@click.command("bundle")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help=f"the bundle file (default {DEV_BUNDLE})")
@click.option("--sign", "sign_key", type=click.Path(dir_okay=False), default=None,
              help="sign with this Ed25519 private key file (bench keys new)")
def bundle_command(out: str | None, sign_key: str | None) -> None:
    """Write the dev run's result bundle: one zip of what its numbers rest on, checked by recomputing them."""
    from bench.bundle.build import build, run_record
    from bench.bundle.make import Claims
    from bench.bundle.signing import load_private
    from bench.io import LineError, write_bytes

    at = Layout(find_root())
    target = Path(out) if out else at / DEV_BUNDLE
    try:
        key = load_private(Path(sign_key)) if sign_key else None
        ev = dev_evidence(at)
        claims = Claims(document=(at / DEV_METRICS).read_bytes(), per_query=(at / PER_QUERY).read_bytes())
        data, lines = build(ev, claims, run_record(at.root, at.params, at.manifest, read_json(at.runs / "system.json"), _accepted(at)),
                            _checks(), key)
    except (BundleError, LineError, ValueError) as exc:
        raise click.ClickException(f"bench bundle: {exc}") from None
    write_bytes(target, data)
    signed = f"signed by {key.public.key_id}" if key else "unsigned: --sign KEY signs it"
    click.echo(f"bench bundle: {target} ({len(data)} bytes, {signed}); {lines[-1] if lines else ''}")


@click.group("keys")
def keys_group() -> None:
    """Ed25519 key pairs for signing bundles."""


@keys_group.command("new")
@click.argument("private", type=click.Path(dir_okay=False))
@click.argument("public", type=click.Path(dir_okay=False))
def keys_new(private: str, public: str) -> None:
    """Write a new key pair: PRIVATE (mode 0600, keep it secret) and PUBLIC (give it to verifiers)."""
    from bench.bundle.signing import new_key_pair

    try:
        key_id = new_key_pair(Path(private), Path(public))
    except (BundleError, OSError) as exc:
        raise click.ClickException(f"bench keys new: {exc}") from None
    click.echo(f"bench keys new: {private} (private, mode 0600) and {public} (public), key {key_id}")


@click.command("verify")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--key", type=click.Path(dir_okay=False), default=None,
              help="the trusted Ed25519 public key file (never taken from the bundle)")
@click.option("--mirror", type=click.Path(file_okay=False), default=None,
              help="also check the set files (of the project here) and every served corpus file (in this mirror root) by digest")
def verify_command(file: str, key: str | None, mirror: str | None) -> None:
    """Verify a result bundle: its signature, every member's digest, every number recomputed. Exit 0 only when all hold."""
    from bench.bundle.verify import verify

    more: dict[str, Any] = {}
    if mirror:
        from bench.corpus_sources import datasets
        from bench.project.selection import local_datasets

        root = find_root()
        project = root if (root / SPLIT_LOCK_FILE).parent.is_dir() else None
        if project is not None:
            local_datasets(Layout(project))
        more = {"mirror": Path(mirror), "project": project, "mirror_keys": {k: ds.mirror_key for k, ds in datasets().items()}}
    result = verify(Path(file), Path(key) if key else None, _checks(**more))
    for line in result.lines:
        click.echo(f"verify: {line}")
    if result.failure:
        click.echo(f"verify: FAILED: {result.failure}", err=True)
        sys.exit(1)
    click.echo(f"verify: ok: {file}")


#: the commands bench.cli adds
COMMANDS = (bundle_command, keys_group, verify_command)
