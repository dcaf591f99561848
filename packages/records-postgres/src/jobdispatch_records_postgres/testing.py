"""Helpers for tests and benchmarks against a real PostgreSQL: where the server of
``tools/postgres/up`` is, whether it answers, and schemas made and dropped per test.

The server is found through ``JOBDISPATCH_PG_DSN`` and ``JOBDISPATCH_PG_PASSWORD_FILE`` (what
``tools/postgres/up`` prints), or else the env file it writes
(``$JOBDISPATCH_PG_STATE/env``, default ``/var/lib/jobdispatch-postgres/env``). Without one,
:func:`require` skips, except under ``JOBDISPATCH_REQUIRE_SERVICES=1`` (CI), where it fails.
Nothing in the store imports this module; ``require`` needs pytest (the ``testing`` extra).

Roles other than the server's test role (:func:`client_role`) are made by the superuser, which
``tools/postgres/up`` lets in only over its Unix socket as the ``postgres`` system user: so only
root (through ``runuser``) can make them, and :func:`require_superuser` says why not otherwise.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "client_role",
    "drop_schema",
    "new_schema_name",
    "problem",
    "require",
    "require_superuser",
    "server_config",
    "superuser_sql",
]

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


def _skip_or_fail(why: str) -> None:
    import pytest

    if os.environ.get("JOBDISPATCH_REQUIRE_SERVICES") == "1":
        pytest.fail(f"JOBDISPATCH_REQUIRE_SERVICES=1 but {why}")
    pytest.skip(why)


def require() -> dict[str, Any]:
    """The server's configuration; skip without one, but fail when
    ``JOBDISPATCH_REQUIRE_SERVICES=1`` (CI starts the services first)."""
    why = problem()
    if why is not None:
        _skip_or_fail(why)
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


def _superuser_command(config: dict[str, Any]) -> list[str]:
    """psql as the superuser over the test server's Unix socket, reading SQL from stdin."""
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(config["dsn"])
    socket = _state_file().parent / "run"
    return [
        "runuser", "-u", "postgres", "--",
        "psql", "-h", str(socket), "-p", str(parts.get("port", 5432)), "-U", "postgres",
        "-d", str(parts.get("dbname", "postgres")), "-v", "ON_ERROR_STOP=1", "-qAt", "-f", "-",
    ]  # fmt: skip


def require_superuser(config: dict[str, Any]) -> None:
    """Skip (fail under ``JOBDISPATCH_REQUIRE_SERVICES=1``) unless the test server's superuser
    answers over its socket: only root, running as ``postgres``, reaches it."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        _skip_or_fail("making database roles needs root (the superuser is reached as postgres)")
    try:
        superuser_sql(config, "SELECT 1")
    except (OSError, subprocess.CalledProcessError) as exc:
        _skip_or_fail(f"the test server's superuser does not answer over its socket: {exc}")


def superuser_sql(config: dict[str, Any], statements: str) -> str:
    """Run ``statements`` as the superuser in the test database (given on stdin, so nothing
    in them shows in a process list); their output. CalledProcessError when one fails."""
    done = subprocess.run(
        _superuser_command(config),
        input=statements,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode:
        raise subprocess.CalledProcessError(done.returncode, "psql", done.stdout, done.stderr)
    return done.stdout


@contextmanager
def client_role(config: dict[str, Any], prefix: str = "client") -> Iterator[dict[str, Any]]:
    """A new login role with a password of its own and no rights at all, made by the
    superuser: ``config`` connecting as it (``user``, ``password_file``). Dropped afterwards,
    with whatever it was given."""
    role = new_schema_name(prefix)
    password = secrets.token_urlsafe(18)
    with tempfile.TemporaryDirectory(prefix="jobdispatch-role-") as folder:
        password_file = Path(folder) / "password"
        password_file.touch(mode=0o600)
        password_file.write_text(password + "\n")
        superuser_sql(config, f"CREATE ROLE {role} LOGIN PASSWORD '{password}';")
        try:
            yield {**config, "user": role, "password_file": str(password_file)}
        finally:
            superuser_sql(config, f"DROP OWNED BY {role} CASCADE; DROP ROLE {role};")
