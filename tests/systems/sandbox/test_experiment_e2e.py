"""Issue 47's experiment probe, end to end: in a queued experiment and in a `--temp` one (their workspace lives under the
project's .dvc/tmp/exps/), a command system whose `system.code` names the project's `.git/objects/pack` was shown it and
rebuilt every gold entry from the packed objects (recall@10 1.0000). The retrieve stage now refuses it with one line.

One clone of the session's reproduced project (tests/conftest.py `reproduced`), one queued and one `--temp` experiment; only
the retrieve stage runs in each (the system's params changed), and stops before the system starts. The same refusal under
Landlock and as `nobody`, and that nothing of the originating project is read from an experiment's workspace, are
tests/systems/sandbox/test_hostile_launch.py (`test_an_experiment_workspace_protects_…`, `test_a_system_in_an_experiment_reads_…`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from tests.project_copy import clone_project, project_env, run

pytestmark = pytest.mark.e2e


def set_probe(work: Path, pack: Path) -> None:
    """params.yaml of the workspace: a command system (the hostile probe, no hits) whose code names the originating
    repository's packed objects (queued and `--temp` experiments take the workspace's uncommitted params)."""
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["system"] = {**params["system"], "name": "git-probe", "adapter": "command",
                        "entry": "{python} tests/systems/hostile_system.py", "code": ["tests/systems/hostile_system.py", str(pack)]}
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def test_a_queued_and_a_temp_experiment_refuse_code_inside_the_projects_git(tmp_path: Path, reproduced: Path) -> None:
    work = clone_project(reproduced, tmp_path / "project")
    env = project_env(tmp_path / "site-cache")
    run(["git", "gc", "-q"], work, env)  # the history as packs, as a repository that was ever pushed or fetched holds it
    pack = work / ".git" / "objects" / "pack"
    assert any(pack.glob("*.pack"))
    expected = (f"system.code: '{pack}' is inside a repository's .git/ ({work / '.git'}), which a system under test may "
                "not see")

    set_probe(work, pack)
    temp = run(["dvc", "exp", "run", "--temp"], work, env, ok=False)
    assert temp.returncode != 0
    assert f"error: {expected}" in temp.stderr + temp.stdout, (temp.stdout + temp.stderr)[-3000:]
    assert "Traceback" not in temp.stderr

    run(["dvc", "exp", "run", "--queue"], work, env)
    run(["dvc", "queue", "start"], work, env)
    deadline = time.monotonic() + 600
    while True:
        status = run(["dvc", "queue", "status"], work, env).stdout
        if not any(word in status for word in ("Queued", "Running")):
            break
        assert time.monotonic() < deadline, status
        time.sleep(2)
    failed = [line.split()[0] for line in status.splitlines() if "Failed" in line]
    assert len(failed) == 1, status
    logs = run(["dvc", "queue", "logs", failed[0]], work, env, ok=False).stdout
    assert f"error: {expected}" in logs, logs[-3000:]
    assert "Traceback" not in logs
