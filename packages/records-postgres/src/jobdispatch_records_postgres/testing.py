"""Helpers for tests and benchmarks against a real PostgreSQL: where the server of
``tools/postgres/up`` is, whether it answers, and schemas made and dropped per test.

The server is found through ``JOBDISPATCH_PG_DSN`` and ``JOBDISPATCH_PG_PASSWORD_FILE`` (what
``tools/postgres/up`` prints), or else the env file it writes
(``$JOBDISPATCH_PG_STATE/env``, default ``/var/lib/jobdispatch-postgres/env``). Without one,
:func:`require` skips, except under ``JOBDISPATCH_REQUIRE_SERVICES=1`` (CI), where it fails.
Nothing in the store imports this module; ``require`` needs pytest (the ``testing`` extra).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

__all__ = ["drop_schema", "new_schema_name", "problem", "require", "server_config"]

_VARS = ("JOBDISPATCH_PG_DSN", "JOBDISPATCH_PG_PASSWORD_FILE")


def _state_file() -> Path:
    return Path(os.environ.get("JOBDISPATCH_PG_STATE", "/var/lib/jobdispatch-postgres")) / "env"


def server_config() -> dict[str, Any] | None:
    """The store configuration reaching the test server (no schema yet), or None."""
    found = {k: os.environ[k] for k in _VARS if os.environ.get(k)}
    if len(found) < len(_VARS):
        try:
            lines = _state_file().read_text().splitlines()
        except OSError:
            lines = []
        for raw in lines:
            line = raw.strip().removeprefix("export ")
            if "=" in line and not line.startswith("#"):
                key, _, value = line.partition("=")
                found.setdefault(key, value)
    if not all(k in found for k in _VARS):
        return None
    return {
        "dsn": found["JOBDISPATCH_PG_DSN"],
        "password_file": found["JOBDISPATCH_PG_PASSWORD_FILE"],
        "connect_timeout": 10,
    }


def problem() -> str | None:
    """Why the test server cannot be used, or None when it answers a query."""
    config = server_config()
    if config is None:
        return (
            'no PostgreSQL: run `eval "$(tools/postgres/up)"` (looked for JOBDISPATCH_PG_DSN and '
            f"{_state_file()})"
        )
    import psycopg

    from jobdispatch_records_postgres.settings import Settings

    settings = Settings.from_config(config)
    try:
        with psycopg.connect(**{**settings.connect_kwargs(), "connect_timeout": 5}) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # anything at all: the server is not usable
        return f"PostgreSQL at {settings.where()} does not answer: {exc}"
    return None


def require() -> dict[str, Any]:
    """The server's configuration; skip without one, but fail when
    ``JOBDISPATCH_REQUIRE_SERVICES=1`` (CI starts the services first)."""
    import pytest

    why = problem()
    if why is not None:
        if os.environ.get("JOBDISPATCH_REQUIRE_SERVICES") == "1":
            pytest.fail(f"JOBDISPATCH_REQUIRE_SERVICES=1 but {why}")
        pytest.skip(why)
    config = server_config()
    assert config is not None
    return config


def new_schema_name(prefix: str = "t") -> str:
    """A schema name no other test uses."""
    return f"{prefix}_{secrets.token_hex(6)}"


def drop_schema(config: dict[str, Any], schema: str) -> None:
    """Drop ``schema`` and everything in it (a test's leftovers)."""
    import psycopg
    from psycopg import sql

    from jobdispatch_records_postgres.settings import Settings

    settings = Settings.from_config({k: v for k, v in config.items() if k != "schema"})
    with psycopg.connect(**settings.connect_kwargs(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
