"""`bench compare`'s markdown: the rows of bench.comparison.compare.compare as one table, with
the paired queries, the test, the clusters they rest on (and the other clustering's interval
and p beside them), where each difference comes from (abstention changed, both answered), the
tie positions named; and, for the A/B page, the rows `bench gate` tests beyond them (holder and
temporal correctness)."""

from __future__ import annotations

from typing import Any

from bench.comparison.compare import MAX_UNPAIRED
from bench.comparison.runs import CompareError, LoadedRun
from bench.numbers import number, p_value

__all__ = ["gated_rows", "markdown"]


def _over(result: dict[str, Any]) -> str:
    return (result.get("clusters") or {}).get("over", "queries")


def _beside(result: dict[str, Any]) -> str:
    found = result.get("clusters") or {}
    return f"{found.get('beside_over', 'another clustering')} ({found.get('beside', '—')})"


def _beside_cell(beside: dict[str, Any] | None) -> str:
    if not beside:
        return "—"
    lo, hi = beside["ci95"]
    return f"[{number(lo)}, {number(hi)}], p {p_value(beside['p'])} ({beside['clusters']} clusters)"


def _split(parts: dict[str, Any] | None) -> str:
    """The parts of a difference from entries where abstention changed and from entries both runs answered."""
    if not parts:
        return "—"
    changed, answered = parts["changed"], parts["answered"]
    mean = "" if answered["mean"] is None else f", mean {number(answered['mean'], sign=True)}"
    return (f"{number(changed['part'], sign=True)} on {changed['entries']} / {number(answered['part'], sign=True)} on "
            f"{answered['entries']}{mean}")


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
        f"- diff = B − A with a 95% bootstrap interval ({result['resamples']} resamples of {_over(result)}, seed {result['seed']}); "
        f"p = two-sided paired randomization test ({result['permutations']} sign flips, each cluster flipped as one), "
        f"p_holm = Holm-corrected over all {len(result['rows'])} rows; significant when p_holm < {result['alpha']}. "
        f"n (clusters): the entries and clusters a row rests on.",
        f"- beside: the interval and p with {_beside(result)} (not Holm-corrected; it decides nothing).",
        "- from abstention: the part of diff from entries where one run handed nothing over (abstained or returned no hit) "
        "and the other answered, and the part from entries both answered (the rest: neither answered); the parts sum to diff.",
        "- win/tie/loss: queries where B is better / equal / worse (for false_recall lower is better).",
        "",
        "| modality | metric | n (clusters) | A | B | diff (B−A) | 95% CI | p | p_holm | win/tie/loss | verdict | beside: 95% CI, p "
        "| from abstention changed / both answered |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---|---|---|---|",
    ]
    for r in result["rows"]:
        lo, hi = r["ci95"]
        out.append(
            f"| {r['modality']} | {r['metric']} | {r['n']} ({r.get('clusters', r['n'])}) | {number(r['a'])} | {number(r['b'])} | "
            f"{number(r['diff'], sign=True)} | [{number(lo)}, {number(hi)}] | {p_value(r['p'])} | {p_value(r['p_holm'])} | "
            f"{r['wins']}/{r['ties']}/{r['losses']} | {r['verdict']} | {_beside_cell(r.get('beside'))} | {_split(r.get('abstention'))} |"
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


def gated_rows(result: dict[str, Any], a: LoadedRun, b: LoadedRun) -> dict[str, Any]:
    """The rows `bench gate A` tests B on (bench.comparison.gate: its primary measures, e.g. holder
    and temporal correctness) that `bench compare` (`result`) does not test, keyed "group measure",
    with the statistics options of `result`: ``rows``, ``family`` (the gated rows Holm ran over) and
    ``refused`` (the gate's one line when it cannot compare the two; then no rows)."""
    from bench.comparison.gate import gate

    try:
        out = gate(a, b, k=result["k"], alpha=result["alpha"], resamples=result["resamples"], permutations=result["permutations"],
                   seed=result["seed"], max_unpaired=result.get("max_unpaired", MAX_UNPAIRED), allow_different_sets=True)
    except CompareError as exc:
        return {"rows": {}, "family": 0, "refused": f"bench gate cannot compare them: {exc}"}
    tested = {(r["modality"], r["metric"]) for r in result["rows"]}
    return {"rows": {f"{r['modality']} {r['metric']}": r for r in out.rows if (r["modality"], r["metric"]) not in tested},
            "family": out.family, "refused": None}
