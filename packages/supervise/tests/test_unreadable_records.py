"""A record the supervisor cannot read stops only that job: serve goes on with the others."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

import pytest
from jobdispatch import Actor, JobSpec, State, compose
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.records.memory import MemoryRecords
from jobdispatch_supervise import Supervisor


def test_serve_leaves_an_unreadable_job_and_supervises_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    store = MemoryRecords()
    cluster = compose(backend, store=store)
    first, bad, last = (
        cluster.operator.submit(JobSpec(command=["x"]), by=Actor.human("ops"), supervised=True).job
        for _ in range(3)
    )
    store.damage(bad, 0, "written by a newer version (schema 2, this reads 1)")
    sup = Supervisor(backend, store, poll=0.02)
    thread = threading.Thread(target=sup.serve, daemon=True)
    # Named, so a level an in-process simulator run set on "jobdispatch" cannot hide it.
    caplog.set_level(logging.ERROR, logger="jobdispatch.supervise")
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if all(cluster.observer.get(j).state is State.RUNNING for j in (first, last)):
                break
            time.sleep(0.01)
        # Still serving: the unreadable job did not end the loop.
        assert thread.is_alive()
        assert cluster.observer.get(first).state is State.RUNNING
        assert cluster.observer.get(last).state is State.RUNNING
    finally:
        sup.stop()
        thread.join(timeout=10)
    # Reported once, naming the job, and its lease let go for a version that can read it.
    reports = [r for r in caplog.records if bad in r.getMessage()]
    assert len(reports) == 1 and "newer version" in reports[0].getMessage()
    assert store.acquire(bad, "a-newer-supervisor", timedelta(seconds=30)).holder
