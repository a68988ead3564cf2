"""Tests of optional extras: skipped on a developer's machine without the extra, never in CI.

CI (`CI=true`, .ci/run) installs every extra a test needs; there a missing one fails the
test naming the pip command instead of skipping it silently.
"""

from __future__ import annotations

import importlib.util
import os

import pytest


def need(install: str, *modules: str) -> None:
    """Skip (or, in CI, fail) the calling test unless every module is importable."""
    for module in modules:
        top = module.partition(".")[0]
        if importlib.util.find_spec(top) is None or importlib.util.find_spec(module) is None:
            message = f"optional extra not installed ({module}): {install}"
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(f"CI must install every extra its tests need; {message}", pytrace=False)
            pytest.skip(message)
