"""A system under test that tries to cheat, for the sandbox tests (standard library only).

    python tests/systems/snoop_system.py ATOMS.jsonl [guess=DIR ...] [--port N]

Before it says ready it looks for the gold and the acceptance token everywhere a
30-line cheat would: its environment, its working folder and every parent folder,
the folders above its own code and above the atoms file, and the folders it is told
to guess (`guess=DIR`: the project root, given in a form the harness does not take for code). It opens the file of every atom it is served (the
media it is allowed to see), tries to write to one, and tries to reach a TCP port on
the host's loopback. It prints what it found as one line `SNOOP {...}` on stderr,
then answers every query with no hits.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path


def set_files(folder: Path) -> list[str]:
    sets = folder / "bench" / "sets"
    try:
        return sorted(str(p) for p in sets.glob("*.jsonl")) if sets.is_dir() else []
    except OSError:
        return []


def ancestors(path: Path) -> list[Path]:
    path = path.absolute()
    return [path, *path.parents]


def main(argv: list[str]) -> int:
    atoms_path = Path(argv[0])
    guesses = [Path(a[len("guess="):]) for a in argv if a.startswith("guess=")]
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else None
    places = {str(p) for base in (Path.cwd(), Path(__file__), atoms_path) for p in ancestors(base)} | {str(g) for g in guesses}
    found = sorted({f for place in places for f in set_files(Path(place))})
    atoms = [json.loads(line) for line in atoms_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    readable: dict[str, str] = {}
    unreadable: list[str] = []
    for atom in atoms:
        rel = atom.get("source_file")
        if not rel or rel in readable:
            continue
        try:
            with open(rel, "rb") as fh:
                readable[rel] = fh.read(64).decode("latin-1")
        except OSError:
            unreadable.append(rel)
    wrote_media = False
    if readable:
        try:
            with open(next(iter(readable)), "ab"):
                wrote_media = True
        except OSError:
            wrote_media = False
    scratch_ok = False
    try:
        (Path(os.environ.get("HOME", ".")) / "probe.txt").write_text("x")
        scratch_ok = True
    except OSError:
        pass
    network = None
    if port is not None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                network = True
        except OSError:
            network = False
    report = {
        "env": dict(os.environ),
        "cwd": str(Path.cwd()),
        "found_sets": found,
        "atoms": len(atoms),
        "readable": readable,
        "unreadable": unreadable,
        "wrote_media": wrote_media,
        "scratch_ok": scratch_ok,
        "network": network,
        "project_visible": [str(g) for g in guesses if (g / "params.yaml").exists()],
    }
    print("SNOOP " + json.dumps(report), file=sys.stderr, flush=True)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip():
            request = json.loads(line)
            print(json.dumps({"id": request["id"], "hits": []}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
