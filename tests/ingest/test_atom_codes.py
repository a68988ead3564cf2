"""Integer atom codes (bench/ingest/atom_codes.py): runs and gold as codes give the
metrics engine exactly what the atom-id strings give, and codes round-trip to ids."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings

from bench.evaluation.cells import aggregate
from bench.evaluation.per_query import per_query
from bench.ingest.atom_codes import ATOM_CODE, AtomCodeError, decode, encode, served_ids, to_codes, with_atom_ids
from tests.evaluation.measures.test_ranking import _oracle_data
from tests.evaluation.test_per_query import PROPS, scenarios


def _table(atoms: pd.DataFrame) -> pa.Array:
    return pa.array(atoms["atom_id"].astype(str), type=pa.large_string())


def test_served_ids_follow_modality_name_order_and_row_order() -> None:
    frames = {"video": pd.DataFrame({"atom_id": ["v1", "v0"]}), "code": pd.DataFrame({"atom_id": ["c0"]})}
    assert served_ids(frames).to_pylist() == ["c0", "v1", "v0"]


def test_encode_decode_round_trip_and_errors() -> None:
    table = pa.array(["a", "b", "c"], type=pa.large_string())
    codes = encode(pd.Series(["c", "a", "c"]), table)
    assert codes.dtype == np.int32 and codes.tolist() == [2, 0, 2]
    assert decode(codes, table).tolist() == ["c", "a", "c"]
    with pytest.raises(AtomCodeError, match=r"run.atom_id: 1 value\(s\) are not served atoms, e.g. \['zz'\]"):
        encode(pd.Series(["a", "zz"]), table, "run.atom_id")
    with pytest.raises(AtomCodeError, match="outside the 3 served atoms"):
        decode(np.array([0, 3]), table)


def test_to_codes_keeps_column_order_and_with_atom_ids_restores_ids() -> None:
    table = pa.array(["a", "b"], type=pa.large_string())
    run = pd.DataFrame({"query_id": ["q2", "q1"], "rank": [1, 1], "atom_id": ["b", "a"], "score": [1.0, 2.0]})
    coded = to_codes(run, table, "run")
    assert list(coded.columns) == ["query_id", "rank", ATOM_CODE, "score"]
    assert isinstance(coded["query_id"].dtype, pd.CategoricalDtype)
    back = with_atom_ids(coded, table)
    assert back["atom_id"].tolist() == ["b", "a"] and back[ATOM_CODE].tolist() == [1, 0]


def _both(s: dict, k: int, failed) -> tuple[pd.DataFrame, pd.DataFrame]:
    table = _table(s["atoms"])
    strings = per_query(s["entries"], s["run"], s["gold"], s["atoms"], k=k, failed=failed)
    coded = per_query(s["entries"], to_codes(s["run"], table, "run"), to_codes(s["gold"], table, "gold"),
                      s["atoms"][["holder", "observed_at"]], k=k, failed=failed)
    return strings, coded


@settings(max_examples=40, **PROPS)
@given(scenarios())
def test_codes_equal_strings_on_random_cases(s: dict) -> None:
    strings, coded = _both(s, s["k"], s["failed"])
    pd.testing.assert_frame_equal(coded, strings)
    assert aggregate(coded, s["latency"], failed=s["failed"], k=s["k"]) == aggregate(strings, s["latency"], failed=s["failed"], k=s["k"])


def _oracle_served(n_queries: int = 300) -> tuple[pd.DataFrame, ...]:
    """The oracle case with every gold atom served (as resolved gold always is)."""
    entries, run, gold, atoms = _oracle_data(n_queries=n_queries)
    extra = sorted(set(gold["atom_id"]) - set(atoms["atom_id"]))
    more = pd.DataFrame({"atom_id": extra, "holder": "h", "observed_at": atoms["observed_at"].iloc[0]})
    return entries, run, gold, pd.concat([atoms, more], ignore_index=True)


def test_codes_equal_strings_on_the_pytrec_eval_oracle_case() -> None:
    entries, run, gold, atoms = _oracle_served()
    strings, coded = _both({"entries": entries, "run": run, "gold": gold, "atoms": atoms}, 10, None)
    pd.testing.assert_frame_equal(coded, strings)  # strings are checked against pytrec_eval in measures/test_ranking
    # uneven depths (one query cut short) and unsorted rows take the padded and sorted paths
    short = run.loc[~((run["query_id"] == "q001") & (run["rank"] > 3))].sample(frac=1, random_state=3)
    strings, coded = _both({"entries": entries, "run": short, "gold": gold, "atoms": atoms}, 10, None)
    pd.testing.assert_frame_equal(coded, strings)


def test_bad_codes_and_duplicates_are_reported() -> None:
    entries, run, gold, atoms = _oracle_served(n_queries=20)
    table = _table(atoms)
    coded_run, coded_gold = to_codes(run, table, "run"), to_codes(gold, table, "gold")
    slim = atoms[["holder", "observed_at"]]
    with pytest.raises(ValueError, match="run atom codes outside the"):
        per_query(entries, coded_run.assign(atom=coded_run[ATOM_CODE] + len(atoms) // 2), coded_gold, slim)
    with pytest.raises(ValueError, match="gold atom codes outside the"):
        per_query(entries, coded_run, coded_gold.assign(atom=-1), slim)
    dup = coded_run.copy()
    dup.loc[dup.index[1], ATOM_CODE] = dup[ATOM_CODE].iloc[0]  # same query, same atom twice
    with pytest.raises(ValueError, match="duplicate"):
        per_query(entries, dup, coded_gold, slim)
    with pytest.raises(ValueError, match="integer atom codes"):
        per_query(entries, coded_run.assign(atom=coded_run[ATOM_CODE].astype(float)), coded_gold, slim)


#: the writers: where an atom code is turned back into its atom id (the HTML drill-down, the TREC qrels)
WRITERS = {"bench/reporting/outputs.py", "bench/gold/step.py"}
DECODERS = {"decode", "partition_ids", "with_atom_ids"}


def _decoding_modules() -> dict[str, set[str]]:
    """Project modules (bench/, stages/) that import a decoder of bench.ingest.atom_codes, with the names."""
    import ast

    from tests.conftest import ROOT

    found: dict[str, set[str]] = {}
    for path in sorted([*(ROOT / "bench").rglob("*.py"), *(ROOT / "stages").glob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "bench.ingest.atom_codes":
                names = {a.name for a in node.names} & DECODERS
                if names and rel != "bench/ingest/atom_codes.py":
                    found.setdefault(rel, set()).update(names)
    return found


def test_atom_ids_are_named_only_by_the_writers() -> None:
    """From retrieve to the cells atoms are codes: only the writers decode them (issue 23)."""
    found = _decoding_modules()
    assert set(found) == WRITERS, found
    assert found["bench/reporting/outputs.py"] == {"with_atom_ids"} and found["bench/gold/step.py"] == {"partition_ids"}
