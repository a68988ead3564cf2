"""False recall and abstention (spec section 4: "strong evidence outside gold was returned").

``false_recall`` (unanswerable entries) is read under the rule of the entry's
modality; what counts as *strong* is read from what the system itself stands behind,
never from a fixed score, so no number depends on the system's score scale:

``abstention``     the run declares abstention (``abstains``: the system said so once)
                   or any response abstained. An unanswerable entry is a false recall
                   when the system handed something over: it did *not* abstain and
                   returned at least one hit (bench.evaluation.measures.base.hands_nothing,
                   the one test of "nothing handed over"). Applies to every modality of the run.
``calibrated``     a system that never abstains: per modality, the threshold is the
                   top-1 score that ``calibration_recall`` (e.g. 0.9) of the
                   modality's answerable entries reach (an order statistic of their
                   top-1 scores: entries with no hit, and failed ones, rank lowest).
                   An unanswerable entry is a false recall when its top-1 score
                   reaches that threshold (bench.evaluation.measures.scores.reaches).
                   When fewer than that share got a hit at all, the threshold is the
                   lowest top-1 score of an answerable hit. ``thresholds`` (from the
                   dev run) replaces the calibration: the acceptance run reuses dev's
                   thresholds and never recalibrates.
``not measurable`` the top-1 scores of the answerable entries do not separate (all
                   equal, or none returned anything), there is no answerable entry to
                   calibrate on, or the dev run gave no threshold for the modality;
                   the cell has no value and says why (:func:`not_measurable`).

Abstention (bench.evaluation.measures.base, *Abstention*: the one rule): an answer that
abstained hands the reader nothing, as an empty answer does, and every rule reads the two as
one thing. ``abstention_rate`` (answerable entries; per-query column ``abstained``) is 1 when
the answer handed nothing over -- it said ``"abstain": true`` or returned no hit -- else 0;
``handed_nothing`` is the same over all entries (the verdict's *met only by handing nothing*
reads it). A failed query counts 1 in all three.
Beside them the per-query table holds ``false_recall_rule``,
``false_recall_threshold`` (calibrated rule only, in the system's own score units) and
``false_recall_reason``; :func:`false_recall_rules` summarises them for dev.json.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.measures.base import AllQueries, Bar, Family, Mean, Measure, hands_nothing
from bench.evaluation.measures.scores import reaches

__all__ = ["ABSTENTION", "CALIBRATED", "FAMILY", "MEASURES", "NOT_MEASURABLE", "FalseRecallRule", "calibrate", "false_recall_columns",
           "false_recall_rules", "modality_rules", "not_measurable"]


def not_measurable(group: pd.DataFrame) -> str | None:
    """Why the false recall of `group` has no value: a modality of its unanswerable
    entries is under the rule "not measurable" (None: every one is measurable)."""
    unans = group["unanswerable"].to_numpy(dtype=bool)
    if not unans.any():
        return None
    rules = group.loc[unans, ["modality", "false_recall_rule", "false_recall_reason"]].drop_duplicates("modality")
    lost = rules.loc[rules["false_recall_rule"] == NOT_MEASURABLE]
    if not len(lost):
        return None
    why = "; ".join(f"{m}: {r}" for m, r in zip(lost["modality"], lost["false_recall_reason"], strict=True))
    return f"not measurable ({why})"


ABSTENTION = "abstention"
CALIBRATED = "calibrated"
NOT_MEASURABLE = "not measurable"


@dataclass(frozen=True)
class FalseRecallRule:
    """How one modality's false recall is read (module docstring, *False recall*)."""

    rule: str
    threshold: float | None = None  # calibrated: top-1 score that counts as strong (system's units)
    reason: str | None = None  # not measurable: why
    kept: int = 0  # answerable entries whose top-1 reaches the threshold
    answerable: int = 0
    calibrated_on: str | None = None  # "this run" or "the dev run" (thresholds passed in)


def calibrate(top1: np.ndarray, share: float) -> FalseRecallRule:
    """Threshold that `share` of the answerable entries' top-1 scores reach.

    ``top1``: one value per answerable entry, NaN where it has no hit (or failed).
    The threshold is an order statistic of the values (never interpolated), so it
    moves with any positive scaling or shift of the scores.
    """
    if not 0.0 < share <= 1.0:
        raise ValueError("calibration_recall must be in (0, 1]")
    n = len(top1)
    if n == 0:
        return FalseRecallRule(NOT_MEASURABLE, reason="no answerable entry to calibrate a threshold on")
    hits = np.sort(top1[~np.isnan(top1)])[::-1]
    if len(hits) == 0:
        return FalseRecallRule(NOT_MEASURABLE, reason=f"none of the {n} answerable entries got a hit: top-1 scores do not separate", answerable=n)
    if reaches(hits[-1:], float(hits[0]))[0]:
        return FalseRecallRule(NOT_MEASURABLE, reason=f"top-1 scores do not separate: all {len(hits)} answerable entries with a hit have the same top-1 score", answerable=n)
    want = max(1, math.ceil(share * n - 1e-9))
    threshold = float(hits[min(want, len(hits)) - 1])
    return FalseRecallRule(CALIBRATED, threshold, kept=int(reaches(hits, threshold).sum()), answerable=n, calibrated_on="this run")


def modality_rules(
    mods: np.ndarray, unanswerable: np.ndarray, failed: np.ndarray, top1: np.ndarray, abstains: bool, share: float,
    thresholds: dict[str, float | None] | None,
) -> dict[str, FalseRecallRule]:
    answerable = ~unanswerable & ~failed
    rules = {}
    for m in sorted(set(mods)):
        in_mod = mods == m
        if abstains:
            rules[m] = FalseRecallRule(ABSTENTION)
        elif thresholds is not None:
            t = thresholds.get(m)
            if t is None:
                rules[m] = FalseRecallRule(NOT_MEASURABLE, reason=f"the dev run has no calibrated threshold for {m}")
            else:
                vals = top1[in_mod & answerable]
                n_ans = int((in_mod & ~unanswerable).sum())
                rules[m] = FalseRecallRule(CALIBRATED, float(t), kept=int(reaches(vals, float(t)).sum()), answerable=n_ans, calibrated_on="the dev run")
        else:
            in_den = in_mod & ~unanswerable
            rules[m] = calibrate(np.where(failed[in_den], np.nan, top1[in_den]), share)
    return rules


def false_recall_columns(
    mods: np.ndarray, n_returned: np.ndarray, top1: np.ndarray, abstained: np.ndarray, rules: dict[str, FalseRecallRule]
) -> dict[str, np.ndarray]:
    n = len(mods)
    fr = np.full(n, np.nan)
    rule = np.empty(n, dtype=object)
    threshold = np.full(n, np.nan)
    reason = np.full(n, None, dtype=object)
    for m, r in rules.items():
        at = mods == m
        rule[at] = r.rule
        reason[at] = r.reason
        if r.rule == ABSTENTION:
            fr[at] = (~hands_nothing(abstained[at], n_returned[at])).astype(float)
        elif r.rule == CALIBRATED:
            assert r.threshold is not None
            threshold[at] = r.threshold
            fr[at] = reaches(top1[at], r.threshold).astype(float)
    return {"false_recall": fr, "false_recall_rule": rule, "false_recall_threshold": threshold, "false_recall_reason": reason}


def false_recall_rules(per_query_df: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per modality (and ``overall``) the false-recall rule that applied, for dev.json's
    ``run.false_recall_rule``: rule, threshold (calibrated only, in the system's own
    score units), how many answerable entries keep their top-1 hit at it, and why a
    modality is not measurable."""
    df = per_query_df
    out: dict[str, dict[str, Any]] = {}
    for m, g in df.groupby("modality", sort=True):
        rule = str(g["false_recall_rule"].iloc[0])
        ans = ~g["unanswerable"].astype(bool)
        row: dict[str, Any] = {"rule": rule, "unanswerable": int((~ans).sum())}
        if rule == CALIBRATED:
            t = float(g["false_recall_threshold"].iloc[0])
            top = g.loc[ans & ~g["failed"].astype(bool), "top1_score"].to_numpy(float)
            row.update({"threshold_score": t, "kept": int(reaches(top, t).sum()), "answerable": int(ans.sum())})
        reason = g["false_recall_reason"].iloc[0]
        if reason is not None and not (isinstance(reason, float) and np.isnan(reason)):
            row["reason"] = str(reason)
        out[str(m)] = row
    rules = {r["rule"] for r in out.values() if r["unanswerable"]}
    overall: dict[str, Any] = {"rule": rules.pop() if len(rules) == 1 else ("mixed" if rules else NOT_MEASURABLE)}
    if not rules and not any(r["unanswerable"] for r in out.values()):
        overall["reason"] = "no unanswerable entries"
    out["overall"] = overall
    return out



def _compute(every: AllQueries) -> dict[str, np.ndarray]:
    """false_recall under each modality's rule (with the rule, threshold and reason) and what was handed nothing."""
    blocks = every.blocks
    mods = blocks["modality"].to_numpy()
    top1 = blocks["top1_score"].to_numpy(dtype=float)
    abstained = blocks["abstained"].to_numpy(dtype=bool)
    declared = bool(every.abstains) or bool(abstained.any())
    rules = modality_rules(mods, blocks["unanswerable"].to_numpy(dtype=bool), blocks["failed"].to_numpy(dtype=bool), top1, declared,
                           float(every.calibration_recall), every.thresholds)
    nothing = hands_nothing(abstained, blocks["n_returned"].to_numpy()).astype(float)
    return {**false_recall_columns(mods, blocks["n_returned"].to_numpy(), top1, abstained, rules), "abstained": nothing,
            "handed_nothing": nothing}


FAMILY = Family(
    name="false_recall", phase="cross_query", compute=_compute,
    columns=lambda k: ("false_recall", "false_recall_rule", "false_recall_threshold", "false_recall_reason", "abstained", "handed_nothing"),
    measures=(
        Measure(name="false_recall", scope="unanswerable", reducer=Mean(worst=1.0), higher_is_better=False, bar=Bar("<=", 0.10),
                heading="false recall", compared=True, unmeasurable=not_measurable, in_objective=True, unit="share of entries (0-1)",
                description="1 if the system returned strong evidence for an unanswerable entry, read from what it stands behind: "
                            "under the abstention rule, it did not abstain and returned a hit; under the calibrated rule, its "
                            "top-1 score reaches the modality's calibrated threshold. No value (with a reason) when not measurable."),
        Measure(name="abstention_rate", column="abstained", scope="answerable", reducer=Mean(worst=1.0), higher_is_better=False,
                heading="abstention rate", compared=True, unit="share of entries (0-1)",
                description='1 if the system handed nothing over for an answerable entry: it answered `"abstain": true` or '
                            "returned no hit (an empty answer and an abstention are one thing), else 0."),
        Measure(name="handed_nothing", scope="all", reducer=Mean(worst=1.0), higher_is_better=False, unit="share of entries (0-1)",
                description='1 if the system handed nothing over for the entry (answerable or not): it answered `"abstain": true` '
                            "or returned no hit, else 0. The verdict's *met only by handing nothing* reads it."),
    ),
)
MEASURES: tuple[Measure, ...] = FAMILY.measures
