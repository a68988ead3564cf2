"""Code modality: symbol/line regions over source trees, symbol/lines/file chunkers, CoSQA and SWE-bench Lite."""

from bench.modalities.code.cosqa import CoSQA
from bench.modalities.code.modality import CodeModality
from bench.modalities.code.swebench import SWEBenchLite

MODALITY = CodeModality()
DATASETS = [CoSQA(), SWEBenchLite()]
