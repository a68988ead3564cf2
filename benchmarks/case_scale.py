"""Case: extraction throughput on the executors (bench.executor) over a synthetic corpus.

The synthetic corpus is `scale` x the mirror: every MMLongBench-Doc PDF and every
ScreenAgent screenshot replicated `scale` times (20 at the full size: 1480 PDFs of
65,620 pages and 4160 screenshots), each copy perturbed so that no two are the same
file: a PDF copy gets a comment line appended after its last `%%EOF` (same pages,
new sha256), a screenshot copy is shifted by 1-3 px, its brightness changed by up to
2% and re-encoded as JPEG (new pixels, realistic OCR work). The copies are written
under a temp folder and removed after; nothing is committed.

Extraction cost is scaled by sampling: a seeded random sample of the corpus
(`pdf_sample` PDFs, `screen_sample` screenshots, `page_sample` text-less PDF pages)
is materialised and extracted on each executor: the local process pool
(`executor.kind: local`), and a Dask LocalCluster of 1 and of 2 single-threaded worker
processes on loopback. Per executor: items/s of the PDF text layer (documents and
pages), of screenshot OCR and of PDF-page OCR (render + OCR), each after one
warm-up item per worker (engine load, imports) and timed over the whole sample; the
full corpus time is the corpus size / that rate (an extrapolation, labelled so). Beside
wall time, each task's CPU seconds in its worker process (`time.process_time`) give
per-item costs that other load on a shared machine barely changes (the sizing in
docs/scale.md uses them). The results must be the same on every executor (`identical`). Scheduler overhead per
task: `noop_tasks` tasks that do nothing, per task. RSS per worker process after
the OCR (psutil, on each Dask worker; the largest of the local pool's processes). The figure
ratios are Dask / local pool time on the same sample (goal: informational).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import MIRROR, figure

DOCS = MIRROR / "mmlongbench-doc" / "data" / "documents"
SCREENS = MIRROR / "screenagent_test" / "data" / "ScreenAgent" / "test"


def _noop(x: int) -> int:
    return x


def _cpu_timed(task: tuple[Any, Any]) -> tuple[Any, float]:
    """(fn(item), CPU seconds the worker process spent on it): a per-item cost that other
    load on the machine barely changes, unlike wall time."""
    fn, item = task
    start = time.process_time()
    out = fn(item)
    return out, time.process_time() - start


def _rss_mib(_: Any = None) -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def corpus(scale: int) -> tuple[list[Path], list[Path], dict[str, int]]:
    """The mirror's PDFs and screenshots and their page counts (the corpus is `scale` x these)."""
    import pypdfium2 as pdfium

    pdfs = sorted(DOCS.glob("*.pdf")) if DOCS.is_dir() else []
    screens = sorted(SCREENS.glob("*/images/*.jpg")) if SCREENS.is_dir() else []
    pages: dict[str, int] = {}
    for p in pdfs:
        doc = pdfium.PdfDocument(str(p))
        pages[p.name] = len(doc)
        doc.close()
    return pdfs, screens, pages


def perturb_pdf(src: Path, dst: Path, copy: int) -> None:
    dst.write_bytes(src.read_bytes() + f"\n% synthetic copy {copy}\n".encode())


def perturb_screen(src: Path, dst: Path, copy: int, rng: random.Random) -> None:
    from PIL import Image, ImageEnhance

    with Image.open(src) as img:
        dx, dy = rng.randint(1, 3), rng.randint(1, 3)
        shifted = Image.new("RGB", img.size, (255, 255, 255))
        shifted.paste(img.convert("RGB"), (dx, dy))
        ImageEnhance.Brightness(shifted).enhance(1 + rng.uniform(-0.02, 0.02)).save(dst, "JPEG", quality=90)


def textless_pages(pdfs: list[Path], limit: int) -> list[tuple[Path, int]]:
    """(pdf, 0-based page) of pages whose text layer has fewer than 16 non-space characters."""
    import pypdfium2 as pdfium

    out: list[tuple[Path, int]] = []
    for p in pdfs:
        doc = pdfium.PdfDocument(str(p))
        try:
            for i in range(len(doc)):
                page = doc[i]
                tp = page.get_textpage()
                text = tp.get_text_range()
                tp.close()
                page.close()
                if sum(not c.isspace() for c in text) < 16:
                    out.append((p, i))
                    if len(out) >= limit:
                        return out
        finally:
            doc.close()
    return out


def _timed_map(ex: Any, fn: Any, items: list, warm: list) -> tuple[float, list, float]:
    """(wall s, results, CPU s summed over the items) of one map after a warm-up map."""
    if warm:
        ex.map(_cpu_timed, [(fn, w) for w in warm])
    start = time.perf_counter()
    pairs = ex.map(_cpu_timed, [(fn, item) for item in items])
    wall = time.perf_counter() - start
    return wall, [out for out, _ in pairs], sum(cpu for _, cpu in pairs)


def run_case(scale: int, pdf_sample: int, screen_sample: int, page_sample: int, noop_tasks: int,
             dask_workers: list[int], local_workers: int = 2, seed: int = 0) -> list[dict] | dict:
    from bench import progress
    from bench.executor import open_executor
    from bench.modalities.ocr import PageImage, ocr_job
    from bench.modalities.pdf.mmlongbench import extract_job
    from bench.modalities.pdf.modality import RENDER_SCALE

    pdfs, screens, pages = corpus(scale)
    if not pdfs or not screens:
        return {"skipped": "no MMLongBench-Doc PDFs or ScreenAgent screenshots in the mirror"}
    rng = random.Random(seed)
    n_pdf, n_screen, n_pages = scale * len(pdfs), scale * len(screens), scale * sum(pages.values())
    scratch = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    progress.configure(enabled=False)
    try:
        # the sample of the synthetic corpus, materialised: (mirror item, copy number)
        pdf_items = rng.sample([(p, c) for p in pdfs for c in range(scale)], pdf_sample)
        screen_items = rng.sample([(s, c) for s in screens for c in range(scale)], screen_sample)
        pdf_jobs: list[tuple[str, str]] = []
        for k, (src, c) in enumerate(pdf_items):
            dst = scratch / f"pdf{k:04d}-{c}-{src.name}"
            perturb_pdf(src, dst, c)
            pdf_jobs.append((str(dst), f"synthetic:{dst.name}"))
        sample_pages = sum(pages[src.name] for src, _ in pdf_items)
        screen_jobs: list[str] = []
        for k, (src, c) in enumerate(screen_items):
            dst = scratch / f"screen{k:04d}-{c}.jpg"
            perturb_screen(src, dst, c, rng)
            screen_jobs.append(str(dst))
        page_jobs = [PageImage(str(p), i, RENDER_SCALE) for p, i in textless_pages(pdfs, page_sample)]

        runs: dict[str, dict[str, Any]] = {}
        outputs: dict[str, tuple] = {}
        setups = [("local", "local", None, local_workers)] + [(f"dask-{w}", "dask", None, w) for w in dask_workers]
        for name, kind, address, workers in setups:
            t0 = time.perf_counter()
            with open_executor(kind, address, workers) as ex:
                start_s = time.perf_counter() - t0
                n = ex.workers
                t_pdf, out_pdf, c_pdf = _timed_map(ex, extract_job, pdf_jobs, pdf_jobs[:n])
                t_screen, out_screen, c_screen = _timed_map(ex, ocr_job, screen_jobs, screen_jobs[:n])
                t_page, out_page, c_page = _timed_map(ex, ocr_job, page_jobs, page_jobs[:n]) if page_jobs else (0.0, [], 0.0)
                ex.map(_noop, list(range(min(noop_tasks, 20))))
                t0 = time.perf_counter()
                ex.map(_noop, list(range(noop_tasks)))
                t_noop = time.perf_counter() - t0
                if kind == "dask":
                    rss = list(ex.client.run(_rss_mib).values())  # type: ignore[attr-defined]
                else:  # whichever pool processes run these: the largest is the figure
                    rss = [max(ex.map(_rss_mib, list(range(4 * n))))]
            outputs[name] = (out_pdf, out_screen, out_page)
            runs[name] = {
                "workers": n, "start_s": start_s,
                "pdf_s": t_pdf, "pdf_docs_per_s": len(pdf_jobs) / t_pdf, "pdf_pages_per_s": sample_pages / t_pdf,
                "screen_s": t_screen, "screens_per_s": len(screen_jobs) / t_screen,
                "page_ocr_s": t_page, "pages_ocr_per_s": (len(page_jobs) / t_page) if t_page else None,
                "cpu_s_per_pdf_page": c_pdf / sample_pages, "cpu_s_per_screenshot": c_screen / len(screen_jobs),
                "cpu_s_per_ocr_page": (c_page / len(page_jobs)) if page_jobs else None,
                "load_average_after": [round(x, 2) for x in os.getloadavg()],
                "noop_s": t_noop, "overhead_per_task_ms": 1000 * t_noop / noop_tasks,
                "worker_rss_mib": [round(r) for r in rss],
            }
    finally:
        progress.configure(enabled=True)
        shutil.rmtree(scratch, ignore_errors=True)
    identical = all(outputs[k] == outputs["local"] for k in outputs)
    local = runs["local"]
    sample = (f"sample of the {scale}x synthetic corpus: {len(pdf_jobs)} PDFs ({sample_pages} pages), "
              f"{len(screen_jobs)} screenshots, {len(page_jobs)} text-less PDF pages")
    figs: list[dict] = []
    for name, r in runs.items():
        full_s = n_pdf / r["pdf_docs_per_s"] + n_screen / r["screens_per_s"]
        figs.append(figure(
            f"extraction on {name} ({r['workers']} worker processes): {sample}", r["pdf_s"] + r["screen_s"],
            local["pdf_s"] + local["screen_s"], f"the local process pool of {local['workers']} on the same sample",
            "informational", **r, identical_to_local=outputs[name] == outputs["local"],
            corpus={"scale": scale, "pdfs": n_pdf, "pages": n_pages, "screenshots": n_screen},
            full_corpus_extrapolated_s=full_s, statistic="one timed run after a warm-up item per worker"))
    for name, r in runs.items():
        if name == "local":
            continue
        figs.append(figure(
            f"scheduler overhead, {noop_tasks} no-op tasks on {name}", r["noop_s"] / noop_tasks, local["noop_s"] / noop_tasks,
            "the same no-op tasks on the local process pool, per task", "informational",
            tasks=noop_tasks, statistic="one run after 20 warm-up tasks"))
    figs[0]["identical_everywhere"] = identical
    return figs
