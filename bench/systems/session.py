"""Open the system under test for a run: adapter, sandbox and working folder, closed together.

The retrieve stage (dev) and the accept stage (test) both call `open_system`; the
stage passes every path and the host environment in (nothing here reads
params.yaml or the environment).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bench.io import write_jsonl
from bench.systems.adapters import Adapter
from bench.systems.atoms import contract_rows
from bench.systems.config import SystemConfig, command_argv, make_adapter
from bench.systems.sandbox import (
    RAW_MODALITIES,
    SourceFile,
    choose_isolation,
    new_workdir,
    prepare_launch,
    source_files,
    sweep_stale,
)


@dataclass
class Opened:
    adapter: Adapter
    info: dict[str, Any] = field(default_factory=dict)  # isolation, isolation_note, swept


def raw_files(manifest_rows: list[dict], sources: list[tuple[str, str, str]], store: Path) -> dict[str, tuple[str, Path]]:
    """Sources of the raw modalities -> (path under the store's dataset folder, local file), present files only."""
    from bench.corpus_sources import datasets
    from bench.ingest.fetch import local_path

    known = datasets()
    present = {(r["key"], r["path"]) for r in manifest_rows if r.get("status") == "present"}
    out: dict[str, tuple[str, Path]] = {}
    for sid, key, modality in sources:
        if modality not in RAW_MODALITIES or key not in known:
            continue
        path = known[key].file_of(sid)
        if path is None or (key, path) not in present:
            continue
        local = local_path(store, key, path)
        if local.is_file():
            out[sid] = (local.relative_to(store / key).as_posix(), local)
    return out


def served_sources(served: Mapping[str, pd.DataFrame]) -> list[tuple[str, str, str]]:
    """(source_id, dataset key, modality) of every source the served atoms come from."""
    out: set[tuple[str, str, str]] = set()
    for modality, frame in served.items():
        for sid, key in frame[["source_id", "dataset"]].drop_duplicates().itertuples(index=False):
            out.add((str(sid), str(key), modality))
    return sorted(out)


def atoms_rows(served: Mapping[str, pd.DataFrame], files: Mapping[str, SourceFile]) -> Iterator[dict[str, Any]]:
    """The atoms file a command system receives: the contract fields, text and `source_file`."""
    for row in contract_rows(dict(served)):
        sf = files.get(row["source_id"])
        yield {**row, "source_file": None if sf is None else sf.relpath}


@contextlib.contextmanager
def open_system(
    cfg: SystemConfig,
    served: Mapping[str, pd.DataFrame],
    atoms: pd.DataFrame,
    *,
    segments: pd.DataFrame | None,
    manifest_rows: list[dict],
    store: Path,
    root: Path,
    temp_root: Path,
    protected: list[Path],
    host_env: Mapping[str, str],
) -> Iterator[Opened]:
    """The adapter for `cfg`; a command system gets its sandbox. Raises SandboxError / ValueError."""
    swept = sweep_stale(temp_root)
    if cfg.adapter != "command":
        adapter = make_adapter(cfg, atoms)
        yield Opened(adapter, {"isolation": "none", "isolation_note": f"the {cfg.adapter} adapter is not sandboxed", "swept_stale": len(swept)})
        return
    isolation, note = choose_isolation(cfg.sandbox)
    workdir = new_workdir(temp_root)
    try:
        sources = served_sources(served)
        files = source_files(sources, raw_files(manifest_rows, sources, store), segments)
        write_jsonl(workdir.atoms, atoms_rows(served, files))
        launch = prepare_launch(
            command_argv(cfg, workdir.atoms), workdir, files,
            isolation=isolation, base=root, protected=protected, host_env=host_env,
        )
        adapter = make_adapter(cfg, atoms, launch)
        yield Opened(adapter, {"isolation": isolation, "isolation_note": note, "swept_stale": len(swept),
                               "source_files": len(files)})
    finally:
        workdir.close()
