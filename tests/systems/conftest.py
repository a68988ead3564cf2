"""Fixtures for the system adapter tests: small atoms, entries, a served-atoms folder."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ROOT


def make_atoms() -> pd.DataFrame:
    rows = []
    for i in range(6):
        rows.append({
            "atom_id": f"locomo:conv-1:session-1#t{i}", "source_id": "locomo:conv-1:session-1", "dataset": "locomo",
            "modality": "conversation", "text": f"turn {i} about apples and pears number {i}", "holder": "locomo:conv-1",
            "observed_at": pd.Timestamp("2023-05-01T10:00:00Z"), "extent": json.dumps({"turn_start": i + 1, "turn_end": i + 1}),
            "turn_start": i + 1, "turn_end": i + 1, "char_start": 0, "char_end": 10,
        })
    return pd.DataFrame(rows)


def entry(qid: str, question: str, modality: str = "conversation") -> dict:
    """A full annotated entry, gold and split included: the harness must not pass those on."""
    return {
        "query_id": qid, "modality": modality, "question": question, "answer": f"SECRET-ANSWER-{qid}",
        "answer_format": "str", "gold": [{"source_id": "locomo:conv-1:session-1", "region": {"turn": 2}}],
        "scope": {"holder": "locomo:conv-1", "session": None, "scenario": "conversation-qa"},
        "as_of": "2023-05-02T00:00:00+00:00", "unanswerable": False,
        "origin": {"dataset": "snap-research/locomo", "revision": "r", "item": "i", "license": "l"}, "split": "dev",
    }


@pytest.fixture
def atoms() -> pd.DataFrame:
    return make_atoms()


@pytest.fixture
def served_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "served"
    (folder / "conversation").mkdir(parents=True)  # data/served layout: <modality>/<dataset>.parquet
    make_atoms().to_parquet(folder / "conversation" / "locomo.parquet", index=False)
    return folder


def serve_argv(served: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "bench.systems.serve", "tests.systems.fake:build", "--atoms", str(served), *extra]


def bwrap_usable() -> bool:
    """Whether command systems get bubblewrap here (`system.sandbox: auto` picks it)."""
    import os

    from bench.systems.sandbox.isolation import choose_isolation
    from bench.systems.sandbox.workdir import SandboxError

    try:
        return choose_isolation("auto", path_env=os.environ.get("PATH")).kind == "bwrap"
    except SandboxError:
        return False


def path_without_bwrap(path: str) -> str:
    """PATH with the system's bubblewrap hidden, as on a machine without the package: each folder that
    holds a bwrap is replaced by a folder of links to its other programs (made once per process)."""
    import os
    import tempfile

    out = []
    for d in path.split(os.pathsep):
        if d and os.path.exists(os.path.join(d, "bwrap")):
            shadow = Path(tempfile.gettempdir()) / f"bench-no-bwrap-{os.getpid()}" / d.strip("/").replace("/", "_")
            if not shadow.is_dir():
                import atexit
                import shutil

                shadow.mkdir(parents=True)
                atexit.register(shutil.rmtree, shadow.parent, True)
                for name in os.listdir(d):
                    if name != "bwrap":
                        (shadow / name).symlink_to(os.path.join(d, name))
            d = str(shadow)
        out.append(d)
    return os.pathsep.join(out)


@pytest.fixture(scope="module")
def served(real_corpus) -> dict:
    """Real atoms of three MMLongBench-Doc PDFs and three LoCoMo sessions, with their corpus."""
    from tests.ingest.chunks import chunk_all

    segments = real_corpus["segments"]
    pdfs = sorted(segments.loc[segments["modality"] == "pdf", "source_id"].unique())[:3]
    sessions = sorted(segments.loc[segments["modality"] == "conversation", "source_id"].unique())[:3]
    segments = segments[segments["source_id"].isin([*pdfs, *sessions])]
    atoms = chunk_all(segments, {"pdf": {"strategy": "page"}, "conversation": {"strategy": "turn"}})
    return {"atoms": atoms, "segments": segments, "manifest": list(real_corpus["manifest"].rows), "store": real_corpus["store"]}


def common_atoms(frames: dict) -> pd.DataFrame:
    cols = ["atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at"]
    return pd.concat([f[cols] for f in frames.values()], ignore_index=True)


def open_for(cfg_block: dict, served: dict, temp_root: Path, host_env: dict | None = None, **more):
    """The session's open_system for a command system of `cfg_block` over the real `served` atoms."""
    from bench.systems.config import check_system
    from bench.systems.sandbox.workdir import protected_paths
    from bench.systems.session import open_system

    cfg = check_system({"name": "probe", "adapter": "command", **cfg_block})
    return open_system(
        cfg, served["atoms"], common_atoms(served["atoms"]), segments=served["segments"], manifest_rows=served["manifest"],
        store=served["store"], root=ROOT, temp_root=temp_root, protected=protected_paths(ROOT),
        host_env=host_env if host_env is not None else dict(os.environ), **more,
    )



@pytest.fixture(scope="session")
def hostile_shared():
    """The folder every user can read, with the launchers' and systems' copies nobody runs (tests/systems/hostile_launch.py)."""
    import shutil

    from tests.systems.hostile_launch import make_shared

    folder = make_shared()
    yield folder
    shutil.rmtree(folder.path, ignore_errors=True)


__all__ = ["ROOT", "bwrap_usable", "entry", "make_atoms", "open_for", "path_without_bwrap", "serve_argv"]
