"""A backend that stops answering for a while must not end supervision: Unreachable and
Unavailable are transient by definition, so the supervisor tries again on its next poll."""

from __future__ import annotations

import logging
import time

import pytest
from jobdispatch import Actor, JobSpec, State, compose
from jobdispatch.memory import MemoryBackend
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.testing import eventually, job_of
from jobdispatch_supervise import Supervisor

from .conftest import supervising


@pytest.mark.parametrize("mode", ["run", "serve"])
def test_supervision_survives_an_unreachable_backend(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The warnings are asserted below: whatever an earlier test set the level to (the
    # simulator quiets this logger in its process), they must be captured here.
    caplog.set_level(logging.WARNING, logger="jobdispatch")
    backend = MemoryBackend(auto_run=True)
    store = MemoryRecords()
    cluster = compose(backend, store=store)
    job = job_of(
        cluster.operator.submit(JobSpec(command=["x"]), by=Actor.human("ops"), supervised=True)
    )
    supervisor = Supervisor(backend, store, poll=0.01)
    thread, errors = supervising(supervisor, job, mode)
    eventually(
        lambda: cluster.observer.get(job), "running", holds=lambda s: s.state is State.RUNNING
    )
    backend.env.set_reachable(False)
    # Until the supervisor has met the unreachable backend at least once (a fixed sleep of
    # 0.1 s was once too short for serve's first poll after it on a loaded CI machine).
    eventually(lambda: "cannot be reached" in caplog.text, "a poll meeting the unreachable backend")
    time.sleep(0.05)  # and tried again meanwhile
    assert thread.is_alive() and not errors, errors
    backend.env.set_reachable(True)
    ref = cluster.observer.get(job).submissions[0].canonical
    assert ref is not None
    backend.env.complete(ref)
    eventually(lambda: cluster.observer.get(job), "settled", holds=lambda s: s.settled)
    supervisor.stop()
    thread.join(timeout=10)
    assert not errors, errors
    assert cluster.observer.get(job).state is State.SUCCEEDED
    assert "cannot be reached" in caplog.text
