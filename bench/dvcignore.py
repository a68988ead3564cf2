"""Lift one entry of the project's .dvcignore while a block runs.

The acceptance pipeline (bench/test/) is listed in .dvcignore so that a bare
`dvc status` and `dvc repro` never see it: its status would read "changed" after every
dev run merely because no acceptance ran since. `bench accept` lifts that entry while
it runs the stage (and `bench accept --status` while it asks DVC), then restores the
file byte for byte.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from bench.io import atomic_writer


@contextlib.contextmanager
def lifted(root: Path, entry: str) -> Iterator[None]:
    """Run the block with the line `entry` removed from `root/.dvcignore`."""
    path = root / ".dvcignore"
    original = path.read_bytes() if path.is_file() else None
    lines = (original or b"").decode("utf-8").splitlines(keepends=True)
    kept = [line for line in lines if line.strip() != entry]
    if original is None or len(kept) == len(lines):
        yield  # nothing to lift
        return
    with atomic_writer(path, "w") as fh:
        fh.write("".join(kept))
    try:
        yield
    finally:
        with atomic_writer(path, "wb") as fh:
            fh.write(original)
