"""Systems under test.

A system is built from the atoms it serves and then answers one query at a time.
It receives only what a real memory system would get: the question, the moment it
is asked (`as_of`), the scope (holder, session, scenario) and the depth k, never
gold, answer, split, the query id or any path of the sets.

Every system, built in or external, is reached through one of three adapters
(bench/systems/adapters/external.py, protocol in docs/systems.md): a Python entry point
(`module:callable`), a command speaking JSON lines, or HTTP on this machine. The
built-in systems are Python entry points listed in `BUILTINS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd


@dataclass(frozen=True)
class Query:
    question: str
    as_of: pd.Timestamp
    holder: str | None
    session: str | None
    scenario: str | None
    k: int


@dataclass(frozen=True)
class Hit:
    atom_id: str
    score: float


@dataclass(frozen=True)
class Citation:
    """One piece of a memory's provenance: a region of a source, in the modality's atom-extent terms."""

    source_id: str
    extent: dict[str, Any]


@dataclass(frozen=True)
class MemoryHit:
    """A memory the system wrote, named instead of a served atom (docs/systems.md, *Memory hits*).

    Gold resolves through its provenance: a citation counts where the memory's text is
    supported by the cited units' own text (bench/systems/credit/support.py)."""

    memory_id: str
    score: float
    text: str
    provenance: tuple[Citation, ...]


@dataclass(frozen=True)
class Response:
    """What a system answers: ranked hits, and optionally that it abstains and how sure it is."""

    hits: Sequence[Hit | MemoryHit] = field(default_factory=list)
    abstain: bool = False
    confidence: float | None = None


class System(Protocol):
    name: str

    def search(self, query: Query) -> list[Hit] | Response: ...


class Replayed(Protocol):
    """A system that is shown the corpus as a stream (docs/systems.md, *Replay*).

    The python adapter replays a system whose factory has ``replay = True``: the factory
    is called with no atoms (an empty frame of the usual columns), then ``observe(event)``
    gets every event (a dict: event, source_id, modality, extent, text, observed_at,
    holder, source_file) in order, each query coming after every event at or before its
    ``as_of``. ``observe`` returns nothing; raising fails the event and stops the run.
    Any adapter written in Python (bench.systems.adapters.external) can speak it."""

    replay: bool

    def observe(self, event: dict[str, Any]) -> None: ...

    def search(self, query: Query) -> list[Hit] | Response: ...


class MalformedResponse(ValueError):
    """A system answered with something that is not a valid response."""


class MissingExtra(RuntimeError):
    """A built-in system needs an optional extra that is not installed."""


#: built-in system name -> Python entry point (a factory called with the served atoms)
BUILTINS: dict[str, str] = {
    "bm25": "bench.systems.builtin.bm25:bm25",
    "bm25-scoped": "bench.systems.builtin.bm25:bm25_scoped",
    "dense": "bench.systems.builtin.dense:dense",
    "dense-scoped": "bench.systems.builtin.dense:dense_scoped",
    "hybrid": "bench.systems.builtin.hybrid:hybrid",
    "hybrid-scoped": "bench.systems.builtin.hybrid:hybrid_scoped",
}
#: built-in system name -> the `system` params its factory takes as keyword arguments (bench/params.py)
BUILTIN_OPTIONS: dict[str, tuple[str, ...]] = {"bm25": ("abstain_below",), "bm25-scoped": ("abstain_below",)}


def load_entry_point(entry: str) -> Any:
    """Resolve "package.module:callable" (or a built-in name) to the callable."""
    entry = BUILTINS.get(entry, entry)
    module_name, sep, attr = entry.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"entry point {entry!r} must look like 'package.module:callable'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(f"entry point {entry!r}: cannot import {module_name!r} ({exc})") from None
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ValueError(f"entry point {entry!r}: {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"entry point {entry!r} is not callable")
    return target


def build_system(name: str, atoms: pd.DataFrame, **options: Any) -> System:
    """Build a built-in system (by name) or any Python entry point over `atoms`; `options`: the
    keyword arguments of its factory (a built-in's BUILTIN_OPTIONS)."""
    if name not in BUILTINS and ":" not in name:
        raise ValueError(f"system.name: unknown system {name!r}; built in: {', '.join(BUILTINS)}")
    system = load_entry_point(name)(atoms, **options)
    if not callable(getattr(system, "search", None)):
        raise ValueError(f"system {name!r}: the factory returned {type(system).__name__}, which has no search(query) method")
    return system
