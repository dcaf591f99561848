"""A deterministic harness for driving the real supervisor through scenarios.

The supervisor runs in the test's own thread with a ManualClock; its ``sleep`` is the
scenario's ``tick``, which advances the clock and lets the scenario play the cluster's part
(preempt the running object, complete it...) when the conditions it waits for hold.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import attrs
import jobdispatch
import pytest
from jobdispatch import Actor, JobSpec, ManualClock, ObjectState, State, Status
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.memory.history import LiveSpan
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.spi import ObjectRef
from jobdispatch.testing import eventually, job_of
from jobdispatch_supervise import Supervisor
from jobdispatch_supervise.sinks import Sink

ME = Actor.human("ops")


@contextmanager
def serving(sup: Supervisor) -> Iterator[threading.Thread]:
    """The supervisor's ``serve`` loop on a thread of its own for the block (the thread, to
    ask whether it still serves); stopped and joined after it, whatever the block raised."""
    thread = threading.Thread(target=sup.serve, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        sup.stop()
        thread.join(timeout=10)


def supervising(
    supervisor: Supervisor, job: str, mode: str
) -> tuple[threading.Thread, list[BaseException]]:
    """The supervisor running ``job`` to its end (``mode`` "run") or serving (``serve``) on a
    thread of its own; whatever it raised is in the list returned beside the thread."""
    errors: list[BaseException] = []

    def go() -> None:
        try:
            supervisor.run(job) if mode == "run" else supervisor.serve()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread, errors


def slurm_jobs(n: int) -> tuple[MemoryBackend, MemoryRecords, jobdispatch.Cluster, list[str]]:
    """A Slurm-shaped memory backend that runs what it starts, a memory store, the cluster
    over both, and ``n`` supervised jobs submitted to it (each ``x``, no rules)."""
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    store = MemoryRecords()
    cluster = jobdispatch.compose(backend, store=store)
    jobs = [
        job_of(cluster.operator.submit(JobSpec(command=["x"]), by=ME, supervised=True))
        for _ in range(n)
    ]
    return backend, store, cluster, jobs


def wait_all_running(cluster: jobdispatch.Cluster, jobs: Sequence[str]) -> None:
    """Wait until the observer reports every one of ``jobs`` running."""
    eventually(
        lambda: [cluster.observer.get(j).state for j in jobs],
        "every job running",
        holds=lambda states: all(s is State.RUNNING for s in states),
    )


@attrs.define
class Event:
    """Something the cluster or a person does once ``when`` holds."""

    when: Callable[[Status], bool]
    do: Callable[[Status], None]
    done: bool = False


@attrs.define
class Scenario:
    shape: Shape = Shape.SLURM
    clock: ManualClock = attrs.Factory(ManualClock)
    backend: MemoryBackend = attrs.field(init=False)
    store: MemoryRecords = attrs.field(init=False)
    cluster: jobdispatch.Cluster = attrs.field(init=False)
    events: list[Event] = attrs.Factory(list)
    job: str = ""
    ticks: int = 0
    sinks: list[Sink] = attrs.Factory(list)

    def __attrs_post_init__(self) -> None:
        self.backend = MemoryBackend(shape=self.shape, auto_run=True, clock=self.clock)
        self.store = MemoryRecords(clock=self.clock)
        self.cluster = jobdispatch.compose(self.backend, store=self.store, clock=self.clock)

    def submit(self, spec: JobSpec, **options: Any) -> jobdispatch.Plan:
        options.setdefault("supervised", True)
        plan = self.cluster.operator.submit(spec, by=ME, **options)
        self.job = job_of(plan)
        return plan

    def on(self, when: Callable[[Status], bool], do: Callable[[Status], None]) -> Scenario:
        self.events.append(Event(when, do))
        return self

    def status(self) -> Status:
        return self.cluster.observer.get(self.job)

    def tick(self, seconds: float) -> None:
        self.ticks += 1
        if self.ticks > 5000:
            raise AssertionError(f"the scenario did not settle: {self.status()}")
        self.clock.advance(max(seconds, 0.001))
        for event in self.events:
            if not event.done:
                status = self.status()
                if event.when(status):
                    event.done = True
                    event.do(status)

    def supervisor(self, **kw: Any) -> Supervisor:
        kw.setdefault("sinks", self.sinks)
        return Supervisor(
            self.backend, self.store, clock=self.clock, sleep=self.tick, poll=1.0, **kw
        )

    def run(self) -> Status:
        self.supervisor().run(self.job)
        return self.status()

    # ---------------------------------------------------------------- conditions

    def running(self, n: int) -> Callable[[Status], bool]:
        def check(s: Status) -> bool:
            return len(s.submissions) >= n and s.submissions[n - 1].state is ObjectState.RUNNING

        return check

    def preempting(self, n: int) -> Callable[[Status], None]:
        """An action that preempts submission ``n``'s object, as the scheduler does."""
        return lambda s: self.backend.env.preempt(self.canonical(s, n))

    def canonical(self, s: Status, n: int) -> ObjectRef:
        ref = s.submissions[n - 1].canonical
        assert ref is not None
        return ref

    def live_overlaps(self) -> list[tuple[LiveSpan, LiveSpan]]:
        return self.backend.env.history.overlapping_live(self.job)


@pytest.fixture(params=[Shape.SLURM, Shape.KUBEFLOW], ids=["slurm", "kubeflow"])
def scenario(request: pytest.FixtureRequest) -> Scenario:
    return Scenario(shape=request.param)


@pytest.fixture
def slurm() -> Scenario:
    return Scenario(shape=Shape.SLURM)


@pytest.fixture
def kubeflow() -> Scenario:
    return Scenario(shape=Shape.KUBEFLOW)


HOUR = timedelta(hours=1)
