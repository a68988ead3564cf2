"""Video modality: region checks, overlap edges, chunkers, and both importers on the real mirror."""

from __future__ import annotations

import ast
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from bench.corpus_sources import datasets
from bench.modalities import modalities
from bench.modalities.derived import is_derived, question_key
from bench.modalities.video import DATASETS, MODALITY
from bench.modalities.video.medvidqa import CSV, VIDEO_ID, MedVidQA, parse_track, read_rows, read_video_ids
from bench.modalities.video.modality import DURATION_TOLERANCE, cue_frame, finish_segments, overlaps, window_bounds
from bench.modalities.video.tutorialvqa import EVENTS, TutorialVQA

MIRROR = Path(__file__).resolve().parents[2].parent / "shared" / "mirror"
TVQA_DIR = MIRROR / "tutorialvqa"
MEDVID_DIR = MIRROR / "medvidqa"
need_tvqa = pytest.mark.skipif(not (TVQA_DIR / EVENTS).exists(), reason=f"TutorialVQA mirror absent at {TVQA_DIR}")
need_medvid = pytest.mark.skipif(not (MEDVID_DIR / CSV).exists(), reason=f"MedVidQA mirror absent at {MEDVID_DIR}")

SPEC_KEYS = ["query_id", "modality", "question", "answer", "answer_format", "gold", "scope", "as_of",
             "unanswerable", "origin", "split"]


def synthetic(cues: list[tuple[float, float, str]], source_id: str = "tutorialvqa:1") -> pd.DataFrame:
    raw = [{"source_id": source_id, "cue_index": i, "t_start": a, "t_end": b, "text": t} for i, (a, b, t) in enumerate(cues)]
    placed, _ = cue_frame(raw)
    return finish_segments(placed, "tutorialvqa", "owner", {source_id: pd.Timestamp("2016-01-01", tz="UTC")})


@pytest.fixture(scope="module")
def tvqa_segments() -> pd.DataFrame:
    if not (TVQA_DIR / EVENTS).exists():
        pytest.skip(f"TutorialVQA mirror absent at {TVQA_DIR}")
    return TutorialVQA().extract({EVENTS: TVQA_DIR / EVENTS})


@pytest.fixture(scope="module")
def tvqa_imported() -> Any:
    """TutorialVQA's set imported from the real mirror once for the module (the tests only read it;
    test_tutorialvqa_import_real imports it a second time and compares)."""
    if not (TVQA_DIR / EVENTS).exists():
        pytest.skip(f"TutorialVQA mirror absent at {TVQA_DIR}")
    return TutorialVQA().import_set(TVQA_DIR)


@pytest.fixture(scope="module")
def medvid_segments() -> pd.DataFrame:
    if not (MEDVID_DIR / CSV).exists():
        pytest.skip(f"MedVidQA mirror absent at {MEDVID_DIR}")
    return MedVidQA().extract({CSV: MEDVID_DIR / CSV})


# -- registration -------------------------------------------------------------


def test_registered():
    assert modalities()["video"] is not None
    assert {"tutorialvqa", "medvidqa"} <= set(datasets())
    assert MODALITY.strategies == ("cue", "window")
    assert all(ds.modality == "video" and ds.annotation_is_human for ds in DATASETS)


# -- region shape -------------------------------------------------------------


@pytest.mark.parametrize(
    "region",
    [
        None,
        [0, 1],
        {},
        {"t_start": 1.0},
        {"t_end": 2.0},
        {"t_start": 1.0, "t_end": 2.0, "page": 1},
        {"start": 1.0, "end": 2.0},
        {"t_start": "1", "t_end": 2.0},
        {"t_start": 1.0, "t_end": None},
        {"t_start": True, "t_end": 2.0},
        {"t_start": float("nan"), "t_end": 2.0},
        {"t_start": 1.0, "t_end": float("inf")},
        {"t_start": -float("inf"), "t_end": 2.0},
        {"t_start": -0.5, "t_end": 2.0},
        {"t_start": 2.0, "t_end": 2.0},
        {"t_start": 3.0, "t_end": 2.0},
    ],
)
def test_bad_region_shapes_rejected(region):
    assert MODALITY.check_region_shape(region) is not None


@pytest.mark.parametrize("region", [{"t_start": 0, "t_end": 5}, {"t_start": 0.0, "t_end": 0.5}, {"t_start": 1, "t_end": 2.5}])
def test_good_region_shapes_accepted(region):
    assert MODALITY.check_region_shape(region) is None


def test_messages_are_one_line():
    for region in ({"t_start": 3.0, "t_end": 2.0}, {"t_start": float("nan"), "t_end": 1.0}, {"x": 1}):
        problem = MODALITY.check_region_shape(region)
        assert problem and "\n" not in problem


# -- region against the real corpus ------------------------------------------


def test_region_in_real_tutorialvqa(tvqa_segments):
    seg = tvqa_segments[tvqa_segments["source_id"] == "tutorialvqa:14643"]
    end = float(seg["t_end"].max())
    assert MODALITY.check_region_in_corpus({"t_start": 186.45, "t_end": 202.41}, seg) is None
    assert MODALITY.check_region_in_corpus({"t_start": 10.0, "t_end": end + DURATION_TOLERANCE}, seg) is None
    beyond = MODALITY.check_region_in_corpus({"t_start": 10.0, "t_end": end + DURATION_TOLERANCE + 0.5}, seg)
    assert beyond is not None and "beyond" in beyond
    assert MODALITY.check_region_in_corpus({"t_start": end, "t_end": end + 1.0}, seg) is not None
    assert MODALITY.check_region_in_corpus({"t_start": 0.0, "t_end": 1.0}, seg.iloc[0:0]) is not None


def test_region_in_real_medvidqa(medvid_segments):
    seg = medvid_segments[medvid_segments["source_id"] == "medvidqa:Y9-54bnvPGg"]
    end = float(seg["t_end"].max())
    assert end == pytest.approx(32.99)
    # the one gold window that ends 1.01 s after the last caption is within the tolerance
    assert MODALITY.check_region_in_corpus({"t_start": 6.0, "t_end": 34.0}, seg) is None
    assert MODALITY.check_region_in_corpus({"t_start": 6.0, "t_end": 36.0}, seg) is not None


# -- overlap edges ------------------------------------------------------------


def atoms_of(spans: list[tuple[float, float]]) -> pd.DataFrame:
    return pd.DataFrame({"t_start": [a for a, _ in spans], "t_end": [b for _, b in spans]}, dtype="float64")


def test_touching_intervals_do_not_overlap():
    atoms = atoms_of([(0.0, 5.0), (10.0, 15.0), (4.999, 5.001)])
    mask = MODALITY.overlap({"t_start": 5.0, "t_end": 10.0}, atoms, None)
    assert mask.tolist() == [False, False, True]


def test_zero_length_atom():
    atoms = atoms_of([(7.0, 7.0), (5.0, 5.0), (10.0, 10.0), (4.0, 4.0), (11.0, 11.0)])
    mask = MODALITY.overlap({"t_start": 5.0, "t_end": 10.0}, atoms, None)
    # inside and at the start: yes; at the (excluded) end and outside: no
    assert mask.tolist() == [True, True, False, False, False]


def test_containment_both_ways():
    atoms = atoms_of([(0.0, 100.0), (6.0, 7.0), (9.0, 12.0)])
    assert MODALITY.overlap({"t_start": 5, "t_end": 10}, atoms, None).all()


# -- chunkers -----------------------------------------------------------------


CUES = [(1.0, 4.0, "a"), (3.5, 9.0, "b"), (9.0, 9.0, "c"), (12.0, 20.0, "d"), (2.0, 3.0, "e")]


def test_cue_chunker_sorted_by_start():
    atoms = MODALITY.chunk(synthetic(CUES), "cue", {})
    assert atoms["text"].tolist() == ["a", "e", "b", "c", "d"]
    assert atoms["atom_id"].tolist() == [f"tutorialvqa:1#c{i}" for i in range(5)]
    assert atoms["extent"].iloc[0] == '{"t_end":4.0,"t_start":1.0}'


def test_window_chunker_covers_the_video():
    seg = synthetic(CUES)
    atoms = MODALITY.chunk(seg, "window", {"window_seconds": 6, "overlap_seconds": 2})
    starts, ends = atoms["t_start"].to_numpy(), atoms["t_end"].to_numpy()
    assert starts[0] == 0.0 and ends[-1] == 20.0
    assert (starts[1:] < ends[:-1]).all()  # consecutive windows overlap: no gap
    assert atoms["text"].tolist() == ["a\ne\nb", "b\nc", "b\nc\nd", "d", "d"]
    assert set("\n".join(atoms["text"]).split("\n")) == {"a", "b", "c", "d", "e"}


def test_window_chunker_options_checked():
    seg = synthetic(CUES)
    for bad in ({}, {"window_seconds": 5}, {"window_seconds": 5, "overlap_seconds": 5},
                {"window_seconds": 0, "overlap_seconds": 0}, {"window_seconds": math.nan, "overlap_seconds": 0}):
        with pytest.raises(ValueError):
            MODALITY.chunk(seg, "window", bad)
    with pytest.raises(ValueError):
        MODALITY.chunk(seg, "scene", {})
    assert window_bounds(0.0, 10, 0) == []


def test_empty_segments_give_empty_atoms():
    empty = synthetic([])
    for strategy, opts in (("cue", {}), ("window", {"window_seconds": 10, "overlap_seconds": 0})):
        atoms = MODALITY.chunk(empty, strategy, opts)
        assert atoms.empty and list(atoms.columns)[:8] == [
            "atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at", "extent"]


def test_unplaceable_cues_dropped_and_counted():
    raw = [{"source_id": "s", "cue_index": i, "t_start": a, "t_end": b, "text": "x"}
           for i, (a, b) in enumerate([("1.0", "2.0"), (None, "3"), ("4", None), ("5", "4"), ("-1", "2"), ("nan", "1")])]
    placed, dropped = cue_frame(raw)
    assert len(placed) == 1
    assert dropped == {"missing_time": 3, "negative_time": 1, "inverted_time": 1}


def test_round_trip_exact_atom_found():
    seg = synthetic([(10.0, 20.0, "gold cue"), (20.0, 30.0, "after"), (0.0, 10.0, "before")])
    region = {"t_start": 10.0, "t_end": 20.0}
    cue = MODALITY.chunk(seg, "cue", {})
    assert cue.loc[MODALITY.overlap(region, cue, seg), "text"].tolist() == ["gold cue"]
    win = MODALITY.chunk(seg, "window", {"window_seconds": 10, "overlap_seconds": 0})
    hit = win[MODALITY.overlap(region, win, seg)]
    assert hit["atom_id"].tolist() == ["tutorialvqa:1#w1"]
    assert (hit["t_start"].iloc[0], hit["t_end"].iloc[0]) == (10.0, 20.0)


def test_round_trip_real_gold_windows(tvqa_segments, tvqa_imported):
    entries = tvqa_imported.entries
    for strategy, opts in (("cue", {}), ("window", {"window_seconds": 30, "overlap_seconds": 10})):
        atoms = MODALITY.chunk(tvqa_segments, strategy, opts)
        by_source = dict(tuple(atoms.groupby("source_id")))
        for e in entries[:300]:
            for g in e["gold"]:
                assert MODALITY.overlap(g["region"], by_source[g["source_id"]], None).any()


# -- TutorialVQA on the real mirror -------------------------------------------


def check_entry_shape(e: dict, key: str) -> None:
    assert list(e) == SPEC_KEYS
    assert e["query_id"].startswith(f"{key}:") and e["modality"] == "video"
    assert e["answer"] is None and e["answer_format"] == "none" and e["unanswerable"] is False
    assert e["split"] in {"dev", "test"} and e["gold"]
    assert e["scope"] == {"holder": "owner", "session": None, "scenario": "video-qa"}
    assert pd.Timestamp(e["as_of"]).tzinfo is not None
    for g in e["gold"]:
        assert g["source_id"].startswith(f"{key}:")
        assert MODALITY.check_region_shape(g["region"]) is None
        assert all(isinstance(v, float) for v in g["region"].values())


@need_tvqa
def test_tutorialvqa_import_real(tvqa_imported):
    first, second = tvqa_imported, TutorialVQA().import_set(TVQA_DIR)  # imported twice: the same result
    assert first.entries == second.entries and first.excluded == second.excluded and first.notes == second.notes
    entries = [e for e in first.entries if not is_derived(e)]
    moments = first.notes["moments"]
    assert moments["source_entries"] == 6003 and moments["dropped_by_reason"] == {
        "gold after the moment, but the question text is gold in more than one source": 58}
    assert first.notes["upstream_rows"] == 6197
    assert first.notes["exact_duplicate_rows_dropped"] == 123
    assert first.notes["exact_duplicate_rows_dropped"] + first.notes["trimmed_question_duplicate_rows_dropped"] == 166
    assert first.notes["video_question_pairs"] == 6007
    assert first.notes["pairs_with_several_gold_windows"] == 24
    assert first.notes["gold_windows_ending_after_last_cue"] == 0
    assert first.notes["dropped_cues"] == {"missing_time": 13, "negative_time": 0, "inverted_time": 2}
    assert len(first.entries) + 58 + len(first.excluded) == 6007
    # two upstream rows belong to no split; two questions are empty strings upstream
    assert Counter(x["reason"] for x in first.excluded) == {
        "row in none of the upstream train/dev/test files": 2,
        "empty question text": 2,
    }
    assert all(e["question"].strip() for e in entries)
    assert len({e["query_id"] for e in entries}) == len(entries)
    assert Counter(e["split"] for e in first.entries) == {"dev": 4729, "test": 1216}
    assert Counter(e["split"] for e in first.entries if e["unanswerable"]) == {"dev": 1541, "test": 347}
    for e in entries:
        check_entry_shape(e, "tutorialvqa")
    assert {e["as_of"] for e in first.entries} == {"2017-07-27T01:22:34.400000+00:00"} == {moments["moment"]}


@need_tvqa
def test_tutorialvqa_extract_real(tvqa_segments):
    seg = tvqa_segments
    assert len(seg) == 3664 - 15 and seg["source_id"].nunique() == 76
    assert seg.attrs["dropped_cues"]["missing_time"] == 13
    v4255 = seg[seg["source_id"] == "tutorialvqa:4255"]
    assert len(v4255) == 186 - 13 - 1
    assert seg.groupby("source_id")["t_start"].apply(lambda s: s.is_monotonic_increasing).all()
    assert str(seg["observed_at"].dtype).startswith("datetime64") and str(seg["observed_at"].dt.tz) == "UTC"
    # a cue is observed at its video's publication time plus its start (first cue at 0.09 s)
    assert seg["observed_at"].min() == pd.Timestamp("2015-06-23T06:37:44.090Z")
    cf = TutorialVQA().corpus_files(TVQA_DIR)
    assert len(cf) == 76 and {c.path for c in cf} == {EVENTS} and cf[0].sha256
    assert TutorialVQA().file_of("tutorialvqa:4255") == EVENTS and TutorialVQA().file_of("medvidqa:x") is None


# -- MedVidQA on the real mirror ----------------------------------------------


@need_medvid
def test_medvidqa_track_parser_matches_literal_eval():
    rows, _ = read_rows(MEDVID_DIR / CSV)
    checked = failed = 0
    for track in rows["subtitle_timestamps"]:
        try:
            d = ast.literal_eval(track)
        except (ValueError, SyntaxError):
            failed += 1
            assert parse_track(track)
            continue
        ref = [(float(k.strip("()").split(",")[0]), float(k.strip("()").split(",")[1]), v.strip()) for k, v in d.items()]
        assert parse_track(track) == ref
        checked += 1
    assert failed == 19 and checked == 126


@need_medvid
def test_medvidqa_import_real():
    ds = MedVidQA()
    first, second = ds.import_set(MEDVID_DIR), ds.import_set(MEDVID_DIR)
    assert first.entries == second.entries and first.excluded == second.excluded and first.notes == second.notes
    entries = [e for e in first.entries if not is_derived(e)]
    assert first.notes["upstream_rows"] == 145 and first.notes["exact_duplicate_rows_dropped"] == 0
    assert first.notes["gold_windows_ending_after_last_cue"] == 1
    moments = first.notes["moments"]
    assert moments["source_entries"] == 144 and moments["dropped_by_reason"] == {
        "gold partly observed before the moment (some evidence before it, some after)": 12}
    assert first.excluded == [{"item": "row:94", "reason": "video_id '#NAME?' is not a YouTube id"}]
    row0 = next(e for e in entries if e["query_id"] == "medvidqa:0")
    assert row0["gold"][0]["region"] == {"t_start": 7.0, "t_end": 73.0}
    # one moment: every video has played for 2/3 of the median video's 448.38 s
    assert {e["as_of"] for e in first.entries} == {"2022-01-01T00:04:59+00:00"}
    assert len({e["query_id"] for e in entries}) == len(entries)
    for e in entries:
        check_entry_shape(e, "medvidqa")
    # grouped split: a video never feeds both splits
    by_video: dict[str, set[str]] = {}
    for e in entries:
        by_video.setdefault(e["gold"][0]["source_id"], set()).add(e["split"])
    assert all(len(s) == 1 for s in by_video.values())
    assert Counter(e["split"] for e in first.entries) == {"dev": 90, "test": 42}
    assert Counter(e["split"] for e in first.entries if e["unanswerable"]) == {"dev": 22, "test": 21}


@need_medvid
def test_medvidqa_extract_real(medvid_segments):
    seg = medvid_segments
    assert seg["source_id"].nunique() == 47 and len(seg) == 7561
    assert seg.attrs["videos_with_bad_id"] == 1
    assert seg.groupby("source_id")["t_start"].apply(lambda s: s.is_monotonic_increasing).all()
    assert np.isfinite(seg[["t_start", "t_end"]].to_numpy()).all()
    assert (seg["t_end"] >= seg["t_start"]).all()
    cf = MedVidQA().corpus_files(MEDVID_DIR)
    assert len(cf) == 47 and {c.path for c in cf} == {CSV}


@need_medvid
def test_medvidqa_listing_reads_the_ids_read_rows_reads():
    """The corpus listing reads the video_id column alone: the ids, in order, of the whole CSV read as cp1252."""
    whole = pd.read_csv(MEDVID_DIR / CSV, encoding="cp1252", dtype=str, keep_default_na=False)["video_id"].tolist()
    assert read_video_ids(MEDVID_DIR / CSV) == whole
    rows, _ = read_rows(MEDVID_DIR / CSV)
    ids = sorted({v for v in rows["video_id"] if VIDEO_ID.match(v)})
    assert [c.source_id for c in MedVidQA().corpus_files(MEDVID_DIR)] == [f"medvidqa:{v}" for v in ids]


def test_medvidqa_listing_of_cp1252_text_with_quotes_and_line_breaks(tmp_path):
    """cp1252 text in other columns (and an id with a non-ASCII letter, not a YouTube id) lists as read_rows reads."""
    header = "video_id,question,timestamp,answer,subtitles,subtitle_timestamps\r\n"
    lines = ['h5MvX50zTLM,"Caf\u00e9 \u2019chin\u2019 tucks, two\nlines","(7, 73)",a,"say ""hi""",{}\r\n',
             '#NAME?,q,"(1, 2)",a,s,{}\r\n',
             'abcdefghij\u00e9,q,"(1, 2)",a,s,{}\r\n',
             '"Y9-54bnvPGg",q,"(1, 2)",a,"\u20ac\r\nmore",{}\r\n',
             'h5MvX50zTLM,q2,"(1, 2)",a,s,{}\r\n']
    path = tmp_path / CSV
    path.parent.mkdir(parents=True)
    path.write_bytes((header + "".join(lines)).encode("cp1252"))
    rows, _ = read_rows(path)  # no exact duplicates here: every row is kept
    assert read_video_ids(path) == rows["video_id"].tolist()
    assert rows["video_id"].tolist()[2] == "abcdefghij\u00e9"
    assert [c.source_id for c in MedVidQA().corpus_files(tmp_path)] == ["medvidqa:Y9-54bnvPGg", "medvidqa:h5MvX50zTLM"]


# -- observed_at per cue and derived unanswerable entries ------------------------


def test_cue_observed_at_is_video_start_plus_cue_start():
    seg = synthetic([(0.0, 4.0, "a"), (4.0, 9.5, "b"), (30.0, 31.0, "c")])
    t0 = pd.Timestamp("2016-01-01", tz="UTC")
    assert seg["observed_at"].tolist() == [t0, t0 + pd.Timedelta(seconds=4), t0 + pd.Timedelta(seconds=30)]
    cue = MODALITY.chunk(seg, "cue", {})
    assert cue["observed_at"].tolist() == seg["observed_at"].tolist()
    win = MODALITY.chunk(seg, "window", {"window_seconds": 10, "overlap_seconds": 0})
    # w0 [0,10) holds a and b: whole once b is observed; w1, w2 are silent: their own start; w3 holds c
    assert win["observed_at"].tolist() == [t0 + pd.Timedelta(seconds=s) for s in (4, 10, 20, 30)]


def import_with_sources(ds, folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple:
    """(result, the human entries the importer asked at its moment, the moment)."""
    import sys

    module = sys.modules[type(ds).__module__]
    seen: dict = {}
    real = module.ask_at

    def spy(entries, gold_times, moment, *args, **kwargs):
        seen.update(entries=entries, moment=moment)
        return real(entries, gold_times, moment, *args, **kwargs)

    monkeypatch.setattr(module, "ask_at", spy)
    return ds.import_set(folder), seen["entries"], pd.Timestamp(seen["moment"])


def check_moment(result, human: list[dict], moment: pd.Timestamp, segments: pd.DataFrame) -> list[dict]:
    """Every entry at the one moment; an answerable one's gold cues all observed by it, a derived
    one's gold text all future memory then (cue and window atoms), traced to its human entry."""
    by_id = {e["query_id"]: e for e in human}
    derived = [e for e in result.entries if is_derived(e)]
    assert derived and len({e["query_id"] for e in result.entries}) == len(result.entries)
    assert {pd.Timestamp(e["as_of"]) for e in result.entries} == {moment}
    gold_sources: dict[str, set[str]] = {}
    for e in human:
        gold_sources.setdefault(question_key(e["question"]), set()).update(g["source_id"] for g in e["gold"])
    atoms = {s: MODALITY.chunk(segments, s, {"window_seconds": 30, "overlap_seconds": 10}) for s in ("cue", "window")}
    atoms_by = {s: dict(tuple(a.groupby("source_id"))) for s, a in atoms.items()}
    for e in result.entries:
        src = by_id[e["query_id"].removesuffix(":gold-later")]
        assert (e["question"], e["scope"], e["split"]) == (src["question"], src["scope"], src["split"])
        for strategy, by_source in atoms_by.items():
            for g in src["gold"]:
                a = by_source[g["source_id"]]
                hit = overlaps(a["t_start"].to_numpy(float), a["t_end"].to_numpy(float), g["region"]["t_start"], g["region"]["t_end"])
                if not is_derived(e):
                    assert e["gold"] == src["gold"]
                    if strategy == "cue":  # every gold cue is in memory at the moment
                        assert (a.loc[hit, "observed_at"] <= moment).all(), e["query_id"]
                else:  # every gold atom that holds text is future memory at the moment
                    text_hit = hit & (a["text"].str.len().to_numpy() > 0)
                    assert (a.loc[text_hit, "observed_at"] > moment).all(), (e["query_id"], strategy)
    for d in derived:
        src = by_id[d["query_id"].removesuffix(":gold-later")]
        assert list(d) == SPEC_KEYS and d["origin"] == {**src["origin"], "item": src["origin"]["item"] + "|derived:gold-later"}
        assert d["unanswerable"] is True and d["gold"] == [] and d["answer"] is None
        assert len(gold_sources[question_key(d["question"])]) == 1
    for split in ("dev", "test"):
        n = sum(e["split"] == split for e in result.entries)
        assert sum(e["split"] == split for e in derived) / n >= 0.15
    return derived


@need_tvqa
def test_tutorialvqa_moment_real(tvqa_segments, monkeypatch):
    result, human, moment = import_with_sources(TutorialVQA(), TVQA_DIR, monkeypatch)
    derived = check_moment(result, human, moment, tvqa_segments)
    assert len(derived) == 1888
    # the moment: 1 s after 51 of the 76 videos (ceil(2/3 of them)) were watched to their end
    ends = tvqa_segments.groupby("source_id")["observed_at"].max().sort_values()
    assert moment == ends.iloc[50] + pd.Timedelta(seconds=1) and (ends <= moment).sum() == 51


@need_medvid
def test_medvidqa_moment_real(medvid_segments, monkeypatch):
    result, human, moment = import_with_sources(MedVidQA(), MEDVID_DIR, monkeypatch)
    derived = check_moment(result, human, moment, medvid_segments)
    assert len(derived) == 43
    durations = medvid_segments.groupby("source_id")["t_end"].max()
    assert moment == pd.Timestamp("2022-01-01T00:00:00Z") + pd.Timedelta(seconds=round(durations.median() * 2 / 3))


# -- sizes: the window options are bounded before any work (issue 25 §3) -------------------


def test_the_tightest_allowed_window_keeps_the_atoms_of_a_transcript_bounded():
    """The issue's transcript: 10 s of cues. 2 s windows with 1.99999 s overlap made 800,001
    atoms; params.yaml refuses that overlap (tests/test_params.py), and the tightest overlap
    it takes (1.98 s, MAX_WINDOW_REPEATS = 100) makes at most 100 atoms per window length."""
    from bench.corpus_sources import datasets as registered
    from bench.params import MAX_WINDOW_REPEATS, ParamsError, check_chunking

    seg = synthetic([(0.0, 4.0, "a"), (4.0, 7.5, "b"), (7.5, 10.0, "c")])
    with pytest.raises(ParamsError, match=r"^params.yaml: chunking.video.overlap_seconds: must be at most 1.98 with window_seconds 2"):
        check_chunking({"strategy": "window", "window_seconds": 2, "overlap_seconds": 1.99999}, MODALITY)
    options = check_chunking({"strategy": "window", "window_seconds": 2, "overlap_seconds": 1.98}, MODALITY)
    atoms = MODALITY.chunk(seg, "window", options)
    assert len(atoms) == 401  # (10 - 2) / 0.02 + 1 windows
    assert len(atoms) <= MAX_WINDOW_REPEATS * math.ceil(10.0 / 2) + 1
    # each second of the transcript lies in at most MAX_WINDOW_REPEATS atoms
    covering = [int(((atoms["t_start"] <= t) & (atoms["t_end"] > t)).sum()) for t in np.arange(0.0, 10.0, 0.25)]
    assert max(covering) <= MAX_WINDOW_REPEATS
    assert registered()  # the registry still loads with the declared options


def test_the_defaults_of_the_window_options_are_declared_by_the_modality():
    from bench.params import check_chunking

    assert check_chunking(None, MODALITY) == {"strategy": "cue", "window_seconds": 30, "overlap_seconds": 10}
    assert MODALITY.windows == (("window_seconds", "overlap_seconds"),)


def test_the_chunking_driver_refuses_more_atoms_than_the_machine_holds(tmp_path):
    """The atom bound of bench.ingest.chunking, on real segments: one line naming the key."""
    from bench.ingest.chunking import BYTES_PER_ATOM, AtomLimitError, atom_limit, chunk_files

    seg = synthetic([(0.0, 4.0, "a"), (4.0, 7.5, "b"), (7.5, 10.0, "c")])
    (tmp_path / "video").mkdir()
    path = tmp_path / "video" / "tutorialvqa.parquet"
    seg.to_parquet(path)
    config = {"video": {"strategy": "window", "window_seconds": 2, "overlap_seconds": 1.98}}
    parts = chunk_files([path], config, max_atoms=401)
    assert len(parts[0][2]) == 401
    with pytest.raises(AtomLimitError) as err:
        chunk_files([path], config, max_atoms=400)
    assert str(err.value) == ("params.yaml: chunking.video: 401 atoms by video/tutorialvqa, more than this machine holds "
                              f"(400 atoms of {BYTES_PER_ATOM} bytes); choose a coarser strategy or larger windows")
    assert atom_limit(2**30) == 2**30 // BYTES_PER_ATOM
