"""A record the supervisor cannot read stops only that job: serve goes on with the others."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

import pytest
from jobdispatch import Actor, JobSpec, State, compose
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.records.store import ListFilter
from jobdispatch.testing import eventually, job_of
from jobdispatch_supervise import Supervisor

from .conftest import serving


def test_serve_leaves_an_unreadable_job_and_supervises_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    store = MemoryRecords()
    cluster = compose(backend, store=store)
    first, bad, last = (
        job_of(
            cluster.operator.submit(JobSpec(command=["x"]), by=Actor.human("ops"), supervised=True)
        )
        for _ in range(3)
    )
    store.damage(bad, 0, "written by a newer version (schema 2, this reads 1)")
    sup = Supervisor(backend, store, poll=0.02)
    # Named, so a level an in-process simulator run set on "jobdispatch" cannot hide it.
    caplog.set_level(logging.ERROR, logger="jobdispatch.supervise")
    with serving(sup) as thread:
        eventually(
            lambda: [cluster.observer.get(j).state for j in (first, last)],
            "the readable jobs running",
            holds=lambda states: all(s is State.RUNNING for s in states),
        )
        # Still serving: the unreadable job did not end the loop.
        assert thread.is_alive()
        assert cluster.observer.get(first).state is State.RUNNING
        assert cluster.observer.get(last).state is State.RUNNING
    # Reported once, naming the job, and its lease let go for a version that can read it.
    reports = [r for r in caplog.records if bad in r.getMessage()]
    assert len(reports) == 1 and "newer version" in reports[0].getMessage()
    assert store.acquire(bad, "a-newer-supervisor", timedelta(seconds=30)).holder


class _SettledIndexDamaged(MemoryRecords):
    """A store whose index of settled jobs also lists one pending job, as a PostgreSQL row
    whose settled flag was set by hand would (R13 of the red team's report)."""

    def __init__(self) -> None:
        super().__init__()
        self.listed_as_settled: str | None = None

    def list(self, filter: ListFilter | None = None) -> Iterator[str]:
        jobs = list(super().list(filter))
        if self.listed_as_settled is None or filter is None or filter.settled is None:
            return iter(jobs)
        if filter.settled:
            return iter([*jobs, self.listed_as_settled])
        return iter([j for j in jobs if j != self.listed_as_settled])


def test_the_residual_sweep_names_a_job_listed_as_settled_that_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Listed as settled, a pending job is served by no supervisor: the sweep, which folds
    every settled job anyway, names it instead of passing over it in silence."""
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    store = _SettledIndexDamaged()
    cluster = compose(backend, store=store)
    hidden = job_of(cluster.operator.submit(JobSpec(command=["x"]), by=Actor.human("ops")))
    store.listed_as_settled = hidden
    sup = Supervisor(backend, store, poll=0.02)
    caplog.set_level(logging.ERROR, logger="jobdispatch.supervise")
    assert sup.residual_jobs() == []
    reports = [r.getMessage() for r in caplog.records if hidden in r.getMessage()]
    assert len(reports) == 1
    assert "listed as settled but its record (revision" in reports[0]
