"""The metrics tests' fixtures; the harness is in metrics_scenario.py."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# metrics_scenario.py, shared by the modules here (pytest's importlib mode does not add this
# folder).
sys.path.insert(0, str(Path(__file__).parent))

from metrics_scenario import Scenario


@pytest.fixture
def scenario(tmp_path: Path) -> Iterator[Scenario]:
    made = Scenario(tmp_path / "records")
    yield made
    made.store.close()
