"""Options of the LMDB store's tests (the root pyproject.toml is shared, so they live here)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--crash-kills",
        type=int,
        default=None,
        help="how many times test_crash SIGKILLs a writer (default 40; the long run is 500)",
    )
