"""Open the system under test for a run: adapter, sandbox and working folder, closed together.

The retrieve stage (dev) and the accept stage (test) both call `open_system`; the
stage passes every path and the host environment in (nothing here reads
params.yaml or the environment).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bench.io import write_jsonl
from bench.params import SystemParams
from bench.systems.adapters.external import Adapter, CommandAdapter
from bench.systems.config import command_argv, make_adapter, names_atoms, sandboxed
from bench.systems.replay import ReplayFiles
from bench.systems.sandbox.code_content import set_query_ids
from bench.systems.sandbox.declared import Forbidden
from bench.systems.sandbox.isolation import Isolation, choose_isolation, prepare_launch
from bench.systems.sandbox.workdir import SourceFile, new_workdir, source_files, sweep_stale

#: an upstream file of one of these kinds may hold more than its source: shown as parsed text
ARCHIVE_SUFFIXES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z")


@dataclass
class Opened:
    adapter: Adapter
    info: dict[str, Any] = field(default_factory=dict)  # isolation, isolation_note, swept


def medium_file(dataset: Any, source_id: str, shared: set[str]) -> str | None:
    """The source's upstream file when it is the source's medium alone, else None.

    Not its medium: no file, an archive member or an archive, a file that also holds
    gold (the data set's `annotation_files`), or one file of several sources (`shared`).
    Such a source is shown as its parsed text. No modality is named here."""
    path = dataset.file_of(source_id)
    if path is None or "!/" in path or path.lower().endswith(ARCHIVE_SUFFIXES) or path in shared:
        return None
    return None if path in set(getattr(dataset, "annotation_files", ())) else path


def raw_files(manifest_rows: list[dict], sources: list[tuple[str, str, str]], store: Path) -> dict[str, tuple[str, Path]]:
    """Sources shown as their upstream file -> (path under the store's dataset folder, local file), present files only."""
    from collections import Counter

    from bench.corpus_sources import datasets
    from bench.ingest.fetch import local_path

    known = datasets()
    present = {(r["key"], r["path"]) for r in manifest_rows if r.get("status") == "present"}
    files = {(sid, key): known[key].file_of(sid) for sid, key, _ in sources if key in known}
    counts = Counter((key, path) for (_, key), path in files.items() if path is not None)
    out: dict[str, tuple[str, Path]] = {}
    for sid, key, _modality in sources:
        if key not in known:
            continue
        shared = {p for (k, p), n in counts.items() if k == key and n > 1}
        path = medium_file(known[key], sid, shared)
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
    from bench.systems.atoms import contract_rows  # here: that module imports pandera (0.3 s), which an in-process system never needs

    for row in contract_rows(dict(served)):
        sf = files.get(row["source_id"])
        yield {**row, "source_file": None if sf is None else sf.relpath}


def confirmed(info: dict[str, Any]) -> Callable[[str, str], None]:
    """What the launcher reported before the system's first instruction becomes the recorded isolation
    (the channel refuses a launch whose report is not the isolation chosen: bench/systems/adapters/external.py)."""

    def record(kind: str, how: str) -> None:
        if info.get("confirmed") is None:
            info["isolation"] = kind
            info["confirmed"] = how
            info["isolation_note"] = f"{info['isolation_note']}; confirmed by the launcher: {how}"

    return record


@contextlib.contextmanager
def open_system(
    cfg: SystemParams,
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
    mirrors: Sequence[Path] = (),
    local_datasets: Sequence[Path] = (),
    isolation: Isolation | None = None,
) -> Iterator[Opened]:
    """The adapter for `cfg`; a command system gets its sandbox. Raises SandboxError / ValueError.

    `mirrors` and `local_datasets` are the folders a system's code may never lie in
    (bench/systems/sandbox/declared.py), besides the `protected` folders of the project `root`."""
    swept = sweep_stale(temp_root)
    if not sandboxed(cfg):
        adapter = make_adapter(cfg, atoms)
        yield Opened(adapter, {"isolation": "none", "isolation_note": f"not isolated: the {cfg.adapter} adapter is not sandboxed",
                               "swept_stale": len(swept)})
        return
    if isolation is None:  # chosen here unless the stage chose it before writing anything
        isolation = choose_isolation(cfg.sandbox, path_env=host_env.get("PATH"))
    forbidden = Forbidden(root, protected, mirrors, local_datasets,
                          set_query_ids([root / "bench" / "sets", root / "data" / "sets", *local_datasets]))
    workdir = new_workdir(temp_root)
    try:
        sources = served_sources(served)
        raw = raw_files(manifest_rows, sources, store)
        # only a command line that names {atoms} is shown the atoms and media before it starts;
        # any other starts with an empty corpus folder, filled by the replay as events arrive
        given = names_atoms(cfg)
        files = source_files(sources, raw, segments) if given else {}
        write_jsonl(workdir.atoms, atoms_rows(served, files) if given else [])  # empty: nothing before the first event
        launch = prepare_launch(
            command_argv(cfg, workdir.atoms), workdir, files,
            isolation=isolation, base=root, forbidden=forbidden, host_env=host_env, code=cfg.code, system_env=cfg.env,
        )
        adapter = make_adapter(cfg, atoms, launch)
        if not given:
            adapter.event_file = ReplayFiles(workdir.path, raw).place  # type: ignore[attr-defined]
        info = {"isolation": isolation.kind, "isolation_note": isolation.note, "swept_stale": len(swept), "source_files": len(files)}
        if isinstance(adapter, CommandAdapter):
            adapter.expect = launch.expect  # its launcher must report the isolation chosen before the system runs
        adapter.confined = confirmed(info)  # type: ignore[attr-defined]
        yield Opened(adapter, info)
    finally:
        workdir.close()
