"""Bugs the deterministic simulator (tools/sim) found in the supervisor, each pinned by its seed.

Replay a seed with ``nox -s sim -- --seed N``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from jobdispatch import (
    CallMeta,
    CauseKind,
    JobSpec,
    ManualClock,
    ObjectRef,
    State,
    compose,
)
from jobdispatch.job import fold
from jobdispatch.memory import MemoryBackend
from jobdispatch.memory import history as h
from jobdispatch.records import events as ev
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.steps import Open
from jobdispatch.testing import PERSON, SUCCESS, T0, Story, job_of
from jobdispatch.timing import CALL_DEADLINE
from jobdispatch.triggers import BudgetSpent
from jobdispatch_supervise.executor import Executor
from jobdispatch_supervise.sinks import EscalationMessage


class _Sink:
    """A sink named like another supervisor's, which can run code while it delivers."""

    name = "pager"

    def __init__(self) -> None:
        self.during: Callable[[], object] = lambda: None
        self.got: list[str] = []

    def deliver(self, message: EscalationMessage) -> None:
        self.got.append(message.id)
        self.during()


def test_seed_346_two_supervisors_delivering_one_escalation_record_it_once() -> None:
    """Seed 346, invariant 6: supervisor A delivered an escalation and, before it recorded the
    delivery, supervisor B delivered and recorded it too. A's commit met a Conflict, moved to
    the new revision and recorded the delivery a second time, and ``fold`` refused the record
    from then on ("delivered to pager twice"). A now sees B's record and adds nothing."""
    story = Story().authorize().attempt().reply(1, 1, "o1").canonical(1, "o1").open(1, "o1")
    story.ended(1, "o1", SUCCESS)
    story.add(ev.Escalated, id=BudgetSpent(0), detail="spent")
    story.add(ev.OutcomeDecided, state=State.SUCCEEDED, cause=SUCCESS).add(ev.Settled)
    clock = ManualClock(T0)
    store = MemoryRecords(clock)
    store.create(story.header, story.events)
    backend = MemoryBackend(clock=clock)
    sink_a, sink_b = _Sink(), _Sink()
    a = Executor(backend, store, clock=clock, holder="a", sinks=[sink_a])
    b = Executor(backend, store, clock=clock, holder="b", sinks=[sink_b])
    lease = store.acquire("job1", "a", timedelta(seconds=30))
    sink_a.during = lambda: b.run_pass("job1", lease)

    a.run_pass("job1", lease)

    assert sink_a.got == sink_b.got == ["budget:0"]
    view = store.read("job1")
    delivered = [e for e in view.events if isinstance(e, ev.EscalationDelivered)]
    assert len(delivered) == 1
    assert fold(view, clock()).escalations[BudgetSpent(0)].delivered == {"pager"}


class _OperatorDied(BaseException):
    """The operator's process dying: nothing after this point of its cancel runs."""


class _Proxy:
    """The backend as one process sees it: every call delegated, ``open`` and ``stop`` through
    hooks that play a pause or a death at that very point."""

    def __init__(self, inner: MemoryBackend) -> None:
        self.inner = inner
        self.before_open: Callable[[], object] = lambda: None
        self.stop_dies = False

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def open(self, ref: ObjectRef, meta: CallMeta | None = None) -> None:
        self.before_open()
        self.inner.open(ref, meta)

    def stop(self, ref: ObjectRef, reason: str) -> None:
        if self.stop_dies:
            raise _OperatorDied
        self.inner.stop(ref, reason)


def _paused_open_across_a_cancel(
    pause: timedelta,
) -> tuple[MemoryBackend, MemoryRecords, str, ManualClock]:
    """Seed 1008073's situation, through the public API: a supervisor commits open-decided and
    pauses before its open call; a person cancels; the operator's process dies after the
    cancel's commit and before its stops; after ``pause`` the supervisor wakes and makes its
    call. Then passes run until the job settles."""
    clock = ManualClock(T0)
    store = MemoryRecords(clock)
    backend = MemoryBackend(clock=clock, auto_run=True)
    mine, theirs = _Proxy(backend), _Proxy(backend)
    theirs.stop_dies = True
    spec = JobSpec(command=["train"], name="c")
    job = job_of(compose(backend, store=store, clock=clock).operator.submit(spec, by=PERSON))
    operator = compose(theirs, store=store, clock=clock).operator  # type: ignore[arg-type]
    executor = Executor(mine, store, clock=clock, holder="a")  # type: ignore[arg-type]
    lease = store.acquire(job, "a", timedelta(hours=1))

    def cancel_then_die() -> None:
        mine.before_open = lambda: None  # the first open call only
        with pytest.raises(_OperatorDied):
            operator.cancel(job, by=PERSON, reason="wrong data")
        clock.advance(pause)

    mine.before_open = cancel_then_die
    kinds = []
    for _ in range(30):
        done = executor.run_pass(job, lease)
        kinds.append(type(done.step) if done.step is not None else None)
        if done.settled:
            break
        clock.advance(timedelta(seconds=1))
    assert Open in kinds and done.settled, kinds
    return backend, store, job, clock


def test_seed_1008073_an_open_decided_before_a_cancel_is_refused_past_its_deadline() -> None:
    """Seed 1008073, invariant 4: an open decided before a cancel was carried out after it, by
    a supervisor that paused between its decision and its call while the operator's process
    died before its stops. Nothing can keep a paused process from calling; what bounds it is
    the deadline now recorded with the decision, which the adapter enforces. Woken past it, the
    call is refused: the cancelled job's program never starts, the object is stopped gated."""
    backend, store, job, clock = _paused_open_across_a_cancel(CALL_DEADLINE + timedelta(seconds=1))

    history = backend.env.history
    assert not history.select(h.ExecutionStarted)
    assert [e.lifted for e in history.select(h.Opened)] == []
    final = fold(store.read(job), clock())
    assert final.settled and final.outcome is not None
    assert final.outcome.state is State.CANCELLED
    decided = [e for e in store.read(job).events if isinstance(e, ev.OpenDecided)]
    assert [e.deadline for e in decided] == [e.at + CALL_DEADLINE for e in decided]


def test_an_open_decided_before_a_cancel_within_its_deadline_runs_and_is_stopped() -> None:
    """The limit of that promise (spec 0001, D8): woken within the deadline, the late call
    lifts the gate, since no scheduler knows of the cancel until a stop reaches it. The next
    pass stops the object, and the execution ends cancelled by an actor."""
    backend, store, job, clock = _paused_open_across_a_cancel(timedelta(seconds=1))

    history = backend.env.history
    assert [e.lifted for e in history.select(h.Opened)] == [True]
    ends = history.select(h.ExecutionEnded)
    assert [e.cause.kind for e in ends] == [CauseKind.CANCELLED]
    final = fold(store.read(job), clock())
    assert final.settled and final.outcome is not None
    assert final.outcome.state is State.CANCELLED
