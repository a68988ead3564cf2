"""A light command-protocol system for the failure tests (standard library only, starts fast).

    python tests/systems/fake_command.py ID1,ID2,... [--record FILE]

Same behaviour words as tests/systems/fake.py, except CRASH exits the process (code 3).
"""

from __future__ import annotations

import json
import re
import sys
import time


def main(argv: list[str]) -> int:
    ids = sorted(argv[0].split(","))
    record = open(argv[argv.index("--record") + 1], "a", encoding="utf-8") if "--record" in argv else None
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if record:
            record.write(line)
            record.flush()
        req = json.loads(line)
        q = req["question"]
        top = ids[: min(3, req["k"])]
        hits = [{"atom_id": a, "score": float(len(top) - i)} for i, a in enumerate(top)]
        if "SLEEP" in q:
            time.sleep(3)
        if "CRASH" in q:
            sys.exit(3)
        wait = re.search(r"WAIT(\d+)", q)
        if wait:
            time.sleep(int(wait.group(1)) / 1000)
        if "NAN" in q:
            hits = [{"atom_id": top[0], "score": float("nan")}]
        if "UNKNOWN" in q:
            hits = [{"atom_id": "no-such-atom", "score": 1.0}]
        if "DUP" in q:
            hits = [{"atom_id": top[0], "score": 2.0}, {"atom_id": top[0], "score": 1.0}]
        if "WRONGTYPE" in q:
            hits = [{"atom_id": top[0], "score": "high"}]
        if "RISING" in q:
            hits = [{"atom_id": top[0], "score": 1.0}, {"atom_id": top[1], "score": 2.0}]
        print(json.dumps({"id": req["id"], "hits": hits}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
