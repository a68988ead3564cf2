"""Local data sets (bench/modalities/local.py and bench/modalities/<m>/local.py).

`build_local_sets` makes six local data sets, one per modality, from real mirrored
files and the real third-party human gold of the registered sets (bench/sets/), as a
team would lay out its own data: a real PDF, real screenshots and photos, a real LoCoMo
conversation turned into the JSON form, real MedVidQA caption tracks turned into WebVTT
and SRT, real CoSQA functions as a repository folder. tests/test_local_e2e.py runs
the pipeline on them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bench.modalities.local import (
    LocalDataError,
    load,
    load_all,
    read_config,
    set_key,
    skeleton,
)
from tests.conftest import MIRROR, ROOT, need_mirror

SETS = ROOT / "bench" / "sets"
PDF = "f8d3a162ab9507e021d83dd109118b60.pdf"  # the smallest mirrored MMLongBench-Doc PDF with 10 entries
SHOTS = 2
PHOTOS = 3
VIDEOS = ("h5MvX50zTLM",)


def registered(key: str) -> list[dict]:
    return [json.loads(line) for line in (SETS / f"{key}.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def write_set(folder: Path, key: str, cfg: dict, entries: list[dict], test_one: bool = True) -> None:
    """dataset.yaml and set.jsonl; the real entries re-keyed to the local data set (one kept in test)."""
    folder.mkdir(parents=True, exist_ok=True)
    base = {
        "key": key, "name": f"team/{key}", "revision": "2024.1", "license": "internal",
        "annotation_source": "human: the upstream data set's annotators (copied for this test)", "gold_made_by": "human",
        "holder": "owner", "observed_at": "2020-01-01T00:00:00+00:00",
    }
    (folder / "dataset.yaml").write_text(yaml.safe_dump({**base, **cfg}, sort_keys=False), encoding="utf-8")
    lines = []
    for n, e in enumerate(entries):
        e = {**e, "query_id": f"{key}:{n}", "split": "test" if (test_one and n == len(entries) - 1) else "dev",
             "origin": {"dataset": f"team/{key}", "revision": "2024.1", "item": e["query_id"], "license": "internal"}}
        lines.append(json.dumps(e, ensure_ascii=False))
    (folder / "set.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def unanswerable(entries: list[dict], n: int = 2) -> list[dict]:
    """A few of the registered set's unanswerable entries (empty gold: they need no file)."""
    return [e for e in entries if e["unanswerable"]][:n]


def regold(entry: dict, key: str, source: Callable[[str], str], region: Callable[[dict], dict] = lambda r: r) -> dict:
    return {**entry, "gold": [{"source_id": f"{key}:{source(g['source_id'])}", "region": region(g["region"])} for g in entry["gold"]]}


def build_pdf(folder: Path) -> None:
    (folder / "files").mkdir(parents=True)
    shutil.copyfile(MIRROR / "mmlongbench-doc/data/documents" / PDF, folder / "files" / "report.pdf")
    entries = [regold(e, "hb", lambda s: "report.pdf") for e in registered("mmlongbench") if e["query_id"].split(":")[1] == PDF]
    write_set(folder, "hb", {"modality": "pdf", "observed_at": "2023-06-01T00:00:00+00:00"}, entries)


def build_screens(folder: Path) -> None:
    (folder / "files").mkdir(parents=True)
    entries = [e for e in registered("screenagent") if e["gold"]]
    shots = sorted({e["gold"][0]["source_id"].split(":", 1)[1] for e in entries})[:SHOTS]
    for path in shots:
        shutil.copyfile(MIRROR / "screenagent_test" / path, folder / "files" / Path(path).name)
    picked = [regold(e, "ui", lambda s: Path(s.split(":", 1)[1]).name) for e in entries if e["gold"][0]["source_id"].split(":", 1)[1] in shots]
    # observed_at per file: each screenshot a second before the first question on it
    times = {}
    for e in picked:
        name = e["gold"][0]["source_id"].split(":", 1)[1]
        t = pd.Timestamp(e["as_of"]) - pd.Timedelta(seconds=1)
        times[name] = min(times.get(name, t), t)
    (folder / "observed_at.csv").write_text("path,observed_at\n" + "".join(f"{n},{t.isoformat()}\n" for n, t in sorted(times.items())))
    write_set(folder, "ui", {"modality": "ui_screenshot", "observed_at": "per_file"}, picked + unanswerable(registered("screenagent")))


def build_photos(folder: Path) -> None:
    (folder / "files").mkdir(parents=True)
    entries = [e for e in registered("coco") if e["gold"]]
    photos = sorted({e["gold"][0]["source_id"].split(":", 1)[1] for e in entries})[:PHOTOS]
    for name in photos:
        shutil.copyfile(MIRROR / "coco_captions_val2017/val2017" / name, folder / "files" / name)
    picked = [regold(e, "photos", lambda s: s.split(":", 1)[1]) for e in entries if e["gold"][0]["source_id"].split(":", 1)[1] in photos]
    write_set(folder, "photos", {"modality": "image", "observed_at": "2017-01-01T00:00:00+00:00"}, picked + unanswerable(registered("coco")))


def build_chat(folder: Path) -> None:
    from bench.archive import read_member
    from bench.modalities.conversation.locomo import (
        ARCHIVE,
        MEMBER_DIR,
        parse_session_time,
        sessions_of,
    )

    (folder / "files").mkdir(parents=True)
    conv = json.loads(read_member(MIRROR / "locomo" / ARCHIVE, f"{MEMBER_DIR}26.json").decode("utf-8"))
    sessions, number = [], {}
    for s in sessions_of(conv):
        turns = []
        for turn in conv[f"session_{s}"]:
            number[turn["dia_id"]] = len(number) + 1
            turns.append({"speaker": turn["speaker"], "text": turn["text"]})
        sessions.append({"date_time": parse_session_time(conv[f"session_{s}_date_time"]).isoformat(), "turns": turns})
    (folder / "files" / "conv-26.json").write_text(json.dumps({"sessions": sessions}, indent=1), encoding="utf-8")
    picked = []
    for e in registered("locomo"):
        if not e["query_id"].startswith("locomo:conv-26:"):
            continue
        e = {**e, "gold": [{"source_id": "chat:conv-26.json",
                            "region": {"turn": number[f"D{g['source_id'].rsplit('-', 1)[1]}:{g['region']['turn']}"]}} for g in e["gold"]],
             "scope": {**e["scope"], "holder": "team-a"}}
        picked.append(e)
        if len(picked) == 40:
            break
    (folder / "holders.csv").write_text("path,holder\nconv-26.json,team-a\n")
    write_set(folder, "chat", {"modality": "conversation", "holder": "per_file"}, picked)


def vtt_time(t: float, comma: bool) -> str:
    ms = round(t * 1000)
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{',' if comma else '.'}{ms:03d}"


def build_calls(folder: Path) -> None:
    from bench.modalities.video.medvidqa import CSV, parse_track, read_rows

    (folder / "files").mkdir(parents=True)
    rows, _ = read_rows(MIRROR / "medvidqa" / CSV)
    entries = [e for e in registered("medvidqa") if e["gold"]]
    vids = sorted({e["gold"][0]["source_id"].split(":", 1)[1] for e in entries})[:2]
    names = {}
    for i, vid in enumerate(vids):
        track = parse_track(rows[rows["video_id"] == vid]["subtitle_timestamps"].iloc[0])
        if i == 0:  # WebVTT
            body = "WEBVTT\n\n" + "\n".join(f"{vtt_time(a, False)} --> {vtt_time(b, False)}\n{t}\n" for a, b, t in track)
            names[vid] = f"{vid}.vtt"
        else:  # SubRip
            body = "\n".join(f"{n + 1}\n{vtt_time(a, True)} --> {vtt_time(b, True)}\n{t}\n" for n, (a, b, t) in enumerate(track))
            names[vid] = f"{vid}.srt"
        (folder / "files" / names[vid]).write_text(body, encoding="utf-8")
    picked = [regold(e, "calls", lambda s: names[s.split(":", 1)[1]]) for e in entries if e["gold"][0]["source_id"].split(":", 1)[1] in names]
    write_set(folder, "calls", {"modality": "video", "observed_at": "2023-01-01T00:00:00+00:00"}, picked + unanswerable(registered("medvidqa")))


def build_code(folder: Path) -> None:
    import ast

    repo = folder / "files" / "snippets"
    repo.mkdir(parents=True)
    seen: dict[str, str] = {}
    picked = []
    for e in registered("cosqa"):
        if e["unanswerable"] or not e["gold"]:
            continue
        symbol = e["gold"][0]["region"]["symbol"]
        if symbol in seen or "." in symbol:
            continue
        try:
            ast.parse(e["answer"])
        except SyntaxError:
            continue
        seen[symbol] = e["answer"]
        picked.append({**e, "gold": [{"source_id": "code:snippets", "region": {"path": "funcs.py", "symbol": symbol}}]})
        if len(picked) == 12:
            break
    picked += [e for e in registered("cosqa") if e["unanswerable"]][:4]
    (repo / "funcs.py").write_text("\n\n\n".join(seen.values()) + "\n", encoding="utf-8")
    write_set(folder, "code", {"modality": "code", "observed_at": "2021-01-01T00:00:00+00:00"}, picked)


BUILDERS = {"pdf": build_pdf, "ui_screenshot": build_screens, "image": build_photos,
            "conversation": build_chat, "video": build_calls, "code": build_code}


def build_local_sets(root: Path) -> dict[str, Path]:
    """One local data set per modality under `root`: modality -> folder."""
    need_mirror("mmlongbench-doc", "locomo", "screenagent_test", "coco_captions_val2017", "medvidqa")
    out = {}
    for modality, build in BUILDERS.items():
        out[modality] = root / modality
        build(out[modality])
    return out


# -- unit tests -----------------------------------------------------------------------


@pytest.fixture()
def chat(tmp_path: Path) -> Path:
    need_mirror("locomo")
    build_chat(tmp_path / "chat")
    return tmp_path / "chat"


def test_conversation_parsed_from_real_locomo(chat: Path) -> None:
    ds = load(chat)
    files = {p: chat / p for p in ds.pins() if p.startswith("files/")}
    seg = ds.extract(files)
    assert set(seg["source_id"]) == {"chat:conv-26.json"}
    assert seg["turn"].tolist() == list(range(1, len(seg) + 1))
    assert (seg["holder"] == "team-a").all()
    # a turn is observed at its session's time: the first session of conv-26 is 8 May 2023
    assert seg["observed_at"].iloc[0] == pd.Timestamp("2023-05-08T13:56:00", tz="UTC")
    assert seg["observed_at"].is_monotonic_increasing and seg["observed_at"].nunique() > 1
    assert seg["text"].iloc[0].startswith("Caroline: ")


def test_video_vtt_and_srt_from_real_captions(tmp_path: Path) -> None:
    need_mirror("medvidqa")
    build_calls(tmp_path / "calls")
    ds = load(tmp_path / "calls")
    seg = ds.extract({p: tmp_path / "calls" / p for p in ds.pins() if p.startswith("files/")})
    kinds = {s.rsplit(".", 1)[1] for s in seg["source_id"]}
    assert kinds == {"vtt", "srt"}
    for _, grp in seg.groupby("source_id"):
        assert (grp["t_end"] >= grp["t_start"]).all() and grp["t_start"].is_monotonic_increasing
        assert grp["text"].str.len().gt(0).mean() > 0.9


def test_video_bad_timing_names_file_and_line(tmp_path: Path) -> None:
    from bench.modalities.video.local import read_cues

    with pytest.raises(LocalDataError, match=r"^a\.vtt: line 3: timing '00:00:01 --> 00:00:02\.000'"):
        read_cues("WEBVTT\n\n00:00:01 --> 00:00:02.000\nhello\n", "a.vtt")
    with pytest.raises(LocalDataError, match=r"^b\.vtt: line 1: a WebVTT file must start with WEBVTT"):
        read_cues("00:00:01.000 --> 00:00:02.000\nhi\n", "b.vtt")
    with pytest.raises(LocalDataError, match=r"^c\.srt: line 2: cue ends"):
        read_cues("1\n00:00:05,000 --> 00:00:02,000\nhi\n", "c.srt")
    assert read_cues("1\n00:01:05,250 --> 01:00:00,000\n<i>hi</i> there\n", "d.srt") == [(65.25, 3600.0, "hi there")]
    assert read_cues("WEBVTT\n\nNOTE x\n\n00:05.000 --> 00:06.000 align:start\n<v Ana>Hello\n", "e.vtt") == [(5.0, 6.0, "Ana: Hello")]


def test_code_repository_folder(tmp_path: Path) -> None:
    build_code(tmp_path / "code")
    ds = load(tmp_path / "code")
    seg = ds.extract({p: tmp_path / "code" / p for p in ds.pins() if p.startswith("files/")})
    assert set(seg["source_id"]) == {"code:snippets"} and seg["path"].tolist() == ["funcs.py"]
    symbols = {s["name"] for s in json.loads(seg["symbols"].iloc[0])}
    wanted = {json.loads(line)["gold"][0]["region"]["symbol"] for line in (tmp_path / "code/set.jsonl").read_text().splitlines() if json.loads(line)["gold"]}
    assert wanted <= symbols


def test_pdf_pages_from_real_pdf(tmp_path: Path) -> None:
    need_mirror("mmlongbench-doc")
    build_pdf(tmp_path / "hb")
    ds = load(tmp_path / "hb")
    seg = ds.extract({p: tmp_path / "hb" / p for p in ds.pins() if p.startswith("files/")})
    assert set(seg["source_id"]) == {"hb:report.pdf"} and seg["page"].min() == 1 and seg["page"].max() > 1
    assert seg["text"].str.len().sum() > 1000


# -- refusals: one line naming the file ---------------------------------------------


@pytest.fixture()
def minimal(tmp_path: Path) -> Path:
    folder = tmp_path / "calls"
    skeleton(folder, "video")
    return folder


def edit(folder: Path, **changes: object) -> None:
    cfg = yaml.safe_load((folder / "dataset.yaml").read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k)
        else:
            cfg[k] = v
    (folder / "dataset.yaml").write_text(yaml.safe_dump(cfg))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"gold_made_by": "llm"}, r"dataset\.yaml: field gold_made_by is 'llm': only gold made by people"),
        ({"gold_made_by": None}, r"dataset\.yaml: missing field gold_made_by"),
        ({"annotation_source": ""}, r"dataset\.yaml: field annotation_source must be a non-empty string"),
        ({"modality": "audio"}, r"dataset\.yaml: field modality 'audio' must be one of"),
        ({"key": "My Key"}, r"dataset\.yaml: field key 'My Key' must be lower-case"),
        ({"revision": 3}, r"dataset\.yaml: field revision must be a quoted string"),
        ({"observed_at": "2024-01-01T00:00:00"}, r"dataset\.yaml: field observed_at: '2024-01-01T00:00:00' has no timezone"),
        ({"observed_at": "yesterday"}, r"dataset\.yaml: field observed_at: 'yesterday' is not an ISO 8601"),
        ({"holder": "per_file"}, r"dataset\.yaml: field holder is per_file but .*holders\.csv is missing"),
        ({"colour": "blue"}, r"dataset\.yaml: unknown field colour"),
    ],
)
def test_bad_dataset_yaml_refused(minimal: Path, changes: dict, message: str) -> None:
    edit(minimal, **changes)
    with pytest.raises(LocalDataError, match=message) as info:
        load(minimal)
    assert "\n" not in str(info.value) and str(info.value).startswith(minimal.as_posix())


def test_bad_folder_contents_refused(minimal: Path) -> None:
    (minimal / "files" / "notes.txt").write_text("x")
    with pytest.raises(LocalDataError, match=r"files/notes\.txt: not a file this modality reads \(transcripts"):
        load(minimal)
    (minimal / "files" / "notes.txt").unlink()
    (minimal / "set.jsonl").unlink()
    with pytest.raises(LocalDataError, match=r"set\.jsonl: missing"):
        load(minimal)


def test_bad_per_file_table_and_transcript_refused(minimal: Path) -> None:
    edit(minimal, holder="per_file")
    (minimal / "holders.csv").write_text("path,holder\nother.vtt,ana\n")
    with pytest.raises(LocalDataError, match=r"holders\.csv: line 2: field path 'other\.vtt' is no source under files/"):
        load(minimal)
    (minimal / "holders.csv").write_text("path,holder\nonboarding-call.vtt,ana\n")
    ds = load(minimal)
    assert set(ds.holder_of.values()) == {"ana"}
    (minimal / "files" / "onboarding-call.vtt").write_text("WEBVTT\n\n00:00:01.000 -> 00:00:02.000\nhi\n")
    with pytest.raises(LocalDataError, match=r"calls/files/onboarding-call\.vtt: line 3: cue without a timing line"):
        load(minimal).extract({"files/onboarding-call.vtt": minimal / "files" / "onboarding-call.vtt"})


def test_keys_unique_and_set_key(minimal: Path, tmp_path: Path) -> None:
    from bench.corpus_sources import datasets

    other = tmp_path / "other"
    shutil.copytree(minimal, other)
    with pytest.raises(LocalDataError, match=r"other/dataset\.yaml: field key 'calls' is already used by a local"):
        load_all([minimal, other])
    edit(minimal, key="locomo")
    with pytest.raises(LocalDataError, match=r"field key 'locomo' is already used by a registered data set"):
        load_all([minimal], registered=list(datasets().values()))
    edit(minimal, key="calls")
    ds = load(minimal)
    assert set_key(minimal / "set.jsonl", [ds]) == "calls" and set_key(SETS / "locomo.jsonl", [ds]) == "locomo"


def test_skeleton_is_a_valid_data_set_for_text_modalities(tmp_path: Path) -> None:
    from bench.annotations.validate import validate
    from bench.corpus_sources import register_local
    from bench.ingest.corpus import Manifest
    from bench.ingest.fetch import FetchLog, fetch_dataset

    for modality in ("video", "conversation", "code"):
        folder = tmp_path / f"ex-{modality}"
        skeleton(folder, modality)
        ds = load(folder)
        register_local([ds])
        try:
            log = FetchLog()
            rows = fetch_dataset(ds, tmp_path / "store", [folder.parent], False, log)
            assert all(r["status"] == "present" for r in rows) and not log.problems
            assert {r["path"] for r in rows} >= {"dataset.yaml", "set.jsonl"}
            seg = ds.extract({r["path"]: tmp_path / "store" / ds.key / r["path"] for r in rows})
            result = validate([ds.set_path], Manifest(tuple(rows)), seg)
            assert result.ok, result.errors.to_string()
            assert len(result.dev()) == 2
        finally:
            register_local([])
    with pytest.raises(LocalDataError, match="exists and is not empty"):
        skeleton(tmp_path / "ex-video", "video")


def test_validate_rejects_wrong_region_in_local_set(chat: Path, tmp_path: Path) -> None:
    from bench.annotations.validate import validate
    from bench.corpus_sources import register_local
    from bench.ingest.corpus import Manifest
    from bench.ingest.fetch import FetchLog, fetch_dataset

    lines = (chat / "set.jsonl").read_text().splitlines()
    bad = json.loads(lines[0])
    bad["gold"][0]["region"]["turn"] = 10_000
    lines[0] = json.dumps(bad)
    (chat / "set.jsonl").write_text("\n".join(lines) + "\n")
    ds = load(chat)
    register_local([ds])
    try:
        rows = fetch_dataset(ds, tmp_path / "store", [chat.parent], False, FetchLog())
        seg = ds.extract({r["path"]: tmp_path / "store" / ds.key / r["path"] for r in rows})
        project = tmp_path / "project"
        project.mkdir()
        result = validate([ds.set_path], Manifest(tuple(rows)), seg, root=project)
    finally:
        register_local([])
    assert not result.ok
    row = result.errors.iloc[0]
    # the one-line row names the set file relative to the project, never by a machine path
    assert row["file"] == "../chat/set.jsonl" and row["line"] == 1 and row["check"] == "corpus"
    assert row["value"].startswith("gold[0]: turn 10000 not in the conversation")


def test_read_config_accepts_per_file_times(minimal: Path) -> None:
    edit(minimal, observed_at="per_file")
    (minimal / "observed_at.csv").write_text("path,observed_at\nonboarding-call.vtt,2024-02-01T08:00:00+01:00\n")
    assert read_config(minimal)["observed_at"] == "per_file"
    ds = load(minimal)
    assert ds.observed_of == {"calls:onboarding-call.vtt": pd.Timestamp("2024-02-01T07:00:00", tz="UTC")}


# -- faults of issue 25: refused at load, before any stage writes ---------------------


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_empty_set_file_refused(minimal: Path, text: str) -> None:
    """An empty set.jsonl used to overwrite every report, then crash with a TypeError."""
    (minimal / "set.jsonl").write_text(text)
    with pytest.raises(LocalDataError) as info:
        load(minimal)
    assert str(info.value) == f"{minimal.as_posix()}/set.jsonl: no entries (empty file): write at least one entry; nothing was changed"


def test_conversation_turn_with_empty_text_refused(tmp_path: Path) -> None:
    """A turn with empty text (all of them, in the probe) left BM25 without a single word:
    `max() arg is an empty sequence`. Refused at load, naming file and field."""
    folder = tmp_path / "chats"
    skeleton(folder, "conversation")
    (path,) = (folder / "files").glob("*.json")
    doc = json.loads(path.read_text())
    doc["sessions"][0]["turns"][1]["text"] = "  "
    path.write_text(json.dumps(doc))
    with pytest.raises(LocalDataError) as info:
        load(folder)
    assert str(info.value) == (f"{folder.as_posix()}/files/{path.name}: field sessions[0].turns[1].text: empty; "
                               "a turn needs words to be retrieved (remove it or write its text)")


def test_empty_and_truncated_corpus_files_refused(minimal: Path, tmp_path: Path) -> None:
    """0-byte or truncated local files used to become 'unreadable', their entries invalid,
    and the chunk stage then said "run the extract stages first"."""
    (vtt,) = (minimal / "files").glob("*.vtt")
    whole = vtt.read_bytes()
    vtt.write_bytes(b"")
    with pytest.raises(LocalDataError) as info:
        load(minimal)
    assert str(info.value) == f"{vtt.as_posix()}: empty file (0 bytes): copy the whole file into files/"
    vtt.write_bytes(whole[: whole.index(b"-->") + 2])  # cut inside the first timing line
    with pytest.raises(LocalDataError, match=rf"^{minimal.as_posix()}/files/{vtt.name}: line \d+: "):
        load(minimal)
    # a real PDF of the mirror, cut in half
    need_mirror("mmlongbench-doc")
    real = next(iter(sorted((MIRROR / "mmlongbench-doc" / "data" / "documents").glob("*.pdf"))))
    folder = tmp_path / "docs"
    skeleton(folder, "pdf")
    data = real.read_bytes()
    (folder / "files" / "handbook.pdf").write_bytes(data[: len(data) // 2])
    with pytest.raises(LocalDataError) as info:
        load(folder)
    assert str(info.value).startswith(f"{folder.as_posix()}/files/handbook.pdf: pdfium cannot read it (")
    (folder / "files" / "handbook.pdf").write_bytes(data)
    assert load(folder).paths == ["handbook.pdf"]


def test_non_utf8_file_name_refused_naming_it(minimal: Path) -> None:
    """DVC refused it with its own message naming no file; refused first, named."""
    import os

    name = os.fsdecode(b"caf\xe9.vtt")
    (minimal / "files" / name).write_bytes((next(iter((minimal / "files").glob("*.vtt")))).read_bytes())
    with pytest.raises(LocalDataError) as info:
        load(minimal)
    assert str(info.value) == f"{minimal.as_posix()}/files/caf\\xe9.vtt: file name is not valid UTF-8; rename it (DVC and the manifest need UTF-8 names)"


def test_files_folder_as_a_symbolic_link_refused(minimal: Path, tmp_path: Path) -> None:
    """Links inside files/ were refused, files/ itself as a link was followed."""
    elsewhere = tmp_path / "elsewhere"
    shutil.move(minimal / "files", elsewhere)
    (minimal / "files").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(LocalDataError) as info:
        load(minimal)
    assert str(info.value) == f"{minimal.as_posix()}/files: a symbolic link; files/ must be a real folder holding the corpus (links are not read)"
