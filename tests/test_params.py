"""params.yaml is checked against one schema before any stage touches an output."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import yaml

from bench.corpus_sources import datasets
from bench.io import NonFiniteError, write_json
from bench.modalities import modalities
from bench.params import (
    BYTES_PER_RUN_ROW,
    IN_CORE_ROWS,
    MAX_WINDOW_REPEATS,
    ExecutorParams,
    MetricsParams,
    Params,
    ParamsError,
    SystemParams,
    check_executor,
    check_extract,
    check_params,
)
from tests.conftest import ROOT
from tests.project_copy import copy_project, project_env


def real() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))


def check(doc: dict, memory_bytes: int | None = None) -> Params:
    return check_params(doc, modalities(), set(datasets()), memory_bytes)


def with_(path: str, value, doc: dict | None = None) -> dict:
    doc = copy.deepcopy(doc or real())
    *parents, leaf = path.split(".")
    node = doc
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value
    return doc


def refused(doc: dict, memory_bytes: int | None = None) -> str:
    with pytest.raises(ParamsError) as err:
        check(doc, memory_bytes)
    return str(err.value)


def test_the_committed_params_give_the_typed_configuration():
    doc = real()
    cfg = check(doc)
    assert cfg.metrics == MetricsParams(**doc["metrics"])
    assert cfg.system == SystemParams(**doc["system"])
    assert cfg.executor == ExecutorParams(**doc["executor"])
    assert cfg.fetch.mirror_dirs == tuple(doc["fetch"]["mirror_dirs"])
    for modality, block in doc["chunking"].items():
        assert cfg.chunking[modality] == {**cfg.chunking[modality], **block}  # as written, plus the declared defaults
    assert cfg.extraction == doc["extraction"]


def test_every_default_is_filled_in_once():
    """A params.yaml with only the required keys: every other value is its declared default."""
    doc = {"datasets": "all", "fetch": {"mirror_dirs": ["m"]}, "chunking": {}, "system": {"name": "bm25"}, "metrics": {"k": 10}}
    cfg = check(doc)
    assert (cfg.metrics.bootstrap_resamples, cfg.metrics.bootstrap_seed, cfg.metrics.calibration_recall) == (1000, 0, 0.9)
    assert (cfg.system.depth, cfg.system.timeout_s, cfg.system.sandbox, cfg.fetch.download) == (100, 30.0, "auto", "auto")
    assert cfg.executor == ExecutorParams("local", None, None, IN_CORE_ROWS)
    assert cfg.local_datasets == ()
    for name, mod in modalities().items():
        assert cfg.chunking[name] == {"strategy": mod.strategies[0], **{k: o.default for k, o in mod.chunk_options.items()}}
    # the committed params.yaml writes the defaults out: the two agree
    written = real()
    for name, block in written["chunking"].items():
        assert check(doc).chunking[name] == {**check(doc).chunking[name], **block}, name
    assert cfg.extraction == written["extraction"]
    assert cfg.metrics.budget == {name: mod.budget.default for name, mod in modalities().items()}
    assert written["metrics"]["budget"] == cfg.metrics.budget  # written out in params.yaml, as the modalities declare


def test_the_budget_is_checked_per_modality():
    """metrics.budget: a positive amount per registered modality, in its bounds; the others keep their default."""
    some = next(iter(modalities()))
    cfg = check(with_("metrics.budget", {some: 123.5}))
    assert cfg.metrics.budget[some] == 123.5 and len(cfg.metrics.budget) == len(modalities())
    assert refused(with_("metrics.budget", {"pfd": 1})).startswith("params.yaml: metrics.budget.pfd: unknown key (did you mean 'pdf'?)")
    assert refused(with_("metrics.budget", {some: 0})) == f"params.yaml: metrics.budget.{some}: must be > 0, got 0"
    assert refused(with_("metrics.budget", {some: "lots"})) == f"params.yaml: metrics.budget.{some}: must be a number, got 'lots'"
    assert refused(with_("metrics.budget", [1])) == "params.yaml: metrics.budget: must be a mapping of modality -> amount, got [1]"
    high = modalities()[some].budget.high
    over = high * 10
    assert refused(with_("metrics.budget", {some: over})) == (f"params.yaml: metrics.budget.{some}: must be <= {high:g}, "
                                                            f"got {str(over) if isinstance(over, float) else repr(over)}")


def test_the_system_block_has_one_typed_form():
    """The stages read `system` only through SystemParams: YAML's bare `off` is "off", one code path a tuple,
    seconds floats; bench.systems.config.check_system adds the systems' own rules and no default of its own;
    the chunking block as written is what a run records."""
    from bench.systems.config import check_system

    block = yaml.safe_load("name: x\nadapter: command\nentry: '{python} s.py'\nsandbox: off\ncode: s.py\ntimeout_s: 5\n")
    cfg = check(with_("system", block))
    assert (cfg.system.sandbox, cfg.system.code, cfg.system.timeout_s, cfg.system.depth) == ("off", ("s.py",), 5.0, 100)
    assert isinstance(cfg.system.timeout_s, float) and check_system(cfg.system) is cfg.system
    with pytest.raises(ParamsError, match=r"^params.yaml: system.entry: the command adapter needs an entry"):
        check_system(cfg.system.__class__(name="x", adapter="command"))
    with pytest.raises(ParamsError, match=r"^params.yaml: system.name: unknown built-in system 'bm26'"):
        check_system({"name": "bm26"})
    written = with_("chunking", {"image": None, "pdf": {"strategy": "window"}})
    assert check(written).chunking_written == {"image": None, "pdf": {"strategy": "window"}}
    assert check(written).chunking["pdf"]["window_tokens"] == 200  # the typed block: defaults filled in


def test_nan_and_inf_refused():
    # YAML `.nan` / `.inf` parse to float nan / inf
    for text in (".nan", ".inf", "-.inf"):
        value = yaml.safe_load(text)
        assert refused(with_("metrics.calibration_recall", value)).startswith("params.yaml: metrics.calibration_recall: must be a finite number")


def test_misspelled_key_refused_with_the_close_one():
    doc = real()
    doc["chunking"]["pdf"]["stratgy"] = "window"
    msg = refused(doc)
    assert msg.startswith("params.yaml: chunking.pdf.stratgy: unknown key (did you mean 'strategy'?)")
    assert "\n" not in msg
    assert refused(with_("metrics.kk", 10)).startswith("params.yaml: metrics.kk: unknown key (did you mean 'k'?)")
    assert refused(with_("chunkin", {})).startswith("params.yaml: chunkin: unknown key (did you mean 'chunking'?)")


def test_k_beyond_depth_and_non_integer_k_refused():
    assert refused(with_("metrics.k", 500)) == (
        "params.yaml: metrics.k: 500 is more than system.depth (100): recall@k would count atoms never retrieved")
    assert refused(with_("metrics.k", 10.7)) == "params.yaml: metrics.k: must be a whole number, got 10.7"
    assert refused(with_("metrics.k", 0)) == "params.yaml: metrics.k: must be >= 1, got 0"
    assert refused(with_("metrics.k", True)).startswith("params.yaml: metrics.k: must be a whole number")
    assert check(with_("metrics.k", 100)).metrics.k == 100


def test_other_values_refused():
    cases = {
        "chunking.pdf.strategy": ("windw", "chunking.pdf.strategy: must be one of ['page', 'window', 'whole']"),
        "chunking.pdf.window_tokens": (150.5, "chunking.pdf.window_tokens: must be a whole number"),
        "chunking.conversation.overlap_turns": (5, "chunking.conversation.overlap_turns: must be smaller than window_turns (5)"),
        "chunking.video.window_seconds": (float("nan"), "chunking.video.window_seconds: must be a finite number"),
        "system.depth": (0, "system.depth: must be >= 1"),
        "system.sandbox": ("maybe", "system.sandbox: must be one of ['auto', 'required', 'off']"),
        "metrics.bootstrap_resamples": (-1, "metrics.bootstrap_resamples: must be >= 1"),
        "metrics.calibration_recall": (0.0, "metrics.calibration_recall: must be > 0"),
        "fetch.download": ("sometimes", "fetch.download: must be one of"),
        "executor.kind": ("ray", "executor.kind: must be one of ['local', 'dask']"),
        "executor.in_core_rows": (0, "executor.in_core_rows: must be >= 1"),
        "datasets": (["mmlongbench", "locomoo"], "datasets: unknown data set 'locomoo' (did you mean 'locomo'?)"),
    }
    for key, (value, message) in cases.items():
        assert refused(with_(key, value)).startswith(f"params.yaml: {message}"), key


def test_keys_other_engineers_add_are_known():
    doc = with_("metrics.calibration_recall", 0.9)
    doc = with_("system.sandbox", "auto", doc)
    doc = with_("executor", {"kind": "dask", "address": "tcp://127.0.0.1:8786", "workers": 2}, doc)
    doc = with_("local_datasets", [], doc)
    assert check(doc).executor == ExecutorParams("dask", "tcp://127.0.0.1:8786", 2, IN_CORE_ROWS)


def test_check_executor_fills_in_core_rows():
    """executor.in_core_rows: checked alone (not a DVC param), defaulted when absent."""
    assert check_executor(None) == ExecutorParams("local", None, None, IN_CORE_ROWS)
    assert check_executor({"in_core_rows": 1000}).in_core_rows == 1000
    assert check_executor(real()["executor"]).in_core_rows == real()["executor"]["in_core_rows"]
    for bad, message in ((2.5, "must be a whole number"), (True, "must be a whole number"), (0, "must be >= 1")):
        with pytest.raises(ParamsError, match=rf"params.yaml: executor.in_core_rows: {message}"):
            check_executor({"in_core_rows": bad})


def test_a_key_no_code_reads_is_unknown():
    assert refused(with_("metrics.strong_score", 12.0)) == (
        "params.yaml: metrics.strong_score: unknown key; known here: k, calibration_recall, bootstrap_resamples, bootstrap_seed, budget")


def test_the_extract_stage_checks_its_own_block():
    """One extract stage loads one modality: its extraction block, executor and local_datasets."""
    pdf = modalities()["pdf"]
    assert check_extract(real(), pdf).options == {"ocr_min_chars": 16}
    assert check_extract({"extraction": {}}, pdf).options == {"ocr_min_chars": 16}
    assert check_extract(real(), modalities()["video"]).options == {}
    with pytest.raises(ParamsError, match=r"^params.yaml: extraction.pdf.ocr_min_chars: must be <= 1,000,000, got 10,000,000$"):
        check_extract({"extraction": {"pdf": {"ocr_min_chars": 10_000_000}}}, pdf)
    with pytest.raises(ParamsError, match=r"^params.yaml: extraction.pdf.ocr_min: unknown key \(did you mean 'ocr_min_chars'\?\)"):
        check_extract({"extraction": {"pdf": {"ocr_min": 3}}}, pdf)


# -- sizes without bounds (issue 25 §3): refused with one line before any work ---------------

HUGE = {
    "system.depth": (2**31, "params.yaml: system.depth: must be <= 10,000, got 2,147,483,648"),
    "system.timeout_s": (1e308, "params.yaml: system.timeout_s: must be <= 86400, got 1e+308"),
    "system.startup_timeout_s": (1e30, "params.yaml: system.startup_timeout_s: must be <= 86400, got 1e+30"),
    "system.concurrency": (10**30, "params.yaml: system.concurrency: must be <= 256, got 1,000,000,000,000,000,000,000,000,000,000"),
    "system.warmup": (10**12, "params.yaml: system.warmup: must be <= 1,000,000, got 1,000,000,000,000"),
    "metrics.bootstrap_resamples": (10**12, "params.yaml: metrics.bootstrap_resamples: must be <= 1,000,000, got 1,000,000,000,000"),
    "metrics.bootstrap_seed": (2**64, "params.yaml: metrics.bootstrap_seed: must be <= 9,223,372,036,854,775,807, got 18,446,744,073,709,551,616"),
    "executor.workers": (10**6, "params.yaml: executor.workers: must be <= 1,024, got 1,000,000"),
    "chunking.pdf.window_tokens": (10**30, "params.yaml: chunking.pdf.window_tokens: must be <= 1,000,000, got 1,000,000,000,000,000,000,000,000,000,000"),
    "chunking.ui_screenshot.grid_rows": (10**6, "params.yaml: chunking.ui_screenshot.grid_rows: must be <= 100, got 1,000,000"),
    "chunking.video.window_seconds": (1e30, "params.yaml: chunking.video.window_seconds: must be <= 86400, got 1e+30"),
}


@pytest.mark.parametrize("key", sorted(HUGE))
def test_a_size_beyond_its_bound_is_refused(key):
    value, message = HUGE[key]
    assert refused(with_(key, value)) == message


def test_sizes_at_their_bounds_pass():
    doc = with_("system.depth", 10_000)
    doc = with_("system.timeout_s", 86_400, doc)
    doc = with_("metrics.bootstrap_resamples", 1_000_000, doc)
    doc = with_("chunking.ui_screenshot.grid_rows", 100, doc)
    cfg = check(doc)
    assert (cfg.system.depth, cfg.metrics.bootstrap_resamples, cfg.chunking["ui_screenshot"]["grid_rows"]) == (10_000, 1_000_000, 100)


def test_a_window_overlap_that_repeats_each_part_too_often_is_refused():
    """The issue's case: a 2 s window with 1.99999 s overlap made 800,001 atoms of a 10 s transcript."""
    doc = with_("chunking.video", {"strategy": "window", "window_seconds": 2, "overlap_seconds": 1.99999})
    assert refused(doc) == ("params.yaml: chunking.video.overlap_seconds: must be at most 1.98 with window_seconds 2, got 1.99999: "
                            f"each part of a source would be in 200,000 atoms (at most {MAX_WINDOW_REPEATS})")
    # every windowed modality is bounded the same way (pdf, conversation, code windows)
    for modality in ("pdf", "conversation", "code"):
        window, overlap = modalities()[modality].windows[0]
        msg = refused(with_(f"chunking.{modality}", {window: 1000, overlap: 999}))
        assert msg.startswith(f"params.yaml: chunking.{modality}.{overlap}: must be at most 990 with {window} 1000, got 999"), msg
    assert check(with_("chunking.video", {"strategy": "window", "window_seconds": 2, "overlap_seconds": 1.98})).chunking["video"]["overlap_seconds"] == 1.98
    assert refused(with_("chunking.video.window_seconds", 0.5)) == "params.yaml: chunking.video.window_seconds: must be >= 1, got 0.5"


def test_in_core_rows_is_bounded_by_the_machine_memory():
    gib = 2**30
    rows = gib // BYTES_PER_RUN_ROW  # 6,429,590 rows in 1 GiB
    assert refused(real(), memory_bytes=gib) == (
        f"params.yaml: executor.in_core_rows: must be <= {rows:,} (1.0 GiB of memory at {BYTES_PER_RUN_ROW} bytes a run row in core), "
        f"got {IN_CORE_ROWS:,}")
    assert check(with_("executor.in_core_rows", rows), memory_bytes=gib).executor.in_core_rows == rows
    assert check(real(), memory_bytes=16 * gib).executor.in_core_rows == IN_CORE_ROWS


def test_the_stages_machine_memory_is_read():
    from bench.project.selection import machine_memory

    memory = machine_memory()
    assert memory is None or memory > 2**28  # more than 256 MiB on any machine that runs the pipeline


def test_write_json_refuses_nan(tmp_path):
    target = tmp_path / "dev.json"
    target.write_text('{"old": 1}\n')
    with pytest.raises(NonFiniteError, match=r"dev.json: run.strong_score: not a finite number"):
        write_json(target, {"run": {"strong_score": float("nan")}})
    assert json.loads(target.read_text()) == {"old": 1}
    write_json(target, {"x": 1.5})
    assert json.loads(target.read_text()) == {"x": 1.5}


@pytest.mark.e2e
def test_stage_refuses_bad_params_before_touching_outputs(tmp_path):
    """A stage run by hand with a misspelled key: one line, exit 1, its outputs as they were."""
    work = copy_project(tmp_path / "p", datasets=["locomo"])
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["chunking"]["pdf"]["stratgy"] = "window"
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    dev_json = (work / "reports" / "metrics" / "dev.json").read_bytes()
    manifest = (work / "bench" / "corpus" / "manifest.jsonl").read_bytes()
    env = project_env(tmp_path / "site")
    env["PYTHONPATH"] = str(work)
    for stage in ("fetch", "validate", "evaluate"):
        proc = subprocess.run([sys.executable, "-m", f"stages.{stage}"], cwd=work, env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == 1, (stage, proc.stderr)
        assert proc.stderr.strip().splitlines() == [
            "error: params.yaml: chunking.pdf.stratgy: unknown key (did you mean 'strategy'?); known here: strategy, window_tokens, overlap_tokens"], stage
    assert (work / "reports" / "metrics" / "dev.json").read_bytes() == dev_json
    assert (work / "bench" / "corpus" / "manifest.jsonl").read_bytes() == manifest
    assert not (work / "data").exists()  # nothing created either


def test_the_abstention_threshold_is_a_declared_option_of_the_builtin_bm25():
    """system.abstain_below: a share in [0, 1] or null (the built-in's default, bench.systems.builtin.bm25.ABSTAIN_BELOW,
    chosen on dev and written out in params.yaml); only the built-in bm25 and bm25-scoped take it, built with it."""
    from bench.systems.builtin.bm25 import ABSTAIN_BELOW
    from bench.systems.config import builtin_options, check_system

    assert real()["system"]["name"] == "bm25-scoped" and real()["system"]["abstain_below"] is None  # null: ABSTAIN_BELOW
    assert f"null: their default, {ABSTAIN_BELOW:g}, chosen on dev" in (ROOT / "params.yaml").read_text(encoding="utf-8")
    assert check(with_("system", {"name": "bm25"})).system.abstain_below is None
    assert builtin_options(check(with_("system", {"name": "bm25"})).system) == {}  # null: the factory's own default
    cfg = check(with_("system.abstain_below", 0.3)).system
    assert cfg.abstain_below == 0.3 and builtin_options(cfg) == {"abstain_below": 0.3}
    assert isinstance(check(with_("system.abstain_below", 1)).system.abstain_below, float)
    for bad, message in ((1.5, "must be <= 1, got 1.5"), (-0.1, "must be >= 0, got -0.1"), ("half", "must be a number, got 'half'"),
                         (float("nan"), "must be a finite number")):
        assert refused(with_("system.abstain_below", bad)).startswith(f"params.yaml: system.abstain_below: {message}"), bad
    with pytest.raises(ParamsError, match=r"^params.yaml: system.abstain_below: only the built-in bm25 and bm25-scoped abstain by "
                                          r"this threshold, not builtin system 'dense'"):
        check_system({"name": "dense", "abstain_below": 0.3})
    with pytest.raises(ParamsError, match=r"not python system 'x'"):
        check_system({"name": "x", "adapter": "python", "entry": "m:f", "abstain_below": 0.3})
    assert builtin_options(check_system({"name": "dense"})) == {}
