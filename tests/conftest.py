"""Shared fixtures: the real mirror, and a real corpus (manifest + segments) built once."""

from __future__ import annotations

import json
import os
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
    """MMLongBench-Doc and LoCoMo fetched from the real mirror and parsed, once per session.

    Text layer only (extraction.pdf.ocr_min_chars 0): OCR of all 638 text-less pages
    would take minutes; page OCR is tested on the gold pages alone
    (tests/modalities/test_pdf.py)."""
    need_mirror("mmlongbench-doc", "locomo")
    from bench.corpus_sources import datasets
    from bench.ingest.corpus import Manifest, extract_all
    from bench.ingest.fetch import FetchLog, fetch_dataset, sort_manifest
    from bench.io import write_jsonl

    base = tmp_path_factory.mktemp("real-corpus")
    store = base / "store"
    rows: list[dict] = []
    log = FetchLog()
    for key in ("mmlongbench", "locomo"):
        rows += fetch_dataset(datasets()[key], store, [MIRROR], False, log)
    manifest_path = base / "manifest.jsonl"
    write_jsonl(manifest_path, sort_manifest(rows))
    manifest = Manifest.load(manifest_path)
    frames = extract_all(manifest, store, ocr_cache=ocr_cache, options={"pdf": {"ocr_min_chars": 0}})
    return {
        "base": base,
        "store": store,
        "manifest_path": manifest_path,
        "manifest": manifest,
        "segments": pd.concat(frames.values(), ignore_index=True),
    }


def write_set(path: Path, entries: list) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for e in entries:
            fh.write((e if isinstance(e, str) else json.dumps(e)) + "\n")
    return path


os.environ.setdefault("DVC_NO_ANALYTICS", "1")


#: the data sets of the shared reproduced project: a PDF set and a conversation set, small
REPRODUCED = ["mmlongbench", "locomo"]


@pytest.fixture(scope="session")
def reproduced(tmp_path_factory: pytest.TempPathFactory, ocr_cache: Path) -> Path:
    """The project on REPRODUCED, committed to a fresh git repository and reproduced with
    `dvc repro` once per session (page OCR off, tests/project_copy.py). End-to-end tests
    that change something work on their own clone (project_copy.clone_project), so the
    session pays for one cold run instead of one per test module."""
    from tests.project_copy import copy_project, keep_ocr_cache, project_env, run

    need_mirror("mmlongbench-doc", "locomo")
    work = copy_project(tmp_path_factory.mktemp("reproduced") / "project", datasets=REPRODUCED, ocr_cache=ocr_cache)
    env = project_env(work.parent / "site-cache")
    for args in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "copy"], ["dvc", "repro"]):
        run(args, work, env)
    keep_ocr_cache(work, ocr_cache)
    run(["git", "add", "-A"], work, env)
    run(["git", "commit", "-q", "-m", "baseline run"], work, env)
    return work


@pytest.fixture(scope="session")
def locomo_reproduced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """LoCoMo alone (`datasets: [locomo]`, bm25, 200 bootstrap resamples), committed to a fresh
    git repository and reproduced once per session. Tests that evaluate a system on LoCoMo
    clone it (project_copy.clone_project): only the stages from retrieve on run again."""
    import yaml

    from tests.project_copy import copy_project, project_env, run

    need_mirror("locomo")
    work = copy_project(tmp_path_factory.mktemp("locomo-reproduced") / "project", datasets=["locomo"])
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["metrics"]["bootstrap_resamples"] = 200  # the tests that share it compare values, not interval widths
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = project_env(work.parent / "site-cache")
    for args in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "copy"], ["dvc", "repro"]):
        run(args, work, env)
    run(["git", "add", "-A"], work, env)
    run(["git", "commit", "-q", "-m", "baseline run"], work, env)
    return work
