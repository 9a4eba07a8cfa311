"""How deep the suite goes. `make test` runs the ``ci`` depth: every test, with
fewer generated examples and smaller load, soak and fuzzing runs. `make
test-deep` (``TEST_DEPTH=deep``) runs the same tests at their full sizes; run
it before changing the aggregator, the guard, listing or cursors."""

from __future__ import annotations

import os

from hypothesis import settings

DEEP = os.environ.get("TEST_DEPTH", "ci") == "deep"

# For property tests that name no size of their own.
settings.register_profile("ci", max_examples=30, deadline=None)
settings.register_profile("deep", max_examples=100, deadline=None)
settings.load_profile("deep" if DEEP else "ci")


def sized(deep: int, ci: int) -> int:
    """``deep`` under `make test-deep`, ``ci`` otherwise."""
    return deep if DEEP else ci
