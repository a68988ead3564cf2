"""The one rule for equal scores (bench.evaluation.measures.scores): rounding ties whatever the scale,
and the tied positions of the top k."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.evaluation.measures.scores import reaches, tie_groups, tied_positions, within_tie


def test_rounding_differences_are_ties_whatever_the_scale() -> None:
    a = 0.1 + 0.2 + 0.3
    b = 0.3 + 0.2 + 0.1  # the same terms in another order: differs in the last bit
    assert a != b
    for scale, shift in ((1.0, 0.0), (1e-3, 0.0), (1e3, 0.0), (1.0, 1.0)):
        x = np.array([a, b, 2.0, -np.inf]) * scale + shift
        assert tie_groups(x).tolist() == [1, 1, 2, 0]
        assert reaches(x[:2], float(x[1])).all() and reaches(x[:2], float(x[0])).all()
    assert not reaches(np.array([-np.inf, np.nan]), -1.0).any()


def test_within_tie_is_relative_and_never_true_for_nan() -> None:
    assert within_tie(1e12, 1e12 + 1.0) and not within_tie(1.0, 1.0 + 1e-6)
    assert not within_tie(np.nan, np.nan).any() and not within_tie(1.0, np.nan).any()


def test_ties_counted_where_the_rule_decides():
    run = pd.DataFrame({"query_id": ["q"] * 4 + ["r"] * 2, "atom_id": list("abcdxy"), "rank": [1, 2, 3, 4, 1, 2],
                        "score": [5.0, 3.0, 3.0, 1.0, 2.0, 1.0]})
    t = tied_positions(run, k=2).set_index("query_id")["tied@2"]
    assert t.to_dict() == {"q": 1, "r": 0}  # rank 2 ties rank 3 (the cut at k = 2 was set by atom_id)
    assert tied_positions(run, k=10).set_index("query_id")["tied@10"].to_dict() == {"q": 2, "r": 0}


# --------------------------------------------------------------------------- real data
