"""bench.ingest.store: segments laid out per modality, and modality sub-packages loaded one at a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from bench.ingest.store import load_segments, segment_files
from bench.modalities import load, names
from tests.dvc_deps import ROOT


def test_segments_are_read_from_modality_folders_in_dataset_order(tmp_path: Path) -> None:
    for modality, key in (("video", "medvidqa"), ("conversation", "locomo"), ("code", "cosqa")):
        (tmp_path / modality).mkdir(exist_ok=True)
        pd.DataFrame({"source_id": [f"{key}:a"], "n": [1]}).to_parquet(tmp_path / modality / f"{key}.parquet")
    (tmp_path / "stray.parquet").write_bytes(b"not read: segments live in <modality>/ folders")
    assert [p.stem for p in segment_files(tmp_path)] == ["cosqa", "locomo", "medvidqa"]
    seg = load_segments(tmp_path)
    assert seg is not None and seg["source_id"].tolist() == ["cosqa:a", "locomo:a", "medvidqa:a"]
    assert load_segments(tmp_path / "absent") is None


def test_load_imports_one_modality_only() -> None:
    code = "import sys; from bench.modalities import load; load('pdf'); print(sorted(m for m in sys.modules if m.startswith('bench.modalities.')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "bench.modalities.pdf" in out and "bench.modalities.image" not in out and "bench.modalities.ocr" not in out
    assert load("video").MODALITY.name == "video" and "video" in names()
    with pytest.raises(ValueError, match="unknown modality 'nope'"):
        load("nope")


def test_extract_stage_refuses_an_unknown_modality() -> None:
    proc = subprocess.run([sys.executable, "-m", "stages.extract", "nope"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"error: extract: unknown modality 'nope'; known: {', '.join(names())}"
