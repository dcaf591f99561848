"""Shared fixtures of the Slurm adapter's tests: the saved outputs of a real 22.05.8 cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixture_text():
    """Read one saved output by file name."""
    return lambda name: (FIXTURES / name).read_text()
