"""LmdbRecords against the record-store conformance suite; its races run in processes."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

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
    def make_concurrent_appenders(self) -> Callable[[Records], Launcher]:
        def launcher(store: Records) -> Launcher:
            assert isinstance(store, LmdbRecords)
            # Each worker process opens the same directory with its own (system) clock.
            return process_launcher(functools.partial(LmdbRecords, Path(store.path)))

        return launcher
