"""bench: a retrieval-evaluation harness for a multimodal memory system."""
