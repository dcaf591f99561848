"""LmdbRecords against the record-store conformance suite; its races run in processes."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import lmdb
import pytest
from jobdispatch.clock import ManualClock
from jobdispatch.records.store import Records
from jobdispatch_conformance.records import Launcher, RecordStoreSuite, process_launcher
from jobdispatch_records_lmdb import LmdbRecords


class TestLmdbRecords(RecordStoreSuite):
    # Every commit is two fdatasyncs; the model test builds a store per example.
    model_examples = 40
    # Processes really race here (threads in one interpreter mostly take turns): more of them.
    appenders = 6
    race_rounds = 40

    @pytest.fixture
    def make_store(
        self, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[Callable[[ManualClock], Records]]:
        built: list[LmdbRecords] = []

        def make(clock: ManualClock) -> Records:
            built.append(LmdbRecords(tmp_path_factory.mktemp("records"), clock))
            return built[-1]

        yield make
        for store in built:
            store.close()

    @pytest.fixture
    def reopen(self) -> Iterator[Callable[[Records], Records]]:
        opened: list[LmdbRecords] = []

        def reopen(store: Records, clock: ManualClock) -> Records:
            assert isinstance(store, LmdbRecords)
            store.close()
            opened.append(LmdbRecords(store.path, clock))
            return opened[-1]

        yield reopen  # type: ignore[misc]
        for store in opened:
            store.close()

    @pytest.fixture
    def damage(self) -> Iterator[Callable[[Records, ManualClock, str, int], Records]]:
        opened: list[LmdbRecords] = []

        def damage(store: Records, clock: ManualClock, job: str, revision: int) -> Records:
            # One bit of the stored value flipped in place, the store closed meanwhile.
            assert isinstance(store, LmdbRecords)
            store.close()
            env = lmdb.open(str(store.path), max_dbs=10)
            with env.begin(write=True) as txn:
                jobs, values = (
                    env.open_db(b"jobs", txn=txn),
                    env.open_db(b"headers" if revision == 0 else b"events", txn=txn),
                )
                found = txn.get(job.encode(), db=jobs)
                assert found is not None, f"{job} is not in the store"
                seq = bytes(found)[:8]
                key = seq + revision.to_bytes(8, "big") if revision else seq
                stored = txn.get(key, db=values)
                assert stored is not None, f"{job} has nothing stored at revision {revision}"
                value = bytearray(stored)
                value[-2] ^= 0x10
                txn.put(key, bytes(value), db=values)
            env.close()
            opened.append(LmdbRecords(store.path, clock))
            return opened[-1]

        yield damage
        for store in opened:
            store.close()

    @pytest.fixture
    def make_concurrent_appenders(self) -> Callable[[Records], Launcher]:
        def launcher(store: Records) -> Launcher:
            assert isinstance(store, LmdbRecords)
            # Each worker process opens the same directory with its own (system) clock.
            return process_launcher(functools.partial(LmdbRecords, Path(store.path)))

        return launcher
