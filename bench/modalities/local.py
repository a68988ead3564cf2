"""Local data sets: a folder of your own corpus and gold, evaluated with no Python.

A folder named in ``params.yaml: local_datasets`` takes part like a registered data
set (see docs/local-data.md). It holds

    dataset.yaml   key, name, modality, revision, license, annotation_source,
                   gold_made_by (must be "human"), holder, observed_at
    set.jsonl      entries in schema b-2, split set by the user
    files/         the corpus; source_id = "<key>:<path under files/>" (code: the
                   top folder under files/ is one source, a repository)
    holders.csv    when holder: per_file      (columns path, holder)
    observed_at.csv when observed_at: per_file (columns path, observed_at)

The generic part lives here: reading and checking ``dataset.yaml``, listing the files,
the manifest paths (``dataset.yaml``, ``set.jsonl``, ``files/<path>``), holders and
observation times. Each modality parses its own local file format in
``bench/modalities/<modality>/local.py``, a module with

    FORMATS   a phrase naming the accepted files (for errors and docs)
    SUFFIXES  accepted file-name suffixes, lower case (None: any file)
    source_of(path) -> str          the source name of a path under files/
    parse(sources) -> DataFrame     {source_id: [(path in source, local file)]} ->
                                    the modality's segment columns (observed_at optional)
    EXAMPLE_FILES, EXAMPLE_GOLD     the two-entry example of `bench datasets new`

Every refusal is a :class:`LocalDataError` whose text is one line naming the file.
Nothing here reads params.yaml: the stages pass the folders in.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import importlib
import json
import os
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import yaml

from bench.modalities.base import CorpusFile, Dataset, ImportResult

DATASET_FILE = "dataset.yaml"
SET_FILE = "set.jsonl"
FILES_DIR = "files"
HOLDERS_FILE = "holders.csv"
OBSERVED_FILE = "observed_at.csv"
PER_FILE = "per_file"
FIELDS = ("key", "name", "modality", "revision", "license", "annotation_source", "gold_made_by", "holder", "observed_at")
KEY = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
MODALITIES = ("pdf", "image", "ui_screenshot", "video", "code", "conversation")


class LocalDataError(ValueError):
    """A refused local data set: one line naming the file."""


def parser_of(modality: str) -> ModuleType:
    """The modality's local-format parser, bench/modalities/<modality>/local.py."""
    return importlib.import_module(f"bench.modalities.{modality}.local")


def parse_time(value: Any, where: str) -> pd.Timestamp:
    """An ISO 8601 date-time with a timezone, as UTC; else a one-line error naming `where`."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise LocalDataError(f"{where}: {value!r} is not an ISO 8601 date-time") from None
    else:
        raise LocalDataError(f"{where}: must be an ISO 8601 date-time string, got {type(value).__name__}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise LocalDataError(f"{where}: {value!r} has no timezone (write e.g. 2024-05-01T09:00:00+00:00)")
    return pd.Timestamp(moment).tz_convert("UTC")


def _read_yaml(path: Path) -> dict[str, Any]:  # every field present and no other
    shown = path.as_posix()
    if not path.is_file():
        raise LocalDataError(f"{shown}: missing (a local data set needs dataset.yaml, set.jsonl and files/)")
    try:
        cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise LocalDataError(f"{shown}: not valid YAML{f' (line {line + 1})' if line is not None else ''}") from None
    if not isinstance(cfg, dict):
        raise LocalDataError(f"{shown}: must be a mapping of the fields {', '.join(FIELDS)}")
    missing = [f for f in FIELDS if f not in cfg]
    if missing:
        raise LocalDataError(f"{shown}: missing field {missing[0]}")
    extra = sorted(set(cfg) - set(FIELDS))
    if extra:
        raise LocalDataError(f"{shown}: unknown field {extra[0]}")
    return cfg


def _check_fields(cfg: dict[str, Any], shown: str) -> None:  # observed_at: parsed by the caller
    for name in FIELDS:
        value = cfg[name]
        if name in ("revision",) and isinstance(value, (int, float)) and not isinstance(value, bool):
            raise LocalDataError(f"{shown}: field revision must be a quoted string (YAML read {value!r} as a number)")
        if name != "observed_at" and (not isinstance(value, str) or not value.strip()):
            raise LocalDataError(f"{shown}: field {name} must be a non-empty string")
    if not KEY.match(cfg["key"]):
        raise LocalDataError(f"{shown}: field key {cfg['key']!r} must be lower-case letters, digits, '-' or '_' (it prefixes every source_id)")
    if cfg["modality"] not in MODALITIES:
        raise LocalDataError(f"{shown}: field modality {cfg['modality']!r} must be one of {', '.join(MODALITIES)}")
    if cfg["gold_made_by"] != "human":
        raise LocalDataError(
            f"{shown}: field gold_made_by is {cfg['gold_made_by']!r}: only gold made by people is accepted (spec constraint 1); "
            "write gold_made_by: human if people annotated it"
        )


def _check_folder(folder: Path, cfg: dict[str, Any], shown: str) -> None:  # tables, set.jsonl, files/
    for name, table in (("holder", HOLDERS_FILE), ("observed_at", OBSERVED_FILE)):
        if cfg[name] == PER_FILE and not (folder / table).is_file():
            raise LocalDataError(f"{shown}: field {name} is per_file but {(folder / table).as_posix()} is missing")
    set_path = folder / SET_FILE
    if not set_path.is_file():
        raise LocalDataError(f"{set_path.as_posix()}: missing (the set of annotated entries)")
    if not set_path.read_bytes().strip():
        raise LocalDataError(f"{set_path.as_posix()}: no entries (empty file): write at least one entry; nothing was changed")
    files = folder / FILES_DIR
    if files.is_symlink():
        raise LocalDataError(f"{files.as_posix()}: a symbolic link; files/ must be a real folder holding the corpus (links are not read)")
    if not files.is_dir():
        raise LocalDataError(f"{files.as_posix()}: missing (the corpus folder)")


def read_config(folder: Path) -> dict[str, Any]:
    """dataset.yaml, every field checked; a refusal names the file and the field."""
    path = folder / DATASET_FILE
    shown = path.as_posix()
    if not folder.is_dir():
        raise LocalDataError(f"{folder.as_posix()}: local data set folder not found")
    cfg = _read_yaml(path)
    _check_fields(cfg, shown)
    if cfg["observed_at"] != PER_FILE:
        cfg["observed_at"] = parse_time(cfg["observed_at"], f"{shown}: field observed_at")
    _check_folder(folder, cfg, shown)
    return cfg


def list_files(folder: Path, suffixes: Sequence[str] | None, formats: str) -> list[str]:
    """Paths under files/ (posix, sorted); hidden files skipped, links and other types refused."""
    root = folder / FILES_DIR
    out: list[str] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:  # os.fsdecode keeps undecodable bytes as surrogates
            raise LocalDataError(f"{os.fsencode(path).decode('utf-8', 'backslashreplace')}: file name is not valid UTF-8; rename it (DVC and the manifest need UTF-8 names)") from None
        if path.is_symlink():
            raise LocalDataError(f"{path.as_posix()}: symbolic links are not read; copy the file into files/")
        if path.is_dir():
            continue
        if not path.is_file():
            raise LocalDataError(f"{path.as_posix()}: not a regular file")
        if suffixes is not None and path.suffix.lower() not in suffixes:
            raise LocalDataError(f"{path.as_posix()}: not a file this modality reads ({formats})")
        if suffixes is not None and path.stat().st_size == 0:  # code (any file) may hold empty files, e.g. __init__.py
            raise LocalDataError(f"{path.as_posix()}: empty file (0 bytes): copy the whole file into files/")
        out.append(rel)
    if not out:
        raise LocalDataError(f"{root.as_posix()}: no corpus files")
    return out


def read_table(path: Path, column: str) -> dict[str, str]:
    """A two-column CSV path,<column>; a refusal names file, line and field."""
    shown = path.as_posix()
    out: dict[str, str] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is None or [f.strip() for f in reader.fieldnames] != ["path", column]:
            raise LocalDataError(f"{shown}: line 1: header must be 'path,{column}', got {','.join(reader.fieldnames or [])!r}")
        for row in reader:
            line = reader.line_num
            path_value, value = (row.get("path") or "").strip(), (row.get(column) or "").strip()
            if not path_value or not value:
                raise LocalDataError(f"{shown}: line {line}: field {'path' if not path_value else column} is empty")
            if path_value in out:
                raise LocalDataError(f"{shown}: line {line}: field path {path_value!r} listed twice")
            out[path_value] = value
    return out


class LocalDataset(Dataset):
    """A data set read from a local folder (see the module docstring)."""

    repo = "local"
    caveats = ""

    def __init__(self, folder: Path, cfg: dict[str, Any], shown: str | None = None) -> None:
        """Instance state only; the class attributes of the Dataset interface come from
        `load`, which makes one subclass per folder (they are class variables there)."""
        self.folder = folder
        self.shown = shown or folder.as_posix()
        self.parser = parser_of(self.modality)
        self.paths = list_files(folder, self.parser.SUFFIXES, self.parser.FORMATS)
        self.by_source: dict[str, list[str]] = {}
        try:
            for rel in self.paths:
                self.by_source.setdefault(f"{self.key}:{self.parser.source_of(rel)}", []).append(rel)
        except LocalDataError as exc:
            raise LocalDataError(f"{self.shown}/{FILES_DIR}/{exc}") from None
        self._holder = cfg["holder"]
        self._observed = cfg["observed_at"]
        self.holder_of = self._per_source(HOLDERS_FILE, "holder", self._holder, str)
        self.observed_of = self._per_source(OBSERVED_FILE, "observed_at", self._observed, None)

    @property
    def set_path(self) -> Path:
        return self.folder / SET_FILE

    def _per_source(self, table: str, column: str, single: Any, kind: Any) -> dict[str, Any]:
        names = {sid.split(":", 1)[1]: sid for sid in self.by_source}
        if single != PER_FILE:
            return {sid: single for sid in self.by_source}
        path = self.folder / table
        rows = read_table(path, column)
        out: dict[str, Any] = {}
        for line, (name, value) in enumerate(rows.items(), start=2):
            if name not in names:
                raise LocalDataError(f"{path.as_posix()}: line {line}: field path {name!r} is no source under files/ (sources: {', '.join(sorted(names)[:5])}...)")
            out[names[name]] = value if kind is str else parse_time(value, f"{path.as_posix()}: line {line}: field {column}")
        lacking = sorted(set(names) - set(rows))
        if lacking:
            raise LocalDataError(f"{path.as_posix()}: no row for source {lacking[0]!r}")
        return out

    # -- the Dataset interface ------------------------------------------------------
    def url(self, path: str) -> str:
        return f"local:{self.key}/{path}"  # never a machine path: the manifest stays portable

    def corpus_files(self, annotation_dir: Path) -> list[CorpusFile]:
        return [
            CorpusFile(source_id=f"{self.key}:{self.parser.source_of(rel)}", path=f"{FILES_DIR}/{rel}")
            for rel in self.paths
        ]

    def pins(self) -> dict[str, tuple[str, int]]:
        """sha256 and size of every file of the folder now: fetch copies and checks against them."""
        return folder_hashes(self.folder, (DATASET_FILE, SET_FILE, *(f"{FILES_DIR}/{p}" for p in self.paths)))

    def file_of(self, source_id: str) -> str | None:
        files = self.by_source.get(source_id)
        # a repository (code) has many files: its first stands for it in the manifest
        return f"{FILES_DIR}/{files[0]}" if files else None

    def extract(self, files: dict[str, Path], **options: Any) -> pd.DataFrame:
        """Segments of the folder's files, parsed by the modality's local parser, which
        takes the modality's extraction options (params.yaml `extraction.<modality>`)."""
        sources: dict[str, list[tuple[str, Path]]] = {}
        for path, local in sorted(files.items()):
            if not path.startswith(f"{FILES_DIR}/"):
                continue
            rel = path[len(FILES_DIR) + 1:]
            name = self.parser.source_of(rel)
            inner = rel[len(name) + 1:] if rel != name else rel
            sources.setdefault(f"{self.key}:{name}", []).append((inner, Path(local)))
        try:
            df = self.parser.parse(sources, **options)
        except LocalDataError as exc:
            raise LocalDataError(f"{self.shown}/{FILES_DIR}/{exc}") from None
        df = df.copy()
        df["dataset"] = self.key
        df["modality"] = self.modality
        df["holder"] = df["source_id"].map(self.holder_of)
        own = df["source_id"].map(self.observed_of)
        if "observed_at" in df.columns:
            df["observed_at"] = pd.to_datetime(df["observed_at"], utc=True).fillna(pd.to_datetime(own, utc=True))
        else:
            df["observed_at"] = pd.to_datetime(own, utc=True)
        if "seq" not in df.columns:
            df["seq"] = df.groupby("source_id").cumcount()
        return df.reset_index(drop=True)

    def import_set(self, mirror_dir: Path) -> ImportResult:
        raise NotImplementedError(f"{self.key}: a local data set's set is its own {SET_FILE}; nothing to import")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "repo": f"local folder {self.shown}"}


def folder_hashes(folder: Path, paths: Sequence[str]) -> dict[str, tuple[str, int]]:
    return {p: _hash(str(folder / p), (folder / p).stat().st_mtime_ns, (folder / p).stat().st_size) for p in paths}


@functools.cache
def _hash(path: str, mtime_ns: int, size: int) -> tuple[str, int]:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest(), size


@functools.cache
def _unreadable(modality: str, path: str, rel: str, mtime_ns: int, size: int) -> str:
    """Why a local corpus file cannot be read by its modality's first check, or '' (cached per file version)."""
    local = Path(path)
    try:
        if modality == "pdf":
            parser_of("pdf").check_pdf(rel, local)
        elif modality in ("image", "ui_screenshot"):
            parser_of("image").check_images({"_": [(rel, local)]})
        elif modality in ("conversation", "video"):  # a cheap text parse: the whole of it
            parser = parser_of(modality)
            name = parser.source_of(rel)
            parser.parse({f"_:{name}": [(rel[len(name) + 1:] if rel != name else rel, local)]})
    except LocalDataError as exc:
        return str(exc)
    return ""


def check_readable(ds: LocalDataset) -> None:
    """Every corpus file passes its modality's first read: a truncated PDF, image or transcript
    is refused, named, before any stage writes (extraction would leave its entries invalid)."""
    for rel in ds.paths:
        path = ds.folder / FILES_DIR / rel
        st = path.stat()
        problem = _unreadable(ds.modality, str(path), rel, st.st_mtime_ns, st.st_size)
        if problem:
            raise LocalDataError(f"{ds.shown}/{FILES_DIR}/{problem}")


def load(folder: Path, shown: str | None = None) -> LocalDataset:
    """The local data set in `folder`; LocalDataError (one line naming the file) if refused."""
    cfg = read_config(folder)
    text = cfg["annotation_source"].strip()
    observed = cfg["observed_at"]
    attrs = {
        "key": cfg["key"],
        "name": cfg["name"],
        "modality": cfg["modality"],
        "revision": cfg["revision"],
        "license": cfg["license"],
        # the schema's rule: a registered annotation_source starts with "human"
        "annotation_source": text if text.lower().startswith("human") else f"human annotation: {text}",
        "annotation_is_human": True,  # read_config refused anything but gold_made_by: human
        "mirror_key": folder.name,  # fetch reads <folder's parent>/<folder name>/<path>
        "annotation_files": (DATASET_FILE, SET_FILE),
        "holders": f"per file, from {HOLDERS_FILE}" if cfg["holder"] == PER_FILE else f"one holder for all: {cfg['holder']}",
        "observed_at_rule": (f"per file, from {OBSERVED_FILE}" if observed == PER_FILE else f"one time for all: {observed.isoformat()}")
        + ("; a session's date_time, where given, wins" if cfg["modality"] == "conversation" else ""),
    }
    cls = type(f"LocalDataset_{cfg['key']}", (LocalDataset,), attrs)
    ds = cls(folder, cfg, shown)
    check_readable(ds)
    return ds


def load_all(folders: Sequence[Path], shown: Sequence[str] | None = None, registered: Sequence[Dataset] = ()) -> list[LocalDataset]:
    """Every folder as a LocalDataset; keys and names must be unique among all data sets."""
    out: list[LocalDataset] = []
    keys = {ds.key: "registered" for ds in registered}
    names = {ds.name: "registered" for ds in registered}
    for i, folder in enumerate(folders):
        ds = load(folder, shown[i] if shown else None)
        where = f"{ds.shown}/{DATASET_FILE}"
        if ds.key in keys:
            raise LocalDataError(f"{where}: field key {ds.key!r} is already used by a {keys[ds.key]} data set")
        if ds.name in names:
            raise LocalDataError(f"{where}: field name {ds.name!r} is already used by a {names[ds.name]} data set")
        keys[ds.key] = names[ds.name] = f"local ({ds.shown})"
        out.append(ds)
    return out


def set_key(path: Path, local: Sequence[Dataset]) -> str:
    """The set key of a set file: a local data set's key for its set.jsonl, else the file stem."""
    resolved = path.resolve()
    for ds in local:
        if isinstance(ds, LocalDataset) and ds.set_path.resolve() == resolved:
            return ds.key
    return path.stem


def fingerprint(ds: LocalDataset) -> dict[str, Any]:
    """What the `local` DVC stage records of a folder: revision and every file's sha256."""
    return {
        "key": ds.key,
        "revision": ds.revision,
        "files": {p: list(v) for p, v in sorted(ds.pins().items())},
    }


def skeleton(folder: Path, modality: str) -> list[str]:
    """Write a skeleton local data set with a two-entry example; return the files written."""
    if modality not in MODALITIES:
        raise LocalDataError(f"{folder.as_posix()}: modality {modality!r} must be one of {', '.join(MODALITIES)}")
    if folder.exists() and any(folder.iterdir()):
        raise LocalDataError(f"{folder.as_posix()}: exists and is not empty; choose a new folder")
    parser = parser_of(modality)
    key = re.sub(r"[^a-z0-9_-]", "-", folder.name.lower()).strip("-_") or "my-data"
    config = (
        f"# A local data set (see docs/local-data.md). Every field is required.\n"
        f"key: {key}                      # prefixes every source_id: {key}:<path under files/>\n"
        f"name: my-team/{key}             # origin.dataset of every entry in set.jsonl\n"
        f"modality: {modality}\n"
        f"revision: \"v1\"                 # your version string; origin.revision of every entry\n"
        f"license: internal use only\n"
        f"annotation_source: \"human: <who annotated the gold, and how>\"\n"
        f"gold_made_by: human             # required: gold made by people, never by a system\n"
        f"holder: owner                   # or per_file, with holders.csv (path,holder)\n"
        f"observed_at: \"2024-01-01T00:00:00+00:00\"   # or per_file, with observed_at.csv (path,observed_at)\n"
    )
    written: dict[str, str] = {DATASET_FILE: config}
    for rel, text in parser.EXAMPLE_FILES.items():
        written[f"{FILES_DIR}/{rel}"] = text
    lines = []
    for n, (question, answer, rel, region) in enumerate(parser.EXAMPLE_GOLD):
        unanswerable = rel is None
        lines.append(json.dumps({
            "query_id": f"{key}:q{n}",
            "modality": modality,
            "question": question,
            "answer": None if unanswerable else answer,
            "answer_format": "none" if unanswerable else "str",
            "gold": [] if unanswerable else [{"source_id": f"{key}:{parser.source_of(rel)}", "region": region}],
            "scope": {"holder": "owner", "session": None, "scenario": "local"},
            "as_of": "2024-06-01T00:00:00+00:00",
            "unanswerable": unanswerable,
            "origin": {"dataset": f"my-team/{key}", "revision": "v1", "item": f"example:{n}", "license": "internal use only"},
            "split": "dev",
        }, ensure_ascii=False))
    written[SET_FILE] = "\n".join(lines) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FILES_DIR).mkdir(exist_ok=True)
    for rel, text in written.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return sorted(written)
