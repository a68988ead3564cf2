"""A system under test that tries to cheat, for the sandbox tests (standard library only).

    python tests/systems/snoop_system.py ATOMS.jsonl [guess=DIR ...] [--port N]

Before it says ready it looks for the gold and the acceptance token everywhere a
30-line cheat would: its environment, its working folder, $PWD, $HOME, its parent's
/proc/<ppid>/cwd and /proc/<ppid>/environ (and its grandparents'), the folders above
its own code and above the atoms file, every parent folder of those, and the folders it
is told to guess (`guess=DIR`: the project root, given in a form the harness does not
take for code). A set file counts as found when it can be read, not merely named; it
also tries to read params.yaml, data/ and reports/ of every place. It opens the file of every atom it is served (the
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


def can_read(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            fh.read(1)
        return True
    except OSError:
        return False


def set_files(folder: Path) -> list[str]:
    """The set files under folder/bench/sets that this process can read."""
    sets = folder / "bench" / "sets"
    try:
        return sorted(str(p) for p in sets.glob("*.jsonl") if can_read(p)) if sets.is_dir() else []
    except OSError:
        return []


def listable(folder: Path) -> bool:
    try:
        return bool(os.listdir(folder))
    except OSError:
        return False


def proc_places() -> tuple[list[Path], list[str]]:
    """(the cwd of the parent and grandparents via /proc, the environ texts that could be read)."""
    cwds: list[Path] = []
    environs: list[str] = []
    pid = os.getppid()
    for _ in range(3):
        if pid <= 1:
            break
        try:
            cwds.append(Path(os.readlink(f"/proc/{pid}/cwd")))
        except OSError:
            pass
        try:
            environs.append(Path(f"/proc/{pid}/environ").read_bytes().decode("utf-8", "replace"))
        except OSError:
            pass
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return cwds, environs


def ancestors(path: Path) -> list[Path]:
    path = path.absolute()
    return [path, *path.parents]


def main(argv: list[str]) -> int:
    atoms_path = Path(argv[0])
    guesses = [Path(a[len("guess="):]) for a in argv if a.startswith("guess=")]
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else None
    proc_cwds, environs = proc_places()
    bases = [Path.cwd(), Path(__file__), atoms_path, *proc_cwds]
    bases += [Path(os.environ[v]) for v in ("PWD", "HOME") if os.environ.get(v)]
    places = {str(p) for base in bases for p in ancestors(base)} | {str(g) for g in guesses}
    found = sorted({f for place in places for f in set_files(Path(place))})
    project_files = sorted({str(Path(place) / name) for place in places for name in ("params.yaml", "dvc.lock", "data/sets/dev.jsonl")
                            if can_read(Path(place) / name)})
    listed = sorted({str(Path(place) / name) for place in places for name in ("data", "reports", "bench/sets") if listable(Path(place) / name)})
    named = [a for a in argv[1:] if not a.startswith(("guess=", "-")) and Path(a).exists()]
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
        "project_visible": [str(g) for g in guesses if can_read(g / "params.yaml")],
        "project_files": project_files,
        "listed": listed,
        "proc_cwds": [str(c) for c in proc_cwds],
        "environs": environs,
        "named_paths": named,
    }
    # one write with its newline (print writes the end apart): the harness's progress shares this stream
    os.write(2, ("SNOOP " + json.dumps(report) + "\n").encode())
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip():
            request = json.loads(line)
            print(json.dumps({"id": request["id"], "hits": []}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
