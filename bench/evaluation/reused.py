"""A query block's per-query columns reused by content, one modality's queries at a time (bench.memo kind "blocks").

The per-query work of a block (bench.evaluation.evaluate.evaluate_block: the ``query``
phase's columns and every ``block`` phase family's) depends, for a set of queries, only on
those queries' own rows: their entries, run rows, gold rows, regions and responses, the
served atoms those rows name (their holder, time and extent), the failed and abstained
among them, k and the budget, and the evaluation's code. That is the contract of the
phases (a block of any size gives every query the same columns: bench.evaluation.measures.base),
not a property of today's measures, so it holds for any measure declared in those phases.

So the queries of each modality in a block are keyed by exactly those inputs and their
columns are reused when an earlier evaluation had the same: a chunking change confined
to one modality recomputes that modality's queries only. Atom codes are positions in the
served table, which move when another modality's atom count changes: the key names each
atom by its modality and its row within that modality's atoms, and holds the content of
every modality's atoms it names (their rows of the atom table and of the extents), so
the same atoms at other codes are the same inputs. The stored frames hold no atom code.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluation.blocks import query_positions
from bench.ingest.atom_codes import ATOM_CODE
from bench.memo import Memo

__all__ = ["ModalityAtoms", "reuse_block"]

#: the response columns that say where a latency was measured, not what the system answered
NOT_INPUT = ("measured_in",)


def _hash(frame: pd.DataFrame) -> bytes:
    """The frame's content (values, column names and dtypes; not its index) as bytes."""
    frame = frame.reset_index(drop=True)
    values = pd.util.hash_pandas_object(frame, index=False, categorize=True).to_numpy() if len(frame.columns) else np.zeros(0)
    return repr([(str(c), str(t)) for c, t in frame.dtypes.items()]).encode() + np.asarray(values, dtype=np.uint64).tobytes()


class ModalityAtoms:
    """Which modality each atom code belongs to, and each modality's atoms by content."""

    def __init__(self, atoms: pd.DataFrame, atom_ext: pd.DataFrame) -> None:
        modality = atom_ext["modality"].astype(str).to_numpy()
        change = np.flatnonzero(modality[1:] != modality[:-1]) + 1 if len(modality) else np.zeros(0, dtype=np.int64)
        self.starts = np.concatenate([[0], change]).astype(np.int64) if len(modality) else np.zeros(0, dtype=np.int64)
        self.names = [str(modality[s]) for s in self.starts]
        self.n = len(modality)
        self._atoms, self._ext = atoms, atom_ext
        self._digests: dict[int, bytes] = {}

    def local(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(modality number, row within that modality's atoms) of each code (codes past the served atoms: -1, the code)."""
        codes = np.asarray(codes, dtype=np.int64)
        part = np.searchsorted(self.starts, codes, side="right") - 1
        known = (codes < self.n) & (part >= 0)
        return np.where(known, part, -1), np.where(known, codes - self.starts[np.clip(part, 0, None)], codes)

    def digest(self, part: int) -> bytes:
        if part not in self._digests:
            stop = self.starts[part + 1] if part + 1 < len(self.starts) else self.n
            rows = slice(int(self.starts[part]), int(stop))
            self._digests[part] = _hash(self._atoms.iloc[rows]) + b"|" + _hash(self._ext.iloc[rows])
        return self._digests[part]




def _named(frame: pd.DataFrame, atoms: ModalityAtoms) -> tuple[pd.DataFrame, list[int]]:
    """`frame` with its atom codes as (modality, row) and the modalities it names."""
    if ATOM_CODE not in frame.columns:
        return frame, []
    part, row = atoms.local(frame[ATOM_CODE].to_numpy())
    names = np.asarray([*atoms.names, ""], dtype=object)  # -1 (past the served atoms: a memory's code) -> ""
    out = frame.drop(columns=ATOM_CODE).assign(_part=names[part], _row=row)
    return out, sorted({int(p) for p in np.unique(part) if p >= 0})


def _frames(stored: Mapping[str, bytes]) -> list[pd.DataFrame]:
    return [pd.read_parquet(io.BytesIO(stored[name])) for name in sorted(stored, key=lambda n: int(n.split(".")[0]))]


def _blobs(frames: Sequence[pd.DataFrame]) -> dict[str, bytes]:
    out = {}
    for i, frame in enumerate(frames):
        buf = io.BytesIO()
        frame.reset_index(drop=True).to_parquet(buf, index=False)
        out[f"{i}.parquet"] = buf.getvalue()
    return out


def reuse_block(memo: Memo, entries: pd.DataFrame, run: pd.DataFrame, gold: pd.DataFrame, *, regions: pd.DataFrame,
                responses: pd.DataFrame, failed: Sequence[str], abstained: Sequence[str], atoms: ModalityAtoms,
                settings: Sequence[Any], compute: Callable[[pd.DataFrame, pd.DataFrame, pd.DataFrame], tuple[pd.DataFrame, list[pd.DataFrame]]],
                ) -> tuple[pd.DataFrame, list[pd.DataFrame], int]:
    """`compute(entries, run, gold)` -> (query rows, family frames) for the block, one modality's
    queries at a time, each reused when its inputs (module docstring) and `settings` (k, budget)
    are a stored one's; the frames in `entries`' order, and the queries reused."""
    failed_set, abstained_set = {str(q) for q in failed}, {str(q) for q in abstained}
    reg = regions.assign(_q=regions["query_id"].astype(str))
    resp = responses.drop(columns=[c for c in NOT_INPUT if c in responses.columns]) if responses is not None else pd.DataFrame()
    resp_q = resp["query_id"].astype(str) if len(resp.columns) else pd.Series(dtype=str)
    pieces: list[tuple[pd.DataFrame, list[pd.DataFrame]]] = []
    reused = 0
    # each row's query as its entry's modality number (a categorical query id is looked up by its categories only)
    ids_all = entries["query_id"].astype(str).tolist()
    mod_codes, mod_names = pd.factorize(entries["modality"].astype(str), sort=True)
    of_entry = np.append(mod_codes, -1)  # -1: a row of another block's query
    run_mod, gold_mod = of_entry[query_positions(run["query_id"], ids_all)], of_entry[query_positions(gold["query_id"], ids_all)]
    for m in range(len(mod_names)):
        ent = entries.iloc[np.flatnonzero(mod_codes == m)]
        wanted = set(ent["query_id"].astype(str))
        r, g = run.iloc[np.flatnonzero(run_mod == m)], gold.iloc[np.flatnonzero(gold_mod == m)]
        r_named, r_parts = _named(r, atoms)
        g_named, g_parts = _named(g, atoms)
        key = memo.key("blocks", _hash(ent), _hash(r_named), _hash(g_named), _hash(reg.loc[reg["_q"].isin(wanted)].drop(columns="_q")),
                       _hash(resp.loc[resp_q.isin(wanted).to_numpy()]) if len(resp.columns) else b"",
                       sorted(wanted & failed_set), sorted(wanted & abstained_set),
                       [[atoms.names[p], atoms.digest(p)] for p in sorted(set(r_parts) | set(g_parts))], list(settings))
        stored = memo.files("blocks", key)
        if stored is not None:
            reused += len(ent)
        else:  # computed, then read back as stored: a reused piece and a computed one are the same frames
            part, fams = compute(ent, r, g)
            stored = _blobs([part, *fams])
            memo.put_blobs("blocks", key, stored)
        frames = _frames(stored)
        pieces.append((frames[0], frames[1:]))
    order = {q: i for i, q in enumerate(entries["query_id"].astype(str))}

    def ordered(frames: list[pd.DataFrame]) -> pd.DataFrame:
        out = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        pos = out["query_id"].astype(str).map(order).to_numpy()
        return out.iloc[np.argsort(pos, kind="stable")].reset_index(drop=True)

    part = ordered([p for p, _ in pieces])
    families = [ordered([f[i] for _, f in pieces]) for i in range(len(pieces[0][1]))] if pieces else []
    return part, families, reused
