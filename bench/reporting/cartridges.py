"""What each run of an A/B page handed the reader (bench.reporting.compare_page): its top-k
hits with the gold regions each overlaps, and where the budget measures' packing stops in
its ranking.

The hits come from the run's ``data/`` outputs: a project folder's own, or, for a run named
by a revision or an experiment, the DVC cache's by the hashes its commit's dvc.lock records
(:func:`locate`; bench.comparison.runs.run_outputs checks that they are the outputs the
run's per-query table was computed from, and refuses the page otherwise).

The budget cut is the packing of bench.evaluation.measures.budget (``packed_atoms``, the
rule recall@budget and coverage@budget count with): each hit of the entry's own unit is
packed whole, cut (the boundary atom, its leading part), or left beyond the budget; a hit
of another modality is not paid from this budget. An answer that abstained hands the
reader nothing whatever the packing says; the page says so beside its hits.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.comparison.runs import LoadedRun, committed_file, run_outputs
from bench.ingest.atom_codes import ATOM_CODE
from bench.reporting.html_report import SNIPPET  # characters of an atom's text shown beside a hit, as dev.html shows it

__all__ = ["PACK_BEYOND", "PACK_CUT", "PACK_OTHER", "PACK_WHOLE", "RunDetail", "RunFiles", "budget_cut", "load_detail", "locate",
           "located", "source_of"]

#: a hit's place in the cartridge the budget packs (the page's legend)
PACK_WHOLE, PACK_CUT, PACK_BEYOND, PACK_OTHER = "p", "c", "o", "x"


@dataclass(frozen=True)
class RunFiles:
    """Where one run's data/ outputs are (the entry layer names them: bench.project.layout.Layout)."""

    runs: Path  # data/runs (dev.parquet: the run's rows)
    resolved: Path  # data/resolved (gold atoms, regions, segments, memories)
    valid: Path  # data/sets (dev.jsonl: the validated entries)
    served: Path  # data/served (the atoms the system was served)
    manifest: Path  # bench/corpus/manifest.jsonl (which corpus files are present)
    store: Path  # data/corpus (the files the pictures are drawn from)


def locate(run: LoadedRun, relative: RunFiles, per_query: str, scratch: Path) -> RunFiles | str:
    """`run`'s files (`relative`: the project-relative paths, bench.project.layout's): a folder's
    own, or a commit's data/ outputs from the DVC cache linked under `scratch`, its manifest
    from git and the corpus files of the repository's store (pinned by sha256, so the same
    bytes); a string: why there are none. CompareError (bench.comparison.runs.run_outputs)
    when the outputs are not the run of its per-query table."""
    names = ("runs", "resolved", "valid", "served")
    got = run_outputs(run, [str(getattr(relative, n)) for n in names], per_query, scratch)
    if isinstance(got, str):
        return got
    manifest = committed_file(run, str(relative.manifest), scratch)
    home = run.folder if run.folder is not None else run.repo
    return RunFiles(**{n: got[str(getattr(relative, n))] for n in names}, manifest=manifest or scratch / "no-manifest",
                    store=(home or scratch) / relative.store)


@contextmanager
def located(runs: Sequence[LoadedRun], layout: Any, per_query: str) -> Iterator[tuple[RunFiles | str, ...]]:
    """Each run's files (:func:`locate`), a commit's linked in a scratch folder removed afterwards;
    `layout`: the project's paths relative to its folder (bench.project.layout.Layout of ``Path()``:
    runs, resolved, valid_dir, served, manifest, store)."""
    relative = RunFiles(runs=layout.runs, resolved=layout.resolved, valid=layout.valid_dir, served=layout.served,
                        manifest=layout.manifest, store=layout.store)
    with tempfile.TemporaryDirectory(prefix="bench-cartridges-") as scratch:
        yield tuple(locate(run, relative, per_query, Path(scratch) / str(i)) for i, run in enumerate(runs))


@dataclass(frozen=True)
class RunDetail:
    """What one run handed the reader, read from its data/ outputs."""

    entries: dict[str, dict[str, Any]]  # query_id -> its valid entry (question, as_of, gold)
    regions: pd.DataFrame  # the resolved gold regions (query_id, gold_idx, source_id, extent, n_atoms)
    #: query_id -> its top-k hits: rank, score, atom (an index into ``atoms``), the gold regions it overlaps,
    #: and ``pack``, its place in the budget's cartridge (PACK_*; absent where the entry has no budget)
    hits: dict[str, list[dict[str, Any]]]
    atoms: list[dict[str, Any]]  # atom_id, source_id, extent (JSON text), text (snippet), memory facts
    files: RunFiles
    #: query_id -> the budget's cut: amount, spent, unit, last (the last rank packed), beyond (packing went past rank k)
    cuts: dict[str, dict[str, Any]]


def _atoms_info(served: dict[str, pd.DataFrame], memories: Any) -> pd.DataFrame:
    """Row i: atom code i (served atoms in modality-name order, then the run's memories), as
    bench.reporting.outputs builds the drill-down's atom table."""
    frames = [served[m][["atom_id", "source_id", "text", "extent"]] for m in sorted(served)]
    if memories:
        info = memories.info()
        rows = memories.rows
        info["memory"] = [{"citations": int(c), "supported": int(s), "units": int(u), "units_supported": int(us)}
                          for c, s, u, us in zip(rows["citations"], rows["citations_supported"], rows["units"],
                                                 rows["units_supported"], strict=True)]
        frames.append(info)
    return pd.concat(frames, ignore_index=True)


def load_detail(files: RunFiles, k: int, per_query: pd.DataFrame | None = None,
                budget: Mapping[str, Any] | None = None) -> RunDetail | None:
    """The cartridges of the run whose data/ outputs `files` names (None when they are not there);
    with its per-query table and dev.json's ``run.budget``, where the budget cut falls in each."""
    from bench.evaluation.memory_report import load_memory_inputs
    from bench.gold.table import GOLD_COLUMNS, GOLD_FILE, read_regions
    from bench.ingest.partitions import read_modalities
    from bench.io import iter_jsonl

    lay = files
    needed = (lay.runs / "dev.parquet", lay.resolved / GOLD_FILE, lay.valid / "dev.jsonl", lay.served)
    if not all(p.exists() for p in needed):
        return None
    entries = {str(e["query_id"]): e for _, e in iter_jsonl(lay.valid / "dev.jsonl")}
    memories = load_memory_inputs(lay.resolved)
    served = read_modalities(lay.served)
    info = _atoms_info(served, memories)
    every = pd.read_parquet(lay.runs / "dev.parquet", columns=["query_id", "rank", ATOM_CODE, "score"]).astype({"query_id": str})
    cut = {} if per_query is None or budget is None else budget_cut(every, served, memories, per_query, budget, k)
    run = every.loc[every["rank"] <= k].sort_values(["query_id", "rank"], kind="stable")
    gold = pd.read_parquet(lay.resolved / GOLD_FILE, columns=GOLD_COLUMNS).astype({"query_id": str})
    covers = gold.groupby(["query_id", ATOM_CODE])["gold_idx"].agg(lambda s: sorted(int(x) for x in s)).to_dict()
    used = np.unique(run[ATOM_CODE].to_numpy(np.int64))
    position = {int(code): i for i, code in enumerate(used)}
    atoms = []
    for code in used:
        row = info.iloc[int(code)]
        atom_id, source = str(row["atom_id"]), str(row["source_id"])
        # an id that starts with its source names the source by the prefix's length (most atoms: a third of the bytes)
        named = {"sp": len(source)} if source and atom_id.startswith(source) else {"source": source}
        atoms.append({"id": atom_id, **named, "extent": str(row["extent"]), "text": str(row["text"])[:SNIPPET],
                      **({"memory": row["memory"]} if isinstance(row.get("memory"), dict) else {})})
    hits: dict[str, list[dict[str, Any]]] = {}
    for q, rank, atom, score in run.itertuples(index=False):
        marks = cut.get(q, {}).get("marks")
        hits.setdefault(q, []).append({"rank": int(rank), "score": round(float(score), 4), "atom": position[int(atom)],
                                       "gold": covers.get((q, int(atom)), []),
                                       **({} if marks is None else {"pack": marks.get(int(rank), PACK_OTHER)})})
    regions = read_regions(lay.resolved).regions.astype({"query_id": str})
    return RunDetail(entries, regions, hits, atoms, files, {q: {x: v for x, v in c.items() if x != "marks"} for q, c in cut.items()})


def budget_cut(run: pd.DataFrame, served: dict[str, pd.DataFrame], memories: Any, per_query: pd.DataFrame,
               budget: Mapping[str, Any], k: int) -> dict[str, dict[str, Any]]:
    """Per answerable, not failed entry whose modality has a budget: where the budget measures'
    packing (bench.evaluation.measures.budget.packed_atoms, over the whole ranking `run`:
    query_id, rank, atom code) puts each of its ranks -- ``marks`` rank -> PACK_WHOLE, PACK_CUT
    or PACK_BEYOND (ranks of another unit are not paid from it: PACK_OTHER) -- the budget
    ``amount``, what is ``spent``, its ``unit``, the ``last`` rank packed and whether packing went
    ``beyond`` rank `k`. `budget`: dev.json's ``run.budget`` (modality -> amount and unit)."""
    from bench.evaluation.measures.budget import packed_atoms
    from bench.evaluation.measures.extent import atom_extents, own_unit_rows

    amounts = {str(m): c.get("amount") for m, c in budget.items() if isinstance(c, dict)}
    units = {str(m): c.get("unit", "") for m, c in budget.items() if isinstance(c, dict)}
    pq = per_query.assign(query_id=per_query["query_id"].astype(str))
    pq = pq.loc[~pq["unanswerable"].astype(bool) & ~pq["failed"].astype(bool) & pq["modality"].astype(str).map(amounts).notna()]
    if not len(pq):
        return {}
    which = pd.DataFrame({"query_id": pq["query_id"].to_numpy(), "entry_modality": pq["modality"].astype(str).to_numpy(),
                          "amount": pq["modality"].astype(str).map(amounts).astype(float).to_numpy()})
    atom_ext = atom_extents(served)
    extents = None
    if memories:  # memory codes follow the served atoms' (bench.systems.credit.provenance)
        _, atom_ext, extents = memories.joined(pd.DataFrame(index=pd.RangeIndex(len(atom_ext))), atom_ext)
    rows = run.loc[run["query_id"].isin(set(which["query_id"])), ["query_id", ATOM_CODE, "rank"]]
    packed = packed_atoms(rows, atom_ext, which, extents)
    own = own_unit_rows(rows, atom_ext, dict(zip(which["query_id"], which["entry_modality"], strict=True)), extents)
    modality_of = dict(zip(which["query_id"], which["entry_modality"], strict=True))
    own = own_unit_rows(rows, atom_ext, modality_of, extents)
    qs, ranks = packed["query_id"].astype(str).to_numpy(), packed["rank"].to_numpy(np.int64)
    last = pd.Series(ranks, index=qs).groupby(level=0).max()
    spent = pd.Series(packed["packed_extent"].to_numpy(float), index=qs).groupby(level=0).sum()
    out: dict[str, dict[str, Any]] = {}
    for q, amount, modality in zip(which["query_id"], which["amount"], which["entry_modality"], strict=True):
        top = int(last.get(q, 0))
        out[str(q)] = {"marks": {}, "amount": float(amount), "unit": units.get(modality, ""), "spent": round(float(spent.get(q, 0.0)), 1),
                       "last": top, "beyond": top > k}
    for q, rank, whole in zip(qs, ranks, packed["whole"].to_numpy(bool), strict=True):
        out[q]["marks"][int(rank)] = PACK_WHOLE if whole else PACK_CUT
    for q, rank in zip(own["query_id"].astype(str).to_numpy(), own["rank"].to_numpy(np.int64), strict=True):
        if rank > out[q]["last"]:
            out[q]["marks"][int(rank)] = PACK_BEYOND
    return out


def source_of(atom: dict[str, Any]) -> str:
    """An atom's source id (:func:`load_detail` names it by a prefix's length where it can)."""
    return atom["id"][:atom["sp"]] if "sp" in atom else atom["source"]

