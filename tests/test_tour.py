"""The README's tour and docs/comparing.md, run as written (tests/tour.py reads their command
blocks): in a fresh copy, in order, every command exits as the documents say, each quoted output
has the shape of the real one, and the conclusions the prose draws hold on the real run.

The copy is a clone of the session's reproduced project (`[mmlongbench, locomo]`, the README's
selection; page OCR off, as in every test copy), with the mirror root relative as committed in
the project, so queued experiments run from copies under .dvc/tmp/exps/ and resolve it against
the repository (what tests/test_queue_e2e.py checked before it was merged here), and its branch
named `main` as the project's. The README's 3 x 3 sweep runs as 1 x 3 (pdf stays page: SMALL in
tests/tour.py): every conclusion the prose draws about the sweep compares conversation
strategies, and two of the three runs are restored from DVC's run cache. `pytest -m tour_full
tests/test_tour.py` runs the sweep as written (nine experiments).

Also run here: the minimal Python system of docs/systems.md, as that page says to plug it in."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests import tour
from tests.conftest import MIRROR, ROOT, need_mirror
from tests.project_copy import clone_project, project_env, run

# -- the documents' commands and figures (fast) ---------------------------------------------------


def test_every_command_block_is_read_in_order() -> None:
    steps = tour.steps()
    assert [s.doc for s in steps] == sorted((s.doc for s in steps), key=tour.DOCS.index)  # README first, then comparing.md
    readme = [s.command for s in steps if s.doc == "README.md"]
    assert readme[0] == "pip install -e . && dvc repro" and "bench compare HEAD conv-window" in readme
    assert all(key in [s.command for s in steps] for key in tour.INSTEAD)  # the set-up commands are still the README's
    gates = [s for s in steps if s.transcript]
    assert [(s.command, s.exit) for s in gates[:2]] == [("bench gate sweep-1", 0), ("bench gate conv-window", 1)]
    run_as = [c for _, c in tour.planned(steps, small=True)]
    assert "pytest" not in " ".join(run_as) and any("chunking.pdf.strategy=page'" in c for c in run_as)


def test_every_figure_names_a_command_the_tour_runs() -> None:
    commands = {s.command for s in tour.steps()}
    found = [f for doc in tour.DOCS for f in tour.figures(doc)]
    assert len(found) >= 7
    for f in found:
        assert f.command == "transcript" or f.command in commands, f"{f.doc}:{f.line}: {f.command} is not run by the tour"
        if f.command == "transcript":
            assert f.body[0] == "```" and f.body[-1] == "```" and f.body[1].startswith("$ ")
    times = [m.group(1) for doc in tour.DOCS for m in tour.TIME.finditer((ROOT / doc).read_text(encoding="utf-8"))]
    assert times and all(t == "total" or t in commands for t in times)


def test_a_figure_is_rendered_from_the_output() -> None:
    compare = ["# Comparison", "", "| modality | metric | n | verdict |", "|---|---|---:|---|",
               "| conversation | recall@10 | 3 | B better |", "| pdf | recall@10 | 2 | not significant |", "| overall | recall@10 | 5 | B better |"]
    board = ["# Board", "## overall (n = 5)", "", "| rank | run | a | b |", "|---|---|---:|---:|", "| 1 | x | 0.1 | 0.2 |", "| 2 | y | 0.3 | 0.4 |"]
    gate = "gate: a is worse: 1\ngate: b is worse: 2\ngate: failed: 2 reasons\n"
    outcomes = {c: tour.Outcome(tour.Step("README.md", 1, c), c, code, out, "", 1.0)
                for c, code, out in (("cmp", 0, "\n".join(compare)), ("board", 0, "\n".join(board)), ("bench gate x", 1, gate))}
    rows = tour.Figure("README.md", 1, "cmp", tour.selection("rows: overall recall@10, conversation recall@10"), ())
    assert tour.render(rows, outcomes) == [compare[2], compare[3], compare[6], compare[4]]
    table = tour.Figure("README.md", 1, "board", tour.selection("table: overall; columns: run, b; first: 1"), ())
    assert tour.render(table, outcomes) == ["| run | b |", "|---|---:|", "| x | 0.2 |"]
    picked = tour.Figure("README.md", 1, "cmp", tour.selection("rows: pdf recall@10; columns: metric, verdict"), ())
    assert tour.render(picked, outcomes) == ["| metric | verdict |", "|---|---|", "| recall@10 | not significant |"]
    whole = tour.Figure("README.md", 1, "board", tour.selection("whole; demote: 2"), ())
    assert tour.render(whole, outcomes)[:2] == ["### Board", "#### overall (n = 5)"]
    shown = tour.Figure("README.md", 1, "transcript", tour.selection("first-last"), ("```", "$ bench gate x", "old", "exit 0", "```"))
    assert tour.render(shown, outcomes) == ["```", "$ bench gate x", "gate: a is worse: 1", "…", "gate: failed: 2 reasons", "exit 1", "```"]
    with pytest.raises(ValueError, match="no table of the output has the rows"):
        tour.render(tour.Figure("README.md", 1, "cmp", tour.selection("rows: code recall@10"), ()), outcomes)


def test_rewrite_replaces_figures_and_times_only(tmp_path: Path) -> None:
    doc = "README.md"
    (tmp_path / doc).write_text("Took <!-- tour-time: total -->old<!-- /tour-time -->.\n\n<!-- tour: board | whole -->\nold\n<!-- /tour -->\n"
                                "after\n", encoding="utf-8")
    outcomes = {"board": tour.Outcome(tour.Step(doc, 1, "board"), "board", 0, "new 1\nnew 2\n", "", 2.0)}
    assert tour.rewrite(doc, outcomes, {"total": 125.4}, root=tmp_path) == (
        "Took <!-- tour-time: total -->2 min 5 s<!-- /tour-time -->.\n\n<!-- tour: board | whole -->\nnew 1\nnew 2\n<!-- /tour -->\nafter\n")


# -- the tour, run ---------------------------------------------------------------------------------


def cells(line: str) -> list[str]:
    return tour.cells(line)


def compare_rows(stdout: str) -> dict[tuple[str, str], dict[str, str]]:
    """`bench compare`'s Markdown table: (modality, metric) -> column -> cell."""
    found = [t for _, t in tour.tables(stdout.splitlines()) if cells(t[0])[:2] == ["modality", "metric"]]
    assert len(found) == 1, stdout[:3000]
    table = found[0]
    header = cells(table[0])
    return {tuple(cells(r)[:2]): dict(zip(header, cells(r), strict=True)) for r in table[2:]}  # type: ignore[misc]


def board_table(stdout: str, group: str) -> list[dict[str, str]]:
    """The leaderboard's ranked table of `group`, one dict a row."""
    lines = stdout.splitlines()
    for at, table in tour.tables(lines):
        heading = next((line for line in reversed(lines[:at]) if line.startswith("#")), "")
        if re.search(rf"\b{group}\b", heading) and "rank (95%)" in cells(table[0]):
            header = cells(table[0])
            return [dict(zip(header, cells(r), strict=True)) for r in table[2:]]
    raise AssertionError(f"no {group} table in the leaderboard:\n{stdout[:3000]}")


def gate_line(line: str) -> str:
    """What a line of `bench gate` says: passed, failed, a worse measure, a reported one."""
    for kind in ("gate: passed: ", "gate: failed: ", "gate: reported, not gated: "):
        if line.startswith(kind):
            return kind
    return "worse" if line.startswith("gate: ") and " is worse: " in line else line


def comparable(doc: dict) -> dict:
    """dev.json without what a run measures in time (latency cells, the run's timing)."""
    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if "latency" not in k}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node
    return strip(doc)


def experiments(work: Path, env: dict) -> dict[str, tuple[str, dict]]:
    """name -> (git rev, params.yaml) of every experiment of HEAD (`dvc exp show --json`)."""
    found: dict[str, tuple[str, dict]] = {}

    def walk(node) -> None:
        if isinstance(node, dict):
            data = node.get("data")
            if node.get("name") and isinstance(data, dict) and "params" in data and node.get("rev"):
                found[node["name"]] = (node["rev"], data["params"]["params.yaml"]["data"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for baseline in json.loads(run(["dvc", "exp", "show", "--json"], work, env).stdout):
        walk(baseline.get("experiments") or [])
    return found


def tour_copy(base: Path, reproduced: Path) -> tuple[Path, dict]:
    """The fresh copy the tour runs in: the reproduced project cloned with its memo (what its `dvc
    repro` computed, as the README's first command leaves it in a user's copy), its mirror root
    relative (as committed in the project; not committed here: the README's first step commits the
    baseline), its branch `main`."""
    (base / "shared").mkdir(parents=True)
    (base / "shared" / "mirror").symlink_to(MIRROR, target_is_directory=True)
    work = clone_project(reproduced, base / "project", memo=True)  # as the README's first `dvc repro` leaves it
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["fetch"]["mirror_dirs"] = ["../shared/mirror"]
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = project_env(base / "site-cache", drop=("BENCH_MIRROR_DIRS",))
    run(["git", "branch", "-M", "main"], work, env)
    return work, env


def check_conclusions(work: Path, env: dict, outcomes: dict[str, tour.Outcome], small: bool) -> None:
    """What the README's prose concludes from its outputs, on this run."""
    diff = outcomes["dvc metrics diff"].stdout
    assert "reports/metrics/dev.json" in diff and "by_modality.conversation.recall@10.value" in diff, diff[:2000]
    assert not re.search(r"\.(n|denominator)\s", diff), diff  # the README: n and denominators change only with the queries

    rows = compare_rows(outcomes["bench compare HEAD conv-window"].stdout)
    for key in (("conversation", "recall@10"), ("conversation", "recall@budget"), ("overall", "recall@budget")):
        assert rows[key]["verdict"] == "B better", (key, rows[key])  # windows find more gold in the top 10 and at equal cost
    assert rows[("conversation", "precision@10")]["verdict"] == "B worse"  # and cost more per query
    n = next(c for c in rows[("conversation", "recall@10")] if c.split()[0] == "n")  # "n", or "n (clusters)"
    assert int(rows[("conversation", "false_recall")][n].split()[0]) < int(rows[("conversation", "recall@10")][n].split()[0])  # unanswerable only

    exps = experiments(work, env)
    grid = [(p, c) for p in (("page",) if small else ("page", "window", "whole")) for c in ("turn", "window", "session")]
    assert {f"sweep-{i + 1}": (exps[f"sweep-{i + 1}"][1]["chunking"]["pdf"]["strategy"],
                               exps[f"sweep-{i + 1}"][1]["chunking"]["conversation"]["strategy"]) for i in range(len(grid))} == {
        f"sweep-{i + 1}": g for i, g in enumerate(grid)}  # the README names the sweep's runs in this order
    assert [exps[f"turns-{i}"][1]["chunking"]["conversation"]["window_turns"] for i in (1, 2)] == [5, 8]  # comparing.md's names
    # a queued run (in a copy under .dvc/tmp/exps/, the mirror root relative) equals the workspace run of the same params
    queued, workspace = (json.loads(run(["git", "show", f"{exps[name][0]}:reports/metrics/dev.json"], work, env).stdout)
                         for name in ("sweep-2", "conv-window"))
    assert queued["by_modality"]["conversation"]["recall@10"]["n"] > 0 and comparable(queued) == comparable(workspace)

    board = board_table(outcomes["bench leaderboard --all --html board.html"].stdout, "overall")
    assert len(board) == 1 + 1 + len(grid)  # HEAD, conv-window and the sweep (the experiments of HEAD)
    session = [r for r in board if r["run"] in {f"sweep-{i + 1}" for i, g in enumerate(grid) if g[1] == "session"}]
    window = [r for r in board if r["run"] in {"conv-window"} | {f"sweep-{i + 1}" for i, g in enumerate(grid) if g[1] == "window"}]
    assert max(float(r["recall@10"]) for r in board) == max(float(r["recall@10"]) for r in session)  # sessions: the highest recall@10
    assert min(int(r["rank (95%)"].split()[0]) for r in session) > max(int(r["rank (95%)"].split()[0]) for r in window)  # ...behind windows
    assert (work / "board.html").is_file() and (work / "ab.html").is_file()


def run_the_tour(tmp_path: Path, reproduced: Path, small: bool) -> None:
    need_mirror("locomo", "mmlongbench-doc")
    work, env = tour_copy(tmp_path / "tour", reproduced)
    outcomes = tour.run_tour(work, env, small, on_step=tour.logger(tmp_path / "tour.log"))  # every output and time
    assert tour.failed(outcomes) is None, tour.failed(outcomes)
    assert len(outcomes) == len(tour.planned(tour.steps(), small))
    done = tour.by_command(outcomes)
    for step in (o.step for o in outcomes if o.step.transcript):  # the gates say what the documents show (the exit: run_tour)
        shown, got = step.shown, done[step.command].stdout.strip().splitlines()
        assert [gate_line(got[0]), gate_line(got[-1])] == [gate_line(shown[0]), gate_line(shown[-1])], (shown, got)
        base = step.command.split()[-1]
        assert got[-1].startswith((f"gate: passed: no primary measure is significantly worse than {base} ",
                                   "gate: failed: ")) and (got[-1].startswith("gate: passed") or f" against {base} " in got[-1])
    check_conclusions(work, env, done, small)
    check_python_example(work, env)
    stale = "a quoted output no longer has the real one's shape: regenerate them, `python -m tests.tour --write`"
    for doc in tour.DOCS:  # every quoted output has the shape of the real one
        for figure in tour.figures(doc):
            real = tour.render(figure, done)
            if "rows" in figure.selection or "table" in figure.selection:
                assert cells(figure.body[0]) == cells(real[0]), (stale, figure.doc, figure.line, real[:2])
            else:  # the same tables (by their columns; `dvc exp show --md` pads them to its widest cell)
                assert [cells(t[0]) for _, t in tour.tables(real)] == [cells(t[0]) for _, t in tour.tables(list(figure.body))], (
                    stale, figure.doc, figure.line, real[:40])


@pytest.mark.e2e
def test_the_tour_runs_as_written_with_a_small_sweep(tmp_path: Path, reproduced: Path) -> None:
    run_the_tour(tmp_path, reproduced, small=True)


@pytest.mark.e2e
@pytest.mark.tour_full
def test_the_tour_runs_as_written(tmp_path: Path, reproduced: Path, request: pytest.FixtureRequest) -> None:
    if "tour_full" not in (request.config.option.markexpr or ""):
        pytest.skip("the full 3 x 3 sweep: run with `pytest -m tour_full tests/test_tour.py`")
    run_the_tour(tmp_path, reproduced, small=False)


# -- docs/systems.md's minimal Python system --------------------------------------------------------


def systems_example() -> tuple[str, dict]:
    """The Python file and the params block of docs/systems.md, *A minimal Python system*."""
    text = (ROOT / "docs" / "systems.md").read_text(encoding="utf-8")
    section = text.split("### A minimal Python system", 1)[1].split("\n## ", 1)[0]
    blocks = {lang: body for lang, _, body in tour.fences(section)}
    return "\n".join(blocks["python"]) + "\n", yaml.safe_load("\n".join(blocks["yaml"]))


def check_python_example(work: Path, env: dict) -> None:
    """The example as the page says: the file at the project root, the params block, `dvc repro`."""
    code, block = systems_example()
    (work / "my_memory.py").write_text(code, encoding="utf-8")
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["system"].update(block["system"])
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run(["dvc", "repro"], work, env)
    doc = json.loads((work / "reports/metrics/dev.json").read_text())
    assert doc["run"]["system"] == block["system"]["name"] and doc["run"]["adapter"] == "python"
    conv = doc["by_modality"]["conversation"]
    assert conv["recall@10"]["n"] == conv["recall@10"]["denominator"] > 0 and conv["recall@10"]["value"] > 0.1  # it finds gold
    assert doc["run"]["false_recall_rule"]["conversation"]["rule"] == "abstention" and 0 < conv["abstention_rate"]["value"] < 1
    assert conv["holder_correctness"]["value"] == 1.0 and conv["temporal_correctness"]["value"] == 1.0  # scoped, as it says
    assert doc["run"]["description"] in (work / "reports/dev.md").read_text()
