"""`bench --help` and every subcommand's help come without the heavy libraries (pandas, numpy,
pyarrow, pandera, ... take seconds to import; each command imports what it needs when it runs):
checked in a fresh interpreter by what is imported, never by a timed assert."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

HEAVY = ("pandas", "numpy", "pyarrow", "pandera", "scipy", "matplotlib", "bm25s", "duckdb", "dvc", "PIL", "pypdfium2",
         "rapidocr", "torch", "dask")

PROBE = """
import json, sys
import click
from bench.cli import cli

def walk(cmd, path):
    yield path
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from walk(sub, [*path, name])

shown = []
for path in walk(cli, []):
    try:
        cli.main([*path, "--help"], prog_name="bench", standalone_mode=False)
    except SystemExit:
        pass
    shown.append(" ".join(path))
import bench.validate_sets  # the spec's validator: the same command
print(json.dumps({"helps": shown, "loaded": sorted(sys.modules)}))
"""


def helps() -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_help_imports_nothing_heavy() -> None:
    got = helps()
    assert {"", "validate", "compare", "gate", "leaderboard", "splits freeze", "docs metrics", "eval", "accept"} <= set(got["helps"])
    loaded = set(got["loaded"])
    assert "bench.cli" in loaded and "click" in loaded  # the probe did import the command
    assert sorted(m for m in HEAVY if m in loaded) == []


def test_the_probe_sees_a_heavy_import() -> None:
    """The check can fail: a command that imports pandas at module level is seen."""
    proc = subprocess.run([sys.executable, "-c", "import sys, bench.io; print(sorted(m for m in ('pandas', 'numpy') if m in sys.modules))"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "['numpy', 'pandas']"


def test_splits_freeze_help_names_the_local_sets() -> None:
    from click.testing import CliRunner

    from bench.cli import cli

    out = CliRunner().invoke(cli, ["splits", "freeze", "--help"]).output
    assert "local data sets" in out and "local_datasets" in out and "bench/sets/*.jsonl" in out
