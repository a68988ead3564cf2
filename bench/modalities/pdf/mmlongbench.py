"""MMLongBench-Doc: questions over long PDFs with human-annotated evidence pages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from bench.modalities.base import CorpusFile, Dataset, ImportResult, assign_splits, load_pins
from bench.modalities.derived import request_order
from bench.modalities.pdf.modality import MIN_LAYER_CHARS, add_ocr_text, extract_pdf

FORMATS = {"Str": "str", "Int": "int", "Float": "float", "List": "list", "None": "none"}
#: MMLongBench documents are static reports: one fixed, documented moment for all of
#: them, before the spec example's as_of (2024-01-01), which every question uses.
OBSERVED_AT = "2023-06-01T00:00:00+00:00"
AS_OF = "2024-01-01T00:00:00+00:00"
HOLDER = "owner"


class MMLongBench(Dataset):
    key: ClassVar[str] = "mmlongbench"
    name: ClassVar[str] = "yubo2333/MMLongBench-Doc"
    repo: ClassVar[str] = "mayubo2333/MMLongBench-Doc"
    revision: ClassVar[str] = "d73f0dc0be7e0a2ff6a403d5fe65fcd96461f384"
    license: ClassVar[str] = "data CC BY-NC 4.0 (research use only), code Apache-2.0"
    annotation_source: ClassVar[str] = (
        "human: MMLongBench-Doc authors' expert annotators wrote each question, answer and "
        "evidence pages (Ma et al., NeurIPS 2024 Datasets and Benchmarks); third-party work"
    )
    annotation_is_human: ClassVar[bool] = True
    modality: ClassVar[str] = "pdf"
    mirror_key: ClassVar[str] = "mmlongbench-doc"
    holders: ClassVar[str] = "every document belongs to holder 'owner' (one reader's library)"
    observed_at_rule: ClassVar[str] = f"fixed {OBSERVED_AT} for every document; as_of {AS_OF} for every question"
    caveats: ClassVar[str] = (
        "PDFs of 4 MiB or more are not mirrored: entries on them are invalid (constraint 7) "
        "and listed; evidence pages are whole pages, never blocks."
    )
    annotation_files: ClassVar[tuple[str, ...]] = ("data/samples.json",)

    def corpus_files(self, annotation_dir: Path) -> list[CorpusFile]:
        samples = json.loads((annotation_dir / "data/samples.json").read_text(encoding="utf-8"))
        docs = sorted({row["doc_id"] for row in samples})
        return [CorpusFile(source_id=f"{self.key}:{d}", path=f"data/documents/{d}") for d in docs]

    def pins(self) -> dict[str, tuple[str, int]]:
        return load_pins(self.mirror_key)

    def file_of(self, source_id: str) -> str | None:
        prefix = f"{self.key}:"
        return f"data/documents/{source_id[len(prefix):]}" if source_id.startswith(prefix) else None

    def sources_of(self, entry: dict) -> list[str]:
        # query_id is "mmlongbench:<doc_id>:<row>": the document is needed even when
        # the entry is unanswerable and its gold is empty.
        qid = str(entry.get("query_id", ""))
        doc = qid[len(self.key) + 1 :].rsplit(":", 1)[0] if qid.startswith(f"{self.key}:") else ""
        found = set(super().sources_of(entry))
        if doc:
            found.add(f"{self.key}:{doc}")
        return sorted(found)

    def extract(self, files: dict[str, Path], ocr_min_chars: int = MIN_LAYER_CHARS, **_options: Any) -> pd.DataFrame:
        """Pages' text layer; a page with fewer than `ocr_min_chars` non-space characters
        is OCR'd instead (params.yaml `extraction.pdf.ocr_min_chars`; 0: no page OCR)."""
        jobs = [
            (str(local), f"{self.key}:{path[len('data/documents/'):]}")
            for path, local in sorted(files.items())
            if path.startswith("data/documents/")
        ]
        docs = add_ocr_text(extract_many(jobs), [path for path, _ in jobs], min_chars=ocr_min_chars)
        rows = [row for doc in docs for row in doc]
        df = pd.DataFrame(rows, columns=["source_id", "page", "block", "text", "text_source"])
        df["dataset"] = self.key
        df["modality"] = self.modality
        df["holder"] = HOLDER
        df["observed_at"] = pd.Timestamp(OBSERVED_AT)
        df["seq"] = df.groupby("source_id").cumcount()
        return df

    def import_set(self, mirror_dir: Path, page_counts: dict[str, int] | None = None) -> ImportResult:
        """Map samples.json rows to spec entries; page_counts (doc -> pages) screens bad pages."""
        samples = json.loads((mirror_dir / "data/samples.json").read_text(encoding="utf-8"))
        if page_counts is None:
            page_counts = count_pages(mirror_dir / "data/documents")
        splits = assign_splits([row["doc_id"] for row in samples], self.key)
        entries: list[dict] = []
        excluded: list[dict] = []
        for row_no, row in enumerate(samples):
            doc = row["doc_id"]
            source_id = f"{self.key}:{doc}"
            item = f"row:{row_no}"
            unanswerable = row["answer"] == "Not answerable"
            pages = list(dict.fromkeys(json.loads(row["evidence_pages"])))
            if not unanswerable:
                if not pages:
                    excluded.append({"item": item, "reason": "answerable row without evidence pages"})
                    continue
                if any(p < 1 for p in pages):
                    excluded.append({"item": item, "reason": f"evidence page below 1 (pages are 1-based): {pages}"})
                    continue
                limit = (page_counts or {}).get(doc)
                if limit is not None and any(p > limit for p in pages):
                    excluded.append({"item": item, "reason": f"evidence page beyond the document's last page: {limit} pages, evidence {pages}"})
                    continue
            entries.append(
                {
                    "query_id": f"{self.key}:{doc}:{row_no}",
                    "modality": self.modality,
                    "question": row["question"],
                    "answer": None if unanswerable else row["answer"],
                    "answer_format": "none" if unanswerable else FORMATS[row["answer_format"]],
                    "gold": [] if unanswerable else [{"source_id": source_id, "region": {"page": p}} for p in pages],
                    "scope": {"holder": HOLDER, "session": None, "scenario": "document-qa"},
                    "as_of": AS_OF,
                    "unanswerable": unanswerable,
                    "origin": {"dataset": self.name, "revision": self.revision, "item": item, "license": self.license},
                    "split": splits[doc],
                }
            )
        return ImportResult(entries=request_order(entries), excluded=excluded, notes={"upstream_rows": len(samples)})


def extract_job(job: tuple[str, str]) -> list[dict]:
    return extract_pdf(*job)


def extract_many(jobs: list[tuple[str, str]], workers: int | None = None) -> list[list[dict]]:
    """extract_pdf over (path, source_id) jobs, one document per task.

    pdfium holds the GIL while it extracts, so documents go to worker processes: the
    stage's executor (bench.executor: a local pool or Dask workers), or outside a
    stage a local pool of `workers` (default: every core). Results come back in job
    order, so the output does not depend on the executor.
    """
    from bench import progress
    from bench.executor import active

    with progress.bar(len(jobs), "pdf text layer", "files") as bar, active(workers) as ex:
        return ex.map(extract_job, jobs, label="pdf text layer", describe=lambda job: job[1],
                      done=lambda _i, _rows: bar.advance())


def count_pages(folder: Path) -> dict[str, int]:
    """Page count of every PDF present in `folder` (used to screen evidence pages at import)."""
    import pypdfium2 as pdfium

    counts: dict[str, int] = {}
    if folder.is_dir():
        for pdf_path in sorted(folder.glob("*.pdf")):
            pdf = pdfium.PdfDocument(str(pdf_path))
            counts[pdf_path.name] = len(pdf)
            pdf.close()
    return counts
