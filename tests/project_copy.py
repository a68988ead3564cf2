"""A fresh, git-initialised copy of the project for end-to-end DVC tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import yaml

from tests.conftest import MIRROR, ROOT

#: never copied: run outputs, caches and tool state of the working tree
SKIP = ("data", ".git", "cache", "tmp", "__pycache__", ".pytest_cache", ".hypothesis", "*.egg-info", ".benchmarks")


def run(args: list[str], cwd: Path, env: dict, ok: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if ok:
        assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def copy_project(work: Path, datasets: list[str] | None = None, skip: tuple[str, ...] = (), ocr_cache: Path | None = None,
                 pdf_ocr: bool = False) -> Path:
    """Copy the project to `work`, reading the real mirror and never downloading.

    Page OCR of text-less PDF pages is off unless `pdf_ocr` (extraction.pdf.ocr_min_chars
    0): it costs minutes per cold copy, and tests/modalities/test_pdf.py tests it.

    `ocr_cache` (the session's, see conftest) seeds the copy's data/ocr-cache, so OCR
    results of earlier runs in this session are hits; `keep_ocr_cache` saves new ones.
    """
    shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns(*SKIP, *skip))
    if ocr_cache is not None:
        shutil.copytree(ocr_cache, work / "data" / "ocr-cache", dirs_exist_ok=True)
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["fetch"]["mirror_dirs"] = [str(MIRROR)]
    params["fetch"]["download"] = "never"
    if datasets is not None:
        params["datasets"] = datasets
    if not pdf_ocr:
        params.setdefault("extraction", {}).setdefault("pdf", {})["ocr_min_chars"] = 0
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return work


def keep_ocr_cache(work: Path, ocr_cache: Path) -> None:
    """Add the OCR results of a run in the copy `work` to the session's cache folder."""
    if (work / "data" / "ocr-cache").is_dir():
        shutil.copytree(work / "data" / "ocr-cache", ocr_cache, dirs_exist_ok=True)


def project_env(site_cache: Path, drop: tuple[str, ...] = (), **extra: str) -> dict:
    """The test's environment with its own DVC site cache and a git identity (for exp run)."""
    env = {k: v for k, v in os.environ.items() if not (drop and k.startswith(drop))}
    env.update(
        DVC_SITE_CACHE_DIR=str(site_cache),
        GIT_AUTHOR_NAME="e2e", GIT_AUTHOR_EMAIL="e2e@example.invalid",
        GIT_COMMITTER_NAME="e2e", GIT_COMMITTER_EMAIL="e2e@example.invalid",
        **extra,
    )
    return env


def clone_project(src: Path, dest: Path, memo: bool = False) -> Path:
    """A copy of a reproduced project (git history, dvc.lock, data/ and the DVC cache) at
    `dest`: `dvc status` there is clean, so a test changes one thing and re-runs only what
    depends on it. Files under data/ and .dvc/cache are hard links (every writer of the
    pipeline and DVC replace files, never rewrite them in place); the rest is copied, so
    a test may edit params.yaml or a set file in place. .dvc/tmp (locks, state) is not copied;
    with `memo`, its memo folder is (copied: what the source's runs computed, content-addressed,
    bench/memo.py), so the clone holds it as a project does after its own `dvc repro`: an
    experiment that changes one modality's chunking re-runs only that modality's answers and
    per-query columns. Without it the clone's memo starts empty."""
    from bench.project.layout import MEMO_DIR

    shared = (src / "data", src / ".dvc" / "cache")

    def place(s: str, d: str) -> None:
        if any(Path(s).is_relative_to(p) for p in shared):
            os.link(s, d)
        else:
            shutil.copy2(s, d)

    def ignore(folder: str, names: list[str]) -> list[str]:
        return ["tmp"] if Path(folder) == src / ".dvc" else []

    shutil.copytree(src, dest, symlinks=True, ignore=ignore, copy_function=place)
    if memo and (src / MEMO_DIR).is_dir():
        shutil.copytree(src / MEMO_DIR, dest / MEMO_DIR)
    return dest
