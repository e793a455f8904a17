"""Burn-in test helpers: tool-output samples with their provenance header stripped."""

import pytest


@pytest.fixture(scope="session")
def tool_text(tool_outputs):
    """``tool_text(name)`` -> the sample's text without line 1 (the '# SOURCE:' provenance header)."""
    def read(name):
        text = (tool_outputs / name).read_text(encoding="utf-8")
        first, rest = text.split("\n", 1)
        assert first.startswith("# SOURCE:"), name
        return rest
    return read
