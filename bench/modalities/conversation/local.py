"""Local conversation data sets: each JSON file under files/ is one source (a conversation).

The file holds ``{"sessions": [{"date_time": ISO 8601, "turns": [{"speaker": str,
"text": str}, ...]}, ...]}``. Turns are numbered 1, 2, ... through the whole file in
order (across sessions), and a region ``{"turn": n}`` names the n-th turn. A turn is
observed at its session's ``date_time`` (with a timezone); a session without one uses
the file's time from dataset.yaml. To make each session its own source, write one file
per session. Atom text is "speaker: text", as for LoCoMo.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from bench.modalities.local import LocalDataError, parse_time

FORMATS = "conversations (.json: {\"sessions\": [{\"date_time\", \"turns\": [{\"speaker\", \"text\"}]}]})"
SUFFIXES: tuple[str, ...] | None = (".json",)
EXAMPLE_FILES: dict[str, str] = {
    "support-chat.json": json.dumps({
        "sessions": [
            {"date_time": "2024-03-01T10:00:00+00:00", "turns": [
                {"speaker": "Customer", "text": "My invoice shows the wrong address."},
                {"speaker": "Agent", "text": "I have corrected it; a new invoice goes out today."},
            ]},
            {"date_time": "2024-03-08T09:30:00+00:00", "turns": [
                {"speaker": "Customer", "text": "The new invoice arrived, thank you."},
            ]},
        ]
    }, indent=2) + "\n",
}
EXAMPLE_GOLD: list[tuple[str, str | None, str | None, dict]] = [
    ("What did the agent do about the wrong address?", "corrected it and sent a new invoice", "support-chat.json", {"turn": 2}),
    ("Did the customer ask for a refund?", None, None, {}),
]


def source_of(path: str) -> str:
    return path


def turn_rows(source_id: str, doc: object, name: str) -> list[dict]:
    if not isinstance(doc, dict) or not isinstance(doc.get("sessions"), list):
        raise LocalDataError(f"{name}: field sessions: must be an object {{\"sessions\": [...]}}")
    rows: list[dict] = []
    for s, session in enumerate(doc["sessions"]):
        where = f"{name}: field sessions[{s}]"
        if not isinstance(session, dict) or not isinstance(session.get("turns"), list):
            raise LocalDataError(f"{where}: must be an object with a list of turns")
        when = parse_time(session["date_time"], f"{where}.date_time") if session.get("date_time") is not None else pd.NaT
        for t, turn in enumerate(session["turns"]):
            if not isinstance(turn, dict) or not all(isinstance(turn.get(k), str) for k in ("speaker", "text")):
                raise LocalDataError(f"{where}.turns[{t}]: must have string fields speaker and text")
            if not turn["text"].strip():
                raise LocalDataError(f"{where}.turns[{t}].text: empty; a turn needs words to be retrieved (remove it or write its text)")
            rows.append({"source_id": source_id, "turn": len(rows) + 1, "dia_id": f"S{s + 1}:{t + 1}",
                         "speaker": turn["speaker"], "text": f"{turn['speaker']}: {turn['text']}", "observed_at": when})
    if not rows:
        raise LocalDataError(f"{name}: no turns")
    return rows


def parse(sources: dict[str, list[tuple[str, Path]]]) -> pd.DataFrame:
    rows: list[dict] = []
    for source_id, files in sorted(sources.items()):
        for inner, local in files:
            try:
                doc = json.loads(Path(local).read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                line = getattr(exc, "lineno", None)
                raise LocalDataError(f"{inner}: {'line ' + str(line) + ': ' if line else ''}not valid UTF-8 JSON") from None
            rows.extend(turn_rows(source_id, doc, inner))
    df = pd.DataFrame(rows, columns=["source_id", "turn", "dia_id", "speaker", "text", "observed_at"])
    df["observed_at"] = pd.to_datetime(df["observed_at"], utc=True)
    return df
