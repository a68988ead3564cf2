"""The validator rejects one bad set per hard constraint, with file, line, query_id and check."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.annotations.validate import format_table, validate
from bench.cli import cli
from tests.conftest import ROOT, write_set

SETS = ROOT / "bench" / "sets"


def _entries(key: str) -> list[dict]:
    """Dev entries of a committed set (tests never read the test split)."""
    rows = [json.loads(line) for line in (SETS / f"{key}.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    return [e for e in rows if e["split"] == "dev"]


@pytest.fixture(scope="module")
def base(real_corpus: dict) -> dict[str, dict]:
    """Valid real entries: answerable pdf on a present PDF, unanswerable pdf, locomo."""
    present = {r["path"] for r in real_corpus["manifest"].rows if r["status"] == "present"}
    pdf = [e for e in _entries("mmlongbench") if f"data/documents/{e['query_id'].split(':')[1]}" in present]
    conv = _entries("locomo")
    return {
        "pdf": next(e for e in pdf if not e["unanswerable"] and len(e["gold"]) == 1),
        "pdf_unanswerable": next(e for e in pdf if e["unanswerable"]),
        "conversation": next(e for e in conv if not e["unanswerable"]),
        "pdf_unavailable": next(
            e for e in _entries("mmlongbench") if f"data/documents/{e['query_id'].split(':')[1]}" not in present
        ),
    }


def run(tmp_path: Path, real_corpus: dict, *files: list) -> object:
    paths = [write_set(tmp_path / f"set{i}.jsonl", entries) for i, entries in enumerate(files)]
    return validate(paths, real_corpus["manifest"], real_corpus["segments"], root=tmp_path)


def one_failure(result, check_part: str, value_part: str = "") -> dict:
    assert not result.ok, "expected the set to be rejected"
    rows = result.errors.to_dict("records")
    hits = [r for r in rows if check_part in r["check"] or check_part in r["value"]]
    assert hits, f"no failure mentions {check_part!r}:\n{format_table(result.errors)}"
    if value_part:
        assert any(value_part in r["value"] for r in hits), format_table(result.errors)
    return hits[0]


def test_valid_real_entries_pass(tmp_path, real_corpus, base):
    result = run(tmp_path, real_corpus, [base["pdf"], base["pdf_unanswerable"], base["conversation"]])
    assert result.ok, format_table(result.errors)
    assert len(result.entries) == 3 and result.invalid == []


def test_entry_on_unavailable_pdf_is_invalid_not_an_error(tmp_path, real_corpus, base):
    result = run(tmp_path, real_corpus, [base["pdf"], base["pdf_unavailable"]])
    assert result.ok
    assert [r["query_id"] for r in result.invalid] == [base["pdf_unavailable"]["query_id"]]
    assert result.invalid[0]["reason"].startswith("corpus file unavailable: data/documents/")
    assert base["pdf_unavailable"]["query_id"] not in {e["query_id"] for e in result.dev()}


def test_invalid_json_line(tmp_path, real_corpus, base):
    result = run(tmp_path, real_corpus, [base["pdf"], '{"query_id": "x", ', base["conversation"]])
    row = one_failure(result, "invalid JSON")
    assert (row["file"], row["line"]) == ("set0.jsonl", 2)


def test_non_utf8_bytes(tmp_path, real_corpus, base):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(json.dumps(base["pdf"]).encode() + b"\n" + b'{"question": "caf\xe9"}\n')
    result = validate([path], real_corpus["manifest"], real_corpus["segments"], root=tmp_path)
    row = one_failure(result, "not valid UTF-8")
    assert row["line"] == 2


@pytest.mark.parametrize(
    ("mutate", "check", "value"),
    [
        (lambda e: e.pop("split"), "fields", "missing field split"),
        (lambda e: e.update(extra=1), "fields", "unknown field extra"),
        (lambda e: e["scope"].pop("holder"), "fields", "missing field scope.holder"),
        (lambda e: e.update(unanswerable="no"), "unanswerable", "no"),
        (lambda e: e.update(question=""), "question", ""),
        (lambda e: e.update(answer_format="text"), "answer_format", "text"),
        (lambda e: e.update(split="train"), "split", "train"),
        (lambda e: e.update(modality="audio"), "modality", "audio"),
        (lambda e: e["gold"][0].update(region={"turn": 3}), "gold/region shape", "pdf region must have keys"),
        (lambda e: e["gold"][0].update(region={}), "gold/region shape", "pdf region must have keys"),
        (lambda e: e["gold"][0].update(region={"page": -1}), "gold/region shape", "page must be >= 1"),
        (lambda e: e["gold"][0].update(region={"page": "5"}), "gold/region shape", "page must be an integer"),
        (lambda e: e["gold"][0].update(region={"page": 9999}), "corpus", "beyond the document"),
        (lambda e: e["gold"][0].update(region={"page": 1, "block": 999}), "corpus", "block 999 not on page 1"),
        (lambda e: e.update(gold=[]), "gold must be empty if and only if unanswerable", ""),
        (lambda e: e.update(as_of="2024-01-01T00:00:00"), "as_of", "no timezone"),
        (lambda e: e.update(as_of="next tuesday"), "as_of", "not an ISO 8601"),
        (lambda e: e["origin"].update(dataset="someone/else"), "dataset registration", "not registered"),
        (lambda e: e["origin"].update(revision="0" * 40), "corpus", "revision 0000000000000000000000000000000000000000"),
        (lambda e: e["gold"][0].update(source_id="mmlongbench:not-a-document.pdf"), "corpus", "not in the manifest"),
        (lambda e: e["gold"][0].update(source_id="mmlongbench:../../../etc/passwd"), "corpus", "leaves the corpus"),
        (lambda e: e["gold"][0].update(source_id="mmlongbench:/etc/passwd"), "corpus", "absolute"),
        (lambda e: e["gold"][0].update(source_id="locomo:conv-26:session-1"), "corpus", "does not belong"),
    ],
)
def test_bad_pdf_entry_rejected(tmp_path, real_corpus, base, mutate, check, value):
    bad = copy.deepcopy(base["pdf"])
    mutate(bad)
    result = run(tmp_path, real_corpus, [base["conversation"], bad])
    row = one_failure(result, check, value)
    assert row["file"] == "set0.jsonl" and row["line"] == 2
    assert len(result.entries) == 0, "nothing passes when a set has errors"


def test_gold_on_unanswerable_entry(tmp_path, real_corpus, base):
    bad = copy.deepcopy(base["pdf_unanswerable"])
    bad["gold"] = copy.deepcopy(base["pdf"]["gold"])
    row = one_failure(run(tmp_path, real_corpus, [bad]), "gold must be empty if and only if unanswerable")
    assert row["query_id"] == bad["query_id"]


def test_answer_on_unanswerable_entry(tmp_path, real_corpus, base):
    bad = copy.deepcopy(base["pdf_unanswerable"])
    bad["answer"] = "42"
    one_failure(run(tmp_path, real_corpus, [bad]), "answer", "unanswerable entry must have answer null")


def test_turn_not_in_conversation(tmp_path, real_corpus, base):
    bad = copy.deepcopy(base["conversation"])
    bad["gold"][0]["region"] = {"turn": 999}
    one_failure(run(tmp_path, real_corpus, [bad]), "corpus", "turn 999 not in the conversation session")


def test_session_not_in_conversation(tmp_path, real_corpus, base):
    bad = copy.deepcopy(base["conversation"])
    conv = bad["gold"][0]["source_id"].split(":")[1]
    bad["gold"][0]["source_id"] = f"locomo:{conv}:session-99"
    one_failure(run(tmp_path, real_corpus, [bad]), "corpus", "not found in its corpus file")


def test_duplicate_query_id_across_files(tmp_path, real_corpus, base):
    result = run(tmp_path, real_corpus, [base["pdf"]], [base["conversation"], base["pdf"]])
    rows = [r for r in result.errors.to_dict("records") if "unique" in r["check"]]
    assert {(r["file"], r["line"]) for r in rows} == {("set0.jsonl", 1), ("set1.jsonl", 2)}


def test_source_without_human_annotation(tmp_path, real_corpus, base, monkeypatch):
    from bench.modalities.pdf.mmlongbench import MMLongBench

    monkeypatch.setattr(MMLongBench, "annotation_is_human", False)
    one_failure(run(tmp_path, real_corpus, [base["pdf"]]), "dataset registration", "not third-party human")


def test_all_failures_collected_in_one_table(tmp_path, real_corpus, base):
    a = copy.deepcopy(base["pdf"])
    a["as_of"] = "2024-01-01"
    b = copy.deepcopy(base["conversation"])
    b["modality"] = "audio"
    result = run(tmp_path, real_corpus, [a, "not json", b])
    assert {r["line"] for r in result.errors.to_dict("records")} == {1, 2, 3}
    table = format_table(result.errors)
    assert table.splitlines()[0].split() == ["file", "line", "query_id", "check", "value"]


def test_committed_sets_are_valid(real_corpus):
    paths = [SETS / "mmlongbench.jsonl", SETS / "locomo.jsonl"]
    result = validate(paths, real_corpus["manifest"], real_corpus["segments"], root=ROOT)
    assert result.ok, format_table(result.errors.head(20))
    reasons = {r["reason"].split(": ")[0] for r in result.invalid}
    assert reasons == {"corpus file unavailable"}


def test_cli_exit_code_and_table(tmp_path, real_corpus, base):
    """`bench validate` (bench/cli_validate.py), in process: the table on stdout, exit 1."""
    bad = copy.deepcopy(base["pdf"])
    bad["gold"][0]["region"] = {"page": 9999}
    path = write_set(tmp_path / "bad.jsonl", [bad])
    result = CliRunner().invoke(cli, ["validate", str(path), "--manifest", str(real_corpus["manifest_path"])])
    # without data/segments the CLI parses the corpus itself from data/corpus; in a
    # checkout that never ran the pipeline it says so instead
    assert result.exit_code == 1, result.output
    assert "beyond the document" in result.stdout or "run the fetch stage" in result.output


# -- hardening: splits stay apart, ids and values fit their formats ------------------


def _all_entries(key: str) -> list[dict]:
    return [json.loads(line) for line in (SETS / f"{key}.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def test_test_questions_copied_into_dev_are_refused(tmp_path, real_corpus):
    """Every LoCoMo test entry copied under a new query_id with split dev (question
    re-cased and re-spaced): each copy is one failure row naming the test entry."""
    from bench.annotations.splits import load_lock

    real = _all_entries("locomo")
    test = [e for e in real if e["split"] == "test"]
    copies = []
    for e in test:
        c = copy.deepcopy(e)
        c["query_id"] = e["query_id"] + ":copy"
        c["split"] = "dev"
        c["question"] = "  " + e["question"].upper().replace(" ", "\t ") + " "
        copies.append(c)
    path = write_set(tmp_path / "locomo.jsonl", real + copies)
    lock = load_lock(SETS / "splits.lock", "bench/sets/splits.lock")
    result = validate([path], real_corpus["manifest"], real_corpus["segments"], root=tmp_path, lock=lock)
    rows = [r for r in result.errors.to_dict("records") if r["check"] == "dev entry repeats a test entry"]
    assert len(test) == 799 and len(rows) == 799
    assert rows[0]["query_id"].endswith(":copy") and rows[0]["value"].startswith(f"same question and gold as test entry {test[0]['query_id']} (locomo.jsonl:")
    assert result.entries == []  # nothing reaches data/sets/dev.jsonl


def test_a_dev_question_alone_may_repeat_with_other_gold(tmp_path, real_corpus, base):
    other = copy.deepcopy(base["conversation"])
    other["query_id"] += ":other"
    other["split"] = "test"
    other["gold"][0]["region"] = {"turn": other["gold"][0]["region"]["turn"] + 1}
    result = run(tmp_path, real_corpus, [base["conversation"], other])
    assert not any(r["check"] == "dev entry repeats a test entry" for r in result.errors.to_dict("records"))


@pytest.mark.parametrize("qid", ["locomo:conv 26:q0", "locomo:conv-26:q0\t", "locomo:\nq0", "locomo:q0\x00", "locomo:q0\u2028"])
def test_query_id_with_whitespace_or_control_characters_refused(tmp_path, real_corpus, base, qid):
    bad = copy.deepcopy(base["conversation"])
    bad["query_id"] = qid
    row = one_failure(run(tmp_path, real_corpus, [bad]), "query_id format", "query_id holds whitespace or a control character")
    assert row["line"] == 1
    assert "\n" not in format_table(run(tmp_path, real_corpus, [bad]).errors).splitlines()[2]


@pytest.mark.parametrize("as_of", ["1600-01-01T00:00:00+00:00", "2262-04-12T00:00:00+00:00", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_as_of_outside_the_pandas_range_refused(tmp_path, real_corpus, base, as_of):
    bad = copy.deepcopy(base["conversation"])
    bad["as_of"] = as_of
    row = one_failure(run(tmp_path, real_corpus, [bad]), "as_of", "is outside the range pandas can represent (1677-09-21 .. 2262-04-11 UTC)")
    assert row["line"] == 1


def test_as_of_at_the_range_edges_passes(tmp_path, real_corpus, base):
    ok = copy.deepcopy(base["conversation"])
    ok["as_of"] = "2262-04-11T00:00:00+00:00"
    assert run(tmp_path, real_corpus, [ok]).ok


def _cli_root(tmp_path: Path, real_corpus: dict) -> Path:
    """A project root for `bench validate`: params.yaml, bench/ and the real segments."""
    from bench.io import write_parquet

    root = tmp_path / "proj"
    (root / "bench" / "sets").mkdir(parents=True)
    (root / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    write_parquet(root / "data" / "segments" / "all" / "all.parquet", real_corpus["segments"])
    return root


def test_lone_surrogate_is_one_row_not_a_crash(tmp_path, real_corpus, base, monkeypatch):
    bad = copy.deepcopy(base["conversation"])
    line = json.dumps(bad).replace(json.dumps(bad["question"]), json.dumps(bad["question"])[:-1] + '\\ud800"')
    root = _cli_root(tmp_path, real_corpus)
    path = write_set(root / "bench" / "sets" / "locomo.jsonl", [json.dumps(base["conversation"]).replace(base["conversation"]["query_id"], "locomo:x"), line])
    result = validate([path], real_corpus["manifest"], real_corpus["segments"], root=root)
    rows = result.errors.to_dict("records")
    assert [(r["line"], r["check"]) for r in rows] == [(2, "text encoding")]
    assert rows[0]["value"] == "question holds a lone surrogate (a \\ud800-\\udfff escape): not encodable as UTF-8"
    monkeypatch.chdir(root)  # `bench validate` finds its project from the working folder
    proc = CliRunner().invoke(cli, ["validate", str(path), "--manifest", str(real_corpus["manifest_path"])])
    assert proc.exit_code == 1, proc.output
    assert proc.exception is None or isinstance(proc.exception, SystemExit)  # no traceback
    assert "text encoding" in proc.stdout and proc.stderr.strip() == "1 problems in 1 file(s)"


def _skeleton_validated(tmp_path, annotation_source: str):
    """A local conversation data set (the `bench datasets new` skeleton), fetched,
    extracted and validated with the given annotation_source."""
    import yaml

    from bench.annotations.validate import validate
    from bench.corpus_sources import register_local
    from bench.ingest.corpus import Manifest
    from bench.ingest.fetch import FetchLog, fetch_dataset
    from bench.modalities.local import load, skeleton

    folder = tmp_path / "support-chats"
    skeleton(folder, "conversation")
    cfg = yaml.safe_load((folder / "dataset.yaml").read_text(encoding="utf-8"))
    cfg["annotation_source"] = annotation_source
    (folder / "dataset.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    ds = load(folder)
    register_local([ds])
    try:
        rows = fetch_dataset(ds, tmp_path / "store", [folder.parent], False, FetchLog())
        seg = ds.extract({r["path"]: tmp_path / "store" / ds.key / r["path"] for r in rows})
        return validate([ds.set_path], Manifest(tuple(rows)), seg)
    finally:
        register_local([])


@pytest.mark.parametrize("source", ["GPT-4 wrote the questions and marked the turns", "Claude drafted the gold",
                                    "machine-generated QA pairs", "an LLM picked the evidence turns"])
def test_local_annotation_source_naming_a_model_is_flagged(tmp_path, source):
    """gold_made_by: human beside annotation_source "GPT-4 wrote ..." was counted as human
    gold without a flag: every entry of that data set is now invalid as a sample, with
    the model named (counted in summary.json's invalid and listed in dev.md)."""
    result = _skeleton_validated(tmp_path, source)
    assert result.ok  # no set-file error: the set is well formed
    assert len(result.entries) == 2 and result.dev() == []
    reasons = {r["reason"] for r in result.invalid}
    assert len(result.invalid) == len(result.entries) and len(reasons) == 1
    (reason,) = reasons
    assert reason.startswith("annotation_source names a model (") and reason.endswith(
        "beside gold_made_by: human: not counted as human gold")


def test_local_human_annotation_source_is_not_flagged(tmp_path):
    result = _skeleton_validated(tmp_path, "human: two support leads marked the evidence turns")
    assert result.ok and result.invalid == [] and len(result.dev()) == 2


def test_registered_sources_that_mention_a_model_are_not_flagged():
    """LoCoMo's annotation_source says its dialogues were generated by LLM agents (the gold
    is the annotators'): registered data sets state a model's part in reviewed words."""
    from bench.annotations.validate import MODEL_WORDS, model_named
    from bench.corpus_sources import datasets

    locomo = datasets()["locomo"]
    assert MODEL_WORDS.search(locomo.annotation_source) and model_named(locomo) == ""
