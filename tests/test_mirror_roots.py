"""Mirror roots: relative to the original repository, also from a queued or `--temp`
experiment's workspace under .dvc/tmp/exps/; $BENCH_MIRROR_DIRS overrides params."""

from __future__ import annotations

import os
from pathlib import Path

from bench.project.selection import MIRROR_ENV, mirror_roots, repo_root


def test_repo_root_of_an_experiment_workspace(tmp_path: Path) -> None:
    repo = tmp_path / "project"
    workspace = repo / ".dvc" / "tmp" / "exps" / "tmpa1b2c3"
    assert repo_root(workspace) == repo
    assert repo_root(repo) == repo
    assert repo_root(tmp_path / "elsewhere" / "exps") == tmp_path / "elsewhere" / "exps"


def test_relative_roots_resolve_against_the_original_repo(tmp_path: Path) -> None:
    repo = tmp_path / "project"
    workspace = repo / ".dvc" / "tmp" / "exps" / "tmpa1b2c3"
    expected = [(tmp_path / "shared" / "mirror").resolve()]
    assert mirror_roots(["../shared/mirror"], env={}, root=workspace) == expected
    assert mirror_roots(["../shared/mirror"], env={}, root=repo) == expected
    # absolute roots are kept as they are
    assert mirror_roots([str(tmp_path / "m")], env={}, root=workspace) == [(tmp_path / "m").resolve()]


def test_environment_overrides_params(tmp_path: Path) -> None:
    repo = tmp_path / "project"
    env = {MIRROR_ENV: os.pathsep.join([str(tmp_path / "a"), "rel/b", ""])}
    assert mirror_roots(["../shared/mirror"], env=env, root=repo) == [(tmp_path / "a").resolve(), (repo / "rel" / "b").resolve()]
    assert mirror_roots(["../shared/mirror"], env={MIRROR_ENV: ""}, root=repo) == [(tmp_path / "shared" / "mirror").resolve()]
