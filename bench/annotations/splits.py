"""The split lock: which query_ids are test is frozen in bench/sets/splits.lock.

The lock is JSON lines. First come the *freeze records*, one per freeze, oldest first:

    {"freeze": 1, "utc": "...", "git_commit": "...", "reason": "...",
     "entries": 11104, "test": 3003, "digest": "<sha256 of the entry rows>",
     "changes": {"added_to_test": 3003, "removed_from_test": 0, "test_to_dev": 0, "dev_to_test": 0}}

then one *entry row* per known query_id, sorted by (set, query_id):

    {"set": "locomo", "query_id": "locomo:conv-26:q0", "split": "test"}

`digest` is the sha256 of the entry rows as written; the last freeze record's digest
must match them, so a lock edited by hand (instead of re-frozen with
``bench splits freeze --reason ...``) is refused. Dev rows are kept so that a split
change reads "was dev, now test" rather than "added to test".

Validation (:func:`lock_failures`) rejects a set in which an entry changed split, a
locked test entry is missing, or a test entry is not in the lock. New *dev* entries
and dropped dev entries are allowed: they cannot leak the test split.

The digest alone cannot stop a hand edit that also recomputes the digest. So when the
project is a git repository, the lock is also checked against the *committed* lock
(git HEAD's version, :func:`committed_lock` and :func:`history_failures`):

* identical to HEAD's: fine;
* otherwise HEAD's freeze records must be an unchanged prefix of the current ones
  (no committed freeze is rewritten or deleted), and at least one freeze must be newer
  than HEAD's last one (rows that differ from HEAD's with no new freeze are refused,
  whatever digest they carry);
* the newest freeze must describe the change it claims: its entry and test counts
  must be those of the current rows, and when it is the only new freeze its
  `changes` must equal the changes from HEAD's rows to the current ones.

A hand edit with a recomputed digest is therefore refused unless it also appends a
freeze record that states, correctly, how many entries moved between splits, with a
reason; that record is then exactly what `bench splits freeze` writes, and it goes
into the commit for review. Nothing moves silently.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.io import LineError, dumps_line, iter_jsonl

LOCK_NAME = "splits.lock"
FREEZE_FIELDS = ("freeze", "utc", "git_commit", "reason", "entries", "test", "digest", "changes")
ENTRY_FIELDS = ("set", "query_id", "split")
CHECK = "split lock"


@dataclass(frozen=True)
class LockEntry:
    set: str
    query_id: str
    split: str
    line: int  # line in the lock file (0 when not read from a file)


@dataclass(frozen=True)
class SplitLock:
    freezes: tuple[dict, ...]
    entries: tuple[LockEntry, ...]
    display: str = "bench/sets/splits.lock"

    def by_id(self) -> dict[str, LockEntry]:
        return {e.query_id: e for e in self.entries}

    def test_ids(self, sets: Iterable[str] | None = None) -> set[str]:
        keep = None if sets is None else set(sets)
        return {e.query_id for e in self.entries if e.split == "test" and (keep is None or e.set in keep)}

    def digest(self) -> str:
        return entries_digest([(e.set, e.query_id, e.split) for e in self.entries])


def entry_rows(triples: Iterable[tuple[str, str, str]]) -> list[dict]:
    return [{"set": s, "query_id": q, "split": sp} for s, q, sp in sorted(triples)]


def entries_digest(triples: Iterable[tuple[str, str, str]]) -> str:
    h = hashlib.sha256()
    for row in entry_rows(triples):
        h.update((dumps_line(row) + "\n").encode("utf-8"))
    return h.hexdigest()


def load_lock(path: Path, display: str | None = None) -> SplitLock:
    """Read the lock; a malformed line raises LineError naming file, line and field."""
    name = display or str(path)
    freezes: list[dict] = []
    entries: list[LockEntry] = []
    seen: dict[str, int] = {}
    for lineno, row in iter_jsonl(path, name):
        if not isinstance(row, dict):
            raise LineError(name, lineno, "<row>", "lock row must be a JSON object")
        if "freeze" in row:
            if entries:
                raise LineError(name, lineno, "freeze", "freeze records must come before the entry rows")
            missing = [f for f in FREEZE_FIELDS if f not in row]
            if missing:
                raise LineError(name, lineno, missing[0], "missing freeze field")
            freezes.append(row)
            continue
        if set(row) != set(ENTRY_FIELDS):
            raise LineError(name, lineno, "<row>", f"entry row must have exactly the fields {list(ENTRY_FIELDS)}", ",".join(sorted(row)))
        if row["split"] not in ("dev", "test"):
            raise LineError(name, lineno, "split", "must be dev or test", str(row["split"]))
        if row["query_id"] in seen:
            raise LineError(name, lineno, "query_id", f"listed twice (first at line {seen[row['query_id']]})", row["query_id"])
        seen[row["query_id"]] = lineno
        entries.append(LockEntry(row["set"], row["query_id"], row["split"], lineno))
    if not freezes:
        raise LineError(name, None, "freeze", "no freeze record: create the lock with `bench splits freeze --reason ...`")
    return SplitLock(tuple(freezes), tuple(entries), name)


def lock_text(lock: SplitLock) -> str:
    rows = [*lock.freezes, *entry_rows((e.set, e.query_id, e.split) for e in lock.entries)]
    return "".join(dumps_line(r) + "\n" for r in rows)


def changes(old: SplitLock | None, triples: Sequence[tuple[str, str, str]]) -> dict[str, int]:
    before = {} if old is None else {e.query_id: e.split for e in old.entries}
    after = {q: sp for _, q, sp in triples}
    return {
        "added_to_test": sum(1 for q, sp in after.items() if sp == "test" and q not in before),
        "removed_from_test": sum(1 for q, sp in before.items() if sp == "test" and q not in after),
        "test_to_dev": sum(1 for q, sp in after.items() if sp == "dev" and before.get(q) == "test"),
        "dev_to_test": sum(1 for q, sp in after.items() if sp == "test" and before.get(q) == "dev"),
    }


def freeze(old: SplitLock | None, triples: Sequence[tuple[str, str, str]], *, utc: str, git_commit: str | None, reason: str) -> SplitLock:
    """A new lock over `triples` (set, query_id, split) with one more freeze record."""
    if not reason.strip():
        raise ValueError("a re-freeze needs a reason")
    ids = [q for _, q, _ in triples]
    if len(ids) != len(set(ids)):
        dup = next(q for q in ids if ids.count(q) > 1)
        raise ValueError(f"query_id {dup} appears twice in the sets")
    record = {
        "freeze": (len(old.freezes) if old else 0) + 1,
        "utc": utc,
        "git_commit": git_commit,
        "reason": reason.strip(),
        "entries": len(triples),
        "test": sum(1 for t in triples if t[2] == "test"),
        "digest": entries_digest(triples),
        "changes": changes(old, triples),
    }
    entries = tuple(LockEntry(s, q, sp, 0) for s, q, sp in sorted(triples))
    return SplitLock(((*old.freezes,) if old else ()) + (record,), entries, old.display if old else "bench/sets/splits.lock")


def set_triples(paths: Sequence[Path]) -> list[tuple[str, str, str]]:
    """(set key, query_id, split) of every entry of the given set files (for a freeze)."""
    from bench.corpus_sources import datasets
    from bench.modalities.local import set_key

    out: list[tuple[str, str, str]] = []
    for path in paths:
        key = set_key(path, list(datasets().values()))  # a local data set's set.jsonl: its key
        for lineno, obj in iter_jsonl(path):
            if not isinstance(obj, dict) or not isinstance(obj.get("query_id"), str) or obj.get("split") not in ("dev", "test"):
                raise LineError(str(path), lineno, "query_id/split", "cannot freeze an entry without a query_id and a dev/test split")
            out.append((key, obj["query_id"], obj["split"]))
    return out


def _row(file: str, line: int, query_id: str, value: str) -> dict[str, Any]:
    return {"file": file, "line": line, "query_id": query_id, "check": CHECK, "value": value}


def lock_failures(entries: Sequence[tuple[Any, str, int, str]], lock: SplitLock) -> list[dict]:
    """Failure rows (file, line, query_id, check, value) of the entries against the lock.

    `entries` are (parsed object, displayed file, line, set key) of every parsed line of
    the set files being validated; only sets among those keys are checked for dropped
    test entries, so validating a subset of the sets stays possible.
    """
    rows: list[dict] = []
    last = lock.freezes[-1]
    if lock.digest() != last["digest"]:
        rows.append(_row(lock.display, 0, "", f"entry rows (sha256 {lock.digest()[:12]}…) differ from freeze {last['freeze']}'s digest {str(last['digest'])[:12]}…: "
                         "the lock was edited by hand; re-freeze with `bench splits freeze --reason ...`"))
    locked = lock.by_id()
    seen: set[str] = set()
    set_keys: set[str] = set()
    for obj, display, lineno, key in entries:
        set_keys.add(key)
        if not isinstance(obj, dict):
            continue
        qid, split = obj.get("query_id"), obj.get("split")
        if not isinstance(qid, str) or split not in ("dev", "test"):
            continue  # the schema reports these
        seen.add(qid)
        was = locked.get(qid)
        where = f"{lock.display}:{was.line}" if was and was.line else lock.display
        if was is None:
            if split == "test":
                rows.append(_row(display, lineno, qid, f"test entry not in {lock.display}: adding to test needs a recorded re-freeze (`bench splits freeze --reason ...`)"))
        elif was.split != split:
            rows.append(_row(display, lineno, qid, f"split changed from {was.split} ({where}) to {split} without a recorded re-freeze"))
    for e in lock.entries:
        if e.split == "test" and e.set in set_keys and e.query_id not in seen:
            rows.append(_row(lock.display, e.line, e.query_id, f"test entry dropped from bench/sets/{e.set}.jsonl without a recorded re-freeze"))
    return rows


def committed_lock(root: Path, rel: str = "bench/sets/splits.lock") -> SplitLock | None:
    """git HEAD's version of the lock, or None outside git / when HEAD has none.

    A committed lock that does not parse is returned as None too: the working
    tree's lock is then judged on its own digest (the commit history shows the rest)."""
    proc = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=root, capture_output=True, check=False)
    if proc.returncode != 0:
        return None
    tmp = _lock_from_text(proc.stdout.decode("utf-8", "replace"), f"{rel} (HEAD)")
    return tmp


def _lock_from_text(text: str, display: str) -> SplitLock | None:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-lock-") as folder:
        path = Path(folder) / LOCK_NAME
        path.write_text(text, encoding="utf-8")
        try:
            return load_lock(path, display)
        except LineError:
            return None


def history_failures(lock: SplitLock, head: SplitLock | None) -> list[dict]:
    """Failure rows of the lock against the committed one (see the module docstring)."""
    if head is None:
        return []
    same_rows = head.digest() == lock.digest()
    if list(head.freezes) == list(lock.freezes) and same_rows:
        return []
    fix = "restore it (`git checkout HEAD -- bench/sets/splits.lock`) and re-freeze with `bench splits freeze --reason ...`"
    for i, rec in enumerate(head.freezes):
        if i >= len(lock.freezes):
            return [_row(lock.display, 0, "", f"freeze {rec.get('freeze')} of the committed lock (HEAD) is missing: committed freezes are never deleted; {fix}")]
        if lock.freezes[i] != rec:
            return [_row(lock.display, i + 1, "", f"freeze {rec.get('freeze')} differs from the committed lock's (HEAD): committed freezes are never rewritten; {fix}")]
    new = lock.freezes[len(head.freezes):]
    if not new:
        return [_row(lock.display, 0, "", f"entry rows differ from the committed lock (HEAD) but no freeze was recorded since "
                     f"(sha256 {lock.digest()[:12]}… vs {head.digest()[:12]}…): a hand edit; {fix}")]
    last = new[-1]
    line = len(lock.freezes)
    triples = [(e.set, e.query_id, e.split) for e in lock.entries]
    counts = {"entries": len(triples), "test": sum(1 for t in triples if t[2] == "test")}
    for name, value in counts.items():
        if last.get(name) != value:
            return [_row(lock.display, line, "", f"freeze {last.get('freeze')} records {name}={last.get(name)} but the entry rows hold {value}: it does not describe this lock; {fix}")]
    if len(new) == 1:
        actual = changes(head, triples)
        if last.get("changes") != actual:
            return [_row(lock.display, line, "", f"freeze {last.get('freeze')} records changes {last.get('changes')} but the rows changed by {actual} "
                         f"since the committed lock (HEAD): it does not describe this lock; {fix}")]
    numbers = [r.get("freeze") for r in lock.freezes]
    if numbers != list(range(1, len(numbers) + 1)):
        return [_row(lock.display, line, "", f"freeze numbers {numbers} are not 1..{len(numbers)}: {fix}")]
    return []
