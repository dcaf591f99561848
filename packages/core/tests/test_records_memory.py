"""MemoryRecords against the record-store conformance suite, plus what is its own."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from jobdispatch.clock import ManualClock
from jobdispatch.errors import Invalid
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.records.store import Records
from jobdispatch_conformance.records import (
    Launcher,
    RecordStoreSuite,
    evidence,
    make_header,
    thread_launcher,
)


class TestMemoryRecords(RecordStoreSuite):
    @pytest.fixture
    def make_store(self) -> Callable[[ManualClock], Records]:
        return MemoryRecords

    @pytest.fixture
    def make_concurrent_appenders(self) -> Callable[[Records], Launcher]:
        return thread_launcher

    @pytest.fixture
    def damage(self) -> Callable[[Records, ManualClock, str, int], Records]:
        def damage(store: Records, clock: ManualClock, job: str, revision: int) -> Records:
            assert isinstance(store, MemoryRecords)
            store.damage(job, revision)
            return store

        return damage


def test_registered_as_the_memory_record_store() -> None:
    from jobdispatch import plugins

    entry = plugins.load(entry_points=False).registry("record-store").get("memory")
    assert isinstance(entry.factory({}), MemoryRecords)


def test_without_validation_writes_are_not_encoded() -> None:
    """validate=False trusts the caller: the simulator's own events skip the codec."""
    from datetime import datetime

    naive = datetime(2026, 1, 1)
    checked = MemoryRecords()
    checked.create(make_header("j"))
    with pytest.raises(Invalid):
        checked.append("j", [evidence(1, at=naive)], expect_revision=0)
    trusting = MemoryRecords(validate=False)
    trusting.create(make_header("j"))
    assert trusting.append("j", [evidence(1, at=naive)], expect_revision=0) == 1
