"""The isolation table of docs/systems.md (section 4), from what the hostile tests observed.

A test calls `record(probe, level, user, outcome)`; with ``BENCH_HOSTILE_TABLE=FILE`` set the row
is appended to FILE (JSON lines), otherwise nothing is kept. Then

    python -m tests.systems.hostile_table FILE

prints the Markdown table: one row per probe, one column per isolation level and user.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

COLUMNS = [(level, user) for level in ("bwrap", "landlock", "off") for user in ("root", "nobody")]


def record(probe: str, level: str, user: str, outcome: str) -> None:
    path = os.environ.get("BENCH_HOSTILE_TABLE")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"probe": probe, "level": level, "user": user, "outcome": outcome}) + "\n")


def table(rows: list[dict]) -> str:
    probes = list(dict.fromkeys(r["probe"] for r in rows))
    cell = {(r["probe"], r["level"], r["user"]): r["outcome"] for r in rows}
    head = "| probe | " + " | ".join(f"{level} / {user}" for level, user in COLUMNS) + " |"
    out = [head, "|---" * (len(COLUMNS) + 1) + "|"]
    for probe in probes:
        out.append(f"| {probe} | " + " | ".join(cell.get((probe, level, user), "–") for level, user in COLUMNS) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    print(table([json.loads(line) for line in Path(sys.argv[1]).read_text(encoding="utf-8").splitlines() if line.strip()]))
