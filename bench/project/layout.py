"""Every path the pipeline reads or writes, named once, and the raw params.yaml.

Imports no modality: the per-modality extract stages import this module only, so their
DVC deps name only their own modality's code. What needs the data-set registry (the
checked params, the enabled data sets, set files) is in bench/project/selection.py.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn

import click
import yaml

# paths relative to the project root, as git and `git show <rev>:<path>` name them
PARAMS_FILE = "params.yaml"
MANIFEST_FILE = "bench/corpus/manifest.jsonl"
SETS = "bench/sets"
SPLIT_LOCK_FILE = "bench/sets/splits.lock"
LOCAL_FINGERPRINT_DIR = "bench/corpus/local"  # written by the `local` stage, read by fetch
DEV_METRICS = "reports/metrics/dev.json"
TEST_METRICS = "reports/metrics/test.json"
TEST_REPORT = "reports/test.md"  # the acceptance's verdict, written beside test.json
PER_QUERY = "reports/per_query/dev.parquet"
SUMMARY = "data/sets/summary.json"
AUDIT = "reports/acceptance.jsonl"  # the acceptance audit chain
DEV_BUNDLE = "reports/dev.bundle.zip"  # `bench bundle`'s default: the dev run's result bundle (bench/bundle/)
TEST_BUNDLE = "reports/test.bundle.zip"  # the acceptance's bundle of the test run, written with test.json
ACCEPT_PIPELINE = "bench/test/dvc.yaml"  # the locked acceptance stage's pipeline
ACCEPT_TOKEN = "data/.accept-token"  # written by `bench accept` for its stage only


@dataclass(frozen=True)
class Layout:
    """The files of one project (a repository, a copy of it, an experiment workspace)."""

    root: Path

    def __truediv__(self, rel: str) -> Path:
        return self.root / rel

    @property
    def params(self) -> Path:
        return self.root / PARAMS_FILE

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST_FILE

    @property
    def sets_dir(self) -> Path:
        return self.root / SETS

    @property
    def split_lock(self) -> Path:
        return self.root / SPLIT_LOCK_FILE

    @property
    def local_fingerprints(self) -> Path:
        return self.root / LOCAL_FINGERPRINT_DIR

    @property
    def store(self) -> Path:
        """data/corpus: the fetched corpus files (hard links to the mirror where possible)."""
        return self.root / "data" / "corpus"

    @property
    def segments(self) -> Path:
        """data/segments/<modality>/<data set>.parquet: extracted segments."""
        return self.root / "data" / "segments"

    @property
    def ocr_cache(self) -> Path:
        """data/ocr-cache/<modality>/: the persistent OCR cache (a DVC persist output)."""
        return self.root / "data" / "ocr-cache"

    @property
    def valid_dir(self) -> Path:
        """data/sets: the validated dev entries, the invalid ones and the summary."""
        return self.root / "data" / "sets"

    @property
    def atoms(self) -> Path:
        return self.root / "data" / "atoms"

    @property
    def served(self) -> Path:
        """data/served: the atoms the system under test serves (retrieve stage)."""
        return self.root / "data" / "served"

    @property
    def runs(self) -> Path:
        return self.root / "data" / "runs"

    @property
    def resolved(self) -> Path:
        return self.root / "data" / "resolved"

    @property
    def memories(self) -> Path:
        """data/memories: the run's memory hits, their cited units, replay.json (retrieve stage)."""
        return self.root / "data" / "memories"

    @property
    def reports(self) -> Path:
        return self.root / "reports"


def find_root(start: Path | None = None) -> Path:
    """The folder holding params.yaml and bench/: `start` (default the current one) or a parent."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / PARAMS_FILE).is_file() and (folder / "bench").is_dir():
            return folder
    return here


#: where bench.memo keeps reusable results, under the project's .dvc/tmp (git and DVC ignore it)
MEMO_DIR = ".dvc/tmp/bench-memo"
#: environment variable naming another memo folder; "off" turns reuse off
MEMO_ENV = "BENCH_MEMO_DIR"


def memo_dir(root: Path, environ: dict[str, str] | None = None) -> Path | None:
    """The memo folder of the project at `root` (None: reuse turned off).

    A `dvc exp run --queue` experiment runs in a copy at <project>/.dvc/tmp/exps/<name>/;
    it uses the project's own folder, so a sweep reuses what earlier experiments computed
    (entries are content-addressed and written atomically: bench/memo.py)."""
    env = os.environ if environ is None else environ
    given = env.get(MEMO_ENV, "")
    if given:
        return None if given == "off" else Path(given)
    parts = root.resolve().parts
    for i in range(len(parts) - 3):
        if parts[i:i + 3] == (".dvc", "tmp", "exps"):
            return Path(*parts[:i]) / MEMO_DIR
    return root / MEMO_DIR


#: the project this code lives in: stages run with it as the working directory
HERE = Layout(Path(__file__).resolve().parents[2])
ROOT = HERE.root
PARAMS = HERE.params
MANIFEST = HERE.manifest
SETS_DIR = HERE.sets_dir
SPLIT_LOCK = HERE.split_lock
LOCAL_FINGERPRINTS = HERE.local_fingerprints
STORE = HERE.store
SEGMENTS = HERE.segments
OCR_CACHE = HERE.ocr_cache
VALID_DIR = HERE.valid_dir
ATOMS = HERE.atoms
SERVED = HERE.served
RUNS = HERE.runs
RESOLVED = HERE.resolved
MEMORIES = HERE.memories
REPORTS = HERE.reports


class ProjectError(click.ClickException):
    """A bad params.yaml, data-set selection or local data set: one line, exit 1."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def read_params(layout: Layout = HERE) -> dict[str, Any]:
    """params.yaml as written (unchecked; bench/project/selection.py checks it)."""
    try:
        with open(layout.params, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as exc:
        raise ProjectError(f"params.yaml: cannot be read as YAML ({' '.join(str(exc).split())})") from None
    return doc if isinstance(doc, dict) else {}


def fail(message: str) -> NoReturn:
    """One line on stderr and exit 1: the stage's outputs are left as they were."""
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
