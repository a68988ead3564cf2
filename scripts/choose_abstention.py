"""Choose the built-in bm25's abstention threshold (params `system.abstain_below`) on dev.

The procedure (docs/systems.md, *The default system*):

1. Run the system once without abstaining: `dvc exp run -S system.abstain_below=0` (the
   confidence of every answer is recorded in data/runs/latency.parquet; the per-query table
   reports/per_query/dev.parquet holds each answerable entry's held credit, `recall@budget`, and
   how many hits each entry was returned, `n_returned`, nothing being withheld).
2. `python scripts/choose_abstention.py` scores every threshold t of a coarse grid (0, 0.05, ...,
   1) by the evaluation's objective over all dev entries (dev.json `objective`,
   bench/evaluation/measures/objective.py), as the run would have it had it abstained below t:

       an answerable entry scores its held credit when confidence >= t, else 0 (nothing handed over);
       an unanswerable entry scores 1 when nothing strong was handed over (confidence < t, or no hit
       returned), else 0

   and prints, per threshold, the objective overall and per modality with its two parts (the mean
   credit over answerable entries, the share of unanswerable entries left quiet) and the share of
   answerable entries abstained on. The chosen threshold maximises the overall objective (the
   smallest such t on a tie). Chosen and reported on the same dev entries, the number is
   optimistic; the test split (`bench accept`) is the honest check.

Every number here is a mean over entries with its n; nothing depends on BM25's score scale (the
confidence is a share of the question's words).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

GRID = tuple(round(0.05 * i, 2) for i in range(21))


def entries_frame(per_query: pd.DataFrame, responses: pd.DataFrame, credit: str = "recall@budget") -> pd.DataFrame:
    """One row per dev entry: modality, unanswerable, credit (answerable: held credit without abstaining),
    handed (a hit was returned: not abstaining, it is handed over), confidence (0 without a response)."""
    if responses["abstain"].fillna(False).astype(bool).any():  # the system's own answers (an empty one is no withholding)
        raise ValueError("the run abstained on some entries: run it with system.abstain_below 0 (nothing withheld)")
    conf = responses.set_index(responses["query_id"].astype(str))["confidence"].astype(float)
    out = pd.DataFrame({
        "modality": per_query["modality"].astype(str).to_numpy(),
        "unanswerable": per_query["unanswerable"].astype(bool).to_numpy(),
        "credit": pd.to_numeric(per_query[credit], errors="coerce").fillna(0.0).to_numpy(),
        "handed": pd.to_numeric(per_query["n_returned"], errors="coerce").fillna(0).to_numpy() > 0,
        "confidence": per_query["query_id"].astype(str).map(conf).fillna(0.0).to_numpy(),
    })
    return out


def score(frame: pd.DataFrame, threshold: float) -> dict[str, float | int]:
    """The objective of abstaining below `threshold` over `frame`'s entries, its parts and their n."""
    answered = frame["confidence"].to_numpy() >= threshold
    if threshold <= 0:
        answered = np.ones(len(frame), dtype=bool)  # 0 never abstains
    unanswerable = frame["unanswerable"].to_numpy()
    credit = np.where(answered & ~unanswerable, frame["credit"].to_numpy(), 0.0)
    quiet = unanswerable & ~(answered & frame["handed"].to_numpy())
    n_ans, n_un = int((~unanswerable).sum()), int(unanswerable.sum())
    return {
        "objective": float((credit.sum() + quiet.sum()) / len(frame)) if len(frame) else float("nan"),
        "n": len(frame),
        "credit": float(credit[~unanswerable].mean()) if n_ans else float("nan"),
        "answerable": n_ans,
        "quiet": float(quiet[unanswerable].mean()) if n_un else float("nan"),
        "unanswerable": n_un,
        "abstained": float((~answered[~unanswerable]).mean()) if n_ans else float("nan"),
    }


def sweep(frame: pd.DataFrame, grid: tuple[float, ...] = GRID) -> pd.DataFrame:
    """Per threshold and group (each modality and overall): the objective, its parts and their n."""
    rows = []
    groups = [("overall", frame), *((str(m), g) for m, g in frame.groupby("modality", sort=True))]
    for t in grid:
        for group, part in groups:
            rows.append({"threshold": t, "group": group, **score(part, t)})
    return pd.DataFrame(rows)


def chosen(table: pd.DataFrame) -> float:
    """The threshold with the highest overall objective (the smallest on a tie)."""
    overall = table[table["group"] == "overall"].sort_values(["objective", "threshold"], ascending=[False, True], kind="stable")
    return float(overall["threshold"].iloc[0])


def markdown(table: pd.DataFrame) -> str:
    groups = list(dict.fromkeys(table["group"]))
    lines = ["| abstain_below | " + " | ".join(f"{g} objective (credit / quiet; abstained)" for g in groups) + " |",
             "|---:|" + "---|" * len(groups)]
    for t, rows in table.groupby("threshold", sort=True):
        by = rows.set_index("group")
        lines.append(f"| {t:.2f} | " + " | ".join(
            f"{by.at[g, 'objective']:.4f} ({by.at[g, 'credit']:.4f} / {by.at[g, 'quiet']:.4f}; {by.at[g, 'abstained']:.4f})"
            for g in groups) + " |")
    n = table.drop_duplicates("group").set_index("group")
    lines.append("")
    lines.append("n: " + ", ".join(f"{g} {int(n.at[g, 'n'])} ({int(n.at[g, 'answerable'])} answerable, "
                                   f"{int(n.at[g, 'unanswerable'])} unanswerable)" for g in groups))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-query", type=Path, default=Path("reports/per_query/dev.parquet"))
    parser.add_argument("--responses", type=Path, default=Path("data/runs/latency.parquet"))
    parser.add_argument("--credit", default="recall@budget", help="the per-query column of an answerable entry's held credit")
    args = parser.parse_args(argv)
    try:
        frame = entries_frame(pd.read_parquet(args.per_query), pd.read_parquet(args.responses), args.credit)
    except (OSError, KeyError, ValueError) as exc:
        sys.exit(f"choose_abstention: {exc}")
    table = sweep(frame)
    print(markdown(table))
    print(f"\nchosen: abstain_below {chosen(table):.2f} (the highest overall objective; chosen on dev, so optimistic there)")


if __name__ == "__main__":
    main()
