"""PostgresRecords against the record-store conformance suite; its races run in processes,
each with its own connection pool, as supervisors on several hosts would. The suite runs
twice: connected as the schema's owner (a single-role setup), and as a role given only a
client's rights (``PostgresRecords.grant``), as supervisors are meant to run."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from jobdispatch.clock import ManualClock
from jobdispatch.records.store import Records
from jobdispatch_conformance.records import Launcher, RecordStoreSuite, process_launcher
from jobdispatch_records_postgres import PostgresRecords, Settings, testing


@contextmanager
def _behind_the_guards(settings: Settings) -> Iterator[psycopg.Connection[Any]]:
    """A transaction of the schema's owner with the tables' triggers off (the append-only
    ones refuse to rewrite or empty a record, whoever asks), on again at its commit."""
    s = psycopg.sql.Identifier(settings.schema)
    with (
        psycopg.connect(**settings.connect_kwargs(), autocommit=True) as conn,
        conn.transaction(),
    ):
        for table in ("events", "jobs"):
            alter = "ALTER TABLE {s}.{t} DISABLE TRIGGER USER"
            conn.execute(psycopg.sql.SQL(alter).format(s=s, t=psycopg.sql.Identifier(table)))
        yield conn
        for table in ("events", "jobs"):
            alter = "ALTER TABLE {s}.{t} ENABLE TRIGGER USER"
            conn.execute(psycopg.sql.SQL(alter).format(s=s, t=psycopg.sql.Identifier(table)))


def _empty(settings: Settings) -> None:
    s = psycopg.sql.Identifier(settings.schema)
    with _behind_the_guards(settings) as conn:
        conn.execute(psycopg.sql.SQL("TRUNCATE {s}.events, {s}.jobs RESTART IDENTITY").format(s=s))


class TestPostgresRecords(RecordStoreSuite):
    # Every example makes a schema (a few DDL commits); fewer than the memory store's.
    model_examples = 30
    appenders = 6
    race_rounds = 20

    @pytest.fixture
    def make_store(
        self, new_config: Callable[[], dict[str, Any]]
    ) -> Iterator[Callable[[ManualClock], Records]]:
        built: list[PostgresRecords] = []

        def make(clock: ManualClock) -> Records:
            # The suite's clock is pinned as each transaction's instant: the database still
            # judges the leases, at the time the test says. A schema whose store was closed
            # (the model test's previous example) is emptied and used again: cheaper than
            # creating one per example.
            done = next((b for b in built if b.closed), None)
            config: Settings | dict[str, Any]
            if done is not None:
                built.remove(done)
                _empty(self.owner_settings(done.settings))
                config = done.settings
            else:
                config = self.opened_as(new_config())
            built.append(PostgresRecords(config, clock))
            return built[-1]

        yield make
        for store in built:
            store.close()

    def opened_as(self, owned: dict[str, Any]) -> dict[str, Any]:
        """The configuration the stores under test open a new schema with, given its owner's."""
        return owned

    def owner_settings(self, settings: Settings) -> Settings:
        """The settings of the schema's owner, for a store opened with ``settings``."""
        return settings

    @pytest.fixture
    def reopen(self) -> Iterator[Callable[[Records, ManualClock], Records]]:
        opened: list[PostgresRecords] = []

        def reopen(store: Records, clock: ManualClock) -> Records:
            assert isinstance(store, PostgresRecords)
            store.close()
            opened.append(PostgresRecords(store.settings, clock))
            return opened[-1]

        yield reopen
        for store in opened:
            store.close()

    @pytest.fixture
    def damage(
        self, reopen: Callable[[Records, ManualClock], Records]
    ) -> Callable[[Records, ManualClock, str, int], Records]:
        def damage(store: Records, clock: ManualClock, job: str, revision: int) -> Records:
            # One bit of the stored value flipped in place, behind the store's back; then the
            # store is opened again, as after a restart: a store trusts what it decoded (its
            # own commits included), so only a new one finds the damage, as with LMDB.
            assert isinstance(store, PostgresRecords)
            settings = self.owner_settings(store.settings)
            s = psycopg.sql.Identifier(settings.schema)
            with _behind_the_guards(settings) as conn:
                if revision == 0:
                    (value,) = conn.execute(
                        psycopg.sql.SQL("SELECT header FROM {}.jobs WHERE job = %s").format(s),
                        (job,),
                    ).fetchone()  # type: ignore[misc]
                    flipped = bytearray(value)
                    flipped[-2] ^= 0x10
                    conn.execute(
                        psycopg.sql.SQL("UPDATE {}.jobs SET header = %s WHERE job = %s").format(s),
                        (bytes(flipped), job),
                    )
                else:
                    (value,) = conn.execute(
                        psycopg.sql.SQL(
                            "SELECT body FROM {}.events WHERE job = %s AND revision = %s"
                        ).format(s),
                        (job, revision),
                    ).fetchone()  # type: ignore[misc]
                    flipped = bytearray(value)
                    flipped[-2] ^= 0x10
                    conn.execute(
                        psycopg.sql.SQL(
                            "UPDATE {}.events SET body = %s WHERE job = %s AND revision = %s"
                        ).format(s),
                        (bytes(flipped), job, revision),
                    )
            return reopen(store, clock)

        return damage

    @pytest.fixture
    def make_concurrent_appenders(self) -> Callable[[Records], Launcher]:
        def launcher(store: Records) -> Launcher:
            assert isinstance(store, PostgresRecords)
            # Each worker process opens its own store (and pool) on the same schema, on the
            # database's clock.
            settings: Settings = store.settings
            return process_launcher(functools.partial(PostgresRecords, settings))

        return launcher


@pytest.fixture(scope="module")
def client(pg_server: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The test server's configuration as a role of its own that owns nothing."""
    testing.require_superuser(pg_server)
    with testing.client_role(pg_server) as config:
        yield config


class TestPostgresRecordsAsAClientRole(TestPostgresRecords):
    """The same promises kept by a store connected as a role given only what
    ``PostgresRecords.grant`` gives: every operation of the store works with those rights."""

    model_examples = 15
    client: dict[str, Any]
    owners: dict[str, Settings]

    @pytest.fixture(autouse=True)
    def _as_client(self, client: dict[str, Any]) -> None:
        self.client = client
        self.owners = {}

    def opened_as(self, owned: dict[str, Any]) -> dict[str, Any]:
        with PostgresRecords(owned) as owner:  # creates the schema, as its owner
            owner.grant(self.client["user"])
            self.owners[owner.settings.schema] = owner.settings
        return {**self.client, "schema": owned["schema"]}

    def owner_settings(self, settings: Settings) -> Settings:
        return self.owners[settings.schema]
