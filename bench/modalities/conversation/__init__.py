"""Conversation modality: turn regions, turn/window/session chunkers, LoCoMo."""

from bench.modalities.conversation.locomo import LoCoMo
from bench.modalities.conversation.modality import ConversationModality

MODALITY = ConversationModality()
DATASETS = [LoCoMo()]
