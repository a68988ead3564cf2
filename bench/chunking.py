"""Chunk parsed segments into atoms with each modality's configured strategy."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.modalities import modalities


def chunk_modality(modality: str, segments: pd.DataFrame, config: dict[str, Any]) -> pd.DataFrame:
    """Atoms of one modality; `config` is that modality's block of params (strategy + options)."""
    mod = modalities()[modality]
    strategy = config.get("strategy", mod.strategies[0])
    if strategy not in mod.strategies:
        raise ValueError(f"chunking.{modality}.strategy: {strategy!r} is not one of {list(mod.strategies)}")
    atoms = mod.chunk(segments, strategy, config)
    if atoms["atom_id"].duplicated().any():
        dup = atoms.loc[atoms["atom_id"].duplicated(), "atom_id"].iloc[0]
        raise ValueError(f"{modality} chunker {strategy!r} produced a duplicate atom id {dup}")
    atoms["observed_at"] = pd.to_datetime(atoms["observed_at"], utc=True)
    return atoms.reset_index(drop=True)


def chunk_all(segments: pd.DataFrame, params: dict[str, dict[str, Any]]) -> dict[str, pd.DataFrame]:
    """modality -> atoms, for every modality that has segments."""
    out: dict[str, pd.DataFrame] = {}
    for modality, seg in segments.groupby("modality", sort=True):
        out[str(modality)] = chunk_modality(str(modality), seg, params.get(str(modality), {}))
    return out


def atom_stats(atoms: pd.DataFrame) -> dict[str, Any]:
    lengths = atoms["text"].str.len()
    return {
        "atoms": int(len(atoms)),
        "sources": int(atoms["source_id"].nunique()),
        "empty_text": int((lengths == 0).sum()),
        "median_chars": float(lengths.median()) if len(atoms) else 0.0,
    }
