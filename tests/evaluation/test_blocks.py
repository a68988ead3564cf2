"""The evaluation block by block (bench.evaluation.blocks) gives what one block gives.

On a real evaluation of LoCoMo and MMLongBench-Doc (bm25 over the page/turn atoms) with
real queries marked failed, scores tied on purpose and, in a second variant, abstention:
one block, blocks of a few queries cut in memory, and blocks read out of core by DuckDB
from the Parquet files as the stages write them give the same dev.json document, the
same per-query table, the same plot CSVs and the same HTML report (drill-down included).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.evaluation.blocks import DuckDBBlocks, FrameBlocks, block_bounds, parquet_rows, queries_per_block, run_blocks
from bench.evaluation.evaluate import EvalInputs, EvalOptions, RunDescription, evaluate_run, per_query_table
from bench.ingest.atom_codes import served_ids, to_codes
from bench.params import MetricsParams
from bench.reporting.outputs import dev_report
from bench.reporting.thumbnails import CorpusFiles

K = 10
FAILED_PER_KIND = 4


@pytest.fixture(scope="module")
def real(real_run: dict, real_corpus: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    params, checked, entries = real_run["params"], real_run["checked"], real_run["entries"]
    served, cfg, ran, resolved = real_run["served"], real_run["cfg"], real_run["ran"], real_run["resolved"]
    gold, regions = resolved.gold, resolved.regions
    table = served_ids(served)
    # real queries marked failed, answerable and unanswerable, spread over both modalities
    ids = sorted(e["query_id"] for e in entries)
    by_id = {e["query_id"]: e for e in entries}
    ans = [q for q in ids if not by_id[q]["unanswerable"]]
    una = [q for q in ids if by_id[q]["unanswerable"]]
    failed = set(ans[::max(1, len(ans) // FAILED_PER_KIND)][:FAILED_PER_KIND] + una[::max(1, len(una) // FAILED_PER_KIND)][:FAILED_PER_KIND])
    run = ran.run.loc[~ran.run["query_id"].astype(str).isin(failed)].reset_index(drop=True)
    # ties: in every 5th query the scores of ranks 2-4 equal rank 1's (the tie rule orders them)
    qpos = run["query_id"].astype(str).map({q: i for i, q in enumerate(ids)}).to_numpy()
    top1 = run.groupby("query_id", sort=False, observed=True)["score"].transform("max")
    tie = (qpos % 5 == 0) & (run["rank"].to_numpy() <= 4)
    run["score"] = np.where(tie, top1, run["score"])
    responses = ran.latency.loc[~ran.latency["query_id"].astype(str).isin(failed)].reset_index(drop=True)
    folder = tmp_path_factory.mktemp("blocks")
    # the files as the retrieve stage writes them: atom codes, categorical query ids
    to_codes(run, table, "run").to_parquet(folder / "run.parquet")
    gold.to_parquet(folder / "gold.parquet")  # resolve gives codes already
    # read in core as the evaluate stage's step reads them (atoms stay codes)
    with run_blocks(folder / "run.parquet", folder / "gold.parquet", len(entries), in_core_rows=10**9) as blocks:
        in_core = blocks.source
    assert isinstance(in_core, FrameBlocks) and blocks.per_block is None
    inputs = EvalInputs(entries=entries, source=in_core, regions=regions, responses=responses,
                        failures=pd.DataFrame({"query_id": sorted(failed), "kind": "timeout"}), served=served,
                        gold_segments=resolved.segments_by_source(), invalid=[r for r in checked.invalid if r["split"] == "dev"],
                        sha256={})
    options = EvalOptions.from_params(MetricsParams(k=K, bootstrap_resamples=100))
    description = RunDescription(system=cfg.name, depth=cfg.depth, chunking=params["chunking"], concurrency=1, warm=False,
                                 adapter=cfg.adapter, warmup_queries=0, timeout_s=cfg.timeout_s, latency=None)
    corpus = CorpusFiles.from_manifest(real_corpus["manifest"], real_corpus["store"])
    return {"inputs": inputs, "options": options, "description": description, "folder": folder, "table": table,
            "frames": in_core, "failed": failed, "ids": ids, "by_id": by_id, "corpus": corpus}


def _outputs(real: dict, inputs: EvalInputs, options: EvalOptions) -> dict:
    """Everything the evaluate stage writes, as text or frames."""
    result = evaluate_run(inputs, options, real["description"])
    report = dev_report(result, inputs, k=K, max_k=100, calibration_recall=options.calibration_recall, corpus=real["corpus"])
    return {"doc": json.dumps(result.document, sort_keys=False, allow_nan=False), "table": per_query_table(result.query_table, K),
            "per_query": result.per_query, "plots": report.plots, "html": report.html, "blocks": result.blocks}


def _same(a: dict, b: dict) -> None:
    assert a["doc"] == b["doc"]
    pd.testing.assert_frame_equal(a["table"], b["table"])
    pd.testing.assert_frame_equal(a["per_query"], b["per_query"])
    assert a["plots"] == b["plots"]
    assert a["html"] == b["html"]


def _duckdb(real: dict, inputs: EvalInputs, per_block: int, tmp_path: Path) -> tuple[EvalInputs, DuckDBBlocks]:
    folder = real["folder"]
    source = DuckDBBlocks(folder / "run.parquet", folder / "gold.parquet", per_block, temp_dir=tmp_path, memory_limit="256MB", threads=1)
    return replace(inputs, source=source), source


@pytest.mark.parametrize("variant", ["calibrated", "abstention", "dev thresholds"])
def test_one_block_many_blocks_and_duckdb_agree(real: dict, tmp_path: Path, variant: str) -> None:
    inputs, options = real["inputs"], real["options"]
    if variant == "abstention":  # the system abstains on every 3rd answered query: the abstention rule
        responses = inputs.responses.assign(abstain=np.arange(len(inputs.responses)) % 3 == 0)
        inputs, options = replace(inputs, responses=responses), replace(options, abstains=True)
    else:  # a system that never abstains: thresholds calibrated over all queries of a modality
        inputs = replace(inputs, responses=inputs.responses.assign(abstain=False))
    if variant == "dev thresholds":  # the acceptance: the dev run's thresholds, no calibration
        top1 = real["frames"].run.loc[real["frames"].run["rank"] == 1, ["query_id", "score"]]
        modality = top1["query_id"].astype(str).map(lambda q: real["by_id"][q]["modality"])
        options = replace(options, thresholds={str(m): float(g.median()) for m, g in top1["score"].groupby(modality)})
    one = _outputs(real, inputs, options)
    assert one["blocks"] == 1
    doc = json.loads(one["doc"])
    rule = doc["run"]["false_recall_rule"]["pdf"]["rule"]
    assert rule == ("abstention" if variant == "abstention" else "calibrated")
    if variant == "dev thresholds":
        assert options.thresholds is not None
        assert doc["run"]["false_recall_rule"]["pdf"]["threshold_score"] == options.thresholds["pdf"]
    assert doc["ties"]["overall"]["queries_with_ties"] > 0
    assert one["per_query"]["failed"].sum() == 2 * FAILED_PER_KIND
    n = len(real["ids"])
    mods = [real["by_id"][q]["modality"] for q in real["ids"]]
    assert all(mods.count(m) > 131 for m in set(mods))  # each modality's queries span several blocks of either size
    if variant == "calibrated":  # blocks cut in memory: once (the rules of the other variants run block by block below, too)
        # blocks of 97 queries: boundaries fall inside each modality's run of query ids
        many = _outputs(real, replace(inputs, source=FrameBlocks(real["frames"].run, real["frames"].gold, per_block=97)), options)
        assert many["blocks"] == len(block_bounds(n, 97)) > 10
        _same(one, many)
    out_of_core, source = _duckdb(real, inputs, 131, tmp_path)
    with source:
        ooc = _outputs(real, out_of_core, options)
        spill = source._dir
    assert ooc["blocks"] == len(block_bounds(n, 131)) > 10
    assert spill is not None and not spill.exists()  # the partitioned copy is removed
    _same(one, ooc)


def test_blocks_cover_every_row_once(real: dict, tmp_path: Path) -> None:
    """Each block holds exactly the run and gold rows of its queries; the DuckDB blocks
    hold the rows of the in-memory ones, in (query, rank) order; rows_of fetches a few."""
    inputs, ids = real["inputs"], real["ids"]
    frames = list(FrameBlocks(real["frames"].run, real["frames"].gold, per_block=11).blocks(ids))
    _, source = _duckdb(real, inputs, 11, tmp_path)
    with source:
        ducks = list(source.blocks(ids))
        few = [ids[3], ids[-2]]
        run_few, gold_few = source.rows_of(few)
    assert [(b.start, b.stop) for b in frames] == [(b.start, b.stop) for b in ducks] == block_bounds(len(ids), 11)
    def named(frame: pd.DataFrame, key: list[str]) -> pd.DataFrame:  # categories differ: one per block in DuckDB's
        return frame.astype({"query_id": str}).sort_values(key).reset_index(drop=True)

    for f, d in zip(frames, ducks, strict=True):
        mine = set(ids[f.start:f.stop])
        assert set(f.run["query_id"].astype(str)) <= mine and set(f.gold["query_id"].astype(str)) <= mine
        assert list(d.run["query_id"].cat.categories) == ids[d.start:d.stop]  # categorical, as the stages write it
        key = ["query_id", "rank"]
        pd.testing.assert_frame_equal(named(f.run, key), named(d.run, key), check_dtype=False)
        gkey = ["query_id", "gold_idx", "atom"]
        pd.testing.assert_frame_equal(named(f.gold, gkey), named(d.gold, gkey), check_dtype=False)
    assert sum(len(b.run) for b in frames) == len(real["frames"].run) == parquet_rows(real["folder"] / "run.parquet")
    assert sum(len(b.gold) for b in ducks) == len(real["frames"].gold)
    assert set(run_few["query_id"]) <= set(few) and len(run_few) == int(real["frames"].run["query_id"].isin(few).sum())
    assert len(gold_few) == int(real["frames"].gold["query_id"].isin(few).sum())


def test_block_sizes() -> None:
    assert queries_per_block(1000, 10, 1000) is None  # fits: one block
    assert queries_per_block(1001, 10, 1000) == 9  # 100 rows a query
    assert queries_per_block(10**8, 10**6, 2 * 10**7) == 200_000
    assert queries_per_block(500, 1, 10) is None  # one query is one block anyway
    assert queries_per_block(10**6, 10, 5) == 1
    with pytest.raises(ValueError, match="in_core_rows"):
        queries_per_block(10, 1, 0)
    assert block_bounds(10, None) == [(0, 10)]
    assert block_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert block_bounds(0, 4) == [(0, 0)]


KILLED_CHILD = r"""
import sys, time
from pathlib import Path
import numpy as np, pandas as pd
from bench.evaluation.blocks import DuckDBBlocks
folder, parent = Path(sys.argv[1]), Path(sys.argv[2])
queries = [f"q{i:04d}" for i in range(200)]
with DuckDBBlocks(folder / "run.parquet", folder / "gold.parquet", 50, temp_dir=parent, memory_limit="128MB", threads=1) as src:
    first = next(iter(src.blocks(queries)))  # the partitioned copy is on disk now
    print(len(first.run), flush=True)
    time.sleep(600)
"""


def test_copies_of_a_killed_evaluation_are_removed_by_the_next(tmp_path: Path) -> None:
    """A kill -9 in the middle of an out-of-core evaluation left /tmp/eval-blocks-* that no
    later run removed. Now the next DuckDBBlocks in the same parent removes it, and never
    the copy of an evaluation that is still running."""
    import signal
    import subprocess
    import sys

    from tests.conftest import ROOT

    rng = np.random.default_rng(0)
    queries = [f"q{i:04d}" for i in range(200)]
    run = pd.DataFrame({"query_id": np.repeat(queries, 20), "atom_code": rng.integers(0, 10_000, 4000),
                        "rank": np.tile(np.arange(1, 21), 200), "score": rng.random(4000)})
    gold = pd.DataFrame({"query_id": queries, "gold_idx": 0, "atom_code": rng.integers(0, 10_000, 200)})
    run.to_parquet(tmp_path / "run.parquet", index=False)
    gold.to_parquet(tmp_path / "gold.parquet", index=False)
    parent = tmp_path / "eval-tmp"
    env = {"PYTHONPATH": str(ROOT), "PATH": ""}
    procs = [subprocess.Popen([sys.executable, "-c", KILLED_CHILD, str(tmp_path), str(parent)], stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    try:
        for proc in procs:
            assert int(proc.stdout.readline()) == 50 * 20  # each is inside its first block
        dead, alive = procs
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        left = {p.name for p in parent.glob("eval-blocks-*")}
        assert {n.split("-")[2] for n in left} == {str(dead.pid), str(alive.pid)}
        dead_copy = next(parent.glob(f"eval-blocks-{dead.pid}-*"))
        assert sum(f.stat().st_size for f in dead_copy.rglob("*") if f.is_file()) > 0  # what the kill left behind
        with DuckDBBlocks(tmp_path / "run.parquet", tmp_path / "gold.parquet", 50, temp_dir=parent) as src:
            assert src.removed_stale == [dead_copy.name]
            assert not dead_copy.exists() and any(parent.glob(f"eval-blocks-{alive.pid}-*"))
            assert len(list(src.blocks(queries))) == 4
        # its own copy is gone on a clean exit; the running one's is kept
        assert {p.name.split("-")[2] for p in parent.glob("eval-blocks-*")} == {str(alive.pid)}
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    # the survivor, killed too, is removed by the next run
    with DuckDBBlocks(tmp_path / "run.parquet", tmp_path / "gold.parquet", 50, temp_dir=parent) as src:
        assert len(src.removed_stale) == 1
    assert list(parent.glob("eval-blocks-*")) == []


def test_unlocked_copies_are_removed_only_when_old(tmp_path: Path) -> None:
    """A copy with no lock file (left by the version before the lock, or killed between
    creating and locking its folder) is removed once an hour old, never younger."""
    import os

    from bench.evaluation.blocks import UNLOCKED_STALE_S, remove_stale_copies

    young, old = tmp_path / "eval-blocks-abc", tmp_path / "eval-blocks-def"
    for folder in (young, old):
        (folder / "run").mkdir(parents=True)
        (folder / "run" / "data_0.parquet").write_bytes(b"x" * 100)
    os.utime(old, (os.path.getatime(old), os.path.getmtime(old) - UNLOCKED_STALE_S - 1))
    assert remove_stale_copies(tmp_path) == ["eval-blocks-def"]
    assert young.exists() and not old.exists()
