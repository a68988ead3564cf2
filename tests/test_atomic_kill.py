"""kill -9 in the middle of a stage's write leaves the old output, never a truncated one.

A real stage (chunk, on real LoCoMo segments) runs in a subprocess inside a temp copy
of the project. A hook makes its writer stop half way through an output (a parquet
file half written, or a JSON file written but not yet renamed) and signals; the test
then kills the process with SIGKILL and inspects the outputs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import ROOT

DRIVER = r'''
import io, os, runpy, sys, time
ready = os.environ["KILL_READY"]

def block():
    open(ready, "w").close()
    while True:
        time.sleep(60)

if os.environ["KILL_MODE"] == "parquet":
    import pandas as pd
    original = pd.DataFrame.to_parquet
    def half_then_block(self, path, *args, **kwargs):
        buf = io.BytesIO()
        original(self, buf, *args, **kwargs)
        data = buf.getvalue()
        with open(path, "wb") as fh:  # the path write_parquet gave: its temp file
            fh.write(data[: len(data) // 2])
            fh.flush()
            os.fsync(fh.fileno())
        block()
    pd.DataFrame.to_parquet = half_then_block
else:
    os.fsync = lambda fd: block()  # atomic_writer: data written, not yet renamed

sys.argv = ["stages.chunk"]
runpy.run_module("stages.chunk", run_name="__main__")
'''


@pytest.fixture
def project(tmp_path: Path, real_corpus: dict) -> Path:
    work = tmp_path / "project"
    shutil.copytree(ROOT / "bench", work / "bench", ignore=shutil.ignore_patterns("sets", "__pycache__"))
    shutil.copytree(ROOT / "stages", work / "stages", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "params.yaml", work / "params.yaml")
    segs = real_corpus["segments"]
    (work / "data" / "segments" / "conversation").mkdir(parents=True)  # <modality>/<key>.parquet
    segs[segs["dataset"] == segs.loc[segs["modality"] == "conversation", "dataset"].iloc[0]].to_parquet(work / "data" / "segments" / "conversation" / "locomo.parquet", index=False)
    run_stage(work)  # the old outputs
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["chunking"]["conversation"]["strategy"] = "window"  # the new run writes different bytes
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return work


def run_stage(work: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "stages.chunk"], cwd=work, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def snapshot(folder: Path) -> dict[str, bytes]:
    """relative path -> bytes of every file under `folder` (atoms: <modality>/<dataset>.parquet)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def kill_mid_write(work: Path, mode: str) -> None:
    ready = work / "ready"
    env = {**os.environ, "KILL_READY": str(ready), "KILL_MODE": mode}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300  # a bound against hanging, not a timing assertion
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the stage never reached its write"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("mode", ["parquet", "text"])
def test_kill_mid_write_keeps_old_outputs(project, mode):
    atoms = project / "data" / "atoms"
    old = snapshot(atoms)
    assert set(old) == {"conversation/locomo.parquet", "stats.json"}
    kill_mid_write(project, mode)
    after = snapshot(atoms)
    visible = {n for n in after if not Path(n).name.startswith(".")}
    assert visible == set(old), "no new or truncated file under the output name"
    if mode == "parquet":
        assert after["conversation/locomo.parquet"] == old["conversation/locomo.parquet"]
    assert after["stats.json"] == old["stats.json"]
    pd.read_parquet(atoms / "conversation" / "locomo.parquet")  # whole and readable
    json.loads((atoms / "stats.json").read_text())
    # the half-written data exists only as a hidden temp file beside the output
    temps = [Path(n).name for n in after if Path(n).name.startswith(".")]
    assert temps and all(n.endswith(".tmp") for n in temps)
    # a rerun simply works and writes the new outputs
    run_stage(project)
    new = pd.read_parquet(atoms / "conversation" / "locomo.parquet")
    assert new["atom_id"].str.contains("#w").all()
