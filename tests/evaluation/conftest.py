"""The real run the evaluation tests share: LoCoMo and MMLongBench-Doc dev entries, the
built-in bm25 over the page/turn atoms, gold resolved, regions typed and placed by the stages' step
(bench.gold.resolve.resolve_frames)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
import yaml

from bench.annotations.validate import validate
from bench.gold.resolve import resolve_frames
from bench.systems.config import check_system, make_adapter
from bench.systems.run import SYSTEM_COLUMNS, run_queries
from tests.conftest import ROOT
from tests.ingest.chunks import chunk_all


@pytest.fixture(scope="session")
def real_run(real_corpus: dict) -> dict[str, Any]:
    """params, checked sets, dev entries, served atoms, the system's config and adapter, its
    run (RunResult) and its resolved gold (bench.gold.table.Resolved: gold as atom codes, typed and
    placed regions, the gold sources' segments). Read only: tests copy what they change."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    segments = real_corpus["segments"]
    sets = [ROOT / "bench" / "sets" / f"{key}.jsonl" for key in ("locomo", "mmlongbench")]
    checked = validate(sets, real_corpus["manifest"], segments, root=ROOT)
    entries = checked.split("dev")
    served = chunk_all(segments, params["chunking"])
    atoms = pd.concat([f[SYSTEM_COLUMNS] for f in served.values()], ignore_index=True)
    cfg = check_system(params["system"])
    adapter = make_adapter(cfg, atoms)
    ran = run_queries(adapter, entries, cfg.depth, timeout_s=cfg.timeout_s, warmup=0,
                      known_atoms=set(atoms["atom_id"].astype(str)))
    found = resolve_frames(entries, served, segments)  # the resolve stage's step
    return {"params": params, "segments": segments, "checked": checked, "entries": entries, "served": served,
            "cfg": cfg, "adapter": adapter, "ran": ran, "resolved": found}
