"""Conversation modality: turn regions, chunkers and overlap on real LoCoMo sessions, and the importer."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from bench.archive import member_names, read_member
from bench.modalities.base import assign_splits
from bench.modalities.conversation import DATASETS, MODALITY
from bench.modalities.conversation.locomo import (
    ARCHIVE,
    MEMBER_DIR,
    LoCoMo,
    conversation_moments,
    parse_session_time,
    session_end,
    sessions_of,
)
from bench.modalities.conversation.modality import ATOM_CONVERSATION_COLUMNS
from bench.modalities.derived import is_derived

MIRROR = Path(__file__).resolve().parents[2].parent / "shared" / "mirror"
LOCOMO_DIR = MIRROR / "locomo"
ZIP = LOCOMO_DIR / ARCHIVE
need_locomo = pytest.mark.skipif(not ZIP.is_file(), reason=f"LoCoMo mirror absent at {ZIP}")

SPEC_KEYS = ["query_id", "modality", "question", "answer", "answer_format", "gold", "scope", "as_of",
             "unanswerable", "origin", "split"]
SESSION = "locomo:conv-26:session-1"


def skip_without_mirror() -> None:
    if not ZIP.is_file():
        pytest.skip(f"LoCoMo mirror absent at {ZIP}")


@pytest.fixture(scope="module")
def raw() -> dict[str, dict]:
    """The real conversations, read straight from the mirrored zip: conv key -> JSON."""
    skip_without_mirror()
    return {f"conv-{Path(m).stem}": json.loads(read_member(ZIP, m)) for m in member_names(ZIP) if m.startswith(MEMBER_DIR)}


@pytest.fixture(scope="module")
def segments(tmp_path_factory) -> pd.DataFrame:
    """LoCoMo.extract over the real members, unpacked the way the fetch stage stores them."""
    skip_without_mirror()
    folder = tmp_path_factory.mktemp("locomo")
    files = {}
    for m in member_names(ZIP):
        local = folder / Path(m).name
        local.write_bytes(read_member(ZIP, m))
        files[f"{ARCHIVE}!/{m}"] = local
    return LoCoMo().extract(files)


@pytest.fixture(scope="module")
def imported():
    skip_without_mirror()
    return LoCoMo().import_set(LOCOMO_DIR)


@pytest.fixture(scope="module")
def by_source(segments) -> dict[str, pd.DataFrame]:
    return {sid: grp for sid, grp in segments.groupby("source_id", sort=False)}


@pytest.fixture(scope="module")
def chunked(segments) -> dict[str, dict[str, pd.DataFrame]]:
    """strategy -> source_id -> atoms, for the whole real corpus (window: 5 turns, overlap 2)."""
    out = {}
    for strategy in MODALITY.strategies:
        atoms = MODALITY.chunk(segments, strategy, {"window_turns": 5, "overlap_turns": 2})
        assert atoms["atom_id"].is_unique
        out[strategy] = {sid: grp for sid, grp in atoms.groupby("source_id", sort=False)}
    return out


def session(segments: pd.DataFrame, sid: str = SESSION) -> pd.DataFrame:
    return segments[segments["source_id"] == sid]


def synthetic(turns: list[int], source_id: str = "locomo:conv-0:session-1") -> pd.DataFrame:
    df = pd.DataFrame({"source_id": source_id, "turn": turns, "text": [f"A: said {t}" for t in turns]})
    df["dataset"], df["modality"], df["holder"] = "locomo", "conversation", "locomo:conv-0"
    df["observed_at"] = pd.Timestamp("2023-05-08 13:56", tz="UTC")
    df["seq"] = range(len(df))
    return df


# -- region shape -------------------------------------------------------------------


@pytest.mark.parametrize("region", [{"turn": 1}, {"turn": 0}, {"turn": 40}])
def test_valid_turn_regions(region):
    assert MODALITY.check_region_shape(region) is None


@pytest.mark.parametrize(
    ("region", "needle"),
    [
        ({"turn": -1}, "turn must be >= 0"),
        ({"turn": 1.0}, "turn must be an integer"),
        ({"turn": "3"}, "turn must be an integer"),
        ({"turn": True}, "turn must be an integer"),
        ({}, "must have keys {turn}, got {}"),
        ({"page": 1}, "got {page}"),
        ({"turn": 1, "session": 2}, "got {session, turn}"),
        ("D1:3", "region must be an object"),
    ],
)
def test_invalid_turn_regions(region, needle):
    problem = MODALITY.check_region_shape(region)
    assert problem is not None and needle in problem


def test_turn_in_real_session(segments, raw):
    seg = session(segments)
    n = len(raw["conv-26"]["session_1"])
    assert sorted(seg["turn"]) == list(range(1, n + 1))
    assert MODALITY.check_region_in_corpus({"turn": 1}, seg) is None
    assert MODALITY.check_region_in_corpus({"turn": n}, seg) is None
    for bad in (0, n + 1, 999):
        problem = MODALITY.check_region_in_corpus({"turn": bad}, seg)
        assert problem is not None and f"turn {bad}" in problem and f"turns 1..{n}" in problem
    # a turn of a longer session does not exist in a shorter one
    lengths = segments.groupby("source_id")["turn"].max()
    short_sid, long_sid = lengths.idxmin(), lengths.idxmax()
    assert MODALITY.check_region_in_corpus({"turn": int(lengths[long_sid])}, session(segments, short_sid)) is not None


# -- extraction: only what was said ------------------------------------------------------


def test_segments_follow_the_real_sessions(segments, raw):
    assert segments["source_id"].nunique() == sum(len(sessions_of(c)) for c in raw.values())
    conv = raw["conv-26"]
    seg = session(segments)
    turns = conv["session_1"]
    assert seg["text"].tolist() == [f"{t['speaker']}: {t['text']}" for t in turns]
    assert seg["dia_id"].tolist() == [t["dia_id"] for t in turns]
    assert (seg["holder"] == "locomo:conv-26").all()
    assert (seg["observed_at"] == pd.Timestamp(parse_session_time(conv["session_1_date_time"]))).all()
    assert str(seg["observed_at"].dt.tz) == "UTC"
    assert seg["seq"].tolist() == list(range(len(seg)))


def test_blip_caption_and_image_query_never_in_corpus_text(segments, raw):
    conv = raw["conv-26"]
    turn = next(t for t in conv["session_1"] if "blip_caption" in t)
    assert turn["dia_id"] == "D1:5"
    caption, query = turn["blip_caption"], turn["query"]
    row = session(segments)[session(segments)["turn"] == 5].iloc[0]
    assert row["text"] == f"{turn['speaker']}: {turn['text']}"
    corpus = "\n".join(segments["text"])
    assert caption not in corpus and query not in corpus
    # and over every captioned turn of every conversation
    captions = [t["blip_caption"] for c in raw.values() for s in sessions_of(c) for t in c[f"session_{s}"] if "blip_caption" in t]
    assert len(captions) > 1000
    assert not [c for c in captions if c in corpus]
    for field in ("observation", "summary", "events"):
        assert not segments["text"].str.contains(field + "_session", regex=False).any()


# -- chunkers on real sessions -----------------------------------------------------------


def test_turn_chunker(segments):
    seg = session(segments)
    atoms = MODALITY.chunk(seg, "turn", {})
    assert list(atoms.columns) == ATOM_CONVERSATION_COLUMNS
    assert atoms["atom_id"].is_unique and len(atoms) == len(seg)
    assert atoms["atom_id"].tolist() == [f"{SESSION}#t{i}" for i in range(len(seg))]
    assert (atoms["turn_start"] == atoms["turn_end"]).all()
    assert atoms["turn_start"].tolist() == seg["turn"].tolist()
    assert atoms["text"].tolist() == seg["text"].tolist()
    for a in atoms.itertuples():
        assert json.loads(a.extent) == {"turn_start": a.turn_start, "turn_end": a.turn_end}
    assert (atoms["observed_at"] == seg["observed_at"].iloc[0]).all()
    pd.testing.assert_frame_equal(atoms, MODALITY.chunk(seg.sample(frac=1, random_state=1), "turn", {}))


def test_window_chunker(segments):
    seg = session(segments)
    n = len(seg)
    atoms = MODALITY.chunk(seg, "window", {"window_turns": 5, "overlap_turns": 2})
    assert atoms["atom_id"].tolist() == [f"{SESSION}#w{i}" for i in range(len(atoms))]
    texts = seg.sort_values("seq")["text"].tolist()
    for a in atoms.itertuples():
        assert 1 <= a.turn_end - a.turn_start + 1 <= 5
        assert a.text == "\n".join(texts[a.turn_start - 1 : a.turn_end])
    assert atoms["turn_start"].iloc[0] == 1 and atoms["turn_end"].iloc[-1] == n
    for cur, nxt in zip(atoms.itertuples(), atoms.iloc[1:].itertuples()):
        assert nxt.turn_start == cur.turn_end - 1  # two turns shared
        assert nxt.turn_start == cur.turn_start + 3
        assert nxt.char_start < cur.char_end
    assert (atoms.iloc[:-1]["turn_end"] - atoms.iloc[:-1]["turn_start"] == 4).all()
    pd.testing.assert_frame_equal(atoms, MODALITY.chunk(seg, "window", {"window_turns": 5, "overlap_turns": 2}))


def test_session_chunker_and_all_sessions(segments, chunked):
    atoms = pd.concat(chunked["session"].values(), ignore_index=True)
    assert len(atoms) == segments["source_id"].nunique() and atoms["atom_id"].is_unique
    one = atoms[atoms["source_id"] == SESSION].iloc[0]
    seg = session(segments)
    assert one["atom_id"] == f"{SESSION}#session"
    assert (one["turn_start"], one["turn_end"]) == (1, len(seg))
    assert one["text"] == "\n".join(seg["text"])
    assert one["holder"] == "locomo:conv-26"
    by_holder = atoms.groupby("holder")["source_id"].apply(lambda s: {x.rsplit(":", 1)[0] for x in s})
    assert all(v == {h} for h, v in by_holder.items())  # a session never crosses holders


def test_all_strategies_give_unique_ids_over_the_whole_corpus(chunked):
    for strategy, per_source in chunked.items():
        assert pd.concat([a["atom_id"] for a in per_source.values()]).is_unique, strategy
        for sid, atoms in per_source.items():
            assert atoms["atom_id"].str.startswith(sid + "#").all()


def test_bad_chunking_options():
    seg = synthetic([1, 2, 3])
    with pytest.raises(ValueError, match="turn.*window.*session"):
        MODALITY.chunk(seg, "paragraph", {})
    with pytest.raises(ValueError, match="overlap"):
        MODALITY.chunk(seg, "window", {"window_turns": 2, "overlap_turns": 2})


# -- overlap ---------------------------------------------------------------------------


def test_overlap_at_window_edges(segments):
    seg = session(segments)
    atoms = MODALITY.chunk(seg, "window", {"window_turns": 5, "overlap_turns": 2})
    for k, a in enumerate(atoms.itertuples()):
        assert MODALITY.overlap({"turn": a.turn_end}, atoms, seg)[k]
        assert MODALITY.overlap({"turn": a.turn_start}, atoms, seg)[k]
        assert not MODALITY.overlap({"turn": a.turn_end + 1}, atoms, seg)[k]
        assert not MODALITY.overlap({"turn": a.turn_start - 1}, atoms, seg)[k]
    # a shared turn is in both windows, an unshared one in exactly one
    assert MODALITY.overlap({"turn": 4}, atoms, seg).tolist()[:3] == [True, True, False]
    assert MODALITY.overlap({"turn": 6}, atoms, seg).tolist()[:3] == [False, True, False]
    assert not MODALITY.overlap({"turn": len(seg) + 1}, atoms, seg).any()


def test_overlap_uses_turn_numbers_not_positions():
    seg = synthetic([3, 4, 7, 8])  # gaps in numbering
    atoms = MODALITY.chunk(seg, "turn", {})
    assert MODALITY.overlap({"turn": 7}, atoms, seg).tolist() == [False, False, True, False]
    assert not MODALITY.overlap({"turn": 1}, atoms, seg).any()
    windows = MODALITY.chunk(seg, "window", {"window_turns": 2, "overlap_turns": 0})
    assert windows[["turn_start", "turn_end"]].values.tolist() == [[3, 4], [7, 8]]
    assert not MODALITY.overlap({"turn": 5}, windows, seg).any()


def test_real_gold_turns_resolve_to_their_turn_atom(by_source, chunked, imported):
    checked = 0
    for e in imported.entries[::10]:
        as_of = pd.Timestamp(e["as_of"])
        for g in e["gold"]:
            sid, turn = g["source_id"], g["region"]["turn"]
            seg = by_source[sid]
            t_atoms, w_atoms, s_atoms = (chunked[k][sid] for k in ("turn", "window", "session"))
            hit = t_atoms[MODALITY.overlap(g["region"], t_atoms, seg)]
            assert hit["turn_start"].tolist() == [turn]
            assert seg[seg["turn"] == turn]["text"].iloc[0] == hit["text"].iloc[0]
            assert (hit["observed_at"] <= as_of).all()  # gold is never future memory
            w_hit = w_atoms[MODALITY.overlap(g["region"], w_atoms, seg)]
            assert 1 <= len(w_hit) <= 2
            assert ((w_hit["turn_start"] <= turn) & (w_hit["turn_end"] >= turn)).all()
            assert MODALITY.overlap(g["region"], s_atoms, seg).tolist() == [True]
            checked += 1
    assert checked > 150


# -- importer on the real mirror ----------------------------------------------------------


def qa_of(raw: dict, item: str) -> tuple[str, dict]:
    member, q_no = item.split("#qa:")
    conv_key = f"conv-{Path(member).stem}"
    return conv_key, raw[conv_key]["qa"][int(q_no)]


@need_locomo
def test_importer_counts_and_exclusions(imported, raw):
    at_end = [e for e in imported.entries if ":mid" not in e["query_id"]]
    assert len(at_end) == 1978 and len(imported.entries) == 2870
    assert sum(e["unanswerable"] for e in at_end) == 446
    assert sum(e["unanswerable"] for e in imported.entries) == 648
    assert len(imported.excluded) == 8
    total = sum(len(c["qa"]) for c in raw.values())
    assert len(at_end) + len(imported.excluded) == total == imported.notes["upstream_rows"]
    kinds = defaultdict(int)
    for x in imported.excluded:
        assert set(x) == {"item", "reason"} and x["reason"]
        _, qa = qa_of(raw, x["item"])
        reason = x["reason"]
        kinds[reason.split(":")[0]] += 1
        if reason.startswith("answerable question without evidence"):
            assert qa["evidence"] == [] and qa["category"] != 5
        else:
            bad = re.search(r"'(.*)'$", reason).group(1)
            assert any(bad in str(cell) for cell in qa["evidence"])
    assert dict(kinds) == {
        "answerable question without evidence turns": 4,
        "evidence names no turn of the conversation": 2,
        "malformed evidence id": 2,
    }


@need_locomo
def test_importer_field_shapes_and_category_5(imported, raw):
    ds = LoCoMo()
    assert DATASETS[0].key == ds.key
    seen_items = set()
    for e in imported.entries:
        if ":mid" in e["query_id"]:
            continue  # the mid moment's entries: test_two_moments_per_conversation
        assert list(e) == SPEC_KEYS
        conv_key, qa = qa_of(raw, e["origin"]["item"])
        q_no = int(e["origin"]["item"].split("#qa:")[1])
        assert e["query_id"] == f"locomo:{conv_key}:q{q_no}"
        assert e["question"] == qa["question"] and e["modality"] == "conversation"
        assert e["scope"] == {"holder": f"locomo:{conv_key}", "session": None, "scenario": "conversation-qa"}
        assert e["origin"]["dataset"] == ds.name and e["origin"]["revision"] == ds.revision
        assert e["origin"]["license"] == ds.license
        assert datetime.fromisoformat(e["as_of"]).utcoffset() == timedelta(0)
        assert e["split"] in {"dev", "test"}
        assert e["answer_format"] in {"str", "int", "float", "list", "none"}
        if qa["category"] == 5:
            assert e["unanswerable"] is True
            assert (e["answer"], e["answer_format"], e["gold"]) == (None, "none", [])
        else:
            assert e["unanswerable"] is False
            assert e["answer"] == qa["answer"] and e["gold"]
            want = []
            for cell in qa["evidence"]:
                for token in re.split(r"[;,\s]+", cell.strip()):
                    s, t = re.fullmatch(r"D(\d+):(\d+)", token).groups()
                    want.append({"source_id": f"locomo:{conv_key}:session-{int(s)}", "region": {"turn": int(t)}})
            assert e["gold"] == [g for i, g in enumerate(want) if g not in want[:i]]
            for g in e["gold"]:
                assert MODALITY.check_region_shape(g["region"]) is None
        seen_items.add(e["origin"]["item"])
    assert len(seen_items) == 1978
    assert sum(qa["category"] == 5 for c in raw.values() for qa in c["qa"]) == 446


@need_locomo
def test_importer_gold_turns_exist(imported, by_source):
    for e in imported.entries:
        for g in e["gold"]:
            assert MODALITY.check_region_in_corpus(g["region"], by_source[g["source_id"]]) is None


@need_locomo
def test_two_moments_per_conversation(imported, raw):
    """Every question at the conversation's end; again at its mid moment where all or none of its
    evidence was said by then (category 5 stays unanswerable); the mid moment's unanswerable share
    is the end's, per conversation, so as_of tells nothing about answerability."""
    end_of = {e["query_id"]: e for e in imported.entries if ":mid" not in e["query_id"]}
    per_conv: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for e in imported.entries:
        conv_key, qa = qa_of(raw, e["origin"]["item"].split("|")[0])
        conv = raw[conv_key]
        starts = {s: parse_session_time(conv[f"session_{s}_date_time"]) for s in sessions_of(conv)}
        end, mid, _ = conversation_moments(sessions_of(conv), starts)
        if ":mid" not in e["query_id"]:
            assert e["as_of"] == end.isoformat() and all(t < end for t in starts.values())
            per_conv[conv_key]["end"].append(e["unanswerable"])
            continue
        base = e["query_id"].split(":mid")[0]
        twin = end_of[base]
        assert e["as_of"] == mid.isoformat() and e["question"] == twin["question"] and e["split"] == twin["split"]
        evidence = {starts[int(g["source_id"].rsplit("-", 1)[1])] for g in twin["gold"]}
        if not e["unanswerable"]:
            assert e["gold"] == twin["gold"] and all(t <= mid for t in evidence)
            assert e["origin"]["item"] == twin["origin"]["item"] + "|moment:mid"
        elif is_derived(e):
            assert e["query_id"] == base + ":mid:gold-later" and e["gold"] == [] and all(t > mid for t in evidence)
        else:
            assert twin["unanswerable"] and qa["category"] == 5
        per_conv[conv_key]["mid"].append(e["unanswerable"])
    assert len(per_conv) == 10
    for conv_key, at in per_conv.items():
        n_ans, n_un = at["end"].count(False), at["end"].count(True)
        mid_ans, mid_un = at["mid"].count(False), at["mid"].count(True)
        assert mid_ans > 0 and mid_un == (2 * mid_ans * n_un + n_ans) // (2 * n_ans), conv_key
    futures = sum(1 for e in imported.entries if ":mid" in e["query_id"])
    assert futures == 892  # questions asked while later sessions are still future memory


def test_session_end_and_moments_edge_cases():
    t = lambda d, h=0, m=0: datetime(2023, 5, d, h, m, tzinfo=UTC)  # noqa: E731
    starts = {1: t(1, 10), 2: t(1, 10, 30), 3: t(5, 9), 4: t(7, 9)}
    sessions = [1, 2, 3, 4]
    # the next session starts within the hour: one second before it
    assert session_end(1, sessions, starts) == t(1, 10, 30) - timedelta(seconds=1)
    assert session_end(2, sessions, starts) == t(1, 11, 30)
    end, mid, mid_session = conversation_moments(sessions, starts)
    assert (end, mid, mid_session) == (t(8, 9), t(1, 11, 30), 2)  # mid: after session ceil(4 / 2) in time order
    assert conversation_moments([1, 2, 3], {1: t(1), 2: t(2), 3: t(3)})[2] == 2


@need_locomo
def test_importer_splits_grouped_by_conversation(imported, raw):
    per_conv = defaultdict(set)
    for e in imported.entries:
        per_conv[e["query_id"].split(":")[1]].add(e["split"])
    assert set(per_conv) == set(raw)
    assert all(len(v) == 1 for v in per_conv.values())
    expected = assign_splits(list(raw), "locomo")
    assert {k: v.pop() for k, v in per_conv.items()} == expected
    assert sum(v == "test" for v in expected.values()) == 3  # round(30 % of 10)


@need_locomo
def test_importer_is_deterministic(imported, tmp_path):
    from bench.annotations.sets_io import write_set

    again = LoCoMo().import_set(LOCOMO_DIR)
    assert again.entries == imported.entries and again.excluded == imported.excluded
    write_set(LoCoMo(), imported, tmp_path / "a")
    write_set(LoCoMo(), again, tmp_path / "b")
    for rel in ("locomo.jsonl", "imports/locomo.json"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    record = json.loads((tmp_path / "a/imports/locomo.json").read_text(encoding="utf-8"))
    assert (record["entries"], record["unanswerable"], record["excluded"]) == (2870, 648, 8)
