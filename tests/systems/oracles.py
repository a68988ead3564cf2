"""Oracle systems for the audit of what a request tells (docs/moments.md, issue 36).

Each oracle uses one field of the request (plus the atoms) the way a system author who
wanted to game the construction would, and is compared with its honest twin, the
built-in ``bm25-scoped`` (holder and ``as_of`` filtered, abstaining by its own
confidence). Built on bench.systems.builtin.bm25.BM25System, so an oracle differs from its
twin only in what it does with the field:

* :class:`LatestSource` (``as_of``): searches only the holder's latest source (a
  session, a video, a photo, a screenshot) observed at or before ``as_of``;
* :class:`MomentAbstainer` (``as_of``): the twin's ranking, but abstains (confidence 0)
  when ``as_of`` is not the latest moment any request of its holder is asked at;
* :class:`RecentSources` (``as_of``): searches only the sources observed in the last
  quarter of the time between the holder's first atom and ``as_of``;
* :class:`FutureAtoms`: returns the holder's atoms observed *after* ``as_of`` (temporal
  correctness must catch it).

:func:`field_auroc` measures what a field can tell about answerability at most: the
AUROC of P(unanswerable | field value) fitted on the gold labels themselves, against
the same statistic under shuffled labels. Used by
tests/systems/test_oracles.py and by the measurements in docs/moments.md.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from bench.acceptance.in_memory import evaluate_entries
from bench.evaluation.evaluate import EvalOptions, RunDescription, no_failures
from bench.systems import Hit, Query
from bench.systems.builtin.bm25 import BM25System, scope_mask
from bench.systems.config import check_system, make_adapter
from bench.systems.run import SYSTEM_COLUMNS, run_queries

K = 10


class LatestSource(BM25System):
    """bm25-scoped over the holder's latest source observed at or before as_of only."""

    def __init__(self, atoms: pd.DataFrame) -> None:
        super().__init__(atoms, scoped=True, abstain=True)
        self.name = "oracle-latest-source"
        ordered = atoms.sort_values("atom_id", kind="stable")
        self.sources = ordered["source_id"].to_numpy(dtype=object)
        first = atoms.groupby("source_id")["observed_at"].min()
        self.source_start = {s: pd.Timestamp(t) for s, t in first.items()}

    def mask(self, query: Query) -> np.ndarray:
        visible = scope_mask(self.holders, self.observed, query)
        if not visible.any():
            return visible
        seen = sorted({str(s) for s in self.sources[visible]}, key=lambda s: (self.source_start[s], s))
        return visible & (self.sources == seen[-1])


class RecentSources(BM25System):
    """bm25-scoped over the atoms of the last quarter of the holder's time up to as_of."""

    def __init__(self, atoms: pd.DataFrame) -> None:
        super().__init__(atoms, scoped=True, abstain=True)
        self.name = "oracle-recent"

    def mask(self, query: Query) -> np.ndarray:
        visible = scope_mask(self.holders, self.observed, query)
        if not visible.any():
            return visible
        first = self.observed[visible].min()
        as_of = np.datetime64(pd.Timestamp(query.as_of).tz_convert("UTC").tz_localize(None), "ns")
        return visible & (self.observed >= first + (as_of - first) * 3 // 4)


class FutureAtoms(BM25System):
    """The holder's atoms observed after as_of, earliest first: a system that leaks the future."""

    def __init__(self, atoms: pd.DataFrame) -> None:
        super().__init__(atoms, scoped=True, abstain=False)
        self.name = "oracle-future"

    def search(self, query: Query) -> list[Hit]:
        as_of = np.datetime64(pd.Timestamp(query.as_of).tz_convert("UTC").tz_localize(None), "ns")
        future = np.flatnonzero((self.holders == query.holder) & (self.observed > as_of))
        future = future[np.argsort(self.observed[future], kind="stable")][: query.k]
        return [Hit(str(self.atom_ids[i]), float(len(future) - r)) for r, i in enumerate(future)]


def future_atoms(atoms: pd.DataFrame) -> FutureAtoms:
    return FutureAtoms(atoms)


def latest_source(atoms: pd.DataFrame) -> LatestSource:
    return LatestSource(atoms)


def recent_sources(atoms: pd.DataFrame) -> RecentSources:
    return RecentSources(atoms)


def evaluate_system(entry_point: str, entries: list[dict], served: dict[str, pd.DataFrame], segments: pd.DataFrame,
                    respond: Callable[[pd.DataFrame], pd.DataFrame] | None = None, depth: int = K) -> Any:
    """Run a python system over `entries` in process and evaluate it as the stages do.

    `respond` may rewrite the responses table (abstain, confidence) before evaluation:
    that is how the as_of-abstainer is made from its twin's run."""
    atoms = pd.concat([f[SYSTEM_COLUMNS] for f in served.values()], ignore_index=True)
    adapter = make_adapter(check_system({"name": entry_point, "adapter": "python", "entry": entry_point}), atoms)
    ran = run_queries(adapter, entries, depth, warmup=0, timeout_s=120, known_atoms=set(atoms["atom_id"].astype(str)))
    responses = ran.latency if respond is None else respond(ran.latency)
    desc = RunDescription(system=entry_point, depth=depth, chunking={}, concurrency=1, warm=False, adapter="python",
                          warmup_queries=0, timeout_s=120, latency=None)
    options = EvalOptions(k=K, bootstrap_resamples=10, bootstrap_seed=0, calibration_recall=0.9)
    return evaluate_entries(entries, [], ran.run, responses, no_failures(), served, segments, options, desc,
                            in_core_rows=10**8, sha256={})


def moment_abstainer(entries: list[dict]) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """Responses rewritten: abstain (confidence 0) where as_of is before the holder's latest request moment.

    A system sees every request it is sent; the latest moment any request of a holder
    is asked at is what it would learn from them (no gold)."""
    latest: dict[str, str] = {}
    for e in entries:
        holder = str(e["scope"]["holder"])
        latest[holder] = max(latest.get(holder, e["as_of"]), e["as_of"], key=pd.Timestamp)
    early = {e["query_id"] for e in entries if pd.Timestamp(e["as_of"]) < pd.Timestamp(latest[str(e["scope"]["holder"])])}

    def respond(responses: pd.DataFrame) -> pd.DataFrame:
        out = responses.copy()
        hit = out["query_id"].astype(str).isin(early).to_numpy()
        out["abstain"] = out["abstain"].astype(bool) | hit
        out["confidence"] = np.where(hit, 0.0, out["confidence"].astype(float))
        return out

    return respond


def field_auroc(entries: Iterable[dict], value: Callable[[dict], Any], permutations: int = 200,
                seed: int = 0) -> dict[str, Any]:
    """What a field can tell about answerability at most, and what chance alone gives.

    The oracle: an entry's score is the share of unanswerable entries among all entries
    with its value of the field (fitted on the gold labels themselves, so optimistic);
    ``auroc`` is that score's AUROC for telling unanswerable from answerable entries (ties
    ½). Under independence a fitted score still separates a little by chance, so the same
    statistic is computed for `permutations` seeded shuffles of the labels: ``null_q95``
    is its 95th percentile and ``lift`` = auroc - the null median. A field that tells
    nothing has auroc <= null_q95; a field that gives answerability away has auroc near 1.
    """
    rows = [(value(e), bool(e["unanswerable"])) for e in entries]
    codes = pd.factorize(pd.Series([repr(v) for v, _ in rows]))[0]
    y = np.asarray([u for _, u in rows], dtype=bool)
    rng = np.random.default_rng(seed)
    observed = _fitted_auroc(codes, y)
    null = np.asarray([_fitted_auroc(codes, rng.permutation(y)) for _ in range(permutations)])
    return {"auroc": observed, "null_median": float(np.median(null)), "null_q95": float(np.quantile(null, 0.95)),
            "lift": observed - float(np.median(null)), "values": int(codes.max()) + 1 if len(codes) else 0,
            "n_answerable": int((~y).sum()), "n_unanswerable": int(y.sum())}


def _fitted_auroc(codes: np.ndarray, y: np.ndarray) -> float:
    total = np.bincount(codes)
    unans = np.bincount(codes, weights=y.astype(float), minlength=len(total))
    return auroc(unans[codes] / total[codes], y)


def auroc(score: np.ndarray, positive: np.ndarray) -> float:
    """Probability that a positive outranks a negative (ties ½); Mann-Whitney."""
    pos, neg = score[positive], score[~positive]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    ranks = pd.Series(np.concatenate([pos, neg])).rank(method="average").to_numpy()
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def auroc_sd(a: float, n_pos: int, n_neg: int) -> float:
    """Hanley and McNeil's (1982) standard error of an AUROC."""
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    var = (a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg)
    return float(np.sqrt(max(var, 0.0)))


def by_source_gold_share(entries: Iterable[dict], source_of: Callable[[dict], str | None]) -> dict[str, float]:
    """Per group, the share of answerable entries whose gold names the group's source."""
    hit: dict[str, list[bool]] = defaultdict(list)
    for e in entries:
        if e["unanswerable"]:
            continue
        src = source_of(e)
        hit[e["modality"]].append(src is not None and any(g["source_id"] == src for g in e["gold"]))
    return {m: float(np.mean(v)) for m, v in hit.items()}
