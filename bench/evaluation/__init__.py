"""Evaluation: run the system, resolve gold regions to atoms, metrics, fairness, uncertainty, comparison."""
