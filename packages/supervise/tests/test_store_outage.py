"""A record store that stops answering for a while must not end supervision (issue 34 item 1):
the supervisor decides nothing meanwhile, says once that the store is away and once that it
is back, and carries on from the store's view. The real PostgreSQL outages (a server killed, a
partition, a start during one) are in tests/test_supervise_postgres_outage.py."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch import Actor, JobSpec, State, compose
from jobdispatch.clock import system_clock
from jobdispatch.errors import Unavailable
from jobdispatch.memory import MemoryBackend
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.testing import eventually, job_of
from jobdispatch_supervise import Supervisor
from jobdispatch_supervise.outage import WatchedStore

from .conftest import supervising

AWAY = "the record store does not answer"
BACK = "the record store answers again"


class FlakyStore:
    """A memory store whose every call fails Unavailable while ``away`` is set."""

    def __init__(self) -> None:
        self.inner = MemoryRecords()
        self.away = threading.Event()
        self.failed = 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.away.is_set():
                self.failed += 1
                msg = "the test's store is away"
                raise Unavailable(msg)
            return method(*args, **kwargs)

        return call


@pytest.mark.parametrize("mode", ["run", "serve"])
def test_supervision_rides_out_a_store_that_is_away(mode: str, caplog: Any) -> None:
    caplog.set_level(logging.WARNING, logger="jobdispatch")
    backend = MemoryBackend(auto_run=True)
    store = FlakyStore()
    cluster = compose(backend, store=store.inner)
    job = job_of(
        cluster.operator.submit(JobSpec(command=["x"]), by=Actor.human("ops"), supervised=True)
    )
    # A lease ttl short enough that it is due for renewal (and lapses) during the outage.
    supervisor = Supervisor(backend, store, poll=0.01, lease_ttl=timedelta(seconds=0.2))
    thread, errors = supervising(supervisor, job, mode)
    eventually(
        lambda: cluster.observer.get(job), "running", holds=lambda s: s.state is State.RUNNING
    )
    before = store.inner.read(job).revision
    store.away.set()
    eventually(
        lambda: errors or store.failed >= 20, "the supervisor to meet the absent store often"
    )
    assert thread.is_alive() and not errors, errors
    ref = cluster.observer.get(job).submissions[0].canonical
    assert ref is not None
    backend.env.complete(ref)  # the job ends while nothing can be recorded
    time.sleep(0.3)  # past the lease ttl: the lease lapses meanwhile
    assert store.inner.read(job).revision == before  # nothing was recorded
    store.away.clear()
    eventually(lambda: cluster.observer.get(job), "settled", holds=lambda s: s.settled)
    supervisor.stop()
    thread.join(timeout=30)
    assert not errors, errors
    assert cluster.observer.get(job).state is State.SUCCEEDED
    assert caplog.text.count(AWAY) == 1, caplog.text
    assert caplog.text.count(BACK) == 1, caplog.text
    assert "trying again" not in caplog.text  # no line per job for the store's outage
    events = store.inner.read(job).events
    tokens = [e.token for e in events if e.token is not None]
    assert tokens == sorted(tokens)


@given(st.lists(st.booleans(), max_size=40))
def test_an_outage_is_told_once_and_its_end_once(answers: list[bool]) -> None:
    """Whatever the run of answers and failures, one line per change: away after an answer
    (or at first), back after a failure; and every failure is the outage's own."""
    store = FlakyStore()
    watched = WatchedStore(store, system_clock)
    logger = logging.getLogger("jobdispatch.supervise")
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    keep = Keep(logging.WARNING)
    logger.addHandler(keep)
    try:
        for answers_now in answers:
            if answers_now:
                store.away.clear()
                watched.read_many([])
            else:
                store.away.set()
                with pytest.raises(Unavailable) as failed:
                    watched.read_many([])
                assert watched.told(failed.value)
            assert watched.away is not answers_now
    finally:
        logger.removeHandler(keep)
    went = sum(1 for i, ok in enumerate(answers) if not ok and (i == 0 or answers[i - 1]))
    came = sum(1 for i, ok in enumerate(answers) if ok and i > 0 and not answers[i - 1])
    assert sum(AWAY in line for line in lines) == went
    assert sum(BACK in line for line in lines) == came
