"""Paths, params and the failure exit shared by the stage scripts; imports no modality.

stages/common.py re-exports all of it and adds what needs the data-set registry
(every modality); a per-modality stage imports this module only, so its DVC deps
name only its own modality's code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
import yaml

ROOT = Path(__file__).resolve().parent.parent
PARAMS = ROOT / "params.yaml"
MANIFEST = ROOT / "bench" / "corpus" / "manifest.jsonl"
SETS_DIR = ROOT / "bench" / "sets"
SPLIT_LOCK = SETS_DIR / "splits.lock"
STORE = ROOT / "data" / "corpus"
SEGMENTS = ROOT / "data" / "segments"  # <modality>/<dataset key>.parquet
OCR_CACHE = ROOT / "data" / "ocr-cache"  # <modality>/: persistent OCR cache (DVC persist out)
VALID_DIR = ROOT / "data" / "sets"
ATOMS = ROOT / "data" / "atoms"
SERVED = ROOT / "data" / "served"  # the atoms the system under test serves (retrieve stage)
RUNS = ROOT / "data" / "runs"
RESOLVED = ROOT / "data" / "resolved"
REPORTS = ROOT / "reports"


def params() -> dict[str, Any]:
    with open(PARAMS, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def fail(message: str) -> None:
    """One line on stderr and exit 1: the stage's outputs are left as they were."""
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
