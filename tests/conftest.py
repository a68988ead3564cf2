"""Shared fixtures: the real mirror, and a real corpus (manifest + segments) built once."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
MIRROR = ROOT.parent / "shared" / "mirror"


@pytest.fixture(autouse=True)
def _dvc_site_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # DVC keeps a per-machine cache of repo state; tests must not share or pollute it
    monkeypatch.setenv("DVC_SITE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "dvc-site-cache"))
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name` that `build(folder)` filled, built once per test run, not once per
    xdist worker: the first worker to ask builds it under a file lock in the folder all
    workers of the run share (their base temps sit in it); the others wait for it and then
    read the same folder. Under `-n 0` it is this process's base temp. What is in it is
    read only to tests (they clone what they change, project_copy.clone_project)."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, done = root / name, root / f"{name}.built"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed build of another worker left
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


#: the modules run first, in this order: the longest, so that no worker is left with one of them at
#: the end while the other is idle (pyproject.toml: `--dist loadscope` hands out whole modules, in order)
FIRST = ("tests/test_tour.py", "tests/systems/adapters/test_e2e_frameworks.py", "tests/systems/test_e2e_systems.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The modules in FIRST, then the other end-to-end tests (the longest), then the rest; otherwise
    in collection order (a stable sort: each module keeps its own order). A test marked `slow` is
    skipped unless the marker expression names it (`pytest -m slow`): what it runs is run whole
    elsewhere (its docstring says where)."""
    if "slow" not in (config.option.markexpr or ""):
        for item in items:
            if item.get_closest_marker("slow"):
                item.add_marker(pytest.mark.skip(reason="slow: run with `pytest -m slow`"))
    def rank(item: pytest.Item) -> int:
        module = item.nodeid.split("::")[0]
        if module in FIRST:
            return FIRST.index(module)
        return len(FIRST) if item.get_closest_marker("e2e") else len(FIRST) + 1

    items.sort(key=rank)


def need_mirror(*keys: str) -> Path:
    for key in keys or ("",):
        if not (MIRROR / key).is_dir():
            pytest.skip(f"the real data mirror {MIRROR.name}/{key} is not beside the checkout (../shared/mirror)")
    return MIRROR


@pytest.fixture(scope="session")
def ocr_cache(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The OCR cache the tests share (copy_project seeds copies from it): each image of the
    mirror is OCR'd once per session, and, kept in pytest's cache folder, once per checkout.
    Entries are keyed by content, engine and settings, so a kept entry is never stale."""
    cache = getattr(pytestconfig, "cache", None)
    return cache.mkdir("ocr-cache") if cache is not None else tmp_path_factory.mktemp("ocr-cache")


@pytest.fixture(scope="session")
def real_corpus(tmp_path_factory: pytest.TempPathFactory, ocr_cache: Path) -> dict:
    """MMLongBench-Doc and LoCoMo fetched from the real mirror and parsed, once per test run
    (built_once: one xdist worker parses, every worker reads its store, manifest and segments).

    Text layer only (extraction.pdf.ocr_min_chars 0): OCR of all 638 text-less pages
    would take minutes; page OCR is tested on the gold pages alone
    (tests/modalities/test_pdf.py)."""
    need_mirror("mmlongbench-doc", "locomo")
    from bench.ingest.corpus import Manifest

    def build(base: Path) -> None:
        from bench.corpus_sources import datasets
        from bench.ingest.corpus import extract_all
        from bench.ingest.fetch import FetchLog, fetch_dataset, sort_manifest
        from bench.io import write_jsonl

        rows: list[dict] = []
        log = FetchLog()
        for key in ("mmlongbench", "locomo"):
            rows += fetch_dataset(datasets()[key], base / "store", [MIRROR], False, log)
        write_jsonl(base / "manifest.jsonl", sort_manifest(rows))
        frames = extract_all(Manifest.load(base / "manifest.jsonl"), base / "store", ocr_cache=ocr_cache,
                             options={"pdf": {"ocr_min_chars": 0}})
        pd.concat(frames.values(), ignore_index=True).to_pickle(base / "segments.pkl")  # dtypes kept exactly

    base = built_once(tmp_path_factory, "real-corpus", build)
    return {
        "base": base,
        "store": base / "store",
        "manifest_path": base / "manifest.jsonl",
        "manifest": Manifest.load(base / "manifest.jsonl"),
        "segments": pd.read_pickle(base / "segments.pkl"),
    }


def write_set(path: Path, entries: list) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for e in entries:
            fh.write((e if isinstance(e, str) else json.dumps(e)) + "\n")
    return path


os.environ.setdefault("DVC_NO_ANALYTICS", "1")


#: the data sets of the shared reproduced project: a PDF set and a conversation set, small
REPRODUCED = ["mmlongbench", "locomo"]


def reproduce(work: Path, env: dict, ocr_cache: Path | None = None) -> None:
    """Commit the copy `work` to a fresh git repository, `dvc repro` it (keeping its OCR results
    in the session's `ocr_cache`) and commit the run."""
    from tests.project_copy import keep_ocr_cache, run

    for args in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "copy"], ["dvc", "repro"]):
        run(args, work, env)
    if ocr_cache is not None:
        keep_ocr_cache(work, ocr_cache)
    run(["git", "add", "-A"], work, env)
    run(["git", "commit", "-q", "-m", "baseline run"], work, env)


@pytest.fixture(scope="session")
def reproduced(tmp_path_factory: pytest.TempPathFactory, ocr_cache: Path) -> Path:
    """The project on REPRODUCED, committed to a fresh git repository and reproduced with
    `dvc repro` once per test run (page OCR off, tests/project_copy.py; built_once: one xdist
    worker reproduces it, the other waits for it). It is read only: end-to-end tests that
    change something work on their own clone (project_copy.clone_project), so the run pays
    for one cold `dvc repro` instead of one per test module or worker."""
    from tests.project_copy import copy_project, project_env

    need_mirror("mmlongbench-doc", "locomo")

    def build(folder: Path) -> None:
        work = copy_project(folder / "project", datasets=REPRODUCED, ocr_cache=ocr_cache)
        reproduce(work, project_env(folder / "site-cache"), ocr_cache)

    return built_once(tmp_path_factory, "reproduced", build) / "project"


@pytest.fixture(scope="session")
def locomo_reproduced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """LoCoMo alone (`datasets: [locomo]`, bm25, 200 bootstrap resamples), committed to a fresh
    git repository and reproduced once per test run (built_once). Tests that evaluate a system
    on LoCoMo clone it (project_copy.clone_project): only the stages from retrieve on run again."""
    import yaml

    from tests.project_copy import copy_project, project_env

    need_mirror("locomo")

    def build(folder: Path) -> None:
        work = copy_project(folder / "project", datasets=["locomo"])
        params = yaml.safe_load((work / "params.yaml").read_text())
        params["metrics"]["bootstrap_resamples"] = 200  # the tests that share it compare values, not interval widths
        (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        reproduce(work, project_env(folder / "site-cache"))

    return built_once(tmp_path_factory, "locomo-reproduced", build) / "project"
