"""Image modality: whole-image regions ({}), the 'whole' chunker, COCO captions."""

from bench.modalities.image.coco import CocoCaptions
from bench.modalities.image.modality import ImageModality

MODALITY = ImageModality()
DATASETS = [CocoCaptions()]
