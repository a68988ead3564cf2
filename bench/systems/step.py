"""The retrieve step: serve the atoms, open the system (sandboxed), run every query; the stage writes the run.

`run_system` opens the system under test and sends it the entries (the part the dev
retrieve stage and the acceptance stage share); `retrieve` is the dev stage's whole
step around it. Both take every path, the parsed `system:` block and the host
environment from the stage (nothing here reads params.yaml or the environment), and
raise StepError with the one line to show.

Order, so that a refused run changes nothing (data/runs and reports/runs/dev.run are
`persist` outputs: DVC does not delete them before the stage runs): `serve` chooses the
sandbox first (`system.sandbox: auto` stops here when no sandbox works) and the atoms to
serve; the stage writes the served atoms (`write_served`: the system reads them); then
`retrieve` runs the system, and the stage writes the run's files only when every query
has been sent.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from bench.ingest.atom_codes import ATOM_CODE, HIT_COLUMNS
from bench.memo import Memo
from bench.systems.partwise import MEASURED_IN, Text, new_run_id
from bench.systems.run import SYSTEM_COLUMNS, ReplayError, RunResult, latency_percentiles, run_queries

if TYPE_CHECKING:
    from bench.params import ExecutorParams, SystemParams


class StepError(Exception):
    """The step cannot go on; str() is the one line for the user (nothing was written)."""


@dataclass(frozen=True)
class SystemPlaces:
    """Where a system's sandbox lives and what it may never see (the stage fills it in)."""

    root: Path  # the project
    store: Path  # the corpus store (raw media shown to a command system)
    temp_root: Path  # bench.systems.sandbox.workdir.system_temp_root(root)
    protected: Sequence[Path]  # bench.systems.sandbox.workdir.protected_paths(root)
    host_env: Mapping[str, str]
    mirrors: Sequence[Path] = ()  # params fetch.mirror_dirs, resolved
    local_datasets: Sequence[Path] = ()  # params local_datasets, resolved

    @classmethod
    def of_project(cls, root: Path, store: Path, host_env: Mapping[str, str], mirrors: Sequence[Path],
                   local_datasets: Sequence[str]) -> SystemPlaces:
        """The places of the project at `root` (`local_datasets` as params.yaml writes them)."""
        from bench.systems.sandbox.workdir import protected_paths, system_temp_root

        return cls(root=root, store=store, temp_root=system_temp_root(root), protected=protected_paths(root), host_env=host_env,
                   mirrors=mirrors, local_datasets=[(root / f).resolve() for f in local_datasets])


@dataclass
class SystemRun:
    """One run of the system under test as the step made it (run_system): the named run, latency,
    failures and memory hits (bench.systems.run.RunResult), the system.json record, and the check
    of memory citations. `retrieve` turns it into what the stage writes (Retrieved)."""

    result: RunResult
    info: dict[str, Any] = field(default_factory=dict)  # the system.json record (isolation included)
    citations: Any = None  # the run's bench.systems.credit.provenance.CitationCheck (memory hits' units)
    sandbox: dict[str, Any] = field(default_factory=dict)  # isolation, isolation_note of the opened system
    declared: bool = False  # the system declared abstention
    build_s: float = 0.0
    run_s: float = 0.0
    trec: str | None = None  # the run's TREC lines when they were assembled from reused groups' (bench.systems.partwise)


def run_system(cfg: SystemParams, entries: list[dict], served: Mapping[str, pd.DataFrame], *, places: SystemPlaces,
               segments: pd.DataFrame | Callable[[], pd.DataFrame | None] | None, manifest_rows: list[dict], executor: Any = None,
               isolation: Any = None, warm_entries: list[dict] | None = None) -> SystemRun:
    """Open `cfg`'s system over the served atoms and send it `entries` (timed); StepError on any refusal or fault.

    `segments` (or a function loading them, called when first needed) give a command
    system its media, a replayed system its events and memory hits their citations'
    units. `info` holds what system.json records, `isolation` and `isolation_note`
    included; `isolation` is a bench.systems.sandbox.isolation.Isolation chosen earlier (None: chosen here);
    `warm_entries`: the entries whose queries warm up (default: the first `system.warmup`)."""
    from bench.systems import MissingExtra
    from bench.systems.adapters.external import SystemCrash
    from bench.systems.config import described, sandboxed
    from bench.systems.credit.provenance import CitationCheck
    from bench.systems.replay import event_stream
    from bench.systems.sandbox.workdir import SandboxError
    from bench.systems.session import open_system, served_sources

    atoms = pd.concat([f[SYSTEM_COLUMNS] for f in served.values()], ignore_index=True)
    corpus = functools.cache(segments if callable(segments) else lambda: segments)
    check = CitationCheck(corpus)
    try:
        start = time.perf_counter()
        command = sandboxed(cfg)
        with open_system(cfg, served, atoms, segments=corpus() if command else None,
                         manifest_rows=manifest_rows if command else [], store=places.store, root=places.root,
                         temp_root=places.temp_root, protected=list(places.protected), host_env=places.host_env,
                         mirrors=places.mirrors, local_datasets=places.local_datasets, isolation=isolation) as opened:
            build_s = time.perf_counter() - start  # a Python system's index build (a command system starts in the run)
            start = time.perf_counter()
            result = run_queries(opened.adapter, entries, cfg.depth, timeout_s=cfg.timeout_s, concurrency=cfg.concurrency,
                                 warmup=cfg.warmup, known_atoms=set(atoms["atom_id"].astype(str)), executor=executor,
                                 events=lambda: event_stream(_loaded(corpus), [s for s, _, _ in served_sources(served)]),
                                 check_memory=check, probe_every=cfg.probe_every, probe_wait_s=cfg.probe_wait_s,
                                 warm_entries=warm_entries)
            run_s = time.perf_counter() - start
            declared = bool(getattr(opened.adapter, "abstains", False))
            description = described(getattr(opened.adapter, "system", None))  # an in-process system's own words
            sandbox = opened.info
    except SandboxError as exc:
        raise StepError(str(exc)) from None
    except MissingExtra as exc:
        raise StepError(f"params.yaml system: {exc}") from None
    except SystemCrash as exc:
        raise StepError(f"system {cfg.name!r} could not be started: {exc}") from None
    except (ValueError, RuntimeError) as exc:
        raise StepError(f"system {cfg.name!r}: {exc}") from None
    record = system_record(cfg, result, len(entries), len(atoms), sandbox, declared, build_s, run_s)
    return SystemRun(result, {**record, "description": description}, check, dict(sandbox), declared, build_s, run_s)


def _loaded(corpus: Callable[[], pd.DataFrame | None]) -> pd.DataFrame:
    seg = corpus()
    if seg is None:
        raise ReplayError("a replayed system needs the corpus's segments; run the extract stage first")
    return seg


def system_record(cfg: SystemParams, result: RunResult, n_entries: int, n_atoms: int, sandbox: Mapping[str, Any],
                  declared: bool, build_s: float, run_s: float) -> dict[str, Any]:
    return {
        "name": cfg.name, "adapter": cfg.adapter, "entry": cfg.entry, "depth": cfg.depth, "atoms": n_atoms,
        "concurrency": cfg.concurrency, "timeout_s": cfg.timeout_s,
        "warmup_queries": result.info["warmup_queries"], "warm": result.info["warm"], "restarts": result.info["restarts"],
        "queries": n_entries, "failed": len(result.failures),
        "failed_by_kind": {str(k): int(v) for k, v in result.failures["kind"].value_counts().sort_index().items()},
        "latency": latency_percentiles(result.latency["latency_ms"]), "index_build_s": round(build_s, 3),
        "isolation": sandbox["isolation"], "isolation_note": sandbox.get("isolation_note", ""),
        "sandbox": cfg.sandbox, "code": None if cfg.code is None else list(cfg.code),
        "abstains": declared or bool(result.latency["abstain"].any()), "abstains_declared": declared,
        "run_s": round(run_s, 3), "in_flight": result.info["in_flight"], "answered_on": result.info["answered_on"],
        **replay_record(result),
    }


def replay_record(result: RunResult) -> dict[str, Any]:
    """system.json's replay fields: whether it was replayed, events sent, memory hits."""
    out: dict[str, Any] = {"replay": bool(result.info.get("replay", False)), "given_atoms": bool(result.info.get("given_atoms", True)),
                           "memory_hits": len(result.memories)}
    if out["replay"]:
        ingest = result.ingest
        out["events"] = len(ingest)
        out["ingest"] = {"overall": latency_percentiles(ingest["ingest_ms"]),
                         **{str(m): latency_percentiles(g["ingest_ms"]) for m, g in ingest.groupby("modality", sort=True)}}
        out["replay_facts"] = result.info.get("replay_facts", {})  # start_empty, searchable; an MCP server's memories
    return out


# --------------------------------------------------------------------------- the dev stage's step


@dataclass(frozen=True)
class RetrievePaths:
    atoms: Path  # data/atoms
    segments: Path  # data/segments
    manifest: Path  # data/manifest
    served: Path  # data/served


@dataclass(frozen=True)
class Serving:
    """What `serve` decided before anything is written: the atoms to serve (partitions, or None:
    data/atoms copied as they are), where they come from (served.json), and the sandbox."""

    parts: list[tuple[str, str, pd.DataFrame]] | None
    provenance: dict[str, Any]
    isolation: Any  # bench.systems.sandbox.isolation.Isolation, or None for an in-process system


@dataclass(frozen=True)
class Retrieved:
    """What the dev retrieve step hands its stage to write (data/runs, data/memories, served.json, dev.run)."""

    run: pd.DataFrame  # coded (bench/ingest/atom_codes.py): data/runs/dev.parquet
    result: RunResult  # latency, failures, ingest as the run measured them; the named run for the TREC file
    info: dict[str, Any]  # data/runs/system.json
    memories: pd.DataFrame
    units: pd.DataFrame
    hits: pd.DataFrame  # the memory hits: query, rank, atom code
    served: dict[str, Any]  # data/served/served.json
    summary: str  # the line the stage prints
    trec: str | None = None  # reports/runs/dev.run's text when reused groups gave theirs (else the stage formats the run)


def served_atoms(atoms_file: str | None, paths: RetrievePaths, root: Path) -> tuple[list[tuple[str, str, pd.DataFrame]] | None, dict]:
    """(partitions to write, or None to copy data/atoms as is; provenance)."""
    from bench.ingest.partitions import partition_files
    from bench.io import sha256_file

    if atoms_file is None:
        if not partition_files(paths.atoms):
            raise StepError(f"no atoms in {paths.atoms.name}/; run the chunk stage first")
        return None, {"source": "harness chunking (data/atoms)"}
    from bench.ingest.corpus import load_segments
    from bench.systems.atoms import AtomsError, load_system_atoms

    path = (root / atoms_file).resolve()
    try:
        frames = load_system_atoms(path, load_segments(paths.segments))
    except AtomsError as exc:
        raise StepError(str(exc)) from None
    if not frames:
        raise StepError(f"{atoms_file}: system.atoms: the file holds no atoms")
    # the system's atoms partitioned like the harness's: by modality, then data set
    parts = [(m, str(ds), part.reset_index(drop=True)) for m in sorted(frames) for ds, part in frames[m].groupby("dataset", sort=True)]
    return parts, {"source": "system", "file": atoms_file, "sha256": sha256_file(path)}


def write_served(parts: list[tuple[str, str, pd.DataFrame]] | None, paths: RetrievePaths) -> None:
    from bench.ingest.partitions import partition_files, write_partitions
    from bench.io import atomic_writer

    paths.served.mkdir(parents=True, exist_ok=True)
    if parts is None:  # byte copies: an unchanged chunking leaves resolve up to date
        keep = set()
        for src in partition_files(paths.atoms):
            dst = paths.served / src.parent.name / src.name
            dst.parent.mkdir(parents=True, exist_ok=True)
            with atomic_writer(dst, "wb") as fh:
                fh.write(src.read_bytes())
            keep.add(dst)
        write_partitions(paths.served, [], keep=keep)
    else:
        write_partitions(paths.served, parts)


def serve(cfg: SystemParams, paths: RetrievePaths, places: SystemPlaces) -> Serving:
    """The refusals that must come before anything is written (the sandbox, the system's atoms file)
    and the atoms to serve; the stage writes them (`write_served`) before `retrieve`."""
    from bench.systems.config import sandboxed
    from bench.systems.sandbox.isolation import choose_isolation
    from bench.systems.sandbox.workdir import SandboxError

    try:  # first: a refused sandbox changes nothing
        isolation = choose_isolation(cfg.sandbox, path_env=places.host_env.get("PATH")) if sandboxed(cfg) else None
    except SandboxError as exc:
        raise StepError(str(exc)) from None
    parts, provenance = served_atoms(cfg.atoms, paths, places.root)
    return Serving(parts, provenance, isolation)


def retrieve(cfg: SystemParams, entries: list[dict], serving: Serving, *, paths: RetrievePaths, places: SystemPlaces,
             where: ExecutorParams, memo: Memo | None = None, text: Text | None = None) -> Retrieved:
    """The dev retrieve stage's step (`where`: params executor, checked): runs the system over the
    served atoms (data/served, written by the stage from `serving`) and returns what the stage writes.
    `memo`: a built-in system's answers reused by content (bench.systems.partwise); None: every query sent.
    `text`: formats run rows as TREC lines (stored with a group, so a reused group's are not formatted again)."""
    from bench.executor import ExecutorError, open_executor, using
    from bench.ingest.atom_codes import AtomCodeError, served_ids
    from bench.systems.credit.provenance import coded_run
    from bench.systems.partwise import LIGHT_COLUMNS, reusable

    # a run that may reuse answers reads the atoms' text only of the parts it builds a system over
    served = read_served(paths.served, LIGHT_COLUMNS if reusable(cfg, memo) else None)
    try:
        with open_executor(where.kind, where.address, where.workers) as ex, using(ex):
            ran = answer(cfg, entries, served, serving, paths=paths, places=places, where=where.kind, executor=ex, memo=memo, text=text)
    except ExecutorError as exc:
        raise StepError(str(exc)) from None
    provenance = serving.provenance
    info = {**ran.info, "atoms_source": provenance, "executor": where.kind}  # where the queries ran: never part of dev.json
    try:  # atoms as integer codes into the served table, memories after them, query ids categorical (bench/ingest/atom_codes.py)
        coded, memories = coded_run(ran.result.run, ran.result.memories, served_ids(served), ran.citations)
    except AtomCodeError as exc:
        raise StepError(f"system {cfg.name!r}: {exc}") from None
    mine = coded[ATOM_CODE].to_numpy() >= len(served_ids(served))
    hits = coded.loc[mine, HIT_COLUMNS].astype({"query_id": str})
    counts = pd.concat([f["modality"] for f in served.values()]).value_counts().sort_index()
    lat = info["latency"]
    p50 = "—" if lat["p50_ms"] is None else f"{lat['p50_ms']:.2f} ms"
    reused = f"; {info['reused_queries']} answers reused ({', '.join(info['parts_built']) or 'no index built'})" if info["reused_queries"] else ""
    summary = (f"retrieve: {cfg.name} ({cfg.adapter}): {len(entries)} queries over {info['atoms']} atoms; failed {info['failed']}; "
               f"p50 {p50} (n={lat['n']}, concurrency {cfg.concurrency}, warm-up {info['warmup_queries']}); isolation {info['isolation']}"
               f"{reused}")
    return Retrieved(run=coded, result=ran.result, info=info, memories=memories.memories, units=memories.units, hits=hits,
                     served={**provenance, "atoms": {m: int(n) for m, n in counts.items()}}, summary=summary, trec=ran.trec)


def answer(cfg: SystemParams, entries: list[dict], served: dict[str, pd.DataFrame], serving: Serving, *, paths: RetrievePaths,
           places: SystemPlaces, where: str, executor: Any, memo: Memo | None, text: Text | None = None) -> SystemRun:
    """Every entry's answer: the query groups an earlier run answered from byte-identical inputs
    reused (bench.systems.partwise), the rest sent to a system built over the parts they read;
    the latency table names the run that measured each query (`measured_in`)."""
    from bench.ingest.corpus import Manifest, load_segments
    from bench.systems.config import sandboxed
    from bench.systems.partwise import part_digests, plan, with_measured_in

    run_id = new_run_id()
    reuse = None if memo is None else plan(cfg, entries, served, part_digests(paths.served, sorted(served), places.root), memo, where)
    rows = list(range(len(entries))) if reuse is None else reuse.rows_to_run()
    ran = None
    if rows:
        sub = [entries[i] for i in rows]
        warm = None if reuse is None else [sub[i % len(sub)] for i in range(min(cfg.warmup, len(entries)))]
        ran = run_system(cfg, sub, served if reuse is None else read_served(paths.served, only=reuse.parts_to_build()), places=places,
                         segments=lambda: load_segments(paths.segments), executor=executor, isolation=serving.isolation,
                         manifest_rows=list(Manifest.load(paths.manifest).rows) if sandboxed(cfg) else [], warm_entries=warm)
        ran.result.latency = with_measured_in(ran.result.latency, run_id)
    if reuse is None:
        assert ran is not None
        ran.info.update(run_id=run_id, reused_queries=0, parts_built=sorted(served), latency_measured_in={run_id: len(ran.result.latency)})
        return ran
    stored = reuse.stored_info()
    fresh = None if ran is None or text is None else text(ran.result.run)  # the new answers' TREC lines, formatted once
    if ran is not None:
        reuse.store(entries, ran.result, {**ran.result.info, **ran.sandbox, "abstains_declared": ran.declared,
                                          "description": ran.info.get("description")}, fresh)
    result, trec = reuse.merge(entries, None if ran is None else ran.result, text, fresh)
    result.info = {**stored, **(ran.result.info if ran else {}), "warm": all([stored.get("warm", True), ran is None or ran.result.info["warm"]])}
    sandbox = ran.sandbox if ran is not None else {"isolation": stored.get("isolation"), "isolation_note": stored.get("isolation_note", "")}
    declared = ran.declared if ran is not None else bool(stored.get("abstains_declared"))
    n_atoms = sum(len(f) for f in served.values())
    info = system_record(cfg, result, len(entries), n_atoms, sandbox, declared, ran.build_s if ran else 0.0, ran.run_s if ran else 0.0)
    info["description"] = ran.info.get("description") if ran is not None else stored.get("description")  # the system's own words
    counts = result.latency[MEASURED_IN].value_counts().sort_index()
    info.update(run_id=run_id, reused_queries=reuse.reused(), parts_built=reuse.parts_to_build(),
                latency_measured_in={str(r): int(n) for r, n in counts.items()})
    return SystemRun(result, info, None if ran is None else ran.citations, sandbox, declared, trec=trec)


def read_served(folder: Path, columns: list[str] | None = None, only: Sequence[str] | None = None) -> dict[str, pd.DataFrame]:
    """modality -> its served partitions, concatenated (bench.ingest.partitions.read_modalities), of
    the modalities `only` (None: every one), the `columns` (None: every one)."""
    from bench.ingest.partitions import concat_partitions, partitions

    by_modality: dict[str, list[pd.DataFrame]] = {}
    for part in partitions(folder):
        if only is None or part.modality in only:
            by_modality.setdefault(part.modality, []).append(pd.read_parquet(part.path, columns=columns))
    return {m: concat_partitions(frames) for m, frames in by_modality.items()}
