"""Validate annotation sets against the spec, the manifest and the real corpus (the core of
`bench validate` (bench/cli_validate.py) and of the validate and accept stages).

Every failure of every file is collected (Pandera, lazy) and returned as one table:
file, line, query_id, check, offending value (format_table prints it).

Two outcomes are not failures of the set file but facts about the corpus here:
an entry whose needed file is listed in the manifest as *unavailable* (for example
a PDF of 4 MiB or more that the mirror lacks) is *invalid as a sample* (spec
constraint 7): it is counted and listed, never silently dropped, and the run goes on.
A file or revision missing from the manifest altogether is an error.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd

from bench.annotations.schema import entry_schema, failures, flatten, printable
from bench.annotations.splits import SplitLock, history_failures, lock_failures
from bench.corpus_sources import dataset_by_name, datasets
from bench.ingest.corpus import Manifest
from bench.modalities import modalities
from bench.modalities.local import LocalDataset, set_key

FAILURE_COLUMNS = ["file", "line", "query_id", "check", "value"]


@dataclass
class ValidationResult:
    errors: pd.DataFrame
    entries: list[dict] = field(default_factory=list)  # every entry that passed, in file order
    invalid: list[dict] = field(default_factory=list)  # {query_id, file, line, split, modality, reason}

    @property
    def ok(self) -> bool:
        return self.errors.empty

    def dev(self) -> list[dict]:
        return self.split("dev")

    def split(self, name: str) -> list[dict]:
        """Valid entries of one split (entries invalid as samples here left out)."""
        bad = {r["query_id"] for r in self.invalid}
        return [e for e in self.entries if e["split"] == name and e["query_id"] not in bad]


def read_lines(path: Path, display: str) -> tuple[list[tuple[int, Any]], list[dict]]:
    """Parse every line; collect (not raise) bad bytes and bad JSON as failure rows."""
    parsed: list[tuple[int, Any]] = []
    errors: list[dict] = []
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                errors.append({"file": display, "line": lineno, "query_id": "", "check": "line is not valid UTF-8", "value": f"byte {exc.start}: {raw[exc.start:exc.start + 4]!r}"})
                continue
            if not text.strip():
                continue
            try:
                parsed.append((lineno, json.loads(text)))
            except json.JSONDecodeError as exc:
                errors.append({"file": display, "line": lineno, "query_id": "", "check": "invalid JSON", "value": f"{exc.msg} at column {exc.colno}"})
    return parsed, errors


def unsafe_path(path: str) -> bool:
    pure = PurePosixPath(path.replace("\\", "/"))
    return path.startswith(("/", "\\")) or pure.is_absolute() or ".." in pure.parts or (len(path) > 1 and path[1] == ":")


#: words in a local data set's annotation_source that name a model as a maker of the gold
#: (docs/local-data.md): its entries are invalid as samples, with the word as the reason
MODEL_WORDS = re.compile(
    r"\b(chat-?gpt|gpt(?:-?\d[\w.]*)?|claude|llms?|(?:large )?language models?|gemini|llama[\w.-]*|mistral|"
    r"(?:auto|machine|model|ai|llm)?[- ]?generated|synthetic)\b", re.IGNORECASE)


def model_named(ds: Any) -> str:
    """The model a local data set's annotation_source names ('' if none or registered).
    Registered data sets state a model's part in their own reviewed words (LoCoMo's
    dialogues, ScreenAgent's plan items); a local folder's gold_made_by: human beside
    "GPT-4 wrote ..." is not taken as human annotation."""
    if not isinstance(ds, LocalDataset):
        return ""
    found = MODEL_WORDS.search(ds.annotation_source)
    return found.group(0).strip() if found else ""


def _source_problem(entry: dict, ds: Any, manifest: dict[tuple[str, str, str], dict],
                    unreadable: dict[tuple[str, str], str] | None) -> tuple[str, str]:
    """(hard problem, invalid-as-a-sample reason) of an entry's corpus files."""
    revision = entry["origin"]["revision"]
    unavailable = []
    for sid in ds.sources_of(entry):
        path = ds.file_of(sid)
        if path is None:
            return f"source_id {sid} does not belong to dataset {ds.name}", ""
        if unsafe_path(path) or unsafe_path(sid.split(":", 1)[-1]):
            return f"source path {path} is absolute or leaves the corpus ('..')", ""
        row = manifest.get((ds.name, revision, path))
        if row is None:
            known = {k[1] for k in manifest if k[0] == ds.name}
            if revision not in known:
                return f"revision {revision} of {ds.name} not in the manifest", ""
            return f"file {path} not in the manifest at revision {revision}", ""
        if row["status"] != "present":
            unavailable.append(path)
        elif unreadable and (ds.key, path) in unreadable:
            return "", f"unreadable corpus file: {path} ({unreadable[(ds.key, path)]})"
    return ("", f"corpus file unavailable: {unavailable[0]}") if unavailable else ("", "")


def corpus_problem(entry: dict, manifest: dict[tuple[str, str, str], dict], segments: dict[str, pd.DataFrame],
                   unreadable: dict[tuple[str, str], str] | None = None) -> tuple[str, str]:
    """(hard problem, invalid-as-a-sample reason) of one structurally valid entry."""
    ds = dataset_by_name(entry["origin"]["dataset"])
    if ds is None:  # structure checks refuse an unregistered data set first
        raise ValueError(f"dataset {entry['origin']['dataset']!r} is not registered")
    modality = modalities()[entry["modality"]]
    if ds.modality != entry["modality"]:
        return f"dataset {ds.name} holds {ds.modality}, entry says {entry['modality']}", ""
    hard, reason = _source_problem(entry, ds, manifest, unreadable)
    if hard or reason:
        return hard, reason
    model = model_named(ds)
    if model:
        return "", f"annotation_source names a model ({model!r}) beside gold_made_by: human: not counted as human gold"
    for i, g in enumerate(entry["gold"]):
        seg = segments.get(g["source_id"])
        if seg is None:
            return f"gold[{i}]: source {g['source_id']} not found in its corpus file", ""
        problem = modality.check_region_in_corpus(g["region"], seg)
        if problem:
            return f"gold[{i}]: {problem}", ""
    return "", ""


def validate(paths: Sequence[Path], manifest: Manifest, segments: pd.DataFrame | None, root: Path | None = None, lock: SplitLock | None = None,
             committed: SplitLock | None = None, unreadable: Sequence[dict] = ()) -> ValidationResult:
    """Validate set files; `root` makes displayed file names relative.

    With a split `lock` (bench/annotations/splits.py), an entry that changed split, a locked test
    entry missing from its set and a test entry not in the lock are failures too; with
    the `committed` lock (git HEAD's), a lock changed without a recorded freeze is.
    `unreadable` lists corpus files extraction could not read ({key, path, reason}):
    their entries are invalid as samples, like entries on unavailable files.
    """
    rows: list[dict] = []
    entries: list[tuple[dict, str, int]] = []
    line_errors: list[dict] = []
    keyed: list[tuple[dict | None, str, int, str]] = []
    for path in paths:
        display = _display(path, root)
        key = set_key(path, list(datasets().values()))  # a local data set's set.jsonl: its key
        parsed, errs = read_lines(path, display)
        line_errors.extend(errs)
        for lineno, obj in parsed:
            shown = {**obj, "modality": _hashable(obj["modality"])} if isinstance(obj, dict) and isinstance(obj.get("modality"), (list, dict)) else obj
            rows.append(flatten(shown, display, lineno))  # a list as modality would crash a dict lookup
            entries.append((obj, display, lineno))
            keyed.append((obj, display, lineno, key))
        if not parsed:
            keyed.append((None, display, 0, key))
    if lock is not None:
        line_errors.extend(lock_failures(keyed, lock))
        line_errors.extend(history_failures(lock, committed))
    line_errors.extend(cross_split_repeats(entries))
    frame = pd.DataFrame(rows)
    if len(frame):  # a list or object as query_id would crash the uniqueness check: keep it shown, not hashed
        frame["query_id"] = frame["query_id"].map(_hashable)
    lookup = manifest.lookup()
    unreadable_at = {(str(u["key"]), str(u["path"])): str(u["reason"]) for u in unreadable}
    by_source = {sid: grp for sid, grp in segments.groupby("source_id", sort=False)} if segments is not None and len(segments) else {}
    invalid: list[dict] = []
    if len(frame):
        problems = []
        structurally_ok = (frame[["field_problem", "gold_problem", "as_of_problem", "dataset_problem", "answer_problem", "text_problem", "id_problem"]] == "").all(axis=1)
        mods = set(modalities())
        for i, (obj, display, lineno) in enumerate(entries):
            hard = ""
            if structurally_ok.iloc[i] and isinstance(obj.get("modality"), str) and obj["modality"] in mods and isinstance(obj.get("origin", {}).get("revision"), str):
                hard, soft = corpus_problem(obj, lookup, by_source, unreadable_at)
                if soft:
                    invalid.append({"query_id": obj["query_id"], "file": display, "line": lineno, "split": obj.get("split"), "modality": obj["modality"], "reason": soft})
            problems.append(hard)
        frame["corpus_problem"] = problems
        table = _tidy(failures(frame, entry_schema()), frame)
    else:
        table = pd.DataFrame(columns=FAILURE_COLUMNS)
    errors = pd.concat([pd.DataFrame(line_errors, columns=FAILURE_COLUMNS), table], ignore_index=True)
    errors = errors.map(printable)  # ids or values with lone surrogates stay printable
    errors = errors.sort_values(["file", "line"], kind="stable").reset_index(drop=True)
    passed = [obj for obj, _, _ in entries] if errors.empty else []
    return ValidationResult(errors=errors, entries=passed, invalid=invalid if errors.empty else [])


REPEAT = "dev entry repeats a test entry"


def _normal_text(text: str) -> str:
    return " ".join(text.casefold().split())


def _gold_key(gold: list) -> str:
    return json.dumps(sorted(json.dumps(g, sort_keys=True, ensure_ascii=True) for g in gold))


def cross_split_repeats(entries: Sequence[tuple[Any, str, int]]) -> list[dict]:
    """Failure rows for dev entries whose question (case and whitespace normalised) and
    gold equal a test entry's: a test question copied into dev under a new query_id
    would otherwise be tuned on."""
    test: dict[tuple[str, str], tuple[str, str, int]] = {}
    dev: list[tuple[tuple[str, str], Any, str, int]] = []
    for obj, display, lineno in entries:
        if not isinstance(obj, dict) or not isinstance(obj.get("question"), str) or not isinstance(obj.get("gold"), list):
            continue  # the schema reports these
        try:
            key = (_normal_text(obj["question"]), _gold_key(obj["gold"]))
        except (TypeError, ValueError):
            continue
        if obj.get("split") == "test":
            test.setdefault(key, (str(obj.get("query_id")), display, lineno))
        elif obj.get("split") == "dev":
            dev.append((key, obj.get("query_id"), display, lineno))
    rows = []
    for key, qid, display, lineno in dev:
        if key in test:
            tq, tfile, tline = test[key]
            rows.append({"file": display, "line": lineno, "query_id": qid if isinstance(qid, str) else str(qid), "check": REPEAT,
                         "value": f"same question and gold as test entry {tq} ({tfile}:{tline})"})
    return rows


IFF = "gold must be empty if and only if unanswerable"
UNIQUE = "query_id must be unique across all set files"


def _tidy(table: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """One row per entry for the gold/unanswerable check (Pandera reports a frame-wide
    check once per column) and the plain name of the uniqueness check."""
    if table.empty:
        return table
    table = table.copy()
    table.loc[table["check"].str.endswith("field_uniqueness"), "check"] = UNIQUE
    iff = table["check"].str.endswith(IFF)
    if iff.any():
        facts = frame.set_index(["file", "line"])[["unanswerable", "n_gold"]]
        rows = table.loc[iff, ["file", "line", "query_id"]].drop_duplicates(["file", "line"])
        rows["check"] = IFF
        rows["value"] = [f"unanswerable={str(facts.loc[(f, ln), 'unanswerable']).lower()}, gold has {facts.loc[(f, ln), 'n_gold']} regions" for f, ln in zip(rows["file"], rows["line"])]
        table = pd.concat([table.loc[~iff], rows], ignore_index=True)
    return table.drop_duplicates().sort_values(["file", "line", "check"], kind="stable").reset_index(drop=True)


class _Shown:
    """A JSON value that is not hashable (list, object), hashable by its JSON text; never a str."""

    __slots__ = ("text",)

    def __init__(self, value: Any) -> None:
        self.text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)

    def __hash__(self) -> int:
        return hash(self.text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Shown) and other.text == self.text

    def __str__(self) -> str:
        return self.text


def _hashable(value: Any) -> Any:
    return _Shown(value) if isinstance(value, (list, dict)) else value


def _display(path: Path, root: Path | None) -> str:
    try:
        return path.resolve().relative_to((root or Path.cwd()).resolve()).as_posix()
    except ValueError:  # outside the project (a local data set's set.jsonl): relative to it, never a machine path
        if root is not None and path.is_absolute():
            return Path(os.path.relpath(path.resolve(), root.resolve())).as_posix()
        return path.as_posix()


def format_table(errors: pd.DataFrame) -> str:
    cols = FAILURE_COLUMNS
    data = [[str(r[c]) for c in cols] for _, r in errors.iterrows()]
    widths = [min(60, max([len(c)] + [len(row[i]) for row in data])) for i, c in enumerate(cols)]

    def fmt(cells: list[str]) -> str:
        # every column but the last is cut to its width; the offending value is shown whole
        head = [c[: widths[i]].ljust(widths[i]) for i, c in enumerate(cells[:-1])]
        return "  ".join([*head, cells[-1]]).rstrip()

    lines = [fmt(cols), fmt(["-" * w for w in widths])] + [fmt(row) for row in data]
    return "\n".join(lines)


def invalid_counts(invalid: list[dict]) -> dict[str, dict[str, int]]:
    """split -> reason kind -> count."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in invalid:
        kind = row["reason"].split(": ")[0]
        out[row["split"]][kind] += 1
    return {k: dict(v) for k, v in out.items()}
