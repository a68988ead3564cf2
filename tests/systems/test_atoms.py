"""System-provided atoms: the Pandera contract, extents -> modality columns, gold resolved against them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from bench.gold.resolve import resolve
from bench.ingest.atom_codes import served_ids, with_atom_ids
from bench.io import iter_jsonl, write_jsonl
from bench.systems.atoms import (
    AtomsError,
    atom_columns,
    atoms_from_extents,
    contract_rows,
    load_system_atoms,
    read_atoms_file,
    validate_contract,
)
from tests.conftest import ROOT
from tests.ingest.chunks import chunk_all

GOOD = {"atom_id": "a1", "source_id": "locomo:conv-1:session-1", "modality": "conversation",
        "extent": {"turn_start": 1, "turn_end": 3}, "observed_at": "2023-05-01T10:00:00+00:00", "holder": "locomo:conv-1", "text": "hi"}


def write_rows(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def load(path: Path) -> dict[str, pd.DataFrame]:
    return load_system_atoms(path, None)


def test_good_atoms_become_the_modality_columns(tmp_path):
    rows = [
        GOOD,
        {**GOOD, "atom_id": "a2", "extent": json.dumps({"turn": 7})},
        {**GOOD, "atom_id": "v1", "source_id": "medvidqa:x", "modality": "video", "extent": {"t_start": 1.5, "t_end": 9}, "text": None},
        {**GOOD, "atom_id": "c1", "source_id": "swebench:r", "modality": "code", "extent": {"path": "a/b.py", "line": 4}},
        {**GOOD, "atom_id": "u1", "source_id": "screenagent:s", "modality": "ui_screenshot", "extent": {"bbox": [0, 0, 10.5, 20]}},
        {**GOOD, "atom_id": "i1", "source_id": "coco:1", "modality": "image", "extent": {}},
        {**GOOD, "atom_id": "p1", "source_id": "mmlongbench:d.pdf", "modality": "pdf", "extent": {"page": 2}},
    ]
    frames = load(write_rows(tmp_path / "atoms.jsonl", rows))
    assert sorted(frames) == ["code", "conversation", "image", "pdf", "ui_screenshot", "video"]
    for modality, frame in frames.items():
        assert list(frame.columns) == atom_columns(modality)
        assert str(frame["observed_at"].dt.tz) == "UTC"
    conv = frames["conversation"].set_index("atom_id")
    assert conv.loc["a2", ["turn_start", "turn_end"]].tolist() == [7, 7]
    assert json.loads(conv.loc["a1", "extent"]) == {"turn_start": 1, "turn_end": 3}
    assert frames["code"][["path", "line_start", "line_end"]].values.tolist() == [["a/b.py", 4, 4]]
    assert frames["ui_screenshot"][["x0", "y0", "x1", "y1"]].values.tolist() == [[0.0, 0.0, 10.5, 20.0]]
    assert frames["video"]["text"].tolist() == [""]  # text is optional


def test_parquet_atoms_are_read_too(tmp_path):
    pd.DataFrame([{**GOOD, "extent": json.dumps(GOOD["extent"])}]).to_parquet(tmp_path / "atoms.parquet")
    assert load(tmp_path / "atoms.parquet")["conversation"]["atom_id"].tolist() == ["a1"]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{k: v for k, v in GOOD.items() if k != "holder"}], r"missing field\(s\) \['holder'\]"),
        ([{**GOOD, "gold": 1}], r"unknown field\(s\) \['gold'\]"),
        ([GOOD, GOOD], r"atoms.jsonl:2: atom_id: must be field_uniqueness"),
        ([{**GOOD, "observed_at": "2023-05-01T10:00:00"}], r"atoms.jsonl:1: observed_at: must be ISO 8601 time with a timezone"),
        ([{**GOOD, "modality": "audio"}], r"atoms.jsonl:1: modality: must be one of"),
        ([{**GOOD, "atom_id": ""}], r"atoms.jsonl:1: atom_id: must be non-empty string"),
        ([{**GOOD, "extent": "[1, 2]"}], r"atoms.jsonl:1: extent: must be a JSON object"),
        ([{**GOOD, "extent": {"turn_start": 5, "turn_end": 2}}], r"atoms.jsonl:1: extent: turn_start 5 is after turn_end 2"),
        ([{**GOOD, "extent": {"page": 1}}], r"atoms.jsonl:1: extent: extent must have keys \{turn\} or \{turn_start, turn_end\}"),
        ([{**GOOD, "modality": "video", "extent": {"t_start": 3, "t_end": "x"}}], r"atoms.jsonl:1: extent: t_start and t_end must be finite"),
        ([{**GOOD, "modality": "ui_screenshot", "extent": {"bbox": [5, 0, 1, 1]}}], r"x0 < x1"),
        ([{**GOOD, "modality": "image", "extent": {"page": 1}}], r"image atom's extent must be \{\}"),
        (["not json"], r"atoms.jsonl:1: <line>: invalid JSON"),
        (["[1]"], r"atoms.jsonl:1: <line>: an atom must be a JSON object"),
    ],
)
def test_contract_violations_name_file_line_and_field(tmp_path, rows, message):
    with pytest.raises(AtomsError, match=message):
        load(write_rows(tmp_path / "atoms.jsonl", rows))


def test_source_of_another_modality_is_refused(tmp_path):
    segments = pd.DataFrame({"source_id": ["locomo:conv-1:session-1"], "modality": ["conversation"], "dataset": ["locomo"]})
    rows = [{**GOOD, "modality": "video", "extent": {"t_start": 0, "t_end": 1}}]
    with pytest.raises(AtomsError, match="source locomo:conv-1:session-1 is conversation, the atom says video"):
        load_system_atoms(write_rows(tmp_path / "atoms.jsonl", rows), segments)


# --------------------------------------------------------------------------- on the real corpus


@pytest.fixture(scope="module")
def real(real_corpus) -> dict:
    segments = real_corpus["segments"]
    known = set(segments["source_id"])
    entries = []
    for key in ("mmlongbench", "locomo"):
        dev = [e for _, e in iter_jsonl(ROOT / "bench" / "sets" / f"{key}.jsonl") if e["split"] == "dev"]
        entries += [e for e in dev if e["gold"] and all(g["source_id"] in known for g in e["gold"])][:150]
    # a sample of real sources keeps the test quick: only the sources these entries need, chunked
    # as the chunk stage chunks them (file by file: a source's atoms depend on its segments alone)
    sources = {g["source_id"] for e in entries for g in e["gold"]}
    segments = segments[segments["source_id"].isin(sources)]
    atoms = chunk_all(segments, {"pdf": {"strategy": "page"}, "conversation": {"strategy": "turn"}})
    return {"segments": segments, "atoms": atoms, "entries": entries}


def test_harness_atoms_round_trip_through_the_contract(real, tmp_path):
    """The harness's own chunks, handed over as a system's atoms file, resolve gold identically."""
    path = tmp_path / "atoms.jsonl"
    write_jsonl(path, contract_rows(real["atoms"]))
    served = load_system_atoms(path, real["segments"])
    theirs, _ = resolve(real["entries"], served, real["segments"])
    ours, _ = resolve(real["entries"], real["atoms"], real["segments"])
    assert len(ours) > 250
    # codes are rows of each served table: compare the atom ids they stand for
    theirs = with_atom_ids(theirs, served_ids(served)).drop(columns="atom")
    ours = with_atom_ids(ours, served_ids(real["atoms"])).drop(columns="atom")
    key = ["query_id", "gold_idx", "atom_id"]
    pd.testing.assert_frame_equal(theirs.sort_values(key).reset_index(drop=True), ours.sort_values(key).reset_index(drop=True))


def test_gold_resolves_against_the_systems_own_chunking(real, tmp_path):
    """A system that cuts conversations into 3-turn windows and PDFs into 2-page spans."""
    segments = real["segments"]
    rows = []
    for sid, seg in segments.groupby("source_id"):
        meta = seg.iloc[0]
        observed = pd.Timestamp(seg["observed_at"].max()).isoformat()
        common = {"source_id": sid, "modality": meta["modality"], "observed_at": observed, "holder": meta["holder"]}
        if meta["modality"] == "conversation":
            turns = sorted(seg["turn"].astype(int))
            for i in range(0, len(turns), 3):
                a, b = turns[i], turns[min(i + 2, len(turns) - 1)]
                rows.append({**common, "atom_id": f"{sid}@{a}-{b}", "extent": {"turn_start": a, "turn_end": b}})
        else:
            last = int(seg["page"].max())
            for p in range(1, last + 1, 2):
                rows.append({**common, "atom_id": f"{sid}@p{p}", "extent": {"page_start": p, "page_end": min(p + 1, last)}})
    served = load_system_atoms(write_rows(tmp_path / "mine.jsonl", rows), segments)
    gold, regions = resolve(real["entries"], served, segments)
    gold = with_atom_ids(gold, served_ids(served))
    by_q = gold.groupby(["query_id", "gold_idx"])["atom_id"].apply(set).to_dict()
    checked = 0
    for e in real["entries"]:
        for idx, g in enumerate(e["gold"]):
            region = g["region"]
            if "turn" in region:
                conv = served["conversation"]
                mine = conv[(conv["source_id"] == g["source_id"]) & (conv["turn_start"] <= region["turn"]) & (conv["turn_end"] >= region["turn"])]
            else:
                pdf = served["pdf"]
                mine = pdf[(pdf["source_id"] == g["source_id"]) & (pdf["page_start"] <= region["page"]) & (pdf["page_end"] >= region["page"])]
            future = mine["observed_at"] > pd.Timestamp(e["as_of"])
            expected = set(mine.loc[~future, "atom_id"])
            assert by_q.get((e["query_id"], idx), set()) == expected, (e["query_id"], region)
            checked += 1
    assert checked > 250 and all("@" in a for a in gold["atom_id"])


def test_read_atoms_file_refuses_a_missing_file(tmp_path):
    with pytest.raises(AtomsError, match="no such file"):
        read_atoms_file(tmp_path / "nope.jsonl")
    with pytest.raises(AtomsError, match="missing field"):
        validate_contract(pd.DataFrame({"atom_id": ["x"], "_line": [1]}), "f")
    assert atoms_from_extents(validate_contract(pd.DataFrame([{**GOOD, "_line": 1}]), "f"), None)["conversation"]["dataset"].tolist() == ["locomo"]


def test_atoms_must_agree_with_the_corpus(real, tmp_path):
    """Issue probe: atoms declaring observed_at 1970 made every atom 'past' (temporal correctness 0.13 -> 1.0)."""
    rows = list(contract_rows(real["atoms"]))
    conv = next(i for i, r in enumerate(rows) if r["modality"] == "conversation")
    sid = rows[conv]["source_id"]
    first_seen = pd.to_datetime(real["segments"].loc[real["segments"]["source_id"] == sid, "observed_at"], utc=True).min()
    path = tmp_path / "1970.jsonl"
    where = re.escape(f"{path}:{conv + 1}: ")
    cases = [
        ({"observed_at": "1970-01-01T00:00:00+00:00"},
         where + re.escape(f"observed_at: 1970-01-01T00:00:00+00:00 is before its source {sid} was observed ({first_seen.isoformat()})") + "$"),
        ({"holder": "someone-else"}, where + re.escape(f"holder: 'someone-else' is not the holder of its source {sid} (")),
        ({"source_id": "locomo:conv-999:session-1"}, where + re.escape("source_id: locomo:conv-999:session-1 is not a source of the corpus") + "$"),
    ]
    for change, message in cases:
        bad = [dict(r) for r in rows]
        bad[conv].update(change)
        write_jsonl(path, bad)
        with pytest.raises(AtomsError, match="^" + message):
            load_system_atoms(path, real["segments"])
    # every atom of the file declaring 1970: refused in one line that counts the rest
    every = [{**r, "observed_at": "1970-01-01T00:00:00+00:00"} for r in rows]
    write_jsonl(tmp_path / "all.jsonl", every)
    with pytest.raises(AtomsError) as info:
        load_system_atoms(tmp_path / "all.jsonl", real["segments"])
    assert "\n" not in str(info.value) and f"(and {len(rows) - 1} more row(s))" in str(info.value)


def test_atoms_module_names_no_modality():
    """Each modality reads its own extents (Modality.atom_from_extent): the contract code names none."""
    import ast

    import bench.systems.atoms as mod
    from bench.modalities import modalities

    tree = ast.parse(open(mod.__file__, encoding="utf-8").read())
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    code_strings = strings - {ast.get_docstring(tree)}
    assert not (set(modalities()) & code_strings)
    for name, modality in modalities().items():  # every modality takes system atoms
        assert type(modality).atom_from_extent is not type(modality).__mro__[-2].atom_from_extent, name
