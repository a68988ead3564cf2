"""Every stage of dvc.yaml and bench/test/dvc.yaml lists exactly the project code its
command imports (tests/dvc_deps.py says how imports are found and why statically)."""

from __future__ import annotations

import pytest

from tests.dvc_deps import ROOT, Stage, check, code_files, imported_modules, stages

STAGES = stages()


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_stage_lists_exactly_the_code_it_imports(stage: Stage) -> None:
    problems = check(stage)
    assert not problems, "\n".join(problems)


def test_every_pipeline_is_covered() -> None:
    names = {s.name for s in STAGES}
    assert {"fetch", "validate", "chunk", "retrieve", "evaluate", "accept"} <= names and "resolve" not in names  # resolved in retrieve
    assert {f"extract@{m}" for m in ("code", "conversation", "image", "pdf", "ui_screenshot", "video")} <= names


def test_a_missing_dep_is_named(tmp_path) -> None:
    """The check fails on a stage whose deps miss a module its command imports."""
    validate = next(s for s in STAGES if s.name == "validate")
    broken = Stage(validate.name, validate.dvcfile, validate.cmd, tuple(d for d in validate.deps if d != "bench/annotations/splits.py"))
    assert check(broken) == ["dvc.yaml:validate: `python -m stages.validate` imports bench/annotations/splits.py, which its deps do not list"]
    extra = Stage(validate.name, validate.dvcfile, validate.cmd, (*validate.deps, "bench/ingest/chunking.py"))
    assert check(extra) == ["dvc.yaml:validate: deps list bench/ingest/chunking.py, which `python -m stages.validate` does not import"]


def test_per_modality_extract_imports_only_its_modality() -> None:
    pdf = code_files("python -m stages.extract pdf")
    assert "bench/modalities/pdf/modality.py" in pdf and "bench/modalities/textspan.py" in pdf
    assert not any(f.startswith(("bench/modalities/image/", "bench/modalities/ui_screenshot/")) for f in pdf)
    assert "bench/modalities/ocr.py" in pdf  # text-less pages are OCR'd
    image = code_files("python -m stages.extract image")
    assert "bench/modalities/ocr.py" in image and not any(f.startswith("bench/modalities/pdf/") for f in image)


def test_the_registry_imports_every_modality() -> None:
    """A stage reaching modalities()/datasets() depends on every modality folder."""
    chunk = imported_modules("python -m stages.chunk")
    assert {f"bench.modalities.{m}" for m in ("code", "image", "pdf", "video")} <= chunk


def test_function_level_and_dynamic_imports_count() -> None:
    retrieve = imported_modules("python -m stages.retrieve")
    assert "bench.ingest.store" in retrieve  # only inside served_atoms(): a function-level import (via bench.ingest.corpus)
    assert {"bench.systems.builtin.bm25", "bench.systems.builtin.dense", "bench.systems.builtin.hybrid"} <= retrieve  # BUILTINS, importlib


def test_an_unmodelled_dynamic_import_fails(tmp_path, monkeypatch) -> None:
    import tests.dvc_deps as deps

    monkeypatch.setattr(deps, "DYNAMIC", {k: v for k, v in deps.DYNAMIC.items() if k[0] != "bench.systems"})
    with pytest.raises(deps.UnmodelledImport, match=r"bench/systems/__init__\.py:\d+: dynamic import in load_entry_point\(\)"):
        deps.imported_modules("python -m stages.retrieve")


def test_the_real_run_imports_nothing_unlisted(tmp_path) -> None:
    """Cross-check with a real process: what `stages.extract pdf` imports at start-up is
    inside its static set (the static set may hold more: code paths not taken)."""
    import json
    import subprocess
    import sys

    probe = ("import json, runpy, sys; sys.argv = ['extract', '--help'];\n"
             "try:\n    runpy.run_module('stages.extract', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "import bench.modalities as m; m.load('pdf')\n"
             "print(json.dumps(sorted(k for k in sys.modules if k.split('.')[0] in ('bench', 'stages'))))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out.strip().splitlines()[-1]))
    static = imported_modules("python -m stages.extract pdf")
    assert "bench.modalities.pdf" in loaded and not {"bench.modalities.image", "bench.modalities.ocr"} & loaded
    assert loaded <= static, loaded - static
