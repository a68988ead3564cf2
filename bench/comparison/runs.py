"""Runs to compare, found and read: a folder (a project checkout or a copy of its ``reports/``),
its per-query parquet file, a result bundle (bench.bundle: its claimed per-query table, metrics
and params, each member's digest checked; `bench verify` checks its signature and numbers), a git
revision or a DVC experiment name (bench.comparison.compare documents the forms). A run is its
committed per-query table plus its dev.json and params.yaml."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.bundle.make import ClaimedRun, claimed_run
from bench.bundle.signing import BundleError
from bench.bundle.statement import is_bundle
from bench.evaluation.stats.clusters import COLUMNS as CLUSTER_COLUMNS
from bench.evaluation.stats.clusters import entry_clusters
from bench.io import LineError, iter_jsonl


class CompareError(Exception):
    """A run cannot be found or read; str() is the one-line message."""


@dataclass
class LoadedRun:
    """A finished run loaded for comparison (from a folder, a git revision or a DVC experiment):
    its label, its per-query table and its dev.json document (`metrics`)."""

    label: str
    per_query: pd.DataFrame
    metrics: dict[str, Any] = field(default_factory=dict)
    #: where it was read from (:func:`run_outputs`): a project folder (its data/ outputs and dvc.lock
    #: beside the table, when it holds them), or a commit (a revision or experiment) of the repository `repo`
    folder: Path | None = None
    commit: str | None = None
    repo: Path | None = None

    def describe(self) -> str:
        run = self.metrics.get("run", {})
        run = run if isinstance(run, dict) else {}
        chunking = run.get("chunking", {})
        chunking = {m: c for m, c in chunking.items() if isinstance(c, dict)} if isinstance(chunking, dict) else {}
        parts = [f"{m}={c.get('strategy')}" + ("" if len(c) <= 1 else "(" + ",".join(
            f"{key}={val}" for key, val in sorted(c.items()) if key != "strategy") + ")")
            for m, c in sorted(chunking.items())]
        iso = run.get("isolation")
        isolated = "isolation not recorded" if iso is None else f"isolation {iso}" + (" (not isolated)" if iso in ("process", "none") else "")
        return f"{self.label} ({run.get('system', '?')}; {' '.join(parts) or 'chunking unknown'}; {isolated})"

    @property
    def k(self) -> int | None:
        """The cut-off the run was evaluated at (its dev.json's ``run.k``; None without one)."""
        run = self.metrics.get("run", {})
        k = run.get("k") if isinstance(run, dict) else None
        return k if isinstance(k, int) and not isinstance(k, bool) else None


def common_k(a: LoadedRun, b: LoadedRun, default: int) -> int:
    """The cut-off both runs were evaluated at (from their dev.json; `default`, params
    metrics.k, for a run without one); CompareError when they differ."""
    ka, kb = a.k or default, b.k or default
    if ka != kb:
        raise CompareError(f"the two runs use different k (A: {ka}, B: {kb}): compare runs with the same metrics.k")
    return ka


def git(root: Path, *args: str) -> bytes | None:
    """stdout of a git command in `root`; None when it fails."""
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, check=False)
    return proc.stdout if proc.returncode == 0 else None


def exp_commit(root: Path, name: str) -> str | None:
    """The commit of the DVC experiment `name` (under refs/exps); None when none or several match."""
    out = git(root, "for-each-ref", "--format=%(refname) %(objectname)", "refs/exps")
    if not out:
        return None
    hits = [line.split()[1] for line in out.decode().splitlines() if line.split()[0].rsplit("/", 1)[-1] == name]
    return hits[0] if len(hits) == 1 else None


def _read_parquet_bytes(data: bytes, where: str) -> pd.DataFrame:
    try:
        return pd.read_parquet(io.BytesIO(data))
    except Exception as exc:
        raise CompareError(f"{where}: not a readable parquet table ({exc.__class__.__name__})") from None


def _read_metrics(data: bytes, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CompareError(f"{where}: not readable JSON ({exc.__class__.__name__})") from None
    if not isinstance(doc, dict):
        raise CompareError(f"{where}: not a metrics document (a JSON object)")
    return doc


def load_run(spec: str, root: Path, per_query: str, metrics_file: str, sets: Sequence[Path] | None = None) -> LoadedRun:
    """Find a run by folder, parquet file, git revision or DVC experiment name; `per_query`
    and `metrics_file` are the project's paths of the per-query table and dev.json; ``sets``:
    set files whose entries give the cluster labels a table evaluated before them lacks (:func:`with_clusters`)."""
    return with_clusters(_found(spec, root, per_query, metrics_file), sets or [])


def with_clusters(run: LoadedRun, sets: Sequence[Path]) -> LoadedRun:
    """`run`, its per-query table given the cluster labels (bench.evaluation.stats.clusters) of the entries
    in the set files `sets` when it records none (a run evaluated before the evaluation wrote them); its
    entries no set file holds stay clusters of their own. `run` itself when it has them or no set is given."""
    table = run.per_query
    missing = [c for c in CLUSTER_COLUMNS.values() if c not in table.columns]
    if not missing or not sets or "query_id" not in table.columns:
        return run
    ids = set(table["query_id"].astype(str))
    try:
        entries = [e for path in sets for _, e in iter_jsonl(path) if isinstance(e, dict) and str(e.get("query_id")) in ids]
    except LineError as exc:
        raise CompareError(f"cluster labels for {run.label}: {exc}") from None
    labels = entry_clusters(entries).set_index("query_id").reindex(table["query_id"].astype(str).to_numpy())
    own = table["query_id"].astype(str).to_numpy()
    return replace(run, per_query=table.assign(**{c: np.where(labels[c].isna(), own, labels[c].astype(object)) for c in missing}))


def _found(spec: str, root: Path, per_query: str, metrics_file: str) -> LoadedRun:
    path = Path(spec)
    if path.exists():
        if (bundled := _bundle(path)) is not None:
            return LoadedRun(spec, bundled.per_query, bundled.document)
        if path.is_file():
            pq_path, metrics_path = path, path.parent.parent / "metrics" / "dev.json"
        elif (path / per_query).is_file():
            pq_path, metrics_path = path / per_query, path / metrics_file
        elif (path / "per_query" / "dev.parquet").is_file():
            pq_path, metrics_path = path / "per_query" / "dev.parquet", path / "metrics" / "dev.json"
        else:
            raise CompareError(f"{spec}: folder holds no {per_query}; run the evaluate stage there first")
        frame = _read_parquet_bytes(pq_path.read_bytes(), str(pq_path))
        metrics = _read_metrics(metrics_path.read_bytes(), str(metrics_path)) if metrics_path.is_file() else {}
        return LoadedRun(spec, frame, metrics, folder=path.parent.parent.parent if path.is_file() else path)
    rev = None
    if git(root, "rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}") is not None:
        rev = spec
    else:
        rev = exp_commit(root, spec)
    if rev is None:
        raise CompareError(f"{spec}: not a folder, a git revision or a DVC experiment name of {root.name}")
    data = git(root, "show", f"{rev}:{per_query}")
    if data is None:
        raise CompareError(f"{spec}: revision has no {per_query} (evaluated before per-query tables were committed?)")
    metrics_raw = git(root, "show", f"{rev}:{metrics_file}")
    metrics = _read_metrics(metrics_raw, f"{spec}:{metrics_file}") if metrics_raw else {}
    sha = git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    return LoadedRun(spec, _read_parquet_bytes(data, f"{spec}:{per_query}"), metrics,
                     commit=sha.decode().strip() if sha else rev, repo=root)


def _bundle(path: Path) -> ClaimedRun | None:
    """The run a result bundle claims (None: `path` is no bundle); CompareError when it cannot be read."""
    if not is_bundle(path):
        return None
    try:
        return claimed_run(path)
    except BundleError as exc:
        raise CompareError(str(exc)) from None


def run_params(spec: str, root: Path) -> dict[str, Any]:
    """params.yaml of a run (a folder's own, or the commit's of a revision or experiment); {} without one."""
    import yaml

    path = Path(spec)
    if (bundled := _bundle(path)) is not None:
        data: bytes | None = bundled.params
    elif path.exists():
        folder = path if path.is_dir() else path.parent.parent.parent  # reports/per_query/dev.parquet -> the project
        data = (folder / "params.yaml").read_bytes() if (folder / "params.yaml").is_file() else None
    else:
        rev = spec if git(root, "rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}") is not None else exp_commit(root, spec)
        data = git(root, "show", f"{rev}:params.yaml") if rev else None
    try:
        doc = yaml.safe_load(data) if data else {}
    except yaml.YAMLError:
        raise CompareError(f"{spec}: params.yaml is not readable YAML") from None
    return doc if isinstance(doc, dict) else {}


def set_files(run: LoadedRun) -> dict[str, str] | None:
    """The sha256 of every set file the run was evaluated over (its dev.json's ``sha256.sets``,
    path -> digest); None when its dev.json records none."""
    sha = run.metrics.get("sha256")
    sets = sha.get("sets") if isinstance(sha, dict) else None
    if not isinstance(sets, dict) or not sets:
        return None
    return {str(path): str(digest) for path, digest in sets.items()}


# --------------------------------------------------------------------------- a run's DVC outputs (the A/B page's cartridges)


def run_outputs(run: LoadedRun, paths: Sequence[str], per_query: str, scratch: Path) -> dict[str, Path] | str:
    """Local folders holding the DVC outputs `paths` (project-relative, e.g. data/runs) of the very
    run whose per-query table `run` holds, for the A/B page's cartridges; a string: why there are none.

    A folder run's own outputs count only when DVC says they are the ones its dvc.lock records for
    the stage that wrote `per_query` (that stage's deps, and `per_query` itself unchanged: ``dvc
    status`` of those paths). A run read from a commit (a revision or an experiment) gets them
    from the repository's DVC cache by the hashes its commit's dvc.lock records for that stage,
    linked under `scratch`, after the committed `per_query` is checked against its md5 there.
    Refused (:class:`CompareError`, one line) when the table and the outputs are not from the same
    run: cartridges of one run beside another run's numbers would be read as one."""
    if run.folder is not None:
        return _folder_outputs(run, run.folder, paths, per_query)
    if run.commit is not None and run.repo is not None:
        return _commit_outputs(run, run.repo, run.commit, paths, per_query, scratch)
    return "it was not read from a project folder or a commit"


def committed_file(run: LoadedRun, path: str, scratch: Path) -> Path | None:
    """A file git tracks (e.g. the corpus manifest) as of the run: the folder's own, or the
    commit's written under `scratch`; None when there is none."""
    if run.folder is not None:
        return run.folder / path if (run.folder / path).is_file() else None
    if run.commit is None or run.repo is None:
        return None
    data = git(run.repo, "show", f"{run.commit}:{path}")
    if data is None:
        return None
    out = scratch / "committed" / path
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out


def _lock_stage(lock: Any, per_query: str) -> tuple[str, dict[str, Any]] | None:
    """(name, dvc.lock entry) of the stage whose outs hold `per_query`."""
    stages = lock.get("stages") if isinstance(lock, dict) else None
    for name, entry in (stages if isinstance(stages, dict) else {}).items():
        if isinstance(entry, dict) and any(isinstance(o, dict) and o.get("path") == per_query for o in entry.get("outs") or []):
            return str(name), entry
    return None


def _load_lock(data: bytes, where: str) -> Any:
    import yaml

    try:
        return yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        raise CompareError(f"{where}: not readable YAML") from None


def _not_same_run(run: LoadedRun, changed: Sequence[str], per_query: str, stage: str, fix: str) -> CompareError:
    return CompareError(f"{run.label}: its per-query table and its cartridge files are not from the same run ({', '.join(changed)} "
                        f"differ from what dvc.lock records for the {stage} stage that wrote {per_query}): {fix}")


def _folder_outputs(run: LoadedRun, folder: Path, paths: Sequence[str], per_query: str) -> dict[str, Path] | str:
    missing = [p for p in paths if not (folder / p).exists()]
    if missing:
        return f"it is not a project folder holding its data/ outputs (no {missing[0]}; run `dvc repro` there)"
    if not (folder / "dvc.lock").is_file():
        return "no dvc.lock ties its data/ outputs to its per-query table"
    found = _lock_stage(_load_lock((folder / "dvc.lock").read_bytes(), str(folder / "dvc.lock")), per_query)
    if found is None:
        return f"its dvc.lock records no stage writing {per_query}"
    name, entry = found
    deps = {d.get("path") for d in entry.get("deps") or [] if isinstance(d, dict)}
    if any(p not in deps for p in paths):
        return f"its dvc.lock does not record {next(p for p in paths if p not in deps)} as read by the {name} stage"
    from dvc.repo import Repo

    try:  # DVC resolves a stage's paths against the working directory
        with contextlib.chdir(folder), Repo(str(folder)) as repo:
            stage = repo.stage.collect(name)[0]
            wanted = {*paths, per_query}
            changed = sorted(str(x.def_path) for x in (*stage.deps, *stage.outs) if str(x.def_path) in wanted and x.status())
    except Exception as exc:  # not a DVC repository, a dvc.yaml that no longer names the stage, ...
        return f"DVC cannot read its pipeline ({exc.__class__.__name__})"
    if changed:
        raise _not_same_run(run, changed, per_query, name, f"run `dvc repro` in {folder} first (or compare it by revision)")
    return {p: folder / p for p in paths}


def _commit_outputs(run: LoadedRun, repo_root: Path, commit: str, paths: Sequence[str], per_query: str,
                    scratch: Path) -> dict[str, Path] | str:
    raw = git(repo_root, "show", f"{commit}:dvc.lock")
    if raw is None:
        return f"commit {commit[:7]} has no dvc.lock"
    found = _lock_stage(_load_lock(raw, f"{commit[:7]}:dvc.lock"), per_query)
    if found is None:
        return f"the dvc.lock of commit {commit[:7]} records no stage writing {per_query}"
    name, entry = found
    out = next(o for o in entry["outs"] if isinstance(o, dict) and o.get("path") == per_query)
    table = git(repo_root, "show", f"{commit}:{per_query}")
    if out.get("hash") != "md5" or "md5" not in out or table is None:
        return f"the dvc.lock of commit {commit[:7]} records no md5 of {per_query}"
    if hashlib.md5(table).hexdigest() != out["md5"]:
        raise _not_same_run(run, [per_query], per_query, name, f"commit {commit[:7]} holds a per-query table its dvc.lock does not record")
    deps = {d.get("path"): d for d in entry.get("deps") or [] if isinstance(d, dict)}
    lacking = [p for p in paths if not isinstance(deps.get(p, {}).get("md5"), str)]
    if lacking:
        return f"the dvc.lock of commit {commit[:7]} records no md5 of {lacking[0]}"
    return _from_cache(repo_root, commit, {p: deps[p]["md5"] for p in paths}, scratch)


def _from_cache(repo_root: Path, commit: str, hashes: dict[str, str], scratch: Path) -> dict[str, Path] | str:
    """The outputs of the given md5s (a file's, or a folder's ``.dir`` listing) linked under
    `scratch` from the DVC cache of `repo_root`; why not when the cache lacks one."""
    from dvc.repo import Repo
    from dvc_data.hashfile.hash_info import HashInfo
    from dvc_data.hashfile.tree import Tree

    target = scratch / commit[:12]
    with contextlib.chdir(repo_root), Repo(str(repo_root)) as repo:
        odb = repo.cache.local
        for path, md5 in hashes.items():
            try:
                files = [("/".join(key), hi.value) for key, _, hi in Tree.load(odb, HashInfo("md5", md5))] if md5.endswith(".dir") else [("", md5)]
            except (FileNotFoundError, ValueError):
                files = []
            where = [(target / path / rel if rel else target / path, Path(odb.oid_to_path(oid))) for rel, oid in files]
            if not where or not all(src.is_file() for _, src in where):
                return f"the DVC cache holds no {path} of commit {commit[:7]} (`dvc pull` or `dvc exp pull` fetches it)"
            for dest, src in where:
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.symlink_to(src)
    return {p: target / p for p in hashes}
