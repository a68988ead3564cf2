"""PDF modality: page/block regions, page/window/whole chunkers, MMLongBench-Doc."""

from bench.modalities.pdf.mmlongbench import MMLongBench
from bench.modalities.pdf.modality import PdfModality
from bench.modalities.pdf.textless import textless_gold

MODALITY = PdfModality()
DATASETS = [MMLongBench()]

__all__ = ["DATASETS", "MODALITY", "MMLongBench", "PdfModality", "textless_gold"]
