"""A replayed system for the tests: it records every event and query it gets, in order.

In process (python adapter, ``tests.systems.replay_fake:build``), served as a command or
over HTTP (``python -m bench.systems.serve tests.systems.replay_fake:build``), or run as a
bare script speaking the line protocol (``{python} tests/systems/replay_fake.py``), which
writes its record to stderr as ``RECORD {json}`` lines (a sandboxed system can write
nothing the test could read). It answers each query with one memory citing the latest
unit it was sent of the query's holder. A question holding FAILEVENT makes it fail the
next event; an event whose text holds REFUSE is answered ``ok: false``.
"""

from __future__ import annotations

import json
import sys
from typing import Any


class Recorder:
    name = "replay-recorder"
    replay = True

    def __init__(self, atoms: Any = None) -> None:
        self.record: list[tuple[str, Any]] = []  # ("event", event) or ("query", question, as_of)
        self.latest: dict[str, dict] = {}
        self.fail_next = False

    def observe(self, event: dict[str, Any]) -> None:
        if self.fail_next or "RAISE" in (event.get("text") or ""):
            raise RuntimeError("cannot digest this event")
        self.record.append(("event", event))
        self.latest[event["holder"]] = event

    def search(self, query: Any) -> list[dict]:
        question, as_of, holder = (query["question"], query["as_of"], query["scope"]["holder"]) if isinstance(query, dict) else (
            query.question, str(query.as_of), query.holder)
        self.record.append(("query", question, as_of))
        self.fail_next = "FAILEVENT" in question
        last = self.latest.get(holder)
        if last is None:
            return []
        return [{"memory_id": f"m-{last['event']}", "score": 1.0, "text": last["text"] or "(no text)",
                 "provenance": [{"source_id": last["source_id"], "extent": last["extent"]}]}]


def build(atoms: Any = None) -> Recorder:
    return Recorder(atoms)


build.replay = True  # type: ignore[attr-defined]


def main() -> int:
    system = Recorder()
    print(json.dumps({"ready": True, "replay": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "observe" in request:
            event = request["observe"]
            ok = "REFUSE" not in (event.get("text") or "")
            if ok:
                system.observe(event)
                lines = None
                if event.get("source_file"):  # a parsed source holds the events sent of it; a raw medium is whole
                    with open(event["source_file"], "rb") as fh:
                        lines = fh.read().count(b"\n")
                print("RECORD " + json.dumps({"event": event, "file_lines": lines}), file=sys.stderr, flush=True)
            print(json.dumps({"event": event["event"], "ok": ok}), flush=True)
            continue
        print("RECORD " + json.dumps({"query": request["question"], "as_of": request["as_of"]}), file=sys.stderr, flush=True)
        print(json.dumps({"id": request["id"], "hits": system.search(request)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
