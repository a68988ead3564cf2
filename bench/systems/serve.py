"""Serve any Python system (a built-in or `module:callable`) over the command or HTTP protocol.

    python -m bench.systems.serve bm25 --atoms data/served            # JSON lines on stdin/stdout
    python -m bench.systems.serve bm25 --atoms data/served --http 127.0.0.1:8765

As a command system this runs any Python entry point sandboxed (the python adapter
runs in the harness's own process and cannot be isolated):

    entry: "{python} -m bench.systems.serve mypkg.mod:factory --atoms {atoms}"

`--atoms` is a folder of `<modality>.parquet` atoms (the harness's `data/served/`
or `data/atoms/`) or an atoms file in the contract format (JSONL or Parquet). The
system is built first; then one line `{"ready": true}` (with `"url"` in HTTP mode,
and `"abstains": true` when the system has `abstains = True`) is printed on stdout. This wraps the built-in systems in the external protocols, so
the harness can check that a system's metrics do not depend on the adapter.

A factory with ``replay = True`` (bench.systems.Replayed) is built with no atoms and
served replayed: its ready line says ``"replay": true``, each ``{"observe": event}`` is
handed to its ``observe`` and answered ``{"event": id, "ok": true}``; it takes no
`--atoms` (a replayed command system's line must not name ``{atoms}``):

    entry: "{python} -m bench.systems.serve examples.consolidating_memory:build"

Over HTTP the harness's ``{"hello": true}`` is answered with the ready line.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import click
import pandas as pd

from bench.systems import System, build_system, load_entry_point
from bench.systems.adapters.external import loopback_url
from bench.systems.adapters.protocol import query_of_request, response_to_json

#: the atom columns a replayed system's factory is called with (no rows): those the python adapter gives
ATOM_FRAME = ["atom_id", "source_id", "dataset", "modality", "text", "holder", "observed_at"]


def load_atoms(path: Path) -> pd.DataFrame:
    if path.is_dir():  # served atoms (data/served): <modality>/<dataset>.parquet
        from bench.ingest.partitions import partition_files

        frames = [pd.read_parquet(p) for p in partition_files(path)]
        if not frames:
            raise click.ClickException(f"{path}: no <modality>/<dataset>.parquet atoms")
        return pd.concat(frames, ignore_index=True)
    from bench.systems.atoms import AtomsError, read_atoms_file, validate_contract

    try:
        return validate_contract(read_atoms_file(path), str(path))
    except AtomsError as exc:
        raise click.ClickException(str(exc)) from None


def answer(system: System, request: dict[str, Any], factory: Any = None) -> dict[str, Any]:
    """The answer to one line or POST: a query, an event (replay) or the harness's hello (HTTP)."""
    if set(request) == {"observe"}:
        event = request["observe"]
        system.observe(event)  # type: ignore[attr-defined]
        return {"event": event["event"], "ok": True}
    if set(request) == {"hello"}:
        return ready_line(system, factory)
    return response_to_json(system.search(query_of_request(request)), request.get("id"))


def ready_line(system: System, factory: Any = None, **extra: Any) -> dict[str, Any]:
    """{"ready": true}, with "abstains": true when the system or its factory has `abstains = True`
    and "replay": true when the factory has `replay = True`."""
    line: dict[str, Any] = {"ready": True, **extra}
    if any(getattr(o, "abstains", False) is True for o in (system, factory)):
        line["abstains"] = True
    if getattr(factory, "replay", False) is True:
        line["replay"] = True
    return line


def serve_lines(system: System, stdin: Any, stdout: Any, record: Any = None, factory: Any = None) -> None:
    stdout.write(json.dumps(ready_line(system, factory)) + "\n")
    stdout.flush()
    for line in stdin:
        if not line.strip():
            continue
        if record is not None:
            record.write(line if line.endswith("\n") else line + "\n")
            record.flush()
        stdout.write(json.dumps(answer(system, json.loads(line), factory)) + "\n")
        stdout.flush()


def make_server(system: System, host: str, port: int, record: Any = None, factory: Any = None) -> ThreadingHTTPServer:
    lock = threading.Lock()  # the built-in systems are not promised to be thread-safe

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            try:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = json.loads(raw)
                with lock:
                    if record is not None:
                        record.write(raw.decode("utf-8") + "\n")
                        record.flush()
                    body = json.dumps(answer(system, request, factory)).encode("utf-8")
                status = 200
            except Exception as exc:
                body, status = json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode("utf-8"), 500
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return ThreadingHTTPServer((host, port), Handler)


@click.command()
@click.argument("entry")
@click.option("--atoms", "atoms_path", default=None, type=click.Path(exists=True, path_type=Path),
              help="served atoms folder or contract atoms file (required unless the factory has replay = True)")
@click.option("--http", "http_addr", default=None, help="serve HTTP on HOST:PORT (loopback only; port 0 picks a free one)")
@click.option("--record", "record_path", default=None, type=click.Path(dir_okay=False, path_type=Path), help="append every request received to this file (to inspect what the harness sent)")
def main(entry: str, atoms_path: Path | None, http_addr: str | None, record_path: Path | None) -> None:
    try:
        factory = load_entry_point(entry)
        replay = getattr(factory, "replay", False) is True
        if replay == (atoms_path is not None):
            raise ValueError(f"{entry}: a replayed system (replay = True on its factory) takes no --atoms; any other needs --atoms"
                             if replay else "--atoms is required (the system's factory has no replay = True)")
        system = build_system(entry, pd.DataFrame(columns=ATOM_FRAME) if atoms_path is None else load_atoms(atoms_path))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    record = open(record_path, "a", encoding="utf-8") if record_path else None
    if http_addr is None:
        serve_lines(system, sys.stdin, sys.stdout, record, factory)
        return
    host, _, port = http_addr.rpartition(":")
    try:
        loopback_url(f"http://{host}:{port}/")
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    server = make_server(system, host, int(port), record, factory)
    url = f"http://{host}:{server.server_address[1]}/"
    sys.stdout.write(json.dumps(ready_line(system, factory, url=url)) + "\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
