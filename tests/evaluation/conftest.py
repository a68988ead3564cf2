"""The real run the evaluation tests share: LoCoMo and MMLongBench-Doc dev entries, the
built-in bm25 over the page/turn atoms, gold resolved, regions typed and placed by the stages' step
(bench.gold.resolve.resolve_frames)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from bench.annotations.validate import validate
from bench.gold.resolve import resolve_frames
from bench.systems.config import check_system, make_adapter
from bench.systems.run import SYSTEM_COLUMNS, run_queries
from tests.conftest import ROOT, built_once
from tests.ingest.chunks import chunk_all


@pytest.fixture(scope="session")
def real_run(real_corpus: dict, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """params, checked sets, dev entries, served atoms, the system's config and adapter (the built-in
    unscoped `bm25`, whatever params.yaml's default: it hands over other holders' and future atoms,
    which the measures under test must see), its run (RunResult) and its resolved gold (bench.gold.table.Resolved: gold as atom codes, typed and
    placed regions, the gold sources' segments). Read only: tests copy what they change.

    Run once per test run (built_once: one xdist worker runs the queries and pickles what it
    found, every worker loads it); each worker builds its own adapter over the same atoms."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    segments = real_corpus["segments"]

    def build(folder: Path) -> None:
        sets = [ROOT / "bench" / "sets" / f"{key}.jsonl" for key in ("locomo", "mmlongbench")]
        checked = validate(sets, real_corpus["manifest"], segments, root=ROOT)
        entries = checked.split("dev")
        served = chunk_all(segments, params["chunking"])
        atoms = system_atoms(served)
        cfg = check_system({**params["system"], "name": "bm25"})  # unscoped: its leaks are there to be measured
        ran = run_queries(make_adapter(cfg, atoms), entries, cfg.depth, timeout_s=cfg.timeout_s, warmup=0,
                          known_atoms=set(atoms["atom_id"].astype(str)))
        found = resolve_frames(entries, served, segments)  # the resolve step
        done = {"checked": checked, "entries": entries, "served": served, "cfg": cfg, "ran": ran, "resolved": found}
        (folder / "run.pkl").write_bytes(pickle.dumps(done))

    shared = pickle.loads((built_once(tmp_path_factory, "real-run", build) / "run.pkl").read_bytes())
    adapter = make_adapter(shared["cfg"], system_atoms(shared["served"]))
    return {"params": params, "segments": segments, **shared, "adapter": adapter}


def system_atoms(served: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The atoms a system is given: every modality's served atoms, in the system's columns."""
    return pd.concat([f[SYSTEM_COLUMNS] for f in served.values()], ignore_index=True)
