"""A base-commit tree for one real SWE-bench Lite entry, recovered from its human patch.

The real mirror holds no base-commit trees. For tests of the folder-mirror path, a
tree is built for a real entry's ``<owner>__<name>@<base_commit>`` from that row's
``patch`` in the real mirror: every file the patch changes is written with its
old-side lines (hunk context and removed lines) at their real line numbers, which
is the real base-commit text there; lines the patch does not show are left empty.
So the entry's gold regions (old-side changed lines) exist in the tree, and the
text around them is real, but the tree is not the whole repository (SOURCE.json's
file count and bytes are not reproduced: extract warns about that).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from tests.conftest import MIRROR

SWE = MIRROR / "swebench-lite"
DEV_FILE = "swe_bench_lite_dev.csv"
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def dev_row(instance_id: str) -> dict:
    with open(SWE / DEV_FILE, encoding="utf-8", newline="") as fh:
        return next(r for r in csv.DictReader(fh) if r["instance_id"] == instance_id)


def old_side_text(patch: str) -> dict[str, dict[int, str]]:
    """Old-side path -> {line number: text} of every context and removed line of the patch."""
    out: dict[str, dict[int, str]] = {}
    path: str | None = None
    cursor = 0
    for line in patch.split("\n"):
        if line.startswith("--- "):
            old = line[4:].split("\t", 1)[0].strip()
            path = None if old == "/dev/null" else old.removeprefix("a/")
        elif line.startswith(("+++ ", "diff --git ")):
            continue
        elif (m := HUNK.match(line)) and path is not None:
            cursor = int(m.group(1))
        elif path is not None and line[:1] in (" ", "-"):
            out.setdefault(path, {})[cursor] = line[1:]
            cursor += 1
    return out


def build_tree(mirror_root: Path, instance_id: str) -> tuple[str, Path]:
    """Write the tree under `mirror_root`/swebench-lite/repos/; return (source_id, folder)."""
    row = dev_row(instance_id)
    name = f"{row['repo'].replace('/', '__')}@{row['base_commit']}"
    folder = mirror_root / "swebench-lite" / "repos" / name
    for path, lines in old_side_text(row["patch"]).items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        text = [lines.get(n, "") for n in range(1, max(lines) + 1)]
        target.write_text("\n".join(text) + "\n", encoding="utf-8")
    return f"swebench:{name}", folder
