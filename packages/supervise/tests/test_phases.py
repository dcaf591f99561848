"""The executor runs a batch of jobs in phases (spec 0004 D2): every decision in one commit, then
the calls of the decisions that landed (concurrently where the adapter says it may), then every
answer in one commit; and for each job the protocol's order holds as it does for one job."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import attrs
import pytest
from jobdispatch import Actor, Invalid, JobSpec, ManualClock, Unavailable, compose
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.records import events as ev
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.records.store import AppendRequest, Lease, ReadAnswer, Refusal
from jobdispatch.spi import ObjectRef, StartRequest, call_concurrency
from jobdispatch.steps import Start
from jobdispatch.testing import job_of
from jobdispatch_supervise import Executor, Supervisor

TTL = timedelta(seconds=30)


class Counting(MemoryRecords):
    """The memory store, counting its batch appends and their sizes."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.batches: list[int] = []

    def append_many(self, requests: Sequence[AppendRequest]) -> tuple[int | Refusal, ...]:
        self.batches.append(len(requests))
        return super().append_many(requests)


class Sequential(MemoryBackend):
    """The memory adapter, declaring no concurrency; each start checks that its decision was
    committed before it was called."""

    call_concurrency = 1

    def __init__(self, store: MemoryRecords, **kw: Any) -> None:
        super().__init__(**kw)
        self.store = store
        self.started: list[str] = []

    def start(self, request: StartRequest) -> ObjectRef:
        events = self.store.read(request.job).events
        assert isinstance(events[-1], ev.AttemptStarted), "Start was called before its decision"
        self.started.append(request.job)
        return super().start(request)


def _jobs(
    n: int, backend_type: type[Sequential] = Sequential, **kw: Any
) -> tuple[ManualClock, Counting, Sequential, list[str]]:
    clock = ManualClock()
    store = Counting(clock)
    backend = backend_type(store, shape=Shape.SLURM, auto_run=True, clock=clock, **kw)
    cluster = compose(backend, store=store, clock=clock)
    ops = Actor.human("ops")
    jobs = [
        job_of(cluster.operator.submit(JobSpec(command=["x"]), by=ops, supervised=True))
        for _ in range(n)
    ]
    return clock, store, backend, jobs


def _until_start(executor: Executor, store: MemoryRecords, jobs: list[str]) -> dict[str, Lease]:
    """Run batches until every job's next step is its Start; the leases, one per job."""
    leases = {j: store.acquire(j, executor.holder, TTL) for j in jobs}
    for _ in range(10):
        results = executor.run_batch([(j, leases[j], None) for j in jobs])
        assert all(r.error is None for r in results)
        view = {j: store.read(j).events[-1] for j in jobs}
        if all(isinstance(e, ev.SubmissionAuthorized) for e in view.values()):
            return leases
    raise AssertionError("the jobs never reached their Start")


def test_a_batch_commits_its_decisions_together_and_its_answers_together() -> None:
    clock, store, backend, jobs = _jobs(3)
    executor = Executor(backend, store, clock=clock, holder="s")
    leases = _until_start(executor, store, jobs)
    store.batches.clear()

    results = executor.run_batch([(j, leases[j], None) for j in jobs])

    assert all(isinstance(r.step, Start) and not r.conflict for r in results)
    # One commit of the three decisions, then one of the three answers.
    assert store.batches == [3, 3]
    assert sorted(backend.started) == sorted(jobs)
    for job in jobs:
        started, replied = store.read(job).events[-2:]
        assert isinstance(started, ev.AttemptStarted) and isinstance(replied, ev.AttemptReplied)
        assert replied.reply is ev.Reply.CREATED


def test_a_refused_decision_calls_nothing_and_leaves_the_others_of_its_batch_alone() -> None:
    clock, store, backend, jobs = _jobs(3)
    executor = Executor(backend, store, clock=clock, holder="s")
    leases = _until_start(executor, store, jobs)
    # Another supervisor takes the middle job over: this one's lease on it is stale.
    store.release(leases[jobs[1]])
    store.acquire(jobs[1], "other", TTL)

    results = executor.run_batch([(j, leases[j], None) for j in jobs])

    assert [r.conflict for r in results] == [False, True, False]
    assert backend.started == [jobs[0], jobs[2]]
    assert backend.env.objects_of(jobs[1]) == []
    assert not isinstance(store.read(jobs[1]).events[-1], ev.AttemptStarted)


def test_run_pass_raises_what_ended_its_job_and_a_batch_hands_it_back() -> None:
    clock, store, backend, jobs = _jobs(1)
    executor = Executor(backend, store, clock=clock, holder="s")
    lease = store.acquire(jobs[0], "s", TTL)
    missing = lease.__class__(job="nosuchjob", holder="s", token=1, expires=lease.expires)

    results = executor.run_batch([("nosuchjob", missing, None), (jobs[0], lease, None)])

    assert results[0].error is not None and "nosuchjob" in str(results[0].error)
    assert results[1].error is None and results[1].step is not None
    with pytest.raises(type(results[0].error)):
        executor.run_pass("nosuchjob", missing)


class ReadsCounted(Counting):
    """Counts its batch reads; ``down`` makes the next one fail as a lost store does."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.reads: list[int] = []
        self.down = False

    def read_many(self, jobs: Sequence[str]) -> tuple[ReadAnswer, ...]:
        self.reads.append(len(jobs))
        if self.down:
            raise Unavailable("the store is away")
        return super().read_many(jobs)


def test_a_batch_reads_its_records_in_one_call_and_a_store_away_ends_every_pass() -> None:
    clock = ManualClock()
    store = ReadsCounted(clock)
    backend = Sequential(store, shape=Shape.SLURM, auto_run=True, clock=clock)
    cluster = compose(backend, store=store, clock=clock)
    jobs = [
        job_of(
            cluster.operator.submit(JobSpec(command=["x"]), by=Actor.human("o"), supervised=True)
        )
        for _ in range(4)
    ]
    executor = Executor(backend, store, clock=clock, holder="s")
    leases = {j: store.acquire(j, "s", TTL) for j in jobs}
    batch = [(j, leases[j], None) for j in jobs]

    executor.run_batch(batch)
    assert store.reads == [4], "one read_many for the batch, no read per job"

    store.down, store.batches = True, []
    before = {j: store.read(j).revision for j in jobs}
    results = executor.run_batch(batch)
    assert all(isinstance(r.error, Unavailable) for r in results)
    # The one error is each job's answer, not raised again per job (its traceback stays short).
    assert results[0].error is not None and results[0].error.__traceback__ is not None
    assert len(traceback.extract_tb(results[0].error.__traceback__)) < 5
    assert store.batches == [], "nothing was committed"
    assert backend.started == []
    assert {j: store.read(j).revision for j in jobs} == before


class Meeting(Sequential):
    """An adapter taking two calls at once: each start waits until the other has begun, so a
    batch whose calls were made one after the other would break the barrier."""

    call_concurrency = 2

    def __init__(self, store: MemoryRecords, **kw: Any) -> None:
        super().__init__(store, **kw)
        self.barrier = threading.Barrier(2, timeout=60)
        self.met = 0

    def start(self, request: StartRequest) -> ObjectRef:
        self.barrier.wait()
        self.met += 1
        return super().start(request)


def test_calls_are_made_concurrently_within_the_bound_where_the_adapter_allows() -> None:
    clock, store, backend, jobs = _jobs(2, Meeting)
    executor = Executor(backend, store, clock=clock, holder="s", concurrency=4)
    assert executor.concurrency == 2  # the adapter's declaration caps the supervisor's bound
    leases = _until_start(executor, store, jobs)

    results = executor.run_batch([(j, leases[j], None) for j in jobs])

    assert all(r.error is None and not r.conflict for r in results)
    assert isinstance(backend, Meeting)
    assert backend.met == 2 and not backend.barrier.broken
    for job in jobs:
        last = store.read(job).events[-1]
        assert isinstance(last, ev.AttemptReplied) and last.reply is ev.Reply.CREATED, last


class Undeclared:
    """An adapter saying nothing about threads."""

    name = "undeclared"


class Declaring:
    name = "declaring"

    def __init__(self, value: object) -> None:
        self.call_concurrency = value


def test_an_adapter_that_declares_nothing_gets_its_calls_one_at_a_time() -> None:
    assert call_concurrency(Undeclared()) == 1
    assert call_concurrency(Declaring(5)) == 5
    executor = Executor(
        Undeclared(),  # type: ignore[arg-type]
        MemoryRecords(),
        clock=ManualClock(),
        holder="s",
        concurrency=8,
    )
    assert executor.concurrency == 1


@pytest.mark.parametrize("value", [0, -1, True, 2.5, "4"])
def test_a_wrong_concurrency_is_refused_naming_what(value: object) -> None:
    with pytest.raises(Invalid, match="'declaring' declares call_concurrency"):
        call_concurrency(Declaring(value))
    with pytest.raises(Invalid, match="call concurrency must be an integer"):
        Supervisor(MemoryBackend(), MemoryRecords(), call_concurrency=value)  # type: ignore[arg-type]


class CountingLeases(MemoryRecords):
    """The memory store, counting its lease calls by name."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.calls: list[str] = []

    def acquire(self, job: str, holder: str, ttl: timedelta) -> Lease:
        self.calls.append("acquire")
        return super().acquire(job, holder, ttl)

    def renew(self, lease: Lease, ttl: timedelta) -> Lease:
        self.calls.append("renew")
        return super().renew(lease, ttl)

    def acquire_many(
        self, jobs: Sequence[str], holder: str, ttl: timedelta
    ) -> tuple[Lease | Refusal, ...]:
        self.calls.append(f"acquire_many:{len(jobs)}")
        return super().acquire_many(jobs, holder, ttl)

    def renew_many(self, leases: Sequence[Lease], ttl: timedelta) -> tuple[Lease | Refusal, ...]:
        self.calls.append(f"renew_many:{len(leases)}")
        return super().renew_many(leases, ttl)


def test_ownership_of_many_jobs_takes_one_batch_to_acquire_and_one_to_renew() -> None:
    from jobdispatch.testing import Story
    from jobdispatch_supervise.ownership import Ownership

    clock = ManualClock()
    store = CountingLeases(clock)
    header = Story().header
    jobs = [f"job{i}" for i in range(5)]
    for job in jobs:
        store.create(attrs.evolve(header, job=job))
    ownership = Ownership(store, "s", TTL, clock)

    first = ownership.own_many(jobs)
    assert list(first) == jobs and store.calls == ["acquire_many:5"]

    store.calls.clear()
    clock.advance(timedelta(seconds=5))  # far from half-life: nothing to renew
    assert ownership.own_many(jobs) == first and store.calls == []

    # Past half-life, another holder has taken job2 (as after its lease lapsed unseen).
    clock.advance(timedelta(seconds=11))
    store.release(first["job2"])
    store.acquire("job2", "other", TTL)
    store.calls.clear()
    renewed = ownership.own_many(jobs)
    assert store.calls == ["renew_many:5"]
    assert list(renewed) == ["job0", "job1", "job3", "job4"]
    assert all(renewed[j].expires == clock() + TTL for j in renewed)
    assert ownership.held("job2") is None  # forgotten: the next own_many tries to acquire it
