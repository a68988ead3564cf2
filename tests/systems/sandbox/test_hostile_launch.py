"""Issue 47's probes: a system that names its environment, runs in an experiment, reads the harness's
descriptors, or stops answering — under bwrap, Landlock (forced: every bwrap made unavailable is not
needed here, the launch is built for Landlock) and `sandbox: off`, as root and as `nobody`
(tests/systems/hostile_launch.py), with no system bwrap (the pip one runs).

Each observation is also recorded for the isolation table of docs/systems.md (tests/systems/hostile_table.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from bench.systems.adapters.channel import GRACE_S, SystemCrash, confinement
from bench.systems.adapters.external import CommandAdapter
from bench.systems.adapters.mcp_plan import INSTALL
from bench.systems.run import run_queries
from bench.systems.sandbox.declared import Forbidden
from bench.systems.sandbox.workdir import SandboxError, protected_paths
from tests.extras import need
from tests.systems.conftest import entry
from tests.systems.hostile_launch import LEVELS, NOBODY, SYSTEM_PYTHON, USERS, Shared, open_to_all, prepare, start
from tests.systems.hostile_table import record

if sys.platform != "linux" or os.geteuid() != 0:  # pragma: no cover - CI and this machine run as root
    pytest.skip("the root and nobody cases need root to start them", allow_module_level=True)

CASES = [pytest.param(level, user, id=f"{level}-{user}") for level in LEVELS for user in USERS]
GOLD = '{"query_id": "medvidqa:secret-q0", "gold": [{"source_id": "medvidqa:v0"}]}\n'
PRELOAD_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void probe(void) {
    char exe[512] = {0};
    if (readlink("/proc/self/exe", exe, sizeof exe - 1) < 0) exe[0] = '?';
    const char *secret = getenv("PROBE_SECRET"), *drop = getenv("PROBE_DROP");
    int rd = -1, wr = -1;
    if (secret) { int fd = open(secret, O_RDONLY); rd = fd >= 0; if (fd >= 0) close(fd); }
    if (drop) {
        char path[700];
        snprintf(path, sizeof path, "%s/escaped-%d", drop, (int) getpid());
        int fd = open(path, O_CREAT | O_WRONLY, 0644); wr = fd >= 0; if (fd >= 0) close(fd);
    }
    dprintf(2, "PRELOADED exe=%s read=%d wrote=%d\n", exe, rd, wr);
}
"""


@pytest.fixture(scope="module")
def shared(hostile_shared: Shared) -> Shared:
    return hostile_shared


@pytest.fixture(scope="module")
def project(shared: Shared) -> Path:
    """A project every user can read (its sets, data and reports protected), and a folder anyone may write to."""
    proj = shared.path / "project"
    for rel in ("bench/sets/medvidqa.jsonl", "data/sets/dev.jsonl", "reports/runs/dev.qrels"):
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text(GOLD)
    (proj / "dvc.yaml").write_text("stages: {}\n")
    (shared.path / "drop").mkdir(exist_ok=True)
    open_to_all(proj)
    (shared.path / "drop").chmod(0o1777)
    return proj


def compiled_preload(shared: Shared) -> Path:
    """A shared library whose constructor reports where it runs (the probe of issue 47's first row)."""
    out = shared.code / "probe_preload.so"
    if out.exists():
        return out
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("the LD_PRELOAD probe needs a C compiler (cc), which CI's image has", pytrace=False)
        pytest.skip("no C compiler for the LD_PRELOAD probe")
    source = shared.path / "probe_preload.c"
    source.write_text(PRELOAD_C)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(source)], check=True, capture_output=True, timeout=120)
    out.chmod(0o755)
    return out


# --------------------------------------------------------------------------- 1. system.env acts inside the sandbox only


def environ_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        pairs = [item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item]
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


@pytest.mark.parametrize(("level", "user"), CASES)
def test_system_env_reaches_only_the_systems_own_process(shared, project, capfd, level, user):
    """`system.env: {LD_PRELOAD: <its own library>}` (issue 47: the library ran in bwrap itself, or in the reaper,
    before any namespace or Landlock rule, read a set file and wrote into the project): now the library runs in the
    system's own process only, inside every restriction, and the launcher's environment never holds the variables."""
    library = compiled_preload(shared)
    secret = project / "bench" / "sets" / "medvidqa.jsonl"
    env = {"LD_PRELOAD": str(library), "PROBE_SECRET": str(secret), "PROBE_DROP": str(shared.path / "drop"),
           "PYTHONSTARTUP": str(library), "NODE_OPTIONS": "--require /nonexistent", "BASH_ENV": str(library)}
    seen: list[tuple[str, str]] = []
    started = start(level, user, shared, "env=LD_PRELOAD", "env=NODE_OPTIONS", forbidden=Forbidden(project, protected_paths(project)),
                    system_env=env, confined=lambda kind, how: seen.append((kind, how)))
    try:
        leader = started.channel.process.proc.pid  # bwrap, or the reaper (setpriv exec'd into it for nobody)
        launcher_env = environ_of(leader)
    finally:
        started.channel.close()
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("PRELOADED ")]
    assert started.report["env"] == {"LD_PRELOAD": str(library), "NODE_OPTIONS": "--require /nonexistent"}
    assert not set(env) & set(launcher_env), launcher_env  # bwrap / the reaper never got them
    exes = {line.split()[1].removeprefix("exe=") for line in lines}
    assert exes == {str(SYSTEM_PYTHON.resolve())}, lines  # the system's interpreter alone: no bwrap, no launcher python
    assert seen and seen[0][0] == ("process" if level == "off" else level), seen
    escaped = sorted(p.name for p in (shared.path / "drop").iterdir())
    if level == "off":  # not isolated: its own process may read and write what its user can
        record("`system.env: {LD_PRELOAD: own .so}`", level, user, f"ran in the system only ({len(lines)} process); not isolated")
        return
    assert all(line.endswith("read=0 wrote=0") for line in lines), lines
    assert escaped == [], escaped
    record("`system.env: {LD_PRELOAD: own .so}`", level, user, "ran in the system's process only, inside: read 0, wrote 0")


def test_a_launch_not_confined_as_chosen_is_refused_and_the_report_is_read():
    """The recorded isolation is what the launcher reported before the system's first instruction: a launch that
    reports another confinement than the one chosen is not used (one line)."""
    from bench.systems.adapters.external import CommandChannel
    from bench.systems.sandbox.isolation import reaper_argv

    argv = reaper_argv([sys.executable, str(Path(__file__).parents[1] / "hostile_system.py")], report=True)
    channel = CommandChannel(argv, None, 60, lambda: None, {"PATH": os.defpath}, None, True, expect="bwrap")
    with pytest.raises(SystemCrash) as info:
        channel.prepare()
    assert str(info.value) == "expected to run under bwrap, but its launcher reported nothing (a plain process under the reaper); not used"
    assert confinement(b'{"child-pid": 7, "mnt-namespace": 1, "net-namespace": 2, "pid-namespace": 3}')[0] == "bwrap"
    assert confinement(b'{"child-pid": 7, "mnt-namespace": 1}')[0] is None  # no network or PID namespace: not bwrap's
    assert confinement(b'{"launcher": "landlock", "abi": 7, "capabilities": 0, "no_new_privs": 1}')[0] == "landlock"
    assert confinement(b'{"launcher": "landlock", "abi": 7, "capabilities": 8192, "no_new_privs": 1}')[0] is None
    assert confinement(b"")[0] is None and confinement(b"\xff")[0] is None


def test_a_variable_name_no_environment_can_hold_is_refused(tmp_path):
    from bench.systems.sandbox.isolation import system_variables

    assert system_variables({"LD_PRELOAD": "{workdir}/x.so"}, tmp_path) == {"LD_PRELOAD": f"{tmp_path}/x.so"}
    for env, message in (({"A=B": "x"}, "system.env: 'A=B' is not a variable name (letters, digits and _, not starting with a digit)"),
                         ({"1A": "x"}, "system.env: '1A' is not a variable name (letters, digits and _, not starting with a digit)"),
                         ({"A": "x\0y"}, "system.env.A: must be a string without NUL bytes, got 'x\\x00y'")):
        with pytest.raises(SandboxError) as info:
            system_variables(env, tmp_path)
        assert str(info.value) == message


# --------------------------------------------------------------------------- 4. the harness's own files


@pytest.mark.parametrize(("level", "user"), CASES)
def test_no_descriptor_reaches_a_host_file(shared, project, capfd, level, user):
    """The harness's stderr is a file here (capfd), as under `dvc repro 2>log` (issue 47: /proc/1/fd/2 under bwrap was that
    file, readable and truncatable): the system's stdin, stdout and stderr are pipes, /proc/1 of the sandbox holds nothing
    of the host, and the systems' temp root cannot be listed."""
    assert os.path.isfile(f"/proc/self/fd/{sys.stderr.fileno()}") or not os.isatty(2)
    started = start(level, user, shared, "fds", forbidden=Forbidden(project, protected_paths(project)))
    try:
        temp_root = started.workdir.parent
        listed = start(level, user, shared, f"read={temp_root}", forbidden=Forbidden(project, protected_paths(project)))
        listed.channel.close()
    finally:
        started.channel.close()
    capfd.readouterr()
    report = started.report
    links, reopened = report["fds"], report["reopened"]
    own = {fd: target for fd, target in links["self"].items() if not target.startswith("/proc/")}
    assert all(target.startswith(("pipe:", "socket:", "anon_inode:", "/dev/null")) for target in own.values()), own
    assert all(kind != "file" for path, kind in reopened.items() if path.startswith("/proc/self/")), reopened
    if level == "off":
        record("descriptors: its own / /proc/1 / the temp root", level, user, "pipes / the host's init (not isolated) / listed")
        return
    host_files = {p: k for p, k in reopened.items() if k in ("file", "dir") and not links.get(p.split("/")[2], {}).get(
        p.rsplit("/", 1)[1], "").startswith("/proc/")}
    assert host_files == {}, (links, reopened)
    assert listed.report["read"] == []
    one = "bwrap's init: pipes only" if level == "bwrap" else "not readable (EACCES)"
    assert (links["1"].get("error") == "EACCES") == (level == "landlock"), links["1"]
    record("descriptors: its own / /proc/1 / the temp root", level, user, f"pipes / {one} / not listed")


# --------------------------------------------------------------------------- 2. experiments


@pytest.fixture(scope="module")
def experiment(shared: Shared) -> dict:
    """A repository with its sets committed and packed, a queued experiment's workspace under its .dvc/tmp/exps/
    (a copy with a git repository of its own, as DVC makes it) and another experiment's beside it."""
    origin = shared.path / "origin"
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    files = {"bench/sets/medvidqa.jsonl": GOLD, "data/sets/dev.jsonl": GOLD, "reports/runs/dev.qrels": "medvidqa:secret-q0 0 v 1\n",
             ".dvc/cache/files/md5/ab/cdef": GOLD, "dvc.yaml": "stages: {}\n", "bench/tools/notes.py": "x = 1\n"}
    for rel, text in files.items():
        (origin / rel).parent.mkdir(parents=True, exist_ok=True)
        (origin / rel).write_text(text)
    for args in (["init", "-q"], ["add", "bench", "data", "reports", "dvc.yaml"], ["commit", "-qm", "sets"], ["gc", "-q"]):
        subprocess.run(["git", *args], cwd=origin, env=env, check=True, capture_output=True)
    exps = origin / ".dvc" / "tmp" / "exps"
    workspace, other = exps / "tmpa1b2c3", exps / "tmpz9y8x7"
    for tree in (workspace, other):
        for rel in ("bench/sets/medvidqa.jsonl", "dvc.yaml"):
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_text(files[rel])
        subprocess.run(["git", "init", "-q"], cwd=tree, env=env, check=True)
    open_to_all(origin)
    pack = next((origin / ".git" / "objects" / "pack").glob("*.pack"))
    secrets = [origin / "bench" / "sets" / "medvidqa.jsonl", origin / "data" / "sets" / "dev.jsonl", origin / "reports" / "runs",
               origin / ".dvc" / "cache" / "files" / "md5" / "ab" / "cdef", pack, origin / ".git" / "HEAD",
               other / "bench" / "sets" / "medvidqa.jsonl", origin / ".dvc" / "tmp" / "exps"]
    return {"origin": origin, "workspace": workspace, "other": other, "pack": pack, "secrets": secrets}


def test_an_experiment_workspace_protects_the_project_it_was_made_from(experiment):
    """The protected set of a workspace under <origin>/.dvc/tmp/exps/ holds the origin's .git, sets, data, reports, DVC cache and
    other experiments; `system.code` naming them (issue 47: `.git/objects/pack` rebuilt into every gold entry) is refused."""
    from bench.systems.sandbox.declared import plan_code
    from bench.systems.sandbox.isolation import runtime_dirs

    origin, workspace = experiment["origin"], experiment["workspace"]
    protected = protected_paths(workspace)
    for path in (origin / ".git", origin / "bench" / "sets", origin / "data", origin / "reports", origin / "dvc.lock",
                 origin / ".dvc" / "cache", experiment["other"], workspace / ".git"):
        assert path in protected, path
    assert workspace not in protected and not any(workspace.is_relative_to(p) for p in protected)
    fb = Forbidden(workspace, protected)
    refusals = {
        experiment["pack"].parent: f"is inside a repository's .git/ ({origin / '.git'}), which a system under test may not see",
        origin / ".dvc" / "cache": "is inside cache/, which a system under test may not see",
        experiment["other"] / "bench": "is inside tmpz9y8x7/, which a system under test may not see",
        origin / "data" / "sets": "is inside data/, which a system under test may not see",
        origin: "names the project folder (or above it); name the system's own files or folders",
    }
    for code, why in refusals.items():
        with pytest.raises(SandboxError) as info:
            plan_code([sys.executable, "s.py"], [str(code)], workspace, fb, runtime_dirs())
        assert str(info.value) == f"system.code: {str(code)!r} {why}"
    holder = experiment["origin"].parent / "holds-a-repo"
    (holder / "vendored" / ".git").mkdir(parents=True, exist_ok=True)
    with pytest.raises(SandboxError, match=r"holds a repository's \.git .*vendored/\.git"):
        plan_code([sys.executable, "s.py"], [str(holder)], workspace, fb, runtime_dirs())
    plan = plan_code([sys.executable, "s.py"], [str(origin / "bench")], workspace, fb, runtime_dirs())
    assert plan.visible == [origin / "bench"]  # its own code is shown, its sets hidden (below)


@pytest.mark.parametrize(("level", "user"), CASES)
def test_a_system_in_an_experiment_reads_nothing_of_the_project_it_was_made_from(shared, experiment, level, user):
    """The workspace's system is shown the origin's bench/ (its code, as the workspace's own): the origin's sets, data,
    reports, cache, packed git objects and the other experiment stay out of reach under bwrap and Landlock."""
    workspace = experiment["workspace"]
    started = start(level, user, shared, *[f"read={p}" for p in experiment["secrets"]], f"read={experiment['origin'] / 'bench' / 'tools'}",
                    forbidden=Forbidden(workspace, protected_paths(workspace)), extra_code=[experiment["origin"] / "bench"], base=workspace)
    started.channel.close()
    read = started.report["read"]
    if level == "off":
        assert set(map(str, experiment["secrets"])) <= set(read)  # not isolated
        record("queued / `--temp` experiment: the origin's sets, data, reports, cache, `.git` packs, other experiments", level, user,
               f"{len(read) - 1} of {len(experiment['secrets'])} read (not isolated)")
        return
    assert read == [str(experiment["origin"] / "bench" / "tools")], read  # its code only
    record("queued / `--temp` experiment: the origin's sets, data, reports, cache, `.git` packs, other experiments", level, user,
           f"0 of {len(experiment['secrets'])} read; `.git/objects/pack` as code refused")


# --------------------------------------------------------------------------- 3. every wait has a deadline

TIMEOUT_S = 2.0
BAD = [("BAD-UTF8", "a byte that is not UTF-8"), ("BAD-HALF", "half a line, then silence"),
       ("BAD-CLOSE", "stdout closed, alive"), ("BAD-NOREAD " + "x" * 400_000, "stops reading its input")]


@pytest.mark.parametrize(("level", "user"), CASES)
def test_every_wait_of_a_command_system_has_a_deadline(shared, project, capfd, level, user):
    """Issue 47: one invalid UTF-8 byte hung the harness 627 s at 0/90 queries; a closed stdout hung it under Landlock. Each
    misbehaviour now fails its query alone, in one line, within timeout_s + GRACE_S; the system is restarted and the run goes on."""
    made = prepare(level, user, shared, [str(SYSTEM_PYTHON), str(shared.code / "hostile_system.py")],
                   forbidden=Forbidden(project, protected_paths(project)))
    adapter = CommandAdapter(made.argv, "hostile", cwd=made.launch.cwd, startup_timeout=60, env=made.launch.env,
                             isolation=made.launch.isolation, reaped=made.launch.reaped, expect=made.launch.expect)
    questions = [q for bad, _ in BAD for q in ("apples", bad)] + ["pears"]
    entries = [entry(f"medvidqa:q{i}", q) for i, q in enumerate(questions)]
    t0 = time.monotonic()
    result = run_queries(adapter, entries, 5, timeout_s=TIMEOUT_S, warmup=0, known_atoms=set())
    wall = time.monotonic() - t0
    capfd.readouterr()
    failures = result.failures.set_index("query_id")
    assert list(failures.index) == [f"medvidqa:q{i}" for i in range(1, 8, 2)]
    assert set(result.latency["query_id"]) == {f"medvidqa:q{i}" for i in range(0, 9, 2)}  # every other query answered
    assert (failures["elapsed_ms"] <= (TIMEOUT_S + GRACE_S) * 1000).all(), failures
    kinds = dict(zip(failures.index, failures["kind"], strict=True))
    messages = dict(zip(failures.index, failures["message"], strict=True))
    assert kinds["medvidqa:q1"] == "crash" and messages["medvidqa:q1"].startswith("wrote a line that is not UTF-8 (byte 0xe9 at offset")
    assert kinds["medvidqa:q3"] == "timeout" and messages["medvidqa:q3"].startswith(f"no answer within {TIMEOUT_S:g} s")
    # a closed stdout: the end of its output (the reaper holds none) or, under bwrap, whose init still holds it, a timeout
    assert (kinds["medvidqa:q5"], messages["medvidqa:q5"].split(";")[0]) in (
        ("crash", "closed its output but did not exit within 1 s"), ("timeout", f"no answer within {TIMEOUT_S:g} s"))
    assert kinds["medvidqa:q7"] == "timeout" and messages["medvidqa:q7"].startswith(f"it read no input for {TIMEOUT_S:g} s")
    assert all("\n" not in m for m in messages.values()) and adapter.restarts() == 4
    assert wall < len(BAD) * (TIMEOUT_S + GRACE_S) + 30
    record("a command system: invalid UTF-8 / half a line / stdout closed, alive / stops reading", level, user,
           " / ".join(f"{kinds[q]} {failures.loc[q, 'elapsed_ms'] / 1000:.1f} s" for q in failures.index))


def tiny_events() -> pd.DataFrame:
    from bench.systems.replay import event_stream

    rows = [{"source_id": "t:a:s1", "dataset": "t", "modality": "conversation", "turn": i + 1, "seq": i, "holder": "t:a",
             "observed_at": pd.Timestamp(f"2023-05-0{i + 1}T10:00:00Z"), "text": text}
            for i, text in enumerate(["Alice: I planted apples", "Bob: pears are better"])]
    seg = pd.DataFrame(rows)
    return event_stream(seg, ["t:a:s1"])


def mcp_entry(qid: str, question: str, second: int = 0) -> dict:
    """A question asked after both events; the questions of a replay are sent in the order of their as_of."""
    return {"query_id": qid, "modality": "conversation", "question": question, "as_of": f"2023-05-03T00:00:{second:02d}+00:00", "gold": [],
            "scope": {"holder": "t:a", "session": None, "scenario": "conversation-qa"}, "unanswerable": False}


@pytest.mark.parametrize(("level", "user"), CASES)
def test_an_mcp_server_that_breaks_the_protocol_fails_one_query_in_one_line(shared, project, capfd, level, user):
    """Issue 47: garbage lines gave 13 multi-line SDK tracebacks and each a timeout; a 100,000-deep JSON result one line naming
    no query. Now each fails its query at once, in one line naming the cause, and nothing of the SDK reaches stderr."""
    need(INSTALL, "mcp", "mcp_types")
    from bench.systems.adapters.mcp import McpAdapter, Server
    from bench.systems.adapters.mcp_plan import mcp_plan

    made = prepare(level, user, shared, [str(SYSTEM_PYTHON), str(shared.code / "hostile_mcp_server.py")],
                   forbidden=Forbidden(project, protected_paths(project)))
    server = Server(argv=made.argv, env=made.launch.env, cwd=made.launch.cwd, scratch=made.workdir / "scratch",
                    reaped=made.launch.reaped, expect=made.launch.expect)
    plan = mcp_plan({"observe": {"tool": "store", "arguments": {"text": "{text}"}}, "search": {"tool": "search", "arguments": {"query": "{question}"}}})
    adapter = McpAdapter(server, "hostile-mcp", plan, 60, made.launch.isolation)
    questions = ["apples", "GARBAGE", "apples", "DEEP", "pears", "BAD-UTF8", "apples STOP-READING", "y" * 400_000, "pears"]
    entries = [mcp_entry(f"t:q{i}", q, i) for i, q in enumerate(questions)]
    result = run_queries(adapter, entries, 5, timeout_s=TIMEOUT_S, events=tiny_events)
    err = capfd.readouterr().err
    failures = result.failures.set_index("query_id")
    assert list(failures.index) == ["t:q1", "t:q3", "t:q5", "t:q7"], failures[["kind", "message", "elapsed_ms"]].to_dict("records")
    assert set(result.latency["query_id"]) == {"t:q0", "t:q2", "t:q4", "t:q6", "t:q8"}
    messages = dict(zip(failures.index, failures["message"], strict=True))
    assert messages["t:q1"] == ("tool search (search) failed: the server wrote a line that is not a JSON-RPC message (Invalid JSON: "
                                "expected ident at line 1 column 2): 'this is not JSON-RPC'"), messages["t:q1"]
    assert messages["t:q3"].startswith("tool search (search) failed: the server wrote a line that is not a JSON-RPC message ("), messages
    assert messages["t:q5"].startswith("tool search (search) failed: the server wrote a line that is not UTF-8 (byte 0xe9"), messages
    assert failures.loc["t:q7", "kind"] == "timeout" or "read no input" in messages["t:q7"], messages
    assert (failures["elapsed_ms"] <= (TIMEOUT_S + GRACE_S) * 1000).all(), failures
    assert all("\n" not in m and len(m) < 400 for m in messages.values())
    assert "Traceback" not in err and "JSONRPC" not in err, err[-3000:]
    record("an MCP server: garbage lines / a 100,000-deep result / invalid UTF-8 / stops reading", level, user,
           " / ".join(f"{failures.loc[q, 'kind']}, one line" for q in failures.index))


@pytest.mark.parametrize("user", USERS)
def test_unprivileged_cases_run_as_nobody(shared, user):
    """The `nobody` cases above really run as uid 65534 (the launch's command line goes through setpriv)."""
    started = start("off", user, shared, "env=USER")
    try:
        uid = os.stat(f"/proc/{started.channel.process.proc.pid}").st_uid
    finally:
        started.channel.close()
    assert uid == (NOBODY if user == "nobody" else 0)


def test_the_recorded_rows_are_json(tmp_path, monkeypatch):
    from tests.systems.hostile_table import table

    monkeypatch.setenv("BENCH_HOSTILE_TABLE", str(tmp_path / "rows.jsonl"))
    record("p", "bwrap", "root", "held")
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert table(rows).splitlines()[2] == "| p | held | – | – | – | – | – |"
