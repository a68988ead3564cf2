"""The tour of README.md and docs/comparing.md as code: every command block, in order.

Each ```sh block of the two documents is a list of commands (a line ending in a backslash
continues); a fenced block without a language whose lines start with `$ ` is a transcript: each
`$` line is a command, the lines after it its output as shown and `exit N` its exit code.
`steps()` reads them from the documents in order (README.md, then docs/comparing.md), so what is
run cannot drift from what the documents say: tests/test_tour.py runs them in a fresh copy of the
project and checks the outputs' shape and the conclusions the prose draws, and

    python -m tests.tour --write [--work FOLDER]

runs them in a fresh copy on the README's selection (page OCR on, the full grid) and rewrites
the quoted outputs (the figures) and the times in both documents from that real run, writing
every command's output and time to FOLDER/tour.log.

A quoted output is marked in the document, and ends at the closing marker:

    <!-- tour: COMMAND | SELECTION -->
    ...
    <!-- /tour -->

COMMAND is a command the tour runs (`transcript`: the `$` commands of the fenced block inside),
SELECTION says what of its output is quoted, `;`-separated: `whole`; `rows: MODALITY METRIC,
...` (rows of the output's Markdown table by their first two cells, in that order); `table:
GROUP` and `first: N` (the first table under the output's heading that names GROUP, its first N
rows); with either, `columns: NAME, ...` (those columns, in that order); `first-last` (a transcript: each command's first and last
output line, `…` between); `demote: N` (N more `#` on the output's headings). A time is
`<!-- tour-time: COMMAND -->…<!-- /tour-time -->` (`total`: the README's commands together).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/comparing.md")

#: set-up commands of the README that the tour does not run as written: the package is installed
#: already (the tests run in it), and the test suite is what runs the tour; the main job (every
#: data set) runs in the test's copy, which holds its outputs already, and not in the regeneration's
INSTEAD: dict[str, str | None] = {
    "pip install -e . && dvc repro": "dvc repro",
    "pip install -e '.[test,example-llamaindex-bm25,example-qdrant,mcp]' && pytest": None,
}
SETUP = tuple(INSTEAD)
#: CI's tour (tests/test_tour.py without --tour-full): the README's 3 x 3 sweep as 1 x 3, pdf
#: chunking left at page (the three conversation strategies stay: every conclusion the prose
#: draws about the sweep compares them); each key must occur in exactly one command
SMALL: dict[str, str] = {"-S 'chunking.pdf.strategy=page,window,whole'": "-S 'chunking.pdf.strategy=page'"}

FENCE = re.compile(r"^```(\w*)\s*$")
MARK = re.compile(r"^<!-- tour: (.+?) \| (.+?) -->$")
END = "<!-- /tour -->"
TIME = re.compile(r"<!-- tour-time: (.+?) -->(.*?)<!-- /tour-time -->")


@dataclass(frozen=True)
class Step:
    """One command of a document, where it stands, and what the document shows of it."""

    doc: str
    line: int
    command: str
    shown: tuple[str, ...] = ()  # a transcript's output lines as the document shows them
    exit: int = 0  # the exit code the document shows (a transcript's `exit N`); a ```sh command exits 0
    transcript: bool = False


@dataclass
class Outcome:
    step: Step
    command: str  # as run (after INSTEAD and SMALL)
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def fences(text: str) -> Iterable[tuple[str, int, list[str]]]:
    """(language, line of the opening fence, 1-based, the lines inside) of every fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        yield m.group(1), i + 1, lines[i + 1:j]
        i = j + 1


def sh_commands(body: list[str]) -> list[tuple[int, str]]:
    """(offset, command) of a ```sh block: a trailing backslash joins the next line; blank and comment lines are no command."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for k, line in enumerate(body):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            start = k
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1].rstrip() + " "
            continue
        out.append((start, uncommented(re.sub(r"\s+", " ", (pending + line.strip()).strip()))))
        pending = ""
    return out


def uncommented(command: str) -> str:
    """The command without its trailing shell comment (a `#` after a blank, outside quotes)."""
    quote = ""
    for i, ch in enumerate(command):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and i > 0 and command[i - 1].isspace():
            return command[:i].rstrip()
    return command


def transcript(body: list[str]) -> list[tuple[int, str, tuple[str, ...], int]]:
    """(offset, command, output lines shown, exit) of each `$` command of a transcript block."""
    out: list[tuple[int, str, tuple[str, ...], int]] = []
    for k, line in enumerate(body):
        if line.startswith("$ "):
            out.append((k, line[2:].strip(), (), 0))
        elif out and (m := re.fullmatch(r"exit (\d+)", line.strip())):
            out[-1] = (*out[-1][:3], int(m.group(1)))
        elif out and line.strip():
            out[-1] = (out[-1][0], out[-1][1], (*out[-1][2], line), out[-1][3])
    return out


def steps(root: Path = ROOT) -> list[Step]:
    """Every command of the documents, in order."""
    found: list[Step] = []
    for doc in DOCS:
        for lang, at, body in fences((root / doc).read_text(encoding="utf-8")):
            if lang == "sh":
                found += [Step(doc, at + 1 + k, cmd) for k, cmd in sh_commands(body)]
            elif lang == "" and body and body[0].startswith("$ "):
                found += [Step(doc, at + 1 + k, cmd, shown, code, True) for k, cmd, shown, code in transcript(body)]
    return found


def planned(all_steps: list[Step], small: bool, setup: bool = True) -> list[tuple[Step, str]]:
    """(step, the command run for it) in order: INSTEAD applied (`setup` False: no set-up command), SMALL when `small`."""
    out: list[tuple[Step, str]] = []
    used = dict.fromkeys(SMALL, 0)
    for step in all_steps:
        command: str | None = INSTEAD.get(step.command, step.command) if setup or step.command not in SETUP else None
        if command is None:
            continue
        if small:
            for old, new in SMALL.items():
                if old in command:
                    used[old] += 1
                    command = command.replace(old, new)
        out.append((step, command))
    if small and any(n != 1 for n in used.values()):
        raise ValueError(f"tests/tour.py SMALL: each substitution must apply to exactly one command, got {used}")
    return out


def bench_shim(folder: Path) -> Path:
    """A folder with a `bench` command that runs `python -m bench.cli` of the project it is called in
    (the documents say `bench`; the installed console script may belong to another checkout)."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "bench"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m bench.cli "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    return folder


def run_tour(work: Path, env: dict[str, str], small: bool, *, setup: bool = True, root: Path = ROOT, timeout: float = 3600,
             on_step: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Run every step in `work` (bash, one command at a time); stop at the first that does not
    exit as the document says (its Outcome is the last)."""
    env = {**env, "PATH": f"{bench_shim(work.parent / 'tour-bin')}:{env.get('PATH', '')}"}
    outcomes: list[Outcome] = []
    for step, command in planned(steps(root), small, setup):
        start = time.monotonic()
        # output to files, not pipes: `dvc exp run --run-all` returns while the queue's worker it started lives on
        # idle with the command's descriptors (a terminal does not wait for it; a pipe would, until it is stopped)
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            proc = subprocess.run(["bash", "-c", command], cwd=work, env=env, stdout=out, stderr=err, text=True, timeout=timeout,
                                  check=False)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        outcome = Outcome(step, command, proc.returncode, stdout, stderr, time.monotonic() - start)
        outcomes.append(outcome)
        if on_step is not None:
            on_step(outcome)
        if proc.returncode != step.exit:
            break
    # the queue's workers the tour started stop once idle (`dvc queue stop` waits for running tasks: none is left)
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(["dvc", "queue", "stop"], cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120,
                       check=False)
    return outcomes


def logger(path: Path, echo: bool = False) -> Callable[[Outcome], None]:
    """An `on_step` that appends every command, its time, exit code and output to `path` (and prints a line)."""
    def log(o: Outcome) -> None:
        head = f"{o.step.doc}:{o.step.line}: {o.command}  [{minutes(o.seconds)}, exit {o.returncode}]"
        if echo:
            print(head, flush=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"$ {o.command}\n# {head}\n{o.stdout}\n{o.stderr}\n")

    return log


def failed(outcomes: list[Outcome]) -> str | None:
    """A line naming the step that did not exit as its document says, with its output; None when all did."""
    last = outcomes[-1] if outcomes else None
    if last is None or last.returncode == last.step.exit:
        return None
    return (f"{last.step.doc}:{last.step.line}: `{last.command}` exited {last.returncode}, the document shows {last.step.exit}\n"
            f"{last.stdout[-4000:]}\n{last.stderr[-4000:]}")


# --------------------------------------------------------------------------- the quoted outputs


@dataclass(frozen=True)
class Figure:
    """A quoted output: its marker's command and selection, and the lines between the markers."""

    doc: str
    line: int  # the marker's line, 1-based
    command: str
    selection: dict[str, str]
    body: tuple[str, ...]


def selection(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(";"):
        key, _, value = part.strip().partition(":")
        out[key.strip()] = value.strip()
    return out


def figures(doc: str, root: Path = ROOT) -> list[Figure]:
    lines = (root / doc).read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        if m := MARK.match(line):
            end = lines.index(END, i + 1)
            out.append(Figure(doc, i + 1, m.group(1).strip(), selection(m.group(2)), tuple(lines[i + 1:end])))
    return out


def cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def tables(lines: list[str]) -> list[tuple[int, list[str]]]:
    """(index of the header, the table's lines) of every Markdown table in `lines`."""
    out = []
    i = 0
    while i < len(lines) - 1:
        if lines[i].startswith("|") and re.fullmatch(r"\|[\s:|-]+\|", lines[i + 1].strip()):
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out.append((i, lines[i:j]))
            i = j
        else:
            i += 1
    return out


def select_rows(output: list[str], wanted: str) -> list[str]:
    keys = [tuple(k.split()) for k in wanted.split(",")]
    for _, table in tables(output):
        rows = {tuple(cells(r)[:2]): r for r in table[2:]}
        if all(k in rows for k in keys):
            return [table[0], table[1], *(rows[k] for k in keys)]
    raise ValueError(f"no table of the output has the rows {wanted}")


def select_table(output: list[str], group: str, first: int) -> list[str]:
    for at, table in tables(output):
        heading = next((line for line in reversed(output[:at]) if line.startswith("#")), "")
        if re.search(rf"\b{re.escape(group)}\b", heading):
            return table[:2 + first]
    raise ValueError(f"no table under a heading naming {group!r}")


def keep_columns(table: list[str], columns: str) -> list[str]:
    """A Markdown table (header, alignment, rows) with only the named columns, in that order."""
    names = [c.strip() for c in columns.split(",")]
    header = cells(table[0])
    missing = [n for n in names if n not in header]
    if missing:
        raise ValueError(f"the table has no column {missing[0]!r}; it has {header}")
    index = [header.index(n) for n in names]
    align = cells(table[1])
    return ["| " + " | ".join(cells(table[0])[i] for i in index) + " |", "|" + "|".join(align[i] for i in index) + "|",
            *("| " + " | ".join(cells(row)[i] for i in index) + " |" for row in table[2:])]


def demoted(lines: list[str], levels: int) -> list[str]:
    return ["#" * levels + line if re.match(r"#+ ", line) else line for line in lines]


def render(figure: Figure, outcomes: dict[str, Outcome]) -> list[str]:
    """The figure's lines from the real outputs (`outcomes` by command as run)."""
    sel = figure.selection
    if figure.command == "transcript":
        out: list[str] = []
        for line in figure.body:
            if line.startswith("$ "):
                got = outcomes[line[2:].strip()]
                shown = got.stdout.rstrip("\n").splitlines()
                if "first-last" in sel and len(shown) > 2:
                    shown = [shown[0], "…", shown[-1]]
                out += [line, *shown, f"exit {got.returncode}"]
        return ["```", *out, "```"]
    output = outcomes[figure.command].stdout.rstrip("\n").splitlines()
    if "rows" in sel:
        lines = select_rows(output, sel["rows"])
    elif "table" in sel:
        lines = select_table(output, sel["table"], int(sel.get("first", "1000000")))
    else:
        lines = output
    if "columns" in sel and ("rows" in sel or "table" in sel):
        lines = keep_columns(lines, sel["columns"])
    return demoted(lines, int(sel.get("demote", "0")))


def minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole >= 60 else f"{whole} s"


def rewrite(doc: str, outcomes: dict[str, Outcome], times: dict[str, float], root: Path = ROOT) -> str:
    """The document with every figure and time taken from the real run."""
    text = (root / doc).read_text(encoding="utf-8")
    lines = text.splitlines()
    for figure in reversed(figures(doc, root)):
        body = render(figure, outcomes)
        start = figure.line  # the marker's index + 1
        end = lines.index(END, start)
        lines[start:end] = body
    text = "\n".join(lines) + "\n"
    return TIME.sub(lambda m: f"<!-- tour-time: {m.group(1)} -->{minutes(times[m.group(1)])}<!-- /tour-time -->", text)


def by_command(outcomes: list[Outcome]) -> dict[str, Outcome]:
    """Each command's first outcome (a command run twice keeps its first: the README's)."""
    out: dict[str, Outcome] = {}
    for o in outcomes:
        out.setdefault(o.step.command, o)
        out.setdefault(o.command, o)
    return out


def durations(outcomes: list[Outcome]) -> dict[str, float]:
    out = {"total": sum(o.seconds for o in outcomes if o.step.doc == DOCS[0] and o.step.command not in SETUP)}
    for o in outcomes:
        out.setdefault(o.step.command, o.seconds)
    return out


# --------------------------------------------------------------------------- the regeneration command


def fresh_copy(work: Path) -> dict[str, str]:
    """A fresh copy of this checkout at `work` (no outputs; git-initialised on branch main, the
    working tree committed; page OCR on, the checkout's OCR cache seeded) and its environment."""
    from tests.project_copy import copy_project, project_env, run

    copy_project(work, ocr_cache=ROOT / "data" / "ocr-cache" if (ROOT / "data" / "ocr-cache").is_dir() else None, pdf_ocr=True)
    env = project_env(work.parent / "site-cache")
    for args in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "a fresh copy"]):
        run(args, work, env)
    return env


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.tour", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the figures and times of README.md and docs/comparing.md")
    parser.add_argument("--work", type=Path, default=None, help="where the fresh copy goes (default: a new temporary folder)")
    args = parser.parse_args(argv)
    import tempfile

    base = args.work or Path(tempfile.mkdtemp(prefix="bench-tour-"))
    if (base / "project").exists():
        shutil.rmtree(base / "project")
    work = base / "project"
    env = fresh_copy(work)
    (base / "tour.log").write_text("", encoding="utf-8")
    outcomes = run_tour(work, env, small=False, setup=False, on_step=logger(base / "tour.log", echo=True))
    problem = failed(outcomes)
    if problem:
        sys.exit(f"the tour stopped: {problem}")
    if args.write:
        for doc in DOCS:
            (ROOT / doc).write_text(rewrite(doc, by_command(outcomes), durations(outcomes)), encoding="utf-8")
        print(f"rewrote the figures and times of {', '.join(DOCS)}; every output: {base / 'tour.log'}")


if __name__ == "__main__":
    main()
