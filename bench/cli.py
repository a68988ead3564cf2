"""The `bench` command: validate sets, import data sets, list sources."""

from __future__ import annotations

import functools
import json
import sys
from datetime import UTC
from pathlib import Path
from typing import Any

import click

from bench.cli_bundle import COMMANDS as BUNDLE_COMMANDS
from bench.cli_validate import validate_command
from bench.comparison import LATENCY_FLOOR_MS, MAX_LATENCY_RATIO
from bench.comparison.options import FIELDS, MAX_UNPAIRED, StatsOptions
from bench.evaluation.stats import CLUSTERINGS
from bench.modalities import names as modality_names
from bench.project.docs import docs_command
from bench.project.layout import AUDIT, DEV_METRICS, PER_QUERY, TEST_METRICS, Layout, find_root, read_params
from bench.project.selection import config, local_datasets, mirror_roots, set_files


@click.group(commands=[validate_command, docs_command, *BUNDLE_COMMANDS])
def cli() -> None:
    """Retrieval-evaluation harness for a multimodal memory system."""


@cli.group()
def sets() -> None:
    """Annotation sets: import them from upstream data."""


@sets.command("import")
@click.argument("keys", nargs=-1, required=True)
@click.option("--mirror", type=click.Path(file_okay=False), default=None, help="mirror root (default: first of params fetch.mirror_dirs)")
def import_(keys: tuple[str, ...], mirror: str | None) -> None:
    """Import data sets by key (or 'all') into bench/sets/<key>.jsonl."""
    from bench.annotations.sets_io import write_set
    from bench.corpus_sources import datasets

    project = Layout(find_root())
    root = project.root
    if mirror is None:
        mirror = str(mirror_roots(list(config(project).fetch.mirror_dirs), root=root)[0])
    known = datasets()
    wanted = sorted(known) if keys == ("all",) else list(keys)
    for key in wanted:
        if key not in known:
            raise click.ClickException(f"unknown data set {key!r}; registered: {', '.join(sorted(known))}")
        ds = known[key]
        result = ds.import_set(Path(mirror) / ds.mirror_key)
        out = write_set(ds, result, project.sets_dir)
        click.echo(f"{key}: {len(result.entries)} entries -> {out.relative_to(root)}; {len(result.excluded)} upstream rows excluded")


@cli.command()
def sources() -> None:
    """List every registered data set with its provenance."""
    from bench.corpus_sources import datasets

    local_datasets(Layout(find_root()))
    click.echo(json.dumps([ds.describe() for ds in datasets().values()], indent=2))


@cli.command()
@click.option("--status", "show_status", is_flag=True, help="only say whether the accepted test result is current")
def accept(show_status: bool) -> None:
    """Final acceptance: evaluate the test split once, through its locked stage.

    Refuses (one line, exit 1) inside `dvc exp run` or a queued experiment, with
    uncommitted changes to code, params or sets, with stale dev metrics, or when the
    manifest, a set or the split lock differs from what the dev run recorded.
    """
    import os
    import secrets
    import subprocess

    from bench.acceptance import report as acc
    from bench.dvcignore import lifted
    from bench.io import LineError, sha256_file, write_text

    root = find_root()
    if show_status:
        sys.exit(_accept_status(root))
    try:
        reason = acc.preflight(root, os.environ, set_files(layout=Layout(root)), config(Layout(root)))
    except (RuntimeError, LineError, ValueError) as exc:
        reason = str(exc)
    if reason:
        click.echo(f"bench accept: refused: {reason}", err=True)
        sys.exit(1)
    token = secrets.token_hex(16)
    # bound to what was just checked: the stage refuses it on another commit or params
    write_text(root / acc.TOKEN_FILE, acc.token_text(token, acc.git_commit(root), sha256_file(root / "params.yaml")))
    try:
        with lifted(root, ACCEPT_IGNORE):  # .dvcignore hides the acceptance pipeline from everything else
            proc = subprocess.run(
                [sys.executable, "-m", "dvc", "repro", "--force", "--single-item", acc.STAGE],
                cwd=root, env=acc.stage_env(os.environ, token), check=False,
            )
    finally:
        acc.remove_token(root)
    if proc.returncode != 0:
        click.echo("bench accept: the acceptance stage failed (reason above); nothing recorded", err=True)
        sys.exit(1)
    rows = acc.read_audit(root / AUDIT)
    k = config(Layout(root)).metrics.k
    click.echo(f"bench accept: {acc.describe(rows[-1], k)}; audit row appended to {AUDIT}, metrics in {TEST_METRICS}")


#: the .dvcignore line that hides the acceptance pipeline (bench/test/) from DVC
ACCEPT_IGNORE = "/bench/test/"


def _accept_status(root: Path) -> int:
    """`dvc status` of the acceptance stage alone: 0 when the accepted result is current."""
    import subprocess

    from bench.acceptance import report as acc
    from bench.dvcignore import lifted

    if not (root / TEST_METRICS).is_file():
        click.echo(f"bench accept --status: no accepted test result ({TEST_METRICS} missing): run `bench accept`")
        return 1
    with lifted(root, ACCEPT_IGNORE):
        proc = subprocess.run([sys.executable, "-m", "dvc", "status", acc.STAGE], cwd=root, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise click.ClickException(f"dvc status failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    if "up to date" in proc.stdout:
        click.echo(f"bench accept --status: the accepted test result ({TEST_METRICS}) is current")
        return 0
    click.echo(f"bench accept --status: the accepted test result is not current; what changed since:\n{proc.stdout.rstrip()}")
    return 1


@cli.group("datasets")
def datasets_cmd() -> None:
    """Local data sets: your own corpus and gold, with no Python (docs/local-data.md)."""


@datasets_cmd.command("new")
@click.option("--modality", required=True, type=click.Choice(modality_names()))
@click.argument("folder", type=click.Path(file_okay=False))
def datasets_new(modality: str, folder: str) -> None:
    """Write a skeleton local data set in FOLDER with a two-entry example."""
    from bench.modalities.local import LocalDataError, skeleton

    try:
        written = skeleton(Path(folder), modality)
    except LocalDataError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {folder}: {', '.join(written)}")
    click.echo(f"next: edit dataset.yaml and set.jsonl, put your files in {folder}/files/, add the folder to params.yaml local_datasets")


@cli.group("splits")
def splits_cmd() -> None:
    """The split lock bench/sets/splits.lock: which query_ids are test, frozen."""


@splits_cmd.command("freeze")
@click.option("--reason", required=True, help="why the splits change; recorded in the lock")
def splits_freeze(reason: str) -> None:
    """Re-freeze the splits of every set: bench/sets/*.jsonl and the local data sets' set.jsonl (params local_datasets), recorded in the lock."""
    import os
    from datetime import datetime

    from bench.acceptance.report import experiment_reason, git_commit
    from bench.annotations.splits import changes, freeze, load_lock, lock_text, set_triples
    from bench.io import LineError, write_text

    root = find_root()
    why = experiment_reason(os.environ, root)
    if why:
        raise click.ClickException(f"refused: {why}")
    lock_path = Layout(root).split_lock
    try:
        old = load_lock(lock_path, "bench/sets/splits.lock") if lock_path.is_file() else None
        local = [ds.set_path for ds in local_datasets(Layout(root))]  # local data sets' set.jsonl
        triples = set_triples(sorted(Layout(root).sets_dir.glob("*.jsonl")) + local)
        new = freeze(old, triples, utc=datetime.now(UTC).isoformat(timespec="seconds"), git_commit=git_commit(root), reason=reason)
    except (LineError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    write_text(lock_path, lock_text(new))
    rec = new.freezes[-1]
    click.echo(f"freeze {rec['freeze']}: {rec['entries']} entries, {rec['test']} test; changes {json.dumps(changes(old, triples))} -> bench/sets/splits.lock")


def _stats_options(f: Any) -> Any:
    """The statistics options of compare, leaderboard and gate, handed to the command as one ``stats``
    (bench.comparison.options.StatsOptions; resamples and seed default to params metrics)."""
    @functools.wraps(f)
    def command(*args: Any, resamples: int | None, seed: int | None, **kwargs: Any) -> Any:
        metrics = _metrics_block(find_root())
        given = {name: kwargs.pop(name) for name in ("permutations", "alpha", "max_unpaired", "clusters")}
        return f(*args, stats=StatsOptions(resamples=resamples or metrics.bootstrap_resamples,
                                           seed=metrics.bootstrap_seed if seed is None else seed, **given), **kwargs)

    for option in reversed((
        click.option("--resamples", type=click.IntRange(1, 1_000_000), default=None, help=FIELDS["resamples"]),
        click.option("--permutations", type=click.IntRange(1, 1_000_000), default=10000, show_default=True, help=FIELDS["permutations"]),
        click.option("--seed", type=int, default=None, help=FIELDS["seed"]),
        click.option("--alpha", type=click.FloatRange(0, 1), default=0.05, show_default=True, help=FIELDS["alpha"]),
        click.option("--max-unpaired", type=click.FloatRange(0, 1), default=MAX_UNPAIRED, show_default=True, help=FIELDS["max_unpaired"]),
        click.option("--clusters", type=click.Choice(CLUSTERINGS), default="question", show_default=True, help=FIELDS["clusters"]),
    )):
        command = option(command)
    return command


@cli.command()
@click.argument("a")
@click.argument("b")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="also write the comparison as JSON here")
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", help="what to print (default Markdown)")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), default=None,
              help="also write every query's A/B as one self-contained page here (docs/comparing.md)")
@_stats_options
def compare(a: str, b: str, json_out: str | None, fmt: str, html_out: str | None, stats: StatsOptions) -> None:
    """Compare run B with run A: paired differences, intervals, Holm-corrected p-values.

    A and B are each a folder (holding reports/per_query/dev.parquet), a git revision
    or a DVC experiment name. See docs/comparing.md.
    """
    from bench.comparison.compare import compare as run_compare
    from bench.comparison.runs import CompareError, common_k, load_run
    from bench.io import write_json
    from bench.reporting.compare_report import markdown as compare_md

    root = find_root()
    metrics = _metrics_block(root)
    try:
        ra, rb = (load_run(spec, root, PER_QUERY, DEV_METRICS, _set_files(root)) for spec in (a, b))
        result = run_compare(ra.per_query, rb.per_query, k=common_k(ra, rb, metrics.k), options=stats)
    except CompareError as exc:
        raise click.ClickException(str(exc)) from None
    result["a"], result["b"] = ra.describe(), rb.describe()
    if html_out:  # first: a refusal (cartridges of another run than the table's) writes nothing
        from bench.io import write_text
        from bench.reporting.cartridges import located
        from bench.reporting.compare_page import build

        try:
            with located((ra, rb), Layout(Path()), PER_QUERY) as files:
                text = build(result, ra, rb, files=files, set_files=_set_files(root))
        except CompareError as exc:
            raise click.ClickException(str(exc)) from None
        write_text(html_out, text)
    if json_out:
        write_json(json_out, result)
    click.echo(json.dumps(result, indent=2) if fmt == "json" else compare_md(result, ra.describe(), rb.describe()))


def _set_files(root: Path) -> list[Path]:
    return sorted(Layout(root).sets_dir.glob("*.jsonl"))


def _metrics_block(root: Path) -> Any:
    """params `metrics` of the project at `root`, checked (compare, leaderboard, gate): only that
    block matters, so a folder whose params.yaml holds no more works too (k: each run's
    dev.json names its own; 10 only for tables without one)."""
    from bench.params import ParamsError, check_block

    layout = Layout(root)
    written = (read_params(layout).get("metrics") or {}) if layout.params.is_file() else {}
    try:
        return check_block("metrics", {"k": 10, **written})
    except ParamsError as exc:
        raise click.ClickException(str(exc)) from None


def _run_params(spec: str, root: Path) -> dict[str, Any]:
    from bench.comparison.runs import CompareError, run_params

    try:
        return run_params(spec, root)
    except CompareError as exc:
        raise click.ClickException(str(exc)) from None


@cli.command()
@click.argument("runs", nargs=-1)
@click.option("--all", "every", is_flag=True, help="every experiment of HEAD (what `dvc exp show` lists)")
@click.option("--baseline", default="HEAD", show_default=True, help="the run the others are compared with")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="also write the leaderboard as JSON here")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), default=None,
              help="also write an HTML page with the quality-against-cost pictures, and beside it each run's A/B page against the baseline")
@click.option("--label", "labels", multiple=True, metavar="NAME=RUN", help="show RUN as NAME (repeatable; default: a folder's base name, the experiment or revision)")
@click.option("--rank-by", default=None, help="the measure the runs are ranked by (default: the declared objective)")
@click.option("--allow-different-sets", is_flag=True, help="rank runs evaluated over different set files (their shared queries)")
@_stats_options
def leaderboard(runs: tuple[str, ...], every: bool, baseline: str, json_out: str | None, html_out: str | None, labels: tuple[str, ...],
                rank_by: str | None, allow_different_sets: bool, stats: StatsOptions) -> None:
    """One table that decides a sweep: RUNs (folders, git revisions, DVC experiments) against a baseline.

    Per modality and overall: changed params, the objective beside its parts (recall@budget,
    false recall), recall@k, MRR, nDCG@k, abstention rate, latency p50, cartridge@k; paired
    intervals and Holm-corrected p-values against the baseline; rank intervals by the
    objective; the Pareto frontier over what the budget packs, differences within noise being
    ties. See docs/comparing.md.
    """
    from bench.comparison.leaderboard import experiment_names
    from bench.comparison.leaderboard import leaderboard as board
    from bench.comparison.runs import CompareError, load_run
    from bench.io import write_json, write_text
    from bench.reporting.leaderboard_page import markdown, parse_labels, short_labels

    root = find_root()
    metrics = _metrics_block(root)
    try:
        given = parse_labels(labels)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--label") from None
    try:
        names = list(dict.fromkeys([baseline, *runs, *(experiment_names(root) if every else [])]))
        if len(names) < 2:
            raise CompareError("no run to rank besides the baseline: name RUNs or pass --all (are there experiments of HEAD?)")
        unknown = [spec for spec in given.values() if spec not in names]
        if unknown:
            raise CompareError(f"--label names a run that is not ranked: {unknown[0]!r} (runs: {', '.join(names)})")
        loaded = [load_run(name, root, PER_QUERY, DEV_METRICS, _set_files(root)) for name in names]
        short = short_labels(names, given)
        for run, label in zip(loaded, short, strict=True):
            run.label = label
        result = board(loaded, base=0, params=[_run_params(name, root) for name in names], k=loaded[0].k or metrics.k,
                       options=stats, rank_by=rank_by, allow_different_sets=allow_different_sets)
    except CompareError as exc:
        raise click.ClickException(str(exc)) from None
    if html_out:
        try:
            write_text(html_out, _leaderboard_pages(result, loaded, names, Path(html_out), root, stats))
        except CompareError as exc:
            raise click.ClickException(str(exc)) from None
    if json_out:
        write_json(json_out, result)
    click.echo(markdown(result))


def _leaderboard_pages(result: dict[str, Any], loaded: list[Any], specs: list[str], out: Path, root: Path, stats: StatsOptions) -> str:
    """Each run's A/B page against the baseline beside `out` (bench.reporting.compare_page), and the
    leaderboard page linking them; the comparisons use the leaderboard's statistics options."""
    from bench.comparison.compare import compare as run_compare
    from bench.io import write_text
    from bench.reporting.cartridges import located
    from bench.reporting.compare_page import build, run_detail
    from bench.reporting.leaderboard_page import page, page_name

    base = loaded[0]
    links = {}
    with located(loaded, Layout(Path()), PER_QUERY) as files:  # each run's data/ outputs found (and checked) once
        base_detail = run_detail(files[0], base, result["k"])  # the baseline's cartridges, read once for every page
        for run, where in zip(loaded[1:], files[1:], strict=True):
            ab = run_compare(base.per_query, run.per_query, k=result["k"], options=stats)
            name = page_name(out.stem, run.label)
            write_text(out.parent / name, build(ab, base, run, files=(files[0], where), set_files=_set_files(root), detail_a=base_detail))
            links[run.label] = name
    return page(result, sources=dict(zip([r.label for r in loaded], specs, strict=True)), links=links)


@cli.command()
@click.argument("base")
@click.option("--min-effect", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="a difference of at most this much never fails the gate")
@click.option("--max-latency-ratio", type=click.FloatRange(1, None), default=MAX_LATENCY_RATIO, show_default=True,
              help="latency p50 / p95 fails only when slower by more than this factor (and the floor)")
@click.option("--latency-floor-ms", type=click.FloatRange(0, None), default=LATENCY_FLOOR_MS, show_default=True,
              help="latency p50 / p95 fails only when slower by more than this many ms (and the factor)")
@click.option("--allow-different-sets", is_flag=True, help="gate runs evaluated over different set files (their shared queries)")
@_stats_options
def gate(base: str, min_effect: float, max_latency_ratio: float, latency_floor_ms: float, allow_different_sets: bool,
         stats: StatsOptions) -> None:
    """Regression gate: exit 1 when a primary measure of this folder's run is significantly worse than BASE's.

    BASE is a folder, git revision or DVC experiment. Gated: the measures declared primary
    (the objective, holder and temporal correctness) per modality and overall, and latency
    beyond noise; the other verdict measures are reported. Exit 0: passed; 1: failed (one line per reason, then
    the gate's line); 2: the two runs cannot be compared (one line). See docs/comparing.md.
    """
    from bench.comparison.gate import gate as run_gate
    from bench.comparison.gate import summary
    from bench.comparison.runs import CompareError, common_k, load_run

    root = find_root()
    metrics = _metrics_block(root)
    try:
        before, now = (load_run(spec, root, PER_QUERY, DEV_METRICS, _set_files(root)) for spec in (base, str(root)))
        result = run_gate(before, now, k=common_k(before, now, metrics.k), min_effect=min_effect, max_latency_ratio=max_latency_ratio,
                          latency_floor_ms=latency_floor_ms, allow_different_sets=allow_different_sets, options=stats)
    except CompareError as exc:
        click.echo(f"gate: refused: {exc}", err=True)
        sys.exit(2)
    for line in [*result.reasons, *result.notes]:
        click.echo(line)
    click.echo(summary(result, base, stats.alpha, min_effect, max_latency_ratio, latency_floor_ms))
    if not result.passed:
        sys.exit(1)


@cli.command("eval")
@click.argument("qrels", type=click.Path(dir_okay=False))
@click.argument("run", type=click.Path(dir_okay=False))
@click.option("-q", "per_query_lines", is_flag=True, help="also print every query's values (trec_eval -q)")
@click.option("-c", "--complete", is_flag=True, help="average over every judged query, a missing one scoring 0 (trec_eval -c)")
@click.option("--json", "as_json", is_flag=True, help="print JSON (means as value, n, denominator) instead of three columns")
def eval_(qrels: str, run: str, per_query_lines: bool, complete: bool, as_json: bool) -> None:
    """Evaluate a TREC RUN against TREC QRELS as trec_eval does (arguments in its order).

    Measures: map, recip_rank, P_10, recall_10, ndcg_cut_10. See docs/trec-eval.md.
    """
    from bench.io import LineError
    from bench.trec.trec_eval import NoCommonQuery, evaluate, format_trec, read_qrels, read_run, to_json

    try:
        result = evaluate(read_qrels(qrels), read_run(run), complete=complete)
    except LineError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except NoCommonQuery as exc:
        click.echo(f"error: {run}: {exc}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(to_json(result, per_query_values=per_query_lines), indent=2))
    else:
        click.echo(format_trec(result, per_query_lines=per_query_lines), nl=False)


@cli.command("systems")
def systems_() -> None:
    """List the built-in systems under test and the adapters (docs/systems.md)."""
    from bench.systems import BUILTINS
    from bench.systems.builtin.dense import dependencies_missing

    missing = dependencies_missing()
    for name, entry in BUILTINS.items():
        note = f"  (unavailable: {missing})" if missing and name.split("-")[0] in ("dense", "hybrid") else ""
        click.echo(f"{name:15} {entry}{note}")
    click.echo("adapters: builtin | python (module:callable) | command (JSON lines) | http (loopback URL)")


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
