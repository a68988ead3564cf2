"""The `system:` block of params.yaml, checked, and the adapter it asks for.

    system:
      name: bm25          # a built-in (bench.systems.BUILTINS) or a label for an external system
      adapter: builtin    # builtin | python | command | http
      entry: null         # python: "module:callable"; command: a command line; http: a loopback URL
      atoms: null         # the system's own atoms (JSONL or Parquet); null: the harness's chunks
      depth: 100          # k sent with every query
      timeout_s: 30       # per query; a query that times out is failed
      concurrency: 1      # queries in flight at once (one channel each)
      warmup: 10          # queries sent once, untimed, before the timed run
      sandbox: auto       # command systems: auto (bwrap, else Landlock, else stop) | required (bwrap) | off
      code: null          # command systems: the system's own files/folders shown to it; null: the program the entry names

The stage reads params.yaml and passes the dict here; nothing here reads files.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.systems import BUILTINS, build_system, load_entry_point
from bench.systems.adapters import Adapter, CommandAdapter, HttpAdapter, PythonAdapter, loopback_url
from bench.systems.isolation import Launch

ADAPTERS = ("builtin", "python", "command", "http")
DEFAULTS: dict[str, Any] = {
    "adapter": "builtin", "entry": None, "atoms": None, "depth": 100,
    "timeout_s": 30.0, "concurrency": 1, "warmup": 10, "startup_timeout_s": 600.0, "sandbox": "auto", "code": None,
}
SANDBOX_MODES = ("auto", "required", "off")


@dataclass(frozen=True)
class SystemConfig:
    name: str
    adapter: str
    entry: str | None
    atoms: str | None
    depth: int
    timeout_s: float
    concurrency: int
    warmup: int
    startup_timeout_s: float
    sandbox: str = "auto"
    code: tuple[str, ...] | None = None  # system.code; None: the program the entry names

    @property
    def command(self) -> list[str]:
        return shlex.split(self.entry or "")


def _positive(block: dict[str, Any], key: str, kind: type, minimum: float) -> Any:
    value = block[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum or (kind is int and int(value) != value):
        raise ValueError(f"system.{key}: must be a {'whole ' if kind is int else ''}number >= {minimum:g}, got {value!r}")
    return kind(value)


def system_config(block: dict[str, Any]) -> SystemConfig:
    """Check the params block; a problem raises ValueError naming the key."""
    if not isinstance(block, dict):
        raise ValueError("system: must be a mapping")
    unknown = sorted(set(block) - set(DEFAULTS) - {"name"})
    if unknown:
        raise ValueError(f"system: unknown key(s) {unknown}; known: name, {', '.join(DEFAULTS)}")
    merged = {**DEFAULTS, **{k: v for k, v in block.items() if v is not None or k in ("entry", "atoms", "code")}}
    name = merged.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("system.name: must be a non-empty string")
    adapter = merged["adapter"]
    if adapter not in ADAPTERS:
        raise ValueError(f"system.adapter: {adapter!r} is not one of {list(ADAPTERS)}")
    entry = merged["entry"]
    if adapter == "builtin":
        if name not in BUILTINS:
            raise ValueError(f"system.name: unknown built-in system {name!r}; built in: {', '.join(BUILTINS)}")
    elif not isinstance(entry, str) or not entry.strip():
        raise ValueError(f"system.entry: the {adapter} adapter needs an entry (python: 'module:callable', command: a command line, http: a URL)")
    if adapter == "http":
        loopback_url(entry)  # raises on a non-loopback URL
    atoms = merged["atoms"]
    if atoms is not None and (not isinstance(atoms, str) or not atoms):
        raise ValueError(f"system.atoms: must be a path or null, got {atoms!r}")
    sandbox = "off" if merged["sandbox"] is False else merged["sandbox"]  # YAML reads a bare `off` as false
    if sandbox not in SANDBOX_MODES:
        raise ValueError(f"system.sandbox: {sandbox!r} is not one of {list(SANDBOX_MODES)}")
    if sandbox == "required" and adapter in ("python", "http"):
        raise ValueError(
            f"system.sandbox: required, but the {adapter} adapter cannot be sandboxed"
            + (" (it runs in the harness's process); run it through the command adapter: "
               "entry: \"{python} -m bench.systems.serve module:callable --atoms {atoms}\""
               if adapter == "python" else " (it is your own server)")
        )
    return SystemConfig(
        name=name,
        adapter=adapter,
        entry=entry,
        atoms=atoms,
        depth=_positive(merged, "depth", int, 1),
        timeout_s=_positive(merged, "timeout_s", float, 0.001),
        concurrency=_positive(merged, "concurrency", int, 1),
        warmup=_positive(merged, "warmup", int, 0),
        startup_timeout_s=_positive(merged, "startup_timeout_s", float, 0.001),
        sandbox=sandbox,
        code=_code(merged["code"]),
    )


def _code(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(x, str) and x for x in items):
        raise ValueError(f"system.code: must be a path or a non-empty list of paths (the system's own files and folders), got {value!r}")
    return tuple(items)


def command_argv(cfg: SystemConfig, atoms_path: Path) -> list[str]:
    """The command line with {python} (this interpreter) and {atoms} (the served atoms as JSONL)."""
    return [arg.replace("{atoms}", str(atoms_path)).replace("{python}", sys.executable) for arg in cfg.command]


def declares_abstention(*objects: Any) -> bool:
    """True when the system object or its factory has `abstains = True`."""
    return any(getattr(o, "abstains", False) is True for o in objects)


def names_atoms(cfg: SystemConfig) -> bool:
    """A command line that names {atoms} is given the served atoms and their media before it
    starts; one that does not starts with an empty corpus folder (a replayed system)."""
    return any("{atoms}" in arg for arg in cfg.command)


def make_adapter(cfg: SystemConfig, atoms: Any, launch: Launch | None = None) -> Adapter:
    """Build the adapter `cfg` asks for. Python systems are built here (index build happens now).

    A python factory with ``replay = True`` is called with no atoms (an empty frame of the
    same columns): it learns the corpus from the replayed events only. A command system
    needs its `launch` (bench.systems.sandbox.prepare_launch): the command line (maybe
    inside bwrap), its scrubbed environment and working folder.
    """
    if cfg.adapter in ("builtin", "python"):
        entry = cfg.name if cfg.adapter == "builtin" else str(cfg.entry)
        factory = load_entry_point(entry)
        replay = getattr(factory, "replay", False) is True
        system = build_system(entry, atoms.iloc[0:0] if replay else atoms)
        if getattr(system, "replay", False) is True and not replay:
            raise ValueError(f"system {entry!r} has replay = True but its factory does not: declare it on the factory "
                             "(a class attribute, or factory.replay = True), so that it is built without the future")
        if replay and not callable(getattr(system, "observe", None)):
            raise ValueError(f"system {entry!r}: its factory declares replay = True, but the system has no observe(event) method")
        adapter = PythonAdapter(system, entry, replay=replay)
        adapter.name = cfg.name
        adapter.abstains = declares_abstention(system, factory)
        return adapter
    if cfg.adapter == "command":
        if launch is None:
            raise ValueError("a command system needs its launch (working folder and environment)")
        return CommandAdapter(launch.argv, cfg.name, cwd=launch.cwd, startup_timeout=cfg.startup_timeout_s,
                              env=launch.env, isolation=launch.isolation, given_atoms=names_atoms(cfg))
    return HttpAdapter(str(cfg.entry), cfg.name, hello_timeout=cfg.timeout_s)
