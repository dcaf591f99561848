"""Ownership, the piece both the supervisor and the simulator's processes run: acquire when
missing, renew past half the lease's life by the holder's clock, forget on Conflict."""

from __future__ import annotations

from datetime import timedelta

import jobdispatch
from jobdispatch import JobSpec, ManualClock
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.records.memory import MemoryRecords
from jobdispatch_supervise import Ownership, Supervisor

TTL = timedelta(seconds=30)


def _store_with_job() -> tuple[ManualClock, MemoryRecords, str]:
    clock = ManualClock()
    store = MemoryRecords(clock=clock)
    backend = MemoryBackend(shape=Shape.SLURM, clock=clock)
    cluster = jobdispatch.compose(backend, store=store, clock=clock)
    plan = cluster.operator.submit(
        JobSpec(command=("true",)), by=jobdispatch.Actor.human("ops"), supervised=True
    )
    return clock, store, plan.job


def test_a_lease_is_acquired_once_kept_while_young_and_renewed_past_half_its_life() -> None:
    clock, store, job = _store_with_job()
    mine = Ownership(store, "a", TTL, clock)
    first = mine.own(job)
    assert first is not None and first.holder == "a"
    clock.advance(TTL / 2 - timedelta(seconds=1))
    assert mine.own(job) == first  # more than half left: the same lease, no store call
    clock.advance(timedelta(seconds=2))
    renewed = mine.own(job)
    assert renewed is not None and renewed.token == first.token
    assert renewed.expires > first.expires
    assert mine.held(job) == renewed


def test_a_job_another_holds_is_refused_and_taken_once_that_lease_lapses() -> None:
    clock, store, job = _store_with_job()
    a = Ownership(store, "a", TTL, clock)
    b = Ownership(store, "b", TTL, clock)
    lease_a = a.own(job)
    assert lease_a is not None
    assert b.own(job) is None
    assert b.held(job) is None
    clock.advance(TTL + timedelta(seconds=1))
    lease_b = b.own(job)
    assert lease_b is not None and lease_b.token > lease_a.token
    # a's renewal is refused: its lease is forgotten, and it is refused until b lets go.
    assert a.own(job) is None
    assert a.held(job) is None
    b.release(job)
    again = a.own(job)
    assert again is not None and again.token > lease_b.token


def test_forget_and_release_drop_the_lease_for_the_next_own() -> None:
    clock, store, job = _store_with_job()
    a = Ownership(store, "a", TTL, clock)
    first = a.own(job)
    assert first is not None
    a.forget(job)
    assert a.held(job) is None
    # Re-acquiring one's own live lease keeps its token.
    kept = a.own(job)
    assert kept is not None and kept.token == first.token
    a.release_all()
    assert a.held(job) is None
    b = Ownership(store, "b", TTL, clock)
    assert b.own(job) is not None  # released, not left to lapse


def test_the_supervisor_owns_its_jobs_through_the_same_piece() -> None:
    clock, store, job = _store_with_job()
    sup = Supervisor(MemoryBackend(shape=Shape.SLURM, clock=clock), store, clock=clock)
    lease = sup.ownership.own(job)
    assert lease is not None and lease.holder == sup.holder
    assert lease.expires == clock() + sup.lease_ttl
    assert Ownership(store, "other", TTL, clock).own(job) is None
