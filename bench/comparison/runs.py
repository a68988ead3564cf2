"""Runs to compare, found and read: a folder (a project checkout or a copy of its ``reports/``),
its per-query parquet file, a git revision or a DVC experiment name (bench.comparison.compare
documents the forms). A run is its committed per-query table plus its dev.json and params.yaml."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

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
        return LoadedRun(spec, frame, metrics)
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
    return LoadedRun(spec, _read_parquet_bytes(data, f"{spec}:{per_query}"), metrics)


def run_params(spec: str, root: Path) -> dict[str, Any]:
    """params.yaml of a run (a folder's own, or the commit's of a revision or experiment); {} without one."""
    import yaml

    path = Path(spec)
    if path.exists():
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
