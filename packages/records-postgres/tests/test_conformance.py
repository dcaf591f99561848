"""PostgresRecords against the record-store conformance suite; its races run in processes,
each with its own connection pool, as supervisors on several hosts would."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from jobdispatch.clock import ManualClock
from jobdispatch.records.store import Records
from jobdispatch_conformance.records import Launcher, RecordStoreSuite, process_launcher
from jobdispatch_records_postgres import PostgresRecords, Settings


def _empty(settings: Settings) -> None:
    s = psycopg.sql.Identifier(settings.schema)
    with psycopg.connect(**settings.connect_kwargs(), autocommit=True) as conn:
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
                _empty(done.settings)
                config = done.settings
            else:
                config = new_config()
            built.append(PostgresRecords(config, clock))
            return built[-1]

        yield make
        for store in built:
            store.close()

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
            settings = store.settings
            s = psycopg.sql.Identifier(settings.schema)
            with psycopg.connect(**settings.connect_kwargs(), autocommit=True) as conn:
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
