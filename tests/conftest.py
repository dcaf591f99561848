"""Shared by the tests under tests/: their helper modules (netns_hosts.py) are importable by
name, since pytest's importlib mode does not put this folder on the path; and the ``home``
fixture of the tests that drive the command line against a local cluster."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

sys.path.insert(0, str(Path(__file__).parent))

if TYPE_CHECKING:
    from test_cli_end_to_end import Home


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    """A configuration home of its own with a local cluster (test_cli_end_to_end.Home), closed
    after the test. A test module that needs another home defines its own ``home``."""
    from test_cli_end_to_end import Home

    h = Home(tmp_path)
    yield h
    h.close()
