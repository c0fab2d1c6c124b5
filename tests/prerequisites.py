"""What a test does when this machine lacks one of its prerequisites (llama.cpp, node, the shared corpora).

On a developer's machine the test is skipped with the reason. Under ``.ci/run`` (``RATIO_REQUIRE_ALL=1``)
it fails instead: CI installs and provides every prerequisite, so a missing one is a broken setup, not
something to skip past.
"""

from __future__ import annotations

import os

import pytest


def missing(reason: str) -> None:
    if os.environ.get("RATIO_REQUIRE_ALL") == "1":
        pytest.fail(f"{reason}, but RATIO_REQUIRE_ALL=1 (.ci/run): CI must run this test")
    pytest.skip(reason)
