"""End to end: the evaluate stage out of core (DuckDB query blocks) writes the same files
as in core.

The session's reproduced project (MMLongBench-Doc and LoCoMo) evaluated its run in one
block (its run is far below params executor.in_core_rows). A clone of it gets
`executor.in_core_rows` so small that the run is cut into a dozen blocks, which is no change
for DVC (`dvc status` stays clean: the executor block is no DVC param); re-running
`python -m stages.evaluate` there reads run and gold through DuckDB block by block and
writes byte-identical dev.json, per-query table, plot tables, dev.md and dev.html.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from tests.project_copy import clone_project, project_env, run

pytestmark = pytest.mark.e2e

#: blocks the clone's run is cut into (each block's setup costs O(atoms): a dozen keeps the test short)
BLOCKS = 12

OUTPUTS = ["reports/metrics/dev.json", "reports/per_query/dev.parquet", "reports/dev.md", "reports/dev.html"]


def _outputs(work: Path) -> dict[str, bytes]:
    files = [*OUTPUTS, *(p.relative_to(work).as_posix() for p in sorted((work / "reports/plots").glob("*.csv")))]
    return {f: (work / f).read_bytes() for f in files}


def test_out_of_core_evaluation_writes_the_same_files(tmp_path: Path, reproduced: Path) -> None:
    in_core = _outputs(reproduced)
    assert any(f.endswith(".csv") for f in in_core)
    work = clone_project(reproduced, tmp_path / "ooc")
    spill = tmp_path / "tmp"  # where DuckDB's partitioned copy goes (the system's temporary folder)
    spill.mkdir()
    env = project_env(tmp_path / "site-cache", TMPDIR=str(spill))
    params = yaml.safe_load((work / "params.yaml").read_text())
    import pyarrow.parquet as pq

    tiny = pq.ParquetFile(work / "data/runs/dev.parquet").metadata.num_rows // BLOCKS  # run rows per block
    params["executor"] = {**params.get("executor", {}), "in_core_rows": tiny}
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert run(["dvc", "status"], work, env).stdout.strip() == "Data and pipelines are up to date."
    for f in OUTPUTS:  # the stage must write them anew
        (work / f).unlink()

    proc = run([sys.executable, "-m", "stages.evaluate"], work, env)
    found = re.search(r"evaluate: out of core: (\d+) run rows > executor.in_core_rows (\d+): (\d+) query blocks of <= (\d+) queries",
                      proc.stderr)
    assert found, proc.stderr
    rows, limit, blocks, per_block = map(int, found.groups())
    assert limit == tiny and rows > 10 * tiny and blocks >= BLOCKS
    out = _outputs(work)
    assert out.keys() == in_core.keys()
    assert [f for f in out if out[f] != in_core[f]] == []
    assert "out of core" not in out["reports/metrics/dev.json"].decode()
    assert not list(spill.glob("eval-blocks-*"))  # DuckDB's partitioned copy is gone
