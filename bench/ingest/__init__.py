"""Ingestion: fetch and hash corpus files, unpack archives, extract segments, chunk into atoms."""
