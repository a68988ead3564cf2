"""Annotations: the set-file schema, the locked dev/test split, writing set files."""
