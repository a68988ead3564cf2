"""UI-screenshot modality: pixel-box regions, OCR-line and grid chunkers, ScreenAgent."""

from bench.modalities.ui_screenshot.modality import UiScreenshotModality
from bench.modalities.ui_screenshot.screenagent import ScreenAgent

MODALITY = UiScreenshotModality()
DATASETS = [ScreenAgent()]
