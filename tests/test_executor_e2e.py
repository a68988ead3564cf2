"""End to end: the pipeline with executor kind local and kind dask gives the same outputs.

The session's reproduced project (MMLongBench-Doc and LoCoMo, page OCR off as
copy_project sets it) ran `dvc repro` with `executor.kind: local`; a clone of it, its dev
questions cut to one LoCoMo conversation and six MMLongBench documents
(tests/systems/small_sets.py: the corpus stays whole), re-runs every stage (`dvc repro -f`)
with `kind: dask` on a LocalCluster of 2 worker processes on loopback that this test starts
and passes through `executor.address`. The manifest, every segment and atom file are
byte-identical to the session's local run, and dev.json is identical apart from latency to a
local run on the same cut questions. Switching the kind afterwards re-runs no stage (`dvc
status` clean): the executor is no DVC param.
OCR through Dask workers is checked on real screenshots (test_ocr_through_dask); a worker
killed in the middle of the extract@pdf stage is replaced and the stage completes with the
same segments (test_a_worker_killed_mid_extraction).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import MIRROR, need_mirror
from tests.project_copy import clone_project, copy_project, project_env, run
from tests.systems.small_sets import cut_dev, dev_groups

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster() -> Any:
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", silence_logs=40) as c:
        yield c


def _set_executor(work: Path, block: dict) -> None:
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["executor"] = block
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _without_latency(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _without_latency(v) for k, v in doc.items() if "latency" not in k}
    if isinstance(doc, list):
        return [_without_latency(v) for v in doc]
    return doc


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _cut_questions(work: Path) -> None:
    """`work`'s dev questions cut to one LoCoMo conversation and six MMLongBench documents (the first by name)."""
    conversation = dev_groups(work, "locomo")[0]
    documents = set(dev_groups(work, "mmlongbench")[:6])
    assert cut_dev(work, "locomo", lambda g: g == conversation) > 0 and cut_dev(work, "mmlongbench", documents.__contains__) > 0


def test_local_and_dask_give_the_same_outputs(tmp_path: Path, cluster: Any, reproduced: Path) -> None:
    """The session's reproduced project ran every stage with kind local; a clone of it with the
    dev questions cut re-runs every stage (`dvc repro -f`) with kind dask on the test's
    LocalCluster, and another with the same cut questions re-runs the stages they change with
    kind local (retrieve and evaluate of the whole dev split on Dask cost a minute)."""
    local = reproduced  # read only here
    dask = clone_project(reproduced, tmp_path / "dask")
    _cut_questions(dask)
    _set_executor(dask, {"kind": "dask", "address": cluster.scheduler_address, "workers": None})
    env_dask = project_env(tmp_path / "site-cache-dask")
    log = run(["dvc", "repro", "-f"], dask, env_dask)
    assert "Running stage 'extract@pdf'" in log.stdout + log.stderr
    cut = clone_project(reproduced, tmp_path / "local-cut")
    _cut_questions(cut)
    assert "Running stage 'retrieve'" in run(["dvc", "repro"], cut, project_env(tmp_path / "site-cache-cut")).stdout
    # the builtin system answered on the Dask workers, the local runs in process
    ran_dask = json.loads((dask / "data/runs/system.json").read_text())
    for ran_local in (json.loads((w / "data/runs/system.json").read_text()) for w in (local, cut)):
        assert (ran_local["executor"], ran_local["answered_on"], ran_local["in_flight"]) == ("local", "here", 1)
    assert (ran_dask["executor"], ran_dask["answered_on"], ran_dask["in_flight"]) == ("dask", "dask workers", 2)

    assert (local / "bench/corpus/manifest.jsonl").read_bytes() == (dask / "bench/corpus/manifest.jsonl").read_bytes()
    for folder in ("data/segments", "data/atoms"):
        a, b = _files(local / folder), _files(dask / folder)
        assert a and a.keys() == b.keys()
        assert [k for k in a if a[k] != b[k]] == [], folder
    assert any(k.startswith("pdf/") for k in _files(local / "data/segments"))
    assert any(k.startswith("pdf/") for k in _files(local / "data/atoms"))  # <modality>/<dataset>.parquet
    dev_a = json.loads((cut / "reports/metrics/dev.json").read_text())
    dev_b = json.loads((dask / "reports/metrics/dev.json").read_text())
    assert "latency_p50_ms" in dev_a["overall"] and {"pdf", "conversation"} <= set(dev_a["by_modality"])
    assert all(block["recall@10"]["n"] > 0 for block in dev_a["by_modality"].values())  # both modalities kept questions
    assert _without_latency(dev_a) == _without_latency(dev_b)

    # switching the executor is no change for DVC: nothing to re-run, in either direction
    switched = clone_project(reproduced, tmp_path / "local")
    _set_executor(switched, {"kind": "dask", "address": cluster.scheduler_address, "workers": 1})
    assert run(["dvc", "status"], switched, project_env(tmp_path / "site-cache-local")).stdout.strip() == "Data and pipelines are up to date."
    _set_executor(dask, {"kind": "local", "address": None, "workers": None})
    assert run(["dvc", "status"], dask, env_dask).stdout.strip() == "Data and pipelines are up to date."


def test_bad_executor_param_stops_the_stage_in_one_line(tmp_path: Path) -> None:
    work = copy_project(tmp_path / "p", datasets=["locomo"])
    _set_executor(work, {"kind": "spark"})
    proc = run([sys.executable, "-m", "stages.chunk"], work, project_env(tmp_path / "site"), ok=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("error: params.yaml: executor.kind: must be one of")


def test_ocr_through_dask_equals_serial(tmp_path: Path, cluster: Any) -> None:
    """Cache misses of ocr_many run on the Dask workers; the boxes equal a serial run's
    and every result lands in the cache (written by the caller)."""
    need_mirror("screenagent_test")
    from distributed import Client

    from bench.executor import DaskExecutor, using
    from bench.modalities.ocr import OcrCache, ocr_many

    screens = sorted((MIRROR / "screenagent_test/data/ScreenAgent/test").glob("*/images/*.jpg"))[:2]  # one per worker
    assert len(screens) == 2
    serial = ocr_many(screens, workers=1, cache=False)
    cache = OcrCache(tmp_path / "cache")
    with Client(cluster) as client, using(DaskExecutor(client)):
        distributed = ocr_many(screens, cache=cache)
    assert distributed == serial and sum(len(r.boxes) for r in serial) > 0
    assert (cache.hits, cache.misses) == (0, 2) and len(list((tmp_path / "cache").rglob("*.json"))) == 2


def test_a_worker_killed_mid_extraction_is_replaced_and_the_stage_completes(tmp_path: Path, reproduced: Path) -> None:
    """`python -m stages.extract pdf` on a LocalCluster of 2 workers; while its tasks (the
    text layer of one MMLongBench-Doc document each) are on the cluster, the process of a
    worker that holds some is killed with SIGKILL. Dask re-runs them on the other worker,
    the nanny starts a new worker process, the stage exits 0, and its segments are
    byte-identical to the session's local run."""
    import os
    import shutil
    import signal
    import subprocess
    import time

    from distributed import Client, LocalCluster

    work = clone_project(reproduced, tmp_path / "killed")
    shutil.rmtree(work / "data/segments/pdf")  # the stage must write them anew
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", silence_logs=50) as cluster, Client(cluster) as client:
        _set_executor(work, {"kind": "dask", "address": cluster.scheduler_address, "workers": None})
        pids = client.run(os.getpid)  # worker address -> process id
        env = project_env(tmp_path / "site-cache")
        stage = subprocess.Popen([sys.executable, "-m", "stages.extract", "pdf"], cwd=work, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        victim, held = None, 0
        deadline = time.monotonic() + 300  # a bound against hanging, not a timing assertion
        while victim is None and stage.poll() is None and time.monotonic() < deadline:
            busy = {addr: len(keys) for addr, keys in client.processing().items() if keys}
            if busy:
                addr = max(busy, key=busy.__getitem__)
                victim, held = pids[addr], busy[addr]
                os.kill(victim, signal.SIGKILL)
            else:
                time.sleep(0.005)
        out, err = stage.communicate(timeout=600)
        assert victim is not None, "the stage finished before a task was seen on the cluster"
        assert held >= 1 and stage.returncode == 0, err
        while time.monotonic() < deadline and len(client.run(os.getpid)) < 2:
            time.sleep(0.2)
        after = set(client.run(os.getpid).values())
        assert victim not in after and len(after) == 2  # the dead worker was replaced
    mine, local = _files(work / "data/segments/pdf"), _files(reproduced / "data/segments/pdf")
    assert mine and mine == local
