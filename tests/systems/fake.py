"""A scriptable system for the robustness tests: the question says how to misbehave.

Used in-process (Python adapter) and through `python -m bench.systems.serve
tests.systems.fake:build` (command and HTTP adapters). Words in the question:

  SLEEP    sleep 3 s before answering (a per-query timeout is shorter)
  CRASH    raise: in-process a crash; under serve the process exits
  NAN      a NaN score          UNKNOWN   an atom id nobody served
  DUP      one atom twice       WRONGTYPE a string score
  RISING   scores that rise down the list
  WAIT<n>  sleep n milliseconds, then answer normally
otherwise the first k atoms (by atom_id) with scores 3, 2, 1, ...
"""

from __future__ import annotations

import re
import threading
import time

import pandas as pd

from bench.systems import Hit, Query, Response


class Fake:
    name = "fake"

    def __init__(self, atoms: pd.DataFrame) -> None:
        self.ids = sorted(atoms["atom_id"].astype(str))
        self.queries: list[Query] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()

    def search(self, query: Query) -> list[Hit] | Response | dict:
        with self.lock:
            self.queries.append(query)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return self._answer(query)
        finally:
            with self.lock:
                self.in_flight -= 1

    def _answer(self, query: Query) -> list[Hit] | Response | dict:
        q = query.question
        if "SLEEP" in q:
            time.sleep(3)
        if "CRASH" in q:
            raise RuntimeError("the fake system crashed on purpose")
        wait = re.search(r"WAIT(\d+)", q)
        if wait:
            time.sleep(int(wait.group(1)) / 1000)
        top = self.ids[: min(3, query.k)]
        if "NAN" in q:
            return [Hit(top[0], float("nan"))]
        if "UNKNOWN" in q:
            return [Hit("no-such-atom", 1.0)]
        if "DUP" in q:
            return [Hit(top[0], 2.0), Hit(top[0], 1.0)]
        if "WRONGTYPE" in q:
            return {"hits": [{"atom_id": top[0], "score": "high"}]}
        if "RISING" in q:
            return [Hit(top[0], 1.0), Hit(top[1], 2.0)]
        if "ABSTAIN" in q:
            return Response([], abstain=True, confidence=0.1)
        return [Hit(a, float(len(top) - i)) for i, a in enumerate(top)]


def build(atoms: pd.DataFrame) -> Fake:
    return Fake(atoms)


class AbstainingFake(Fake):
    abstains = True  # declares that it uses abstention (bench.systems.config.declares_abstention)


def build_abstaining(atoms: pd.DataFrame) -> AbstainingFake:
    return AbstainingFake(atoms)
