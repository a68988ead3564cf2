"""No module outside bench/modalities/ names a modality (bench/modalities/__init__.py:
adding a modality means adding a folder; what differs between modalities is a
`Modality` hook).

"Names" means uses a registered modality name as a name: a string literal that is
exactly the name (``modality == "pdf"``, a dict key, a click choice), or an identifier
(variable, argument, attribute, function or class) that is the name or has it as an
underscore-separated part (``_video``, ``pdf_page_thumbnail``). Docstrings, comments and
prose inside longer strings are not read. One exception: ``code`` is also the harness's
word for exit codes and atom codes, so identifiers are not checked for it (a ``"code"``
literal still is).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench.modalities import modalities, names
from tests.dvc_deps import ROOT

#: registered modality names that are also ordinary identifiers of the harness
WORDS = frozenset({"code"})
#: offenders fixed on another branch (file, name): remove the entry when that branch is
#: merged (test_pending_offenders_still_offend fails then, as a reminder)
#: places where the word is not the modality: the params key `system.code` (the system's declared code, also in a
#: bundle's system record) and a JSON-RPC error's code
NOT_A_MODALITY = {("bench/systems/step.py", "code"), ("bench/bundle/build.py", "code"), ("bench/bundle/make.py", "code"),
                  ("bench/systems/adapters/mcp_errors.py", "code")}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def _identifier(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.alias):
        return node.asname or node.name.rpartition(".")[2]
    return None


def offenders(source: str, known: frozenset[str]) -> list[tuple[int, str, str]]:
    """(line, modality name, how) of every place `source` names one of `known`."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip and node.value in known:
            found.append((node.lineno, node.value, "string"))
            continue
        ident = _identifier(node)
        if ident is None:
            continue
        parts = {ident, *ident.lower().split("_")}
        for name in sorted(known - WORDS):
            if name in parts or (("_" in name) and name in ident.lower()):
                found.append((getattr(node, "lineno", 0), name, f"identifier {ident}"))
    return sorted(set(found))


def project_modules() -> list[Path]:
    files = [*(ROOT / "bench").rglob("*.py"), *(ROOT / "stages").rglob("*.py")]
    inside = ROOT / "bench" / "modalities"
    return sorted(p for p in files if inside not in p.parents and "__pycache__" not in p.parts)


KNOWN = frozenset(names()) | frozenset(modalities())


def scan() -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for path in project_modules():
        rel = path.relative_to(ROOT).as_posix()
        for line, name, how in offenders(path.read_text(encoding="utf-8"), KNOWN):
            out.setdefault((rel, name), []).append(f"{rel}:{line}: {how} names the modality {name!r}")
    return out


def test_the_registry_has_the_names_the_check_looks_for():
    assert {"pdf", "video", "ui_screenshot", "code"} <= KNOWN
    assert len(project_modules()) > 50  # bench/ and stages/ are read, bench/modalities/ is not
    assert not any("modalities" in p.relative_to(ROOT).parts[:2] for p in project_modules())


def test_no_module_outside_the_modality_folders_names_a_modality():
    found = {k: v for k, v in scan().items() if k not in NOT_A_MODALITY}
    assert not found, "\n".join(line for lines in found.values() for line in lines)


def test_the_exceptions_are_still_needed():
    """Each NOT_A_MODALITY entry still matches; one that no longer does is deleted."""
    assert NOT_A_MODALITY <= set(scan()), sorted(NOT_A_MODALITY - set(scan()))


@pytest.mark.parametrize(("source", "expected"), [
    ('if modality == "pdf":\n    pass\n', [(1, "pdf", "string")]),
    ('DEFAULT = {"ui_screenshot": "ocr", "image": "ocr"}\n', [(1, "image", "string"), (1, "ui_screenshot", "string")]),
    ("def _video(q):\n    return q\n", [(1, "video", "identifier _video")]),
    ("def pdf_page_thumbnail(doc, page):\n    return doc\n", [(1, "pdf", "identifier pdf_page_thumbnail")]),
    ("from x import conversation\n", [(1, "conversation", "identifier conversation")]),
    ("CHOICES = ['pdf', 'code']\n", [(1, "code", "string"), (1, "pdf", "string")]),
])
def test_a_planted_offender_is_found(source, expected):
    assert offenders(source, KNOWN) == expected


def test_what_is_not_a_modality_name_passes():
    clean = ('"""The pdf modality is a folder."""\n'  # a docstring
             "# a comment naming video\n"
             "code = proc.returncode  # exit code: `code` is a word of the harness\n"
             'msg = f"exited with code {code}; no pdf here"\n'  # prose inside a longer string
             "def modality_of(source):\n    return source\n")
    assert offenders(clean, KNOWN) == []
