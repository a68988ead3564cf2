"""trec."""
