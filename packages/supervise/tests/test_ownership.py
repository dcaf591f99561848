"""Ownership, the piece both the supervisor and the simulator's processes run: acquire when
missing, renew between a third and a half of the lease's life (each job at its own point) by
the holder's clock, forget on Conflict."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import hypothesis.strategies as st
import jobdispatch
from hypothesis import given
from jobdispatch import JobSpec, ManualClock
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.records.store import Lease, Refusal
from jobdispatch.testing import job_of
from jobdispatch_conformance.records import make_header
from jobdispatch_supervise import Ownership, Supervisor
from jobdispatch_supervise.ownership import RENEWAL_SPREAD, fair_share

TTL = timedelta(seconds=30)


def _store_with_job() -> tuple[ManualClock, MemoryRecords, str]:
    clock = ManualClock()
    store = MemoryRecords(clock=clock)
    backend = MemoryBackend(shape=Shape.SLURM, clock=clock)
    cluster = jobdispatch.compose(backend, store=store, clock=clock)
    plan = cluster.operator.submit(
        JobSpec(command=("true",)), by=jobdispatch.Actor.human("ops"), supervised=True
    )
    return clock, store, job_of(plan)


def test_a_lease_is_acquired_once_kept_while_young_and_renewed_by_half_its_life() -> None:
    clock, store, job = _store_with_job()
    mine = Ownership(store, "a", TTL, clock)
    first = mine.own(job)
    assert first is not None and first.holder == "a"
    clock.advance(TTL / 3 - timedelta(seconds=1))
    assert mine.own(job) == first  # more than two thirds left: the same lease, no store call
    clock.advance(TTL / 2 - TTL / 3 + timedelta(seconds=2))
    renewed = mine.own(job)
    assert renewed is not None and renewed.token == first.token
    assert renewed.expires > first.expires
    assert mine.held(job) == renewed


@given(st.text(min_size=1, max_size=40), st.integers(min_value=1, max_value=3_600))
def test_each_jobs_lease_is_renewed_at_its_own_point_between_a_third_and_a_half_of_its_life(
    job: str, seconds: int
) -> None:
    ttl = timedelta(seconds=seconds)
    mine = Ownership(MemoryRecords(), "a", ttl, ManualClock())
    below = mine.renew_below(job)
    assert ttl / 2 <= below <= ttl / 2 + ttl * RENEWAL_SPREAD
    assert ttl * RENEWAL_SPREAD == ttl / 6
    assert below == Ownership(MemoryRecords(), "b", ttl, ManualClock()).renew_below(job)


class _Renewals(MemoryRecords):
    """The memory store, keeping how many leases each ``renew_many`` renewed."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock=clock)
        self.batches: list[int] = []

    def renew_many(self, leases: Sequence[Lease], ttl: timedelta) -> tuple[Lease | Refusal, ...]:
        self.batches.append(len(leases))
        return super().renew_many(leases, ttl)


def test_leases_taken_in_one_poll_are_renewed_over_several_and_each_in_time() -> None:
    """A launch (or a takeover) takes every lease in one poll; their renewals must not all
    land in one later poll, and none may wait past half the lease's life."""
    clock = ManualClock()
    store = _Renewals(clock)
    jobs = _jobs(store, 600)
    mine = Ownership(store, "a", TTL, clock)
    taken = mine.own_many(jobs)
    assert len(taken) == 600
    for _ in range(int(TTL.total_seconds())):  # one poll a second for a whole lease
        clock.advance(timedelta(seconds=1))
        before = {j: mine.held(j) for j in jobs}
        mine.own_many(jobs)
        for j in jobs:
            lease, was = mine.held(j), before[j]
            assert lease is not None and was is not None
            left = was.expires - clock()
            if lease != was:  # renewed now: it was due, and not before a third of its life
                assert left < mine.renew_below(j) and left <= TTL * 2 / 3
            else:  # kept: more than half of it is left
                assert left >= mine.renew_below(j) > TTL / 2
    assert sum(store.batches) >= 600  # every lease renewed at least once in the lease
    # Spread over the sixth of a lease (5 polls of 1 s): no poll renews nearly all of them.
    assert max(store.batches) < 600 / 3
    assert len(store.batches) >= 5


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


# ------------------------------------------------------------------------------ fair share


@given(jobs=st.integers(min_value=0, max_value=10_000), n=st.integers(1, 200))
def test_fair_shares_add_up_to_the_jobs_and_differ_by_at_most_one(jobs: int, n: int) -> None:
    members = tuple(f"sup-{i:03}" for i in range(n))
    shares = [fair_share(jobs, members, m) for m in members]
    assert sum(shares) == jobs
    assert max(shares) - min(shares) <= 1


def test_a_member_its_own_announcement_missed_counts_itself_last() -> None:
    assert fair_share(7, ("a", "b"), "c") == 2
    assert [fair_share(7, ("a", "b"), m) for m in ("a", "b")] == [4, 3]


def _jobs(store: MemoryRecords, n: int) -> list[str]:
    for i in range(n):
        store.create(make_header(f"job-{i}"))
    return list(store.list())


def _poll(store: MemoryRecords, who: dict[str, Ownership], jobs: list[str]) -> None:
    """One poll of each live supervisor, as serve makes it: announce, count, take a share."""
    for name, mine in who.items():
        members = store.announce(name, TTL)
        mine.own_share(jobs, fair_share(len(jobs), members, name))


def _holdings(who: dict[str, Ownership], jobs: list[str]) -> dict[str, int]:
    return {name: sum(mine.held(j) is not None for j in jobs) for name, mine in who.items()}


def test_a_newcomer_gets_work_gradually_and_the_jobs_spread_evenly() -> None:
    clock = ManualClock()
    store = MemoryRecords(clock=clock)
    jobs = _jobs(store, 10)
    who = {"a": Ownership(store, "a", TTL, clock)}
    _poll(store, who, jobs)
    assert _holdings(who, jobs) == {"a": 10}
    who["b"] = Ownership(store, "b", TTL, clock)
    seen: list[dict[str, int]] = []
    for _ in range(8):
        clock.advance(timedelta(seconds=1))
        _poll(store, who, jobs)
        seen.append(_holdings(who, jobs))
    # a polls before b first announces, so it keeps all ten once; from then on it gives back
    # one job a poll (never all at once), and b takes each as it comes free.
    assert [h["a"] for h in seen[:6]] == [10, 9, 8, 7, 6, 5]
    assert seen[-1] == {"a": 5, "b": 5}
    who["c"] = Ownership(store, "c", TTL, clock)
    for _ in range(8):
        clock.advance(timedelta(seconds=1))
        _poll(store, who, jobs)
    assert sorted(_holdings(who, jobs).values()) == [3, 3, 4]
    # No job is held by two: each lease is the store's one current lease.
    held = [j for mine in who.values() for j in jobs if mine.held(j) is not None]
    assert sorted(held) == sorted(jobs)


def test_a_dead_supervisors_jobs_move_within_one_lease() -> None:
    clock = ManualClock()
    store = MemoryRecords(clock=clock)
    jobs = _jobs(store, 9)
    who = {name: Ownership(store, name, TTL, clock) for name in ("a", "b", "c")}
    for _ in range(10):
        clock.advance(timedelta(seconds=1))
        _poll(store, who, jobs)
    assert _holdings(who, jobs) == {"a": 3, "b": 3, "c": 3}
    del who["c"]  # c dies: it announces and renews no more
    died = clock()
    while sum(_holdings(who, jobs).values()) < len(jobs):
        clock.advance(timedelta(seconds=1))
        _poll(store, who, jobs)
        assert clock() - died <= TTL + timedelta(seconds=1), "c's jobs did not move in a lease"
    assert sorted(_holdings(who, jobs).values()) == [4, 5]


def test_a_supervisor_that_stops_withdraws_so_the_others_count_it_out_at_once() -> None:
    store = MemoryRecords()
    backend = MemoryBackend(shape=Shape.SLURM)
    sup = Supervisor(backend, store, holder="gone", sleep=lambda _: sup.stop())
    sup.serve()
    assert store.announce("other", TTL) == ("other",)
