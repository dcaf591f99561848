"""The two roles of spec 0013 D3: the schema's owner migrates it; every other client runs as a
role given only what the store's operations need, and nothing it sends can rewrite a record,
delete one, or take the guards away. Each test makes its own login role (through the test
server's superuser) and drops it afterwards."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from jobdispatch.clock import ManualClock
from jobdispatch.errors import Invalid
from jobdispatch.records.store import AppendRequest, ListFilter, Measured
from jobdispatch_conformance.records import decision, evidence, make_header
from jobdispatch_records_postgres import SCHEMA_VERSION, PostgresRecords, Settings, testing
from psycopg import sql


@pytest.fixture
def client(pg_server: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The test server's configuration as a new role that owns nothing and was given nothing."""
    testing.require_superuser(pg_server)
    with testing.client_role(pg_server) as config:
        yield config


@pytest.fixture
def granted(
    new_config: Callable[[], dict[str, Any]], client: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A new schema made by its owner (the server's test role), and the client role's
    configuration for it after ``grant``: (the owner's, the client's)."""
    owned = new_config()
    with PostgresRecords(owned) as owner:
        owner.grant(client["user"])
    return owned, {**client, "schema": owned["schema"]}


def _raw(config: dict[str, Any]) -> psycopg.Connection[Any]:
    """A hand-written session under ``config``'s credentials, as psql would open one."""
    return psycopg.connect(**Settings.from_config(config).connect_kwargs(), autocommit=True)


def _refused(conn: psycopg.Connection[Any], statement: sql.Composed) -> psycopg.Error:
    """The error ``statement`` is refused with (the test fails if it is accepted)."""
    with pytest.raises(psycopg.Error) as info:
        conn.execute(statement)
    return info.value


def test_a_client_role_runs_every_operation_of_the_store(
    granted: tuple[dict[str, Any], dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    _, config = granted
    clock = ManualClock()
    with PostgresRecords(config, clock) as store, caplog.at_level(logging.WARNING):
        assert store.create(make_header("a"), [evidence(1)], idempotency_key="k").created
        assert not store.create(make_header("a2"), idempotency_key="k").created
        store.create(make_header("b"))
        lease = store.acquire("a", "sup", timedelta(minutes=1))
        lease = store.renew(lease, timedelta(minutes=1))
        assert store.append("a", [decision(lease.token)], expect_revision=1, owner=lease) == 2
        assert store.append_many(
            [AppendRequest(job="b", events=(evidence(1),), expect_revision=0)]
        ) == (1,)
        assert store.acquire_many(["b"], "sup", timedelta(minutes=1))[0]
        store.release(lease)
        assert store.announce("sup", timedelta(minutes=1)) == ("sup",)
        store.withdraw("sup")
        assert [v.revision for v in store.read_many(["a", "b"])] == [2, 1]  # type: ignore[union-attr]
        assert list(store.list()) == ["a", "b"]
        assert list(store.list(ListFilter(settled=False))) == ["a", "b"]
        assert list(store.list(ListFilter(settled=True))) == []
    assert not [r for r in caplog.records if "owner" in r.getMessage()]


def test_a_client_role_cannot_rewrite_a_record_or_drop_the_guards(
    granted: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """What an owner's raw SQL could do (R10 of the red team's report), refused to the
    client role: rewriting or deleting events, deleting or emptying records, turning a
    trigger off, dropping one, changing a header; and the guards still hold for it."""
    owned, config = granted
    with PostgresRecords(config) as store:
        store.create(make_header("a"), [evidence(1), evidence(2)])
        store.acquire("a", "sup", timedelta(hours=1))
    s = sql.Identifier(config["schema"])

    def q(text: str) -> sql.Composed:
        return sql.SQL(text).format(s=s)

    with _raw(config) as conn:
        for statement in (
            "UPDATE {s}.events SET body = 'x' WHERE job = 'a'",
            "DELETE FROM {s}.events WHERE job = 'a'",
            "TRUNCATE {s}.events",
            "DELETE FROM {s}.jobs WHERE job = 'a'",
            "TRUNCATE {s}.jobs CASCADE",
            "UPDATE {s}.jobs SET header = 'x' WHERE job = 'a'",
            "UPDATE {s}.meta SET value = '1' WHERE key = 'version'",
        ):
            error = _refused(conn, q(statement))
            assert isinstance(error, psycopg.errors.InsufficientPrivilege), statement
        for statement in (
            "ALTER TABLE {s}.events DISABLE TRIGGER guard_event",
            "ALTER TABLE {s}.events DISABLE TRIGGER append_only",
            "DROP TRIGGER guard_job ON {s}.jobs",
            "DROP FUNCTION {s}.guard_event() CASCADE",
            "ALTER TABLE {s}.events DROP CONSTRAINT events_pkey",
            "CREATE OR REPLACE FUNCTION {s}.store_now() RETURNS timestamptz LANGUAGE sql "
            "AS $$ SELECT now() - interval '1 day' $$",
            "DROP TABLE {s}.events",
            "DROP SCHEMA {s} CASCADE",
        ):
            error = _refused(conn, q(statement))
            assert isinstance(error, psycopg.errors.InsufficientPrivilege), statement
        # What the role may do is still guarded: a revision cannot go back, a decision
        # needs the current lease.
        assert _refused(conn, q("UPDATE {s}.jobs SET revision = 1")).sqlstate == "JD002"
        forged = q("INSERT INTO {s}.events VALUES ('a', 3, 99, 'x')")
        assert _refused(conn, forged).sqlstate == "JD001"
    with _raw(owned) as conn:
        triggers = conn.execute(
            "SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE c.relnamespace = %s::regnamespace AND NOT t.tgisinternal "
            "AND t.tgenabled <> 'D'",
            (config["schema"],),
        ).fetchone()
    assert triggers == (6,), "every guard is still there, and on"
    with PostgresRecords(config) as store:
        assert store.read("a").events == (evidence(1), evidence(2))


def test_the_owner_too_cannot_rewrite_a_record_while_the_triggers_stay(
    new_config: Callable[[], dict[str, Any]],
) -> None:
    config = new_config()
    with PostgresRecords(config) as store:
        store.create(make_header("a"), [evidence(1)])
    s = sql.Identifier(config["schema"])
    with _raw(config) as conn:
        for statement in (
            "UPDATE {s}.events SET body = 'x'",
            "DELETE FROM {s}.events",
            "TRUNCATE {s}.events",
            "DELETE FROM {s}.jobs",
            "TRUNCATE {s}.jobs CASCADE",
        ):
            error = _refused(conn, sql.SQL(statement).format(s=s))
            assert error.sqlstate == "JD003", statement
            assert "append-only" in str(error)


def test_only_the_owner_migrates_and_grants(
    granted: tuple[dict[str, Any], dict[str, Any]],
    new_config: Callable[[], dict[str, Any]],
    client: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    owned, config = granted
    s = sql.Identifier(owned["schema"])
    with _raw(owned) as conn:
        # As version 2 left it: no append-only triggers, and members without measurements.
        conn.execute(sql.SQL("DROP FUNCTION {}.append_only() CASCADE").format(s))
        conn.execute(
            sql.SQL(
                "ALTER TABLE {}.members DROP COLUMN poll_seconds, DROP COLUMN commit_seconds"
            ).format(s)
        )
        conn.execute(sql.SQL("UPDATE {}.meta SET value = '2' WHERE key = 'version'").format(s))
    with pytest.raises(
        Invalid, match=rf"version 2 .* needs {SCHEMA_VERSION}; only its owner, role jobdispatch"
    ):
        PostgresRecords(config)
    with PostgresRecords(owned) as owner, pytest.raises(Invalid, match="no role 'nobody_here'"):
        owner.grant("nobody_here")
    # The owner migrated it, and the role granted before has the new version's rights.
    with PostgresRecords(config) as store:
        store.create(make_header("a"))
        # Version 4's columns, written by the client role (an insert, then an update).
        for poll in (0.5, 0.25):
            store.announce("sup-client", timedelta(minutes=1), Measured(poll_seconds=poll))
        assert store.survey().measured["sup-client"] == Measured(poll_seconds=0.25)
        with pytest.raises(Invalid, match="does not own"):
            store.grant(client["user"])
    # A schema that does not exist yet: the client role may not create one.
    with pytest.raises(Invalid, match="may not create one"):
        PostgresRecords({**client, "schema": new_config()["schema"]})
    # The owner's supervisor is told, once, that it should not be one.
    with PostgresRecords(owned) as owner, caplog.at_level(logging.WARNING):
        owner.announce("sup", timedelta(minutes=1))
        owner.announce("sup", timedelta(minutes=1))
    warned = [r for r in caplog.records if "schema owner's rights" in r.getMessage()]
    assert len(warned) == 1
