"""`bench compare A B`: is run B better than run A, per modality and metric, honestly?

A run is found from its committed per-query table ``reports/per_query/dev.parquet``
(written by the evaluate stage, cache: false, so it is in git with every commit and
every DVC experiment) plus ``reports/metrics/dev.json`` for its description. A and
B may each be

* a folder (a project checkout or a copy of its ``reports/``), or the parquet file;
* a git revision (``HEAD``, ``main~1``, a commit hash) of the project's repository;
* a DVC experiment name (as ``dvc exp show`` lists it; found under ``refs/exps``).

For every (modality, metric) -- and ``overall`` -- the comparison pairs the
queries present in both runs (by query_id) that are in the metric's denominator,
with the same rules as dev.json (a failed query counts 0), and reports

* mean of A, mean of B and the paired difference B - A with its 95% bootstrap
  interval (queries resampled in pairs);
* a two-sided paired randomization (sign-flip) test p-value and its Holm-adjusted
  value across every row compared (all modalities and metrics together);
* win / tie / loss counts over queries (a win is B better than A on that query:
  higher, or lower for false_recall);
* "significant" only when the Holm-adjusted p is below alpha; otherwise the text
  says plainly that the difference is not significant.
The number of tied score positions (``tied@k``) of each run is reported as well.

Comparisons that cannot mean anything are refused with one line (`CompareError`):
a malformed per-query table (no rows, a required column missing, a duplicated or
empty query_id, non-boolean flags, non-numeric or infinite metric values), two
runs whose query sets differ by more than `max_unpaired` (a share of all queries
seen; default 1%: the same system over 8 versus 2 data sets differs in every BM25
score because the corpus differs, so its "differences" say nothing about a change),
and zero paired queries in every metric's denominator. Within the tolerance only
the shared queries are compared, and the report's first line says so. Metrics the
tables do not both carry are skipped, so tables with extra columns (for example
`abstention_rate`) or without some metric compare fine.
"""

from __future__ import annotations

import io
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.catalogue import Measure, counted, measures
from bench.evaluation.uncertainty import bootstrap_ci, holm, paired_randomization_test, rng_for


def compared(k: int) -> list[Measure]:
    """The catalogue's measures `bench compare` tests: those where higher is better first,
    then those where lower is better (bench.evaluation.catalogue)."""
    return sorted((m for m in measures(k) if m.compared), key=lambda m: not m.higher_is_better)


class CompareError(Exception):
    """A run cannot be found or read; str() is the one-line message."""


@dataclass
class RunData:
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


# --------------------------------------------------------------------------- finding runs


def _git(root: Path, *args: str) -> bytes | None:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, check=False)
    return proc.stdout if proc.returncode == 0 else None


def _exp_commit(root: Path, name: str) -> str | None:
    out = _git(root, "for-each-ref", "--format=%(refname) %(objectname)", "refs/exps")
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


def load_run(spec: str, root: Path, per_query: str, metrics_file: str) -> RunData:
    """Find a run by folder, parquet file, git revision or DVC experiment name; `per_query`
    and `metrics_file` are the project's paths of the per-query table and dev.json."""
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
        return RunData(spec, frame, metrics)
    rev = None
    if _git(root, "rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}") is not None:
        rev = spec
    else:
        rev = _exp_commit(root, spec)
    if rev is None:
        raise CompareError(f"{spec}: not a folder, a git revision or a DVC experiment name of {root.name}")
    data = _git(root, "show", f"{rev}:{per_query}")
    if data is None:
        raise CompareError(f"{spec}: revision has no {per_query} (evaluated before per-query tables were committed?)")
    metrics_raw = _git(root, "show", f"{rev}:{metrics_file}")
    metrics = _read_metrics(metrics_raw, f"{spec}:{metrics_file}") if metrics_raw else {}
    return RunData(spec, _read_parquet_bytes(data, f"{spec}:{per_query}"), metrics)


# --------------------------------------------------------------------------- comparing


def _infer_k(df: pd.DataFrame, label: str = "per-query table") -> int:
    ks = sorted(int(c.split("@")[1]) for c in df.columns if isinstance(c, str) and c.startswith("recall@") and c.split("@")[1].isdigit())
    if not ks:
        raise CompareError(f"{label}: per-query table has no recall@k column")
    return ks[0]


REQUIRED = ("query_id", "modality", "unanswerable", "failed")
#: default share of all queries (union of A and B) that may be in only one run
MAX_UNPAIRED = 0.01


def check_table(df: Any, label: str) -> None:
    """Refuse a per-query table the comparison cannot read honestly (one line)."""
    if not isinstance(df, pd.DataFrame):
        raise CompareError(f"{label}: not a per-query table")
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise CompareError(f"{label}: malformed per-query table: no column {missing[0]!r} (needs {', '.join(REQUIRED)})")
    if len(df) == 0:
        raise CompareError(f"{label}: per-query table has no rows: nothing to compare")
    qid = df["query_id"]
    if qid.isna().any() or (qid.astype(str).str.strip() == "").any():
        raise CompareError(f"{label}: malformed per-query table: an empty query_id (row {int(np.flatnonzero(qid.isna() | (qid.astype(str).str.strip() == ''))[0])})")
    dup = qid.astype(str).duplicated()
    if dup.any():
        raise CompareError(f"{label}: malformed per-query table: query_id {qid.astype(str)[dup].iloc[0]!r} appears more than once")
    for col in ("unanswerable", "failed"):
        values = df[col]
        if values.isna().any() or not values.map(lambda v: isinstance(v, (bool, np.bool_)) or v in (0, 1)).all():
            raise CompareError(f"{label}: malformed per-query table: column {col!r} must hold true/false only")
    k = _infer_k(df, label)
    for m in compared(k):
        col = m.column
        if col not in df.columns:
            continue
        numeric = pd.to_numeric(df[col], errors="coerce")
        bad = numeric.isna() & df[col].notna()
        if bad.any():
            raise CompareError(f"{label}: malformed per-query table: {col} holds a non-number ({df[col][bad].iloc[0]!r}, query {qid[bad].iloc[0]})")
        inf = np.isinf(numeric.to_numpy(dtype=float))
        if inf.any():
            raise CompareError(f"{label}: malformed per-query table: {col} holds an infinite value (query {qid[inf].iloc[0]})")


def compare(
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    resamples: int = 1000,
    permutations: int = 10000,
    seed: int = 0,
    alpha: float = 0.05,
    max_unpaired: float = MAX_UNPAIRED,
) -> dict[str, Any]:
    """Paired comparison of two per-query tables (see the module docstring)."""
    check_table(a, "A")
    check_table(b, "B")
    k = _infer_k(a)
    if _infer_k(b) != k:
        raise CompareError(f"the two runs use different k (A: {k}, B: {_infer_k(b)}): compare runs with the same metrics.k")
    a = a.assign(query_id=a["query_id"].astype(str)).set_index("query_id")
    b = b.assign(query_id=b["query_id"].astype(str)).set_index("query_id")
    common = a.index.intersection(b.index).sort_values()
    only_a, only_b = len(a.index.difference(b.index)), len(b.index.difference(a.index))
    union = len(common) + only_a + only_b
    if len(common) == 0:
        raise CompareError(f"A and B share no query_id ({len(a)} and {len(b)} queries): zero paired queries, nothing to compare")
    if (only_a + only_b) / union > max_unpaired:
        raise CompareError(
            f"A and B were evaluated on different query sets: {only_a} of A's {len(a)} queries are not in B and {only_b} of B's "
            f"{len(b)} are not in A ({(only_a + only_b) / union:.1%} of {union} unpaired, tolerance {max_unpaired:.1%}); "
            "compare runs over the same data sets and sets (or raise --max-unpaired)")
    pa, pb = a.loc[common], b.loc[common]
    if (pa["unanswerable"].astype(bool) != pb["unanswerable"].astype(bool)).any():
        raise CompareError("the two runs disagree on which queries are unanswerable: different sets")
    rows: list[dict[str, Any]] = []
    groups = [(str(m), pa.index[pa["modality"] == m]) for m in sorted(pa["modality"].astype(str).unique())]
    groups.append(("overall", pa.index))
    for group, idx in groups:
        ga, gb = pa.loc[idx], pb.loc[idx]
        unans = ga["unanswerable"].astype(bool).to_numpy()
        for m in compared(k):
            metric, col, higher = m.name, m.column, m.higher_is_better
            if col not in ga.columns or col not in gb.columns:
                continue
            # the same denominator rule as dev.json: a failed query counts its worst case
            xa = counted(m, ga[col].to_numpy(dtype=float), unans, ga["failed"].astype(bool).to_numpy())[0]
            xb = counted(m, gb[col].to_numpy(dtype=float), unans, gb["failed"].astype(bool).to_numpy())[0]
            n = len(xa)
            if n == 0:
                continue
            d = xb - xa
            better = d > 0 if higher else d < 0
            worse = d < 0 if higher else d > 0
            ci = bootstrap_ci(d, resamples=resamples, rng=rng_for(seed, "compare", group, metric))
            p = paired_randomization_test(d, resamples=permutations, rng=rng_for(seed, "perm", group, metric))
            rows.append({
                "modality": group, "metric": metric, "n": n, "higher_is_better": higher,
                "a": float(xa.mean()), "b": float(xb.mean()), "diff": float(d.mean()),
                "ci95": [ci[0], ci[1]] if ci else [None, None],
                "p": p, "wins": int(better.sum()), "ties": int((d == 0).sum()), "losses": int(worse.sum()),
            })
    if not rows:
        raise CompareError(f"no metric has a paired query in its denominator ({len(common)} paired queries): nothing to compare")
    adjusted = holm([r["p"] for r in rows])
    for r, p_holm in zip(rows, adjusted, strict=True):
        r["p_holm"] = None if np.isnan(p_holm) else float(p_holm)
        r["significant"] = bool(r["p_holm"] is not None and r["p_holm"] < alpha)
        r["verdict"] = _verdict(r)
    ties = {}
    tcol = f"tied@{k}"
    for name, frame in (("a", a), ("b", b)):
        if tcol in frame.columns:
            t = frame[tcol].fillna(0).astype(int)
            ties[name] = {"tied_positions": int(t.sum()), "queries_with_ties": int((t > 0).sum()), "queries": int(len(t))}
    return {
        "k": k,
        "alpha": alpha,
        "resamples": resamples,
        "permutations": permutations,
        "seed": seed,
        "max_unpaired": max_unpaired,
        "queries": {"both": int(len(common)), "only_a": only_a, "only_b": only_b},
        "ties": ties,
        "rows": rows,
    }


def _verdict(r: dict[str, Any]) -> str:
    if not r["significant"]:
        return "not significant"
    good = (r["diff"] > 0) == r["higher_is_better"]
    return "B better" if good else "B worse"


# --------------------------------------------------------------------------- output


def _f(x: Any, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "—"
    return f"{x:.{digits}f}"


def _p(x: Any) -> str:
    if x is None:
        return "—"
    return "<0.0001" if x < 1e-4 else f"{x:.4f}"


def markdown(result: dict[str, Any], label_a: str, label_b: str) -> str:
    q = result["queries"]
    scope = (f" on the {q['both']} queries both runs share ({q['only_a']} only in A and {q['only_b']} only in B are left out, "
             f"within the {result.get('max_unpaired', MAX_UNPAIRED):.1%} tolerance)" if q["only_a"] or q["only_b"] else f" on the same {q['both']} queries")
    out = [
        f"# Comparison: B vs A (k = {result['k']}){scope}",
        "",
        f"- A: {label_a}",
        f"- B: {label_b}",
        f"- paired queries: {q['both']} (only in A: {q['only_a']}, only in B: {q['only_b']}; those are left out)",
        f"- diff = B − A with a 95% bootstrap interval ({result['resamples']} resamples of queries, seed {result['seed']}); "
        f"p = two-sided paired randomization test ({result['permutations']} sign flips), "
        f"p_holm = Holm-corrected over all {len(result['rows'])} rows; significant when p_holm < {result['alpha']}.",
        "- win/tie/loss: queries where B is better / equal / worse (for false_recall lower is better).",
        "",
        "| modality | metric | n | A | B | diff (B−A) | 95% CI | p | p_holm | win/tie/loss | verdict |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---|---|",
    ]
    for r in result["rows"]:
        lo, hi = r["ci95"]
        out.append(
            f"| {r['modality']} | {r['metric']} | {r['n']} | {_f(r['a'])} | {_f(r['b'])} | {r['diff']:+.4f} | "
            f"[{_f(lo)}, {_f(hi)}] | {_p(r['p'])} | {_p(r['p_holm'])} | {r['wins']}/{r['ties']}/{r['losses']} | {r['verdict']} |"
        )
    sig = [r for r in result["rows"] if r["significant"]]
    out.append("")
    if not sig:
        out.append("**No difference is significant** after Holm correction: on these queries the two runs cannot be told apart.")
    else:
        out.append(f"{len(sig)} of {len(result['rows'])} differences are significant after Holm correction; "
                   f"the other {len(result['rows']) - len(sig)} are not significant.")
    if result["ties"]:
        out += ["", "Tied score positions in the top k (order set by the tie rule: score descending, then atom_id ascending):", ""]
        for name, label in (("a", "A"), ("b", "B")):
            t = result["ties"].get(name)
            if t:
                out.append(f"- {label}: {t['tied_positions']} tied positions in {t['queries_with_ties']} of {t['queries']} queries")
    out.append("")
    return "\n".join(out)
