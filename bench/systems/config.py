"""The `system:` block of params.yaml checked against the systems, and the adapter it asks for.

    system:
      name: bm25          # a built-in (bench.systems.BUILTINS) or a label for an external system
      adapter: builtin    # builtin | python | command | http | langchain | llamaindex | mcp
      entry: null         # python: "module:callable"; command: a command line; http: a loopback URL
      atoms: null         # the system's own atoms (JSONL or Parquet); null: the harness's chunks
      depth: 100          # k sent with every query
      timeout_s: 30       # per query; a query that times out is failed
      concurrency: 1      # queries in flight at once (one channel each)
      warmup: 10          # queries sent once, untimed, before the timed run
      sandbox: auto       # command systems: auto (bwrap, else Landlock, else stop) | required (bwrap) | off
      code: null          # command systems: the system's own files/folders shown to them; null: the program the entry names
      env: null           # mcp: settings the server needs ({workdir}: its writable folder)
      mcp: null           # mcp: observe/search tool calls, reset, results rule (bench/systems/adapters/mcp.py)
      abstain_below: null # the built-in bm25 and bm25-scoped only: abstain below this confidence; null: bm25.py's ABSTAIN_BELOW

Its keys, types, bounds and defaults are bench.params.SystemParams (the typed
configuration `bench.project.selection.config()` gives); :func:`check_system` adds
the rules that need the systems themselves: a built-in name, an entry for the
adapters that need one, a loopback URL, a sandbox the adapter can take. Nothing here
reads files.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.params import ParamsError, SystemParams, check_block
from bench.systems import BUILTIN_OPTIONS, BUILTINS, build_system, load_entry_point
from bench.systems.adapters.external import Adapter, CommandAdapter, HttpAdapter, PythonAdapter, loopback_url
from bench.systems.adapters.frameworks import FRAMEWORKS, framework_adapter
from bench.systems.sandbox.isolation import Launch


def check_system(system: SystemParams | Mapping[str, Any]) -> SystemParams:
    """`system` (the typed block, or a mapping checked by bench.params first) when the
    systems can run it; a problem raises ValueError naming the key."""
    cfg = system if isinstance(system, SystemParams) else check_block("system", dict(system))
    if cfg.abstain_below is not None and "abstain_below" not in builtin_options(cfg):
        raise ParamsError("system.abstain_below", f"only the built-in {' and '.join(n for n, o in BUILTIN_OPTIONS.items() if 'abstain_below' in o)} "
                          f"abstain by this threshold, not {cfg.adapter} system {cfg.name!r}: remove it (or null)")
    if cfg.adapter == "builtin":
        if cfg.name not in BUILTINS:
            raise ParamsError("system.name", f"unknown built-in system {cfg.name!r}; built in: {', '.join(BUILTINS)}")
    elif cfg.entry is None:
        raise ParamsError("system.entry", f"the {cfg.adapter} adapter needs an entry (python, langchain, llamaindex: "
                          "'module:callable', command: a command line, http: a URL, mcp: a command line or a URL)")
    if cfg.adapter == "mcp":
        check_mcp(cfg)
    elif cfg.env is not None or cfg.mcp is not None:
        raise ParamsError("system.env" if cfg.env is not None else "system.mcp", f"only for the mcp adapter, not {cfg.adapter}")
    if cfg.adapter == "http":
        try:
            loopback_url(str(cfg.entry))
        except ValueError as exc:  # its message names the key
            raise ParamsError("system.entry", str(exc).removeprefix("system.entry: ")) from None
    if cfg.sandbox == "required" and (cfg.adapter in ("python", "http", *FRAMEWORKS) or (cfg.adapter == "mcp" and not sandboxed(cfg))):
        raise ParamsError(
            "system.sandbox",
            f"required, but the {cfg.adapter} adapter cannot be sandboxed"
            + (" (it runs in the harness's process); run it through the command adapter: "
               "entry: \"{python} -m bench.systems.serve module:callable --atoms {atoms}\""
               if cfg.adapter == "python" else " (it is your own server)" if cfg.adapter in ("http", "mcp")
               else " (it runs in the harness's process)"),
        )
    return cfg


def check_mcp(cfg: SystemParams) -> None:
    """An mcp system's entry (a stdio command without {atoms}, or a loopback URL), env and mcp block."""
    from bench.systems.adapters.mcp import is_url
    from bench.systems.adapters.mcp_plan import check_env, mcp_plan

    mcp_plan(cfg.mcp)
    check_env(cfg.env)
    if cfg.concurrency != 1:
        raise ParamsError("system.concurrency", f"{cfg.concurrency}, but an MCP server is replayed over one session: set 1")
    if is_url(cfg.entry):
        try:
            loopback_url(str(cfg.entry))
        except ValueError as exc:
            raise ParamsError("system.entry", str(exc).removeprefix("system.entry: ")) from None
    elif names_atoms(cfg):
        raise ParamsError("system.entry", "an MCP server is replayed (sent the events through its tools): its command line "
                          "cannot name {atoms}")


def builtin_options(cfg: SystemParams) -> dict[str, Any]:
    """The `system` params a built-in's factory takes (BUILTIN_OPTIONS) and params.yaml sets, by name (a null
    one: the factory's default); none for other adapters."""
    names = BUILTIN_OPTIONS.get(cfg.name, ()) if cfg.adapter == "builtin" else ()
    return {name: getattr(cfg, name) for name in names if getattr(cfg, name) is not None}


def sandboxed(cfg: SystemParams) -> bool:
    """A system the harness starts as a process in its sandbox: a command, or an MCP server over stdio."""
    from bench.systems.adapters.mcp import is_url

    return cfg.adapter == "command" or (cfg.adapter == "mcp" and not is_url(cfg.entry))


def command_argv(cfg: SystemParams, atoms_path: Path) -> list[str]:
    """The command line with {python} (this interpreter) and {atoms} (the served atoms as JSONL)."""
    return [arg.replace("{atoms}", str(atoms_path)).replace("{python}", sys.executable) for arg in shlex.split(cfg.entry or "")]


def declares_abstention(*objects: Any) -> bool:
    """True when the system object or its factory has `abstains = True`."""
    return any(getattr(o, "abstains", False) is True for o in objects)


def described(system: Any) -> str | None:
    """The system's `description` (what it does, in words, for the report), when it declares one."""
    words = getattr(system, "description", None)
    return words.strip() if isinstance(words, str) and words.strip() else None


def names_atoms(cfg: SystemParams) -> bool:
    """A command line that names {atoms} is given the served atoms and their media before it
    starts; one that does not starts with an empty corpus folder (a replayed system)."""
    return any("{atoms}" in arg for arg in shlex.split(cfg.entry or ""))


def make_adapter(cfg: SystemParams, atoms: Any, launch: Launch | None = None) -> Adapter:
    """Build the adapter `cfg` asks for. Python systems are built here (index build happens now).

    A python factory with ``replay = True`` is called with no atoms (an empty frame of the
    same columns): it learns the corpus from the replayed events only. A command system
    needs its `launch` (bench.systems.sandbox.workdir.prepare_launch): the command line (maybe
    inside bwrap), its scrubbed environment and working folder.
    """
    if cfg.adapter in ("builtin", "python"):
        entry = cfg.name if cfg.adapter == "builtin" else str(cfg.entry)
        factory = load_entry_point(entry)
        replay = getattr(factory, "replay", False) is True
        system = build_system(entry, atoms.iloc[0:0] if replay else atoms, **builtin_options(cfg))
        if getattr(system, "replay", False) is True and not replay:
            raise ValueError(f"system {entry!r} has replay = True but its factory does not: declare it on the factory "
                             "(a class attribute, or factory.replay = True), so that it is built without the future")
        if replay and not callable(getattr(system, "observe", None)):
            raise ValueError(f"system {entry!r}: its factory declares replay = True, but the system has no observe(event) method")
        adapter = PythonAdapter(system, entry, replay=replay)
        adapter.name = cfg.name
        adapter.abstains = declares_abstention(system, factory)
        return adapter
    if cfg.adapter in FRAMEWORKS:
        return framework_adapter(cfg.adapter, str(cfg.entry), cfg.name, atoms)
    if cfg.adapter == "mcp":
        from bench.systems.adapters.mcp import mcp_adapter

        return mcp_adapter(cfg, launch)
    if cfg.adapter == "command":
        if launch is None:
            raise ValueError("a command system needs its launch (working folder and environment)")
        return CommandAdapter(launch.argv, cfg.name, cwd=launch.cwd, startup_timeout=cfg.startup_timeout_s,
                              env=launch.env, isolation=launch.isolation, given_atoms=names_atoms(cfg), reaped=launch.reaped)
    return HttpAdapter(str(cfg.entry), cfg.name, hello_timeout=cfg.timeout_s)
