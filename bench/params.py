"""One schema for params.yaml, checked before any stage touches an output.

`check_params(doc)` walks the parsed YAML against the schema below and raises
`ParamsError` at the first problem, naming the dotted key: an unknown or misspelled
key (with the closest known key), a wrong type, NaN or infinity, a count that is not
a whole number, k < 1 or k > system.depth. The stage scripts call it through
`bench.project.selection.params()`, so every stage refuses bad params with one line and exit 1
before it writes anything; nothing here reads files or the environment.

Keys that other parts of the harness may add are known here already:
`metrics.calibration_recall` (float in (0, 1]), `system.sandbox` (auto | required |
off), `executor` (kind local | dask, address, workers, in_core_rows) and `local_datasets`.
`metrics.strong_score` is gone: false recall no longer reads a score threshold, so the
key is refused as unknown.

Chunking options are listed per modality in `CHUNK_OPTIONS` (the option names the
chunkers of bench/modalities read); the strategies come from the modalities
themselves, so a modality's new strategy needs no change here.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from typing import Any


class ParamsError(ValueError):
    """str() is the one-line message: `params.yaml: <key>: <problem>`."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"params.yaml: {key}: {problem}")
        self.key = key
        self.problem = problem


Check = Callable[[str, Any], None]


def _shown(value: Any) -> str:
    return repr(value) if not isinstance(value, float) else str(value)


def whole(minimum: int | None = None, *, nullable: bool = False) -> Check:
    def check(key: str, value: Any) -> None:
        if value is None and nullable:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParamsError(key, f"must be a whole number, got {_shown(value)}")
        if minimum is not None and value < minimum:
            raise ParamsError(key, f"must be >= {minimum}, got {value}")

    return check


def number(*, low: float | None = None, low_open: bool = False, high: float | None = None) -> Check:
    def check(key: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParamsError(key, f"must be a number, got {_shown(value)}")
        if not math.isfinite(value):
            raise ParamsError(key, f"must be a finite number, got {_shown(value)}")
        if low is not None and (value <= low if low_open else value < low):
            raise ParamsError(key, f"must be {'>' if low_open else '>='} {low:g}, got {_shown(value)}")
        if high is not None and value > high:
            raise ParamsError(key, f"must be <= {high:g}, got {_shown(value)}")

    return check


def choice(*options: str | None) -> Check:
    def check(key: str, value: Any) -> None:
        if value not in options:
            raise ParamsError(key, f"must be one of {[o for o in options]}, got {_shown(value)}")

    return check


def text(*, nullable: bool = False) -> Check:
    def check(key: str, value: Any) -> None:
        if value is None and nullable:
            return
        if not isinstance(value, str) or not value.strip():
            raise ParamsError(key, f"must be a non-empty string{' or null' if nullable else ''}, got {_shown(value)}")

    return check


def text_list(*, allow_all: bool = False, nonempty: bool = False) -> Check:
    def check(key: str, value: Any) -> None:
        if allow_all and value == "all":
            return
        if not isinstance(value, list) or any(not isinstance(v, str) or not v.strip() for v in value):
            what = '"all" or a list of names' if allow_all else "a list of names"
            raise ParamsError(key, f"must be {what}, got {_shown(value)}")
        if nonempty and not value:
            raise ParamsError(key, "must not be empty")
        dup = [v for i, v in enumerate(value) if v in value[:i]]
        if dup:
            raise ParamsError(key, f"lists {dup[0]!r} twice")

    return check


def sandbox_mode() -> Check:
    """system.sandbox: auto | required | off, and YAML's boolean for a bare `off` (false)."""
    modes = choice("auto", "required", "off")

    def check(key: str, value: Any) -> None:
        if value is not False:
            modes(key, value)

    return check


def code_paths() -> Check:
    """system.code: null, a path, or a non-empty list of paths (bench/systems/declared.py)."""
    paths = text_list(nonempty=True)

    def check(key: str, value: Any) -> None:
        if value is not None and not (isinstance(value, str) and value.strip()):
            paths(key, value)

    return check


#: chunking options per modality: option -> check (the names the chunkers read)
CHUNK_OPTIONS: dict[str, dict[str, Check]] = {
    "pdf": {"window_tokens": whole(1), "overlap_tokens": whole(0)},
    "conversation": {"window_turns": whole(1), "overlap_turns": whole(0)},
    "code": {"window_lines": whole(1), "overlap_lines": whole(0)},
    "video": {"window_seconds": number(low=0, low_open=True), "overlap_seconds": number(low=0)},
    "ui_screenshot": {"grid_rows": whole(1), "grid_cols": whole(1), "line_v_tol": number(low=0, low_open=True), "line_h_gap": number(low=0)},
    "image": {},
}
#: (window, overlap) option pairs: overlap must stay below the window
WINDOW_PAIRS = (("window_tokens", "overlap_tokens"), ("window_turns", "overlap_turns"),
                ("window_lines", "overlap_lines"), ("window_seconds", "overlap_seconds"))

SCHEMA: dict[str, Any] = {
    "datasets": text_list(allow_all=True),  # [] only with local_datasets (check_params)
    "local_datasets": text_list(),
    "fetch": {
        "mirror_dirs": text_list(nonempty=True),
        "download": choice("auto", "never", "always"),
    },
    "chunking": None,  # built from the modalities (see chunking_schema)
    # options a modality's extraction reads (the extract@<modality> stage passes them on)
    "extraction": {
        "pdf": {"ocr_min_chars": whole(0)},
    },
    "system": {
        "name": text(),
        "adapter": choice("builtin", "python", "command", "http"),
        "entry": text(nullable=True),
        "atoms": text(nullable=True),
        "depth": whole(1),
        "timeout_s": number(low=0, low_open=True),
        "concurrency": whole(1),
        "warmup": whole(0),
        "startup_timeout_s": number(low=0, low_open=True),
        "sandbox": sandbox_mode(),
        "code": code_paths(),
    },
    "metrics": {
        "k": whole(1),
        "calibration_recall": number(low=0, low_open=True, high=1),
        "bootstrap_resamples": whole(1),
        "bootstrap_seed": whole(0),
    },
    "executor": {
        "kind": choice("local", "dask"),
        "address": text(nullable=True),
        "workers": whole(1, nullable=True),
        "in_core_rows": whole(1),
    },
}
#: run rows above which the evaluate and accept stages read the run block by block
#: (bench.evaluation.blocks); measured in benchmarks/case_blocks.py, docs/scale.md
IN_CORE_ROWS = 10_000_000
#: top-level blocks every params.yaml must have
REQUIRED = ("datasets", "fetch", "chunking", "system", "metrics")
REQUIRED_IN = {"system": ("name",), "metrics": ("k",), "fetch": ("mirror_dirs",)}


def _unknown(key: str, name: Any, known: Mapping[str, Any]) -> ParamsError:
    close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    where = f"{key}.{name}" if key else str(name)
    return ParamsError(where, f"unknown key{hint}; known here: {', '.join(known)}")


def _walk(key: str, value: Any, schema: Any) -> None:
    if callable(schema):
        schema(key, value)
        return
    if not isinstance(value, dict):
        raise ParamsError(key, f"must be a mapping, got {_shown(value)}")
    for name, sub in value.items():
        if name not in schema:
            raise _unknown(key, name, schema)
        _walk(f"{key}.{name}" if key else str(name), sub, schema[name])


def check_extraction(block: Any) -> dict[str, Any]:
    """The `extraction` block alone (what a per-modality extract stage reads); {} when absent."""
    if block is None:
        return {}
    _walk("extraction", block, SCHEMA["extraction"])
    return block


def check_executor(block: Any) -> dict[str, Any]:
    """The `executor` block alone, with defaults filled in: {kind, address, workers,
    in_core_rows}. Not a DVC param of any stage: where work runs (and whether the run is
    evaluated in one block or out of core) never changes a result."""
    _walk("executor", {} if block is None else block, SCHEMA["executor"])
    return {"kind": "local", "address": None, "workers": None, "in_core_rows": IN_CORE_ROWS, **(block or {})}


def chunking_schema(strategies: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    """modality -> {strategy, options...} from each modality's strategies."""
    return {m: {"strategy": choice(*strats), **CHUNK_OPTIONS.get(m, {})} for m, strats in strategies.items()}


def check_params(doc: Any, strategies: Mapping[str, tuple[str, ...]], registered: set[str] | None = None) -> dict[str, Any]:
    """Return `doc` unchanged when it fits the schema; raise ParamsError (one line) otherwise.

    `strategies` maps each modality to its chunking strategies; `registered` (when
    given) is the set of data set keys `datasets` may name.
    """
    if not isinstance(doc, dict):
        raise ParamsError("<file>", f"must be a mapping of blocks, got {_shown(doc)}")
    schema = {**SCHEMA, "chunking": chunking_schema(strategies)}
    for name in REQUIRED:
        if name not in doc:
            raise ParamsError(name, "missing block")
    _walk("", doc, schema)
    if doc["datasets"] == [] and not doc.get("local_datasets"):
        raise ParamsError("datasets", "must not be empty (an empty list runs only the folders of local_datasets, and there are none)")
    for block, names in REQUIRED_IN.items():
        for name in names:
            if name not in doc[block]:
                raise ParamsError(f"{block}.{name}", "missing key")
    for modality, block in doc["chunking"].items():
        for window, overlap in WINDOW_PAIRS:
            if window in block and overlap in block and block[overlap] >= block[window]:
                raise ParamsError(f"chunking.{modality}.{overlap}", f"must be smaller than {window} ({block[window]}), got {block[overlap]}")
    depth = doc["system"].get("depth", 100)
    if doc["metrics"]["k"] > depth:
        raise ParamsError("metrics.k", f"{doc['metrics']['k']} is more than system.depth ({depth}): recall@k would count atoms never retrieved")
    if registered is not None and doc["datasets"] != "all":
        for key in (*doc["datasets"], *doc.get("local_datasets", [])):
            if key not in registered and key not in doc.get("local_datasets", []):
                close = difflib.get_close_matches(key, sorted(registered), n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ParamsError("datasets", f"unknown data set {key!r}{hint}; registered: {', '.join(sorted(registered))}")
    return doc
