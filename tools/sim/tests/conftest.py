"""The simulator's tests: it must pass on the real code, catch every mutant, replay exactly,
and its checkers must each see the violation they are for."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sweep: runs many simulated seeds (tens of seconds)")
