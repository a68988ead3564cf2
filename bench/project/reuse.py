"""Reuse of a whole stage's outputs by content (bench.memo): what the evaluate stage's
outputs are made of, and how stored outputs are written for a run whose params differ
only in what they merely record (docs/performance.md, *Reuse across runs*)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.io import digest_paths
from bench.memo import Memo
from bench.modalities.ocr import ACCURACY_FILE
from bench.params import Params
from bench.project.layout import DEV_METRICS, Layout

__all__ = ["evaluate_inputs", "evaluate_key", "with_chunking"]


#: the run record's fields (data/runs/system.json) that say how this retrieve went, which no output of
#: the evaluation shows: a run that reused every answer (bench.systems.partwise) reuses the evaluation too
RUN_ONLY = ("run_id", "run_s", "index_build_s", "reused_queries", "parts_built")


def evaluate_inputs(layout: Layout) -> list[Path]:
    """Every file the evaluate stage reads (data/corpus through the manifest, which names each file's
    sha256), the run's record (system.json) apart: :func:`run_record`."""
    runs = sorted(f for f in layout.runs.rglob("*") if f.is_file() and f.name != "system.json") if layout.runs.is_dir() else []
    return [layout.valid_dir, layout.sets_dir / "imports", layout.resolved, layout.served, *runs, layout.atoms / "stats.json",
            layout.manifest, layout.reports / ACCURACY_FILE.name]


def run_record(layout: Layout) -> dict[str, Any] | None:
    """data/runs/system.json without RUN_ONLY (None when missing)."""
    try:
        record = json.loads((layout.runs / "system.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {k: v for k, v in record.items() if k not in RUN_ONLY}


def evaluate_key(memo: Memo, cfg: Params, layout: Layout, script: Path) -> str:
    """The key of the evaluate stage's outputs: its inputs' content, its script, the code
    (bench.memo KIND_CODE) and every param it reads -- of params ``chunking`` only each
    modality's strategy, the one part the outputs show besides dev.json's ``run.chunking``
    (:func:`with_chunking`): a change of chunking options that leaves the atoms and the run
    as they were reuses the evaluation."""
    return memo.key("evaluate", digest_paths(evaluate_inputs(layout), layout.root), run_record(layout), script.read_bytes(),
                    asdict(cfg.metrics), asdict(cfg.system), cfg.executor.in_core_rows, cfg.datasets, cfg.local_datasets,
                    {m: c.get("strategy") if isinstance(c, dict) else c for m, c in cfg.chunking_written.items()})


def with_chunking(stored: dict[str, bytes], chunking: dict[str, Any]) -> dict[str, Any]:
    """Stored outputs with dev.json's ``run.chunking`` set to this run's params (as written)."""
    doc = json.loads(stored[DEV_METRICS])
    doc["run"]["chunking"] = chunking
    return {**stored, DEV_METRICS: doc}
