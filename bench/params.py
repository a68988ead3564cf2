"""One schema for params.yaml, checked before any stage touches an output, and the typed
configuration it gives.

`check_params(doc, modalities, registered, memory_bytes)` walks the parsed YAML against the
schema and raises `ParamsError` at the first problem, naming the dotted key: an unknown or
misspelled key (with the closest known key), a wrong type, NaN or infinity, a count that is
not a whole number, a size beyond its bound, k < 1 or k > system.depth. It returns
`Params`: frozen dataclasses with every default filled in, so no stage or core function
holds a default of its own. The stage scripts call it through
`bench.project.selection.config()`, so every stage refuses bad params with one line and
exit 1 before it writes anything; nothing here reads files or the environment (the
machine's memory comes in as an argument).

The schema is the dataclasses below: a field is a known key, its metadata ``check`` its
check, its default the default (a field without one is required). The `chunking` and
`extraction` blocks come from the modalities (`Modality.strategies`, `chunk_options`,
`windows`, `extraction_options`), so a modality's new option needs no change here.

Every size has an upper bound (docs/bad-input.md, "Params"): fixed ones below, and two
derived from the machine's memory: `executor.in_core_rows` (BYTES_PER_RUN_ROW a run row
in core, docs/scale.md) and the atoms a chunking may make (bench.ingest.chunking).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.modalities.base import Modality


from bench.params_checks import (
    BYTES_PER_RUN_ROW as BYTES_PER_RUN_ROW,
)
from bench.params_checks import (
    IN_CORE_ROWS as IN_CORE_ROWS,
)
from bench.params_checks import (
    MAX_CONCURRENCY as MAX_CONCURRENCY,
)
from bench.params_checks import (
    MAX_DEPTH as MAX_DEPTH,
)
from bench.params_checks import (
    MAX_RESAMPLES as MAX_RESAMPLES,
)
from bench.params_checks import (
    MAX_SEED as MAX_SEED,
)
from bench.params_checks import (
    MAX_TIMEOUT_S as MAX_TIMEOUT_S,
)
from bench.params_checks import (
    MAX_WARMUP as MAX_WARMUP,
)
from bench.params_checks import (
    MAX_WINDOW_REPEATS as MAX_WINDOW_REPEATS,
)
from bench.params_checks import (
    MAX_WORKERS as MAX_WORKERS,
)
from bench.params_checks import (
    Check as Check,
)
from bench.params_checks import (
    ParamsError as ParamsError,
)
from bench.params_checks import (
    amounts as amounts,
)
from bench.params_checks import (
    choice as choice,
)
from bench.params_checks import (
    code_paths as code_paths,
)
from bench.params_checks import (
    number as number,
)
from bench.params_checks import (
    option_check as option_check,
)
from bench.params_checks import (
    sandbox_mode as sandbox_mode,
)
from bench.params_checks import (
    settings as settings,
)
from bench.params_checks import (
    shown as shown,
)
from bench.params_checks import (
    text as text,
)
from bench.params_checks import (
    text_list as text_list,
)
from bench.params_checks import (
    whole as whole,
)


def _key(check: Check, default: Any = dataclasses.MISSING, normal: Callable[[Any], Any] | None = None) -> Any:
    """A dataclass field that is a params key: its check, its default (none: required) and the
    function that gives a checked value its one form (e.g. float seconds; None: as written)."""
    return field(default=default, metadata={"check": check, "normal": normal})


def _off(value: Any) -> str:
    return "off" if value is False else str(value)  # YAML reads a bare `off` as false


def _paths(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


@dataclass(frozen=True)
class FetchParams:
    mirror_dirs: tuple[str, ...] = _key(text_list(nonempty=True))
    download: str = _key(choice("auto", "never", "always"), "auto")


@dataclass(frozen=True)
class SystemParams:
    name: str = _key(text())
    adapter: str = _key(choice("builtin", "python", "command", "http", "langchain", "llamaindex", "mcp"), "builtin")
    entry: str | None = _key(text(nullable=True), None)
    atoms: str | None = _key(text(nullable=True), None)
    depth: int = _key(whole(1, high=MAX_DEPTH), 100)
    timeout_s: float = _key(number(low=0, low_open=True, high=MAX_TIMEOUT_S), 30.0, float)
    concurrency: int = _key(whole(1, high=MAX_CONCURRENCY), 1)
    warmup: int = _key(whole(0, high=MAX_WARMUP), 10)
    startup_timeout_s: float = _key(number(low=0, low_open=True, high=MAX_TIMEOUT_S), 600.0, float)
    #: auto | required | off (YAML reads a bare `off` as false: both mean off)
    sandbox: str = _key(sandbox_mode(), "auto", _off)
    #: the system's own code shown to it (bench/systems/sandbox/declared.py); null: what the entry names
    code: tuple[str, ...] | None = _key(code_paths(), None, _paths)
    #: mcp systems: settings the server needs ({workdir}: its writable folder); checked by bench.systems.adapters.mcp
    env: dict[str, str] | None = _key(settings(), None)
    #: mcp systems: the observe/search tool calls, reset and results rule (bench.systems.adapters.mcp.mcp_plan)
    mcp: dict[str, Any] | None = _key(settings(any_value=True), None)
    #: replayed systems: a probe for the words of the event just sent after every n-th event, repeated
    #: until a memory holds it or probe_wait_s passes (time until searchable); 0: not measured
    probe_every: int = _key(whole(0, high=MAX_DEPTH * 100), 0)
    probe_wait_s: float = _key(number(low=0, low_open=True, high=MAX_TIMEOUT_S), 5.0, float)
    #: the built-in bm25 and bm25-scoped: their abstention threshold (bench/systems/builtin/bm25.py); 0 never abstains;
    #: null: the built-in's default (bench.systems.builtin.bm25.ABSTAIN_BELOW, chosen on dev)
    abstain_below: float | None = _key(number(low=0, high=1, nullable=True), None, float)


@dataclass(frozen=True)
class MetricsParams:
    k: int = _key(whole(1, high=MAX_DEPTH))
    calibration_recall: float = _key(number(low=0, low_open=True, high=1), 0.9, float)
    bootstrap_resamples: int = _key(whole(1, high=MAX_RESAMPLES), 1000)
    bootstrap_seed: int = _key(whole(0, high=MAX_SEED), 0)
    #: modality -> what a reader is handed per query, in its extent unit (recall@budget); check_params
    #: fills in each modality's default (`Modality.budget`); None there: it declares none
    budget: dict[str, float | None] | None = _key(amounts(), None)


@dataclass(frozen=True)
class BundleParams:
    #: the Ed25519 private key file that signs the acceptance's test bundle, by path, never the key (docs/acceptance.md); null: unsigned
    sign_key: str | None = _key(text(nullable=True), None)


@dataclass(frozen=True)
class ExecutorParams:
    """Where the per-source work runs. Not a DVC param of any stage: where work runs (and
    whether the run is evaluated in one block or out of core) never changes a result."""

    kind: str = _key(choice("local", "dask"), "local")
    address: str | None = _key(text(nullable=True), None)
    workers: int | None = _key(whole(1, nullable=True, high=MAX_WORKERS), None)
    in_core_rows: int = _key(whole(1), IN_CORE_ROWS)


@dataclass(frozen=True)
class Params:
    """The checked params.yaml with every default filled in."""

    #: "all" or the registered data set keys chosen
    datasets: str | tuple[str, ...]
    #: folders of local data sets, as written
    local_datasets: tuple[str, ...]
    fetch: FetchParams
    #: modality -> {"strategy": ..., option: value, ...} (the modality's declared options)
    chunking: dict[str, dict[str, Any]]
    #: modality -> {option: value} for the modalities that declare extraction options
    extraction: dict[str, dict[str, Any]]
    system: SystemParams
    metrics: MetricsParams
    executor: ExecutorParams
    #: the chunking block as params.yaml writes it: what a run records (dev.json's run block)
    #: and the acceptance compares with, so a default added later changes no record
    chunking_written: dict[str, Any] = field(default_factory=dict)
    bundle: BundleParams = field(default_factory=BundleParams)  # no stage's DVC param: signing never changes a number


BLOCKS: dict[str, type] = {"fetch": FetchParams, "system": SystemParams, "metrics": MetricsParams, "executor": ExecutorParams,
                           "bundle": BundleParams}
TOP = {"datasets": text_list(allow_all=True), "local_datasets": text_list()}  # datasets: [] only with local_datasets
#: top-level blocks every params.yaml must have
REQUIRED = ("datasets", "fetch", "chunking", "system", "metrics")
KNOWN = ("datasets", "local_datasets", "fetch", "chunking", "extraction", "system", "metrics", "executor", "bundle")


def _unknown(key: str, name: Any, known: list[str]) -> ParamsError:
    close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    where = f"{key}.{name}" if key else str(name)
    return ParamsError(where, f"unknown key{hint}; known here: {', '.join(known)}")


def _mapping(key: str, value: Any, known: list[str]) -> dict[str, Any]:
    """`value` as a mapping whose keys are all in `known` (ParamsError otherwise)."""
    if not isinstance(value, dict):
        raise ParamsError(key, f"must be a mapping, got {shown(value)}")
    for name in value:
        if name not in known:
            raise _unknown(key, name, known)
    return value


def _options(key: str, value: Any, checks: Mapping[str, Check], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """A block of options checked one by one, with the defaults filled in."""
    block = _mapping(key, {} if value is None else value, list(checks))
    for name, sub in block.items():
        checks[name](f"{key}.{name}", sub)
    return {**defaults, **block}


def check_block(name: str, value: Any) -> Any:
    """One of the fixed blocks (fetch, system, metrics, executor, bundle) as its dataclass."""
    cls = BLOCKS[name]
    fields = dataclasses.fields(cls)
    block = _mapping(name, {} if value is None else value, [f.name for f in fields])
    values = {}
    for f in fields:
        if f.name in block:
            f.metadata["check"](f"{name}.{f.name}", block[f.name])
            value, normal = block[f.name], f.metadata["normal"]
            values[f.name] = normal(value) if normal is not None and value is not None else tuple(value) if isinstance(value, list) else value
        elif f.default is dataclasses.MISSING:
            raise ParamsError(f"{name}.{f.name}", "missing key")
    return cls(**values)


def check_executor(block: Any) -> ExecutorParams:
    """The `executor` block alone."""
    return check_block("executor", block)


@dataclass(frozen=True)
class ExtractParams:
    """What one extract stage reads, checked without the registry (it loads one modality)."""

    options: dict[str, Any]  # extraction.<modality>, defaults filled in
    executor: ExecutorParams
    local_datasets: tuple[str, ...]


def check_extract(doc: Any, modality: Modality) -> ExtractParams:
    """`extraction.<modality>`, `executor` and `local_datasets` of `doc` (the rest is
    checked by the stages before: fetch runs `check_params`)."""
    if not isinstance(doc, dict):
        raise ParamsError("<file>", f"must be a mapping of blocks, got {shown(doc)}")
    local = doc.get("local_datasets") or []
    TOP["local_datasets"]("local_datasets", local)
    return ExtractParams(check_extraction(doc.get("extraction"), modality), check_executor(doc.get("executor")), tuple(local))


def check_extraction(block: Any, modality: Modality) -> dict[str, Any]:
    """`extraction.<modality>` alone with its defaults (what one extract stage reads)."""
    if block is not None and not isinstance(block, dict):
        raise ParamsError("extraction", f"must be a mapping, got {shown(block)}")
    opts = modality.extraction_options
    return _options(f"extraction.{modality.name}", (block or {}).get(modality.name), {n: option_check(o) for n, o in opts.items()},
                    {n: o.default for n, o in opts.items()})


def check_chunking(block: Any, modality: Modality) -> dict[str, Any]:
    """`chunking.<modality>`: strategy and options with their defaults; an overlap leaves
    a step of at least 1/MAX_WINDOW_REPEATS of its window."""
    key = f"chunking.{modality.name}"
    checks = {"strategy": choice(*modality.strategies), **{n: option_check(o) for n, o in modality.chunk_options.items()}}
    out = _options(key, block, checks, {"strategy": modality.strategies[0], **{n: o.default for n, o in modality.chunk_options.items()}})
    for window, overlap in modality.windows:
        size, over = out[window], out[overlap]
        if over >= size:
            raise ParamsError(f"{key}.{overlap}", f"must be smaller than {window} ({size}), got {over}")
        if size / (size - over) > MAX_WINDOW_REPEATS:
            raise ParamsError(f"{key}.{overlap}", f"must be at most {size - size / MAX_WINDOW_REPEATS:g} with {window} {size}, got {over}: "
                              f"each part of a source would be in {size / (size - over):,.0f} atoms (at most {MAX_WINDOW_REPEATS})")
    return out


def check_budget(block: Any, modalities: Mapping[str, Modality]) -> dict[str, float | None]:
    """`metrics.budget`: an amount per modality within its `Modality.budget` bounds, the
    modality's default where the block leaves it out (None: the modality declares none)."""
    given = _mapping("metrics.budget", {} if block is None else block, list(modalities))
    out: dict[str, float | None] = {}
    for name, mod in sorted(modalities.items()):
        option = mod.budget
        if name in given:
            (option_check(option) if option is not None else number(low=0, low_open=True))(f"metrics.budget.{name}", given[name])
            out[name] = float(given[name])
        else:
            out[name] = None if option is None else float(option.default)
    return out


def _datasets(doc: dict[str, Any], registered: set[str] | None) -> None:
    local = doc.get("local_datasets") or []
    if doc["datasets"] == [] and not local:
        raise ParamsError("datasets", "must not be empty (an empty list runs only the folders of local_datasets, and there are none)")
    if registered is None or doc["datasets"] == "all":
        return
    for key in (*doc["datasets"], *local):
        if key not in registered and key not in local:
            close = difflib.get_close_matches(key, sorted(registered), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ParamsError("datasets", f"unknown data set {key!r}{hint}; registered: {', '.join(sorted(registered))}")


def check_memory_bounds(params: Params, memory_bytes: int) -> None:
    """The bounds derived from the machine's memory (refused naming the key)."""
    rows = memory_bytes // BYTES_PER_RUN_ROW
    if params.executor.in_core_rows > rows:
        raise ParamsError("executor.in_core_rows", f"must be <= {rows:,} ({memory_bytes / 2**30:.1f} GiB of memory at "
                          f"{BYTES_PER_RUN_ROW} bytes a run row in core), got {params.executor.in_core_rows:,}")


def check_params(doc: Any, modalities: Mapping[str, Modality], registered: set[str] | None = None, memory_bytes: int | None = None) -> Params:
    """The typed configuration of `doc` when it fits the schema; ParamsError (one line) otherwise.

    `modalities` are the registered modalities (their strategies and options);
    `registered` (when given) is the set of data set keys `datasets` may name;
    `memory_bytes` (when given) the machine's memory, for the bounds derived from it.
    """
    if not isinstance(doc, dict):
        raise ParamsError("<file>", f"must be a mapping of blocks, got {shown(doc)}")
    for name in REQUIRED:
        if name not in doc:
            raise ParamsError(name, "missing block")
    _mapping("", doc, list(KNOWN))
    for name, check in TOP.items():
        if name in doc:
            check(name, doc[name])
    blocks = {name: check_block(name, doc.get(name)) for name in BLOCKS}
    chunking = _mapping("chunking", doc["chunking"], list(modalities))
    extraction = _mapping("extraction", doc.get("extraction") or {}, [m for m, mod in modalities.items() if mod.extraction_options])
    if blocks["metrics"].k > blocks["system"].depth:
        raise ParamsError("metrics.k", f"{blocks['metrics'].k} is more than system.depth ({blocks['system'].depth}): "
                          "recall@k would count atoms never retrieved")
    _datasets(doc, registered)
    blocks["metrics"] = dataclasses.replace(blocks["metrics"], budget=check_budget(blocks["metrics"].budget, modalities))
    datasets = doc["datasets"]
    params = Params(datasets=datasets if isinstance(datasets, str) else tuple(datasets), local_datasets=tuple(doc.get("local_datasets") or ()),
                    chunking={m: check_chunking(chunking.get(m), mod) for m, mod in sorted(modalities.items())},
                    extraction={m: check_extraction(extraction, mod) for m, mod in sorted(modalities.items()) if mod.extraction_options},
                    chunking_written=copy.deepcopy(chunking), **blocks)
    if memory_bytes is not None:
        check_memory_bounds(params, memory_bytes)
    return params
