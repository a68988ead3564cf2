"""The documentation stays usable: a README read in five minutes with the two set-up commands
CI runs, relative links that resolve (anchors included), and one module map that names the
modules that exist (docs/architecture.md)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

README_MAX_LINES = 250
MAIN_JOB = "pip install -e . && dvc repro"
TEST_JOB = "pip install -e '.[test,example-llamaindex-bm25,example-qdrant,mcp]' && pytest"
LINK = re.compile(r"!?\[[^\]]*\]\(([^()\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
MAP_COLUMN = 24  # where the module map's descriptions start; names stand left of it


def docs() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def prose(text: str) -> str:
    """The text outside code blocks and inline code, where a link is a link."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#{1,6} (.+)$", FENCE.sub("", path.read_text(encoding="utf-8")), re.M)
    seen: dict[str, int] = {}
    out = set()
    for h in headings:  # a repeated heading's anchors are slug, slug-1, slug-2, ...
        s = slug(h)
        out.add(f"{s}-{seen[s]}" if s in seen else s)
        seen[s] = seen.get(s, 0) + 1
    return out


def broken_links(path: Path, text: str | None = None) -> list[str]:
    """Links of the page at `path` (its text, or `text` as if it stood there) that lead nowhere."""
    bad = []
    for target in LINK.findall(prose(path.read_text(encoding="utf-8") if text is None else text)):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.is_relative_to(ROOT) and not (ROOT.parent / "shared").is_dir():
            continue  # outside the checkout: the mirror beside it (README, set-up) is absent here
        if not dest.exists():
            bad.append(f"{path.relative_to(ROOT)}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{path.relative_to(ROOT)}: {target}: no such heading")
    return bad


def test_readme_is_short_and_holds_the_two_setup_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    setup = text.split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    assert f"```sh\n{MAIN_JOB}\n```" in setup and f"```sh\n{TEST_JOB}\n```" in setup
    ci = (ROOT / ".ci/run").read_text(encoding="utf-8")
    extras = re.search(r"-e ('\.\[[^\]]+\]')", ci)
    assert extras and f"pip install -e {extras.group(1)} && pytest" == TEST_JOB  # CI installs what the README says
    assert re.search(r"^python -m pytest\b", ci, re.M)


def test_relative_links_resolve():
    assert [p for p in docs() if p.name == "architecture.md"]  # the check sees the docs folder
    assert broken_links(ROOT / "README.md") == [] and len(LINK.findall(prose((ROOT / "README.md").read_text("utf-8")))) > 10
    assert [b for p in docs() for b in broken_links(p)] == []


def test_the_link_check_can_fail():
    assert "which-package-may-import-which" in anchors(ROOT / "docs" / "architecture.md")
    assert slug("Can the set see the change? (`bench/x.py`)") == "can-the-set-see-the-change-benchxpy"
    page = "[a](architecture.md#no-such-heading) [b](nowhere.md) `[c](nowhere.md)` [d](architecture.md#the-stages)\n"
    assert [b.split(": ", 1)[1] for b in broken_links(ROOT / "docs" / "new-page.md", page)] == [
        "architecture.md#no-such-heading: no such heading", "nowhere.md: no such file"]


def module_map() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    return text.split("## The module map", 1)[1].split("```", 2)[1]


def named_paths(block: str) -> list[str]:
    """The paths the map's name column gives, each under the folder it is indented under."""
    out, folders = [], {}
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= MAP_COLUMN:
            continue  # a description's continuation
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0].split()
        parent = "/".join(folders[i] for i in sorted(folders) if i < indent)
        folders = {i: f for i, f in folders.items() if i < indent}
        for name in names:
            if re.fullmatch(r"[\w./-]+(/|\.[a-z]+)", name):  # a folder or a file, not a word
                out.append(f"{parent}/{name}".lstrip("/"))
        if len(names) == 1 and names[0].endswith("/"):
            folders[indent] = names[0].rstrip("/")
    return out


def test_the_module_map_names_what_exists():
    block = module_map()
    paths = named_paths(block)
    assert "bench/ingest/fetch.py" in paths and "stages/fetch.py" in paths
    assert [p for p in paths if not (ROOT / p).exists()] == []
    modules = [p for p in (ROOT / "bench").rglob("*.py") if p.name != "__init__.py"
               and not (p.parent.parent.name == "modalities")]  # a modality folder's own modules: described together
    assert len(modules) > 50
    assert sorted(p.relative_to(ROOT).as_posix() for p in modules if not re.search(rf"\b{re.escape(p.name)}\b", block)) == []


def test_the_tour_quotes_real_outputs():
    """The README's compare rows and gate lines are those of the real sweep in docs/comparing.md."""
    sweep = (ROOT / "docs" / "comparing.md").read_text(encoding="utf-8").splitlines()
    quoted = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
              if line.startswith(("gate: ", "| conversation |", "| pdf |", "| overall |"))]
    assert len(quoted) >= 8 and [line for line in quoted if line not in sweep] == []


def test_plain_text_files_run_as_a_code_data_set(tmp_path: Path) -> None:
    """docs/local-data.md, *Plain text files (.txt)*, as written: the folder it shows is a valid local
    data set, chunked by lines, and the default system finds each gold line and abstains on the
    unanswerable question."""
    import yaml

    from bench.annotations.validate import validate
    from bench.corpus_sources import register_local
    from bench.ingest.corpus import Manifest
    from bench.ingest.fetch import FetchLog, fetch_dataset
    from bench.modalities.local import load
    from tests.ingest.chunks import chunk_all
    from tests.systems.oracles import evaluate_system
    from tests.tour import fences

    section = (ROOT / "docs" / "local-data.md").read_text(encoding="utf-8").split("### Plain text files (.txt)", 1)[1]
    section = section.split("\n### ", 1)[0]
    lines = section.splitlines()
    folder = tmp_path / "my-eval" / "handbook"
    params: dict = {}
    for lang, at, body in fences(section):
        name = re.fullmatch(r"`([^`]+)`.*:", lines[at - 3].strip())  # the line naming the file, a blank line above the fence
        if name:
            (folder / name.group(1)).parent.mkdir(parents=True, exist_ok=True)
            (folder / name.group(1)).write_text("\n".join(body) + "\n", encoding="utf-8")
        elif lang == "yaml":
            params = yaml.safe_load("\n".join(body))
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "dataset.yaml", "files/handbook/expenses.txt", "files/handbook/onboarding.txt", "set.jsonl"]
    assert params["local_datasets"] == ["../my-eval/handbook"] and params["chunking"]["code"]["strategy"] == "lines"

    ds = load(folder)
    register_local([ds])
    try:
        rows = fetch_dataset(ds, tmp_path / "store", [folder.parent], False, FetchLog())
        segments = ds.extract({r["path"]: tmp_path / "store" / ds.key / r["path"] for r in rows})
        result = validate([ds.set_path], Manifest(tuple(rows)), segments)
        assert result.ok, result.errors.to_string()
        entries = result.dev()
        served = chunk_all(segments, params["chunking"])
        doc = evaluate_system("bench.systems.builtin.bm25:bm25_scoped", entries, served, segments).document
    finally:
        register_local([])
    assert set(segments["path"]) == {"onboarding.txt", "expenses.txt"} and len(served["code"]) == 6  # 2-line windows of 6 + 5 lines
    code = doc["by_modality"]["code"]
    assert code["ranked_recall@10"]["value"] == 1.0 and code["ranked_recall@10"]["denominator"] == 2  # each gold line ranked
    assert doc["run"]["false_recall_rule"]["code"]["rule"] == "abstention" and code["recall@10"]["n"] == 2
    assert code["false_recall"]["value"] == 0.0 and code["false_recall"]["denominator"] == 1  # nothing strong on the parking question
