"""The value checks of params.yaml's schema (bench.params): each factory returns a check
`(key, value) -> None` that raises `ParamsError` (one line naming the dotted key) when the value does
not fit; the fixed bounds of every size (docs/bad-input.md, "Params")."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.modalities.base import Option


class ParamsError(ValueError):
    """str() is the one-line message: `params.yaml: <key>: <problem>`."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"params.yaml: {key}: {problem}")
        self.key = key
        self.problem = problem


Check = Callable[[str, Any], None]

#: run rows above which the evaluate and accept stages read the run block by block
#: (bench.evaluation.blocks); measured in benchmarks/case_blocks.py, docs/scale.md
IN_CORE_ROWS = 10_000_000
#: peak RSS of one run row evaluated in core (docs/scale.md: 158-167 bytes measured)
BYTES_PER_RUN_ROW = 167
#: the deepest ranking a system may be asked for (the deepest cutoff any measure reads is 100)
MAX_DEPTH = 10_000
#: per-query and start-up timeouts: at most a day
MAX_TIMEOUT_S = 86_400.0
MAX_CONCURRENCY = 256
MAX_WARMUP = 1_000_000
MAX_WORKERS = 1024
#: bootstrap resamples of one cell: 1,000 times the default's time (the draws are batched)
MAX_RESAMPLES = 1_000_000
MAX_SEED = 2**63 - 1
#: a windowed chunking puts each part of a source in window / (window - overlap) atoms at most
MAX_WINDOW_REPEATS = 100


def shown(value: Any) -> str:
    return repr(value) if not isinstance(value, float) else str(value)


def whole(minimum: int | None = None, *, nullable: bool = False, high: int | None = None) -> Check:
    def check(key: str, value: Any) -> None:
        if value is None and nullable:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParamsError(key, f"must be a whole number, got {shown(value)}")
        if minimum is not None and value < minimum:
            raise ParamsError(key, f"must be >= {minimum}, got {value}")
        if high is not None and value > high:
            raise ParamsError(key, f"must be <= {high:,}, got {value:,}")

    return check


def number(*, low: float | None = None, low_open: bool = False, high: float | None = None, nullable: bool = False) -> Check:
    def check(key: str, value: Any) -> None:
        if value is None and nullable:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParamsError(key, f"must be a number, got {shown(value)}")
        if not math.isfinite(value):
            raise ParamsError(key, f"must be a finite number, got {shown(value)}")
        if low is not None and (value <= low if low_open else value < low):
            raise ParamsError(key, f"must be {'>' if low_open else '>='} {low:g}, got {shown(value)}")
        if high is not None and value > high:
            raise ParamsError(key, f"must be <= {high:g}, got {shown(value)}")

    return check


def choice(*options: str | None) -> Check:
    def check(key: str, value: Any) -> None:
        if value not in options:
            raise ParamsError(key, f"must be one of {[o for o in options]}, got {shown(value)}")

    return check


def text(*, nullable: bool = False) -> Check:
    def check(key: str, value: Any) -> None:
        if value is None and nullable:
            return
        if not isinstance(value, str) or not value.strip():
            raise ParamsError(key, f"must be a non-empty string{' or null' if nullable else ''}, got {shown(value)}")

    return check


def text_list(*, allow_all: bool = False, nonempty: bool = False) -> Check:
    def check(key: str, value: Any) -> None:
        if allow_all and value == "all":
            return
        if not isinstance(value, list) or any(not isinstance(v, str) or not v.strip() for v in value):
            what = '"all" or a list of names' if allow_all else "a list of names"
            raise ParamsError(key, f"must be {what}, got {shown(value)}")
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
    """system.code: null, a path, or a non-empty list of paths (bench/systems/sandbox/declared.py)."""
    paths = text_list(nonempty=True)

    def check(key: str, value: Any) -> None:
        if value is not None and not (isinstance(value, str) and value.strip()):
            paths(key, value)

    return check


def amounts() -> Check:
    """metrics.budget as `bench compare` reads it (no registry): null, or a mapping of
    names to positive finite numbers; `check_params` checks each against its modality."""
    positive = number(low=0, low_open=True)

    def check(key: str, value: Any) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            raise ParamsError(key, f"must be a mapping of modality -> amount, got {shown(value)}")
        for name, amount in value.items():
            positive(f"{key}.{name}", amount)

    return check


def settings(*, any_value: bool = False) -> Check:
    """null, or a mapping of names to strings (`any_value`: to any value; its own module checks them)."""
    def check(key: str, value: Any) -> None:
        if value is None:
            return
        if not isinstance(value, dict) or any(not isinstance(k, str) or not k for k in value):
            raise ParamsError(key, f"must be a mapping of names to {'settings' if any_value else 'strings'}, got {shown(value)}")
        for name, item in value.items():
            if not any_value and not isinstance(item, str):
                raise ParamsError(f"{key}.{name}", f"must be a string, got {shown(item)}")

    return check


def option_check(option: Option) -> Check:
    """The check of a modality's declared option (bench.modalities.base.Option)."""
    if option.whole:
        return whole(math.ceil(option.low + (1 if option.low_open else 0)), high=int(option.high))
    return number(low=option.low, low_open=option.low_open, high=option.high)
