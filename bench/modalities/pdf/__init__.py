"""PDF modality: page/block regions, page/window/whole chunkers, MMLongBench-Doc."""

from bench.modalities.pdf.mmlongbench import MMLongBench
from bench.modalities.pdf.modality import PdfModality

MODALITY = PdfModality()
DATASETS = [MMLongBench()]
