"""evaluation.stats."""
