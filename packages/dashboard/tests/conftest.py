"""The dashboard tests' fixtures: the scripted run of dashboard_fleet.py, and the dashboard of
its store, opened read-only, behind Starlette's TestClient."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# dashboard_fleet.py, shared by the modules here (pytest's importlib mode does not add this
# folder).
sys.path.insert(0, str(Path(__file__).parent))

from dashboard_fleet import SECRET, Fleet
from jobdispatch_dashboard import Board, Redactor, make_app
from starlette.testclient import TestClient


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    made = Fleet(tmp_path_factory.mktemp("records"))
    yield made
    made.scripted.store.close()


@pytest.fixture
def board(fleet: Fleet) -> Board:
    return Board([fleet.source()], redactor=Redactor([SECRET]))


@pytest.fixture
def client(board: Board) -> TestClient:
    return TestClient(make_app(board))
