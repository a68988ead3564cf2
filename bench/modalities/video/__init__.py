"""Video modality: time-window regions, cue/window chunkers, TutorialVQA and MedVidQA."""

from bench.modalities.video.medvidqa import MedVidQA
from bench.modalities.video.modality import VideoModality
from bench.modalities.video.tutorialvqa import TutorialVQA

MODALITY = VideoModality()
DATASETS = [TutorialVQA(), MedVidQA()]
