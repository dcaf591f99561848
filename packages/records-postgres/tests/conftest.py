"""Fixtures of the PostgreSQL store's tests: the server of tools/postgres/up (skip without it,
fail under JOBDISPATCH_REQUIRE_SERVICES=1) and a fresh schema per store, dropped afterwards."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jobdispatch_records_postgres import testing

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def pg_server() -> dict[str, Any]:
    """The test server's store configuration, without a schema."""
    return testing.require()


@pytest.fixture
def new_config(pg_server: dict[str, Any]) -> Iterator[Callable[[], dict[str, Any]]]:
    """``new_config()``: a configuration naming a schema of its own, dropped at teardown."""
    made: list[str] = []

    def make() -> dict[str, Any]:
        made.append(testing.new_schema_name())
        return {**pg_server, "schema": made[-1]}

    yield make
    for schema in made:
        testing.drop_schema(pg_server, schema)
