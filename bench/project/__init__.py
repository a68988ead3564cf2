"""The project: where its files live (layout) and what params.yaml selects (selection).

The one place that reads params.yaml and the environment. Stages and the `bench` command
use it; the core packages (ingest, annotations, evaluation, reporting, modalities,
systems) never import it and take every value as an argument (tests/test_imports.py).
"""
