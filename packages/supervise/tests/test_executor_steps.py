"""The executor runs every step by the step's own parts: its decision, its call, its answer.

These pin what the one generic path does where the fifteen methods before it differed: a
recorded call on an ability the adapter lacks is issued and answered as failed, like any other
failed call, so the record says what was tried and why it did not happen.
"""

from __future__ import annotations

from datetime import timedelta

from jobdispatch import ManualClock, ObjectState
from jobdispatch.records import events as ev
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.records.store import Lease
from jobdispatch.spi import Discovery
from jobdispatch.steps import BackendRelease, Observe
from jobdispatch.testing import T0, Story, execution, observation
from jobdispatch_supervise.executor import Executor


class _NoAbilities:
    """An adapter with none of the optional abilities (no Holder, no Requeuer)."""


def _executor_on(story: Story, clock: ManualClock) -> tuple[Executor, MemoryRecords]:
    store = MemoryRecords(clock)
    store.create(story.header, story.events)
    return Executor(_NoAbilities(), store, clock=clock, holder="s"), store  # type: ignore[arg-type]


def test_a_release_on_an_adapter_that_cannot_hold_is_issued_and_answered_failed() -> None:
    # Row H2: the backend shows hold instance 1, which no longer stands. The adapter has no
    # release (it is no Holder): the call is recorded, and its answer says why it failed.
    story = Story().launched(1, "o1", running=False)
    held = observation("job1", 1, 1, "o1", ObjectState.HELD, execution(0), hold_instance=1)
    story.observe(held)
    clock = ManualClock(T0)
    executor, store = _executor_on(story, clock)
    lease = store.acquire("job1", "s", timedelta(seconds=30))

    done = executor.run_pass("job1", lease, Discovery(job="job1", objects=(held,), at=clock()))

    assert isinstance(done.step, BackendRelease) and not done.conflict
    issued, answered = store.read("job1").events[-2:]
    assert isinstance(issued, ev.CallIssued) and issued.op is ev.CallOp.RELEASE
    assert issued.instance == 1 and issued.token == lease.token
    assert isinstance(answered, ev.CallAnswered)
    assert (answered.call, answered.ok) == (len(story.events) + 1, False)
    assert answered.detail == "unsupported: the adapter cannot hold"


def test_observations_are_committed_at_the_revision_read_without_the_lease() -> None:
    # Observe is the one step not fenced: its evidence lands whoever holds the lease.
    story = Story().launched(1, "o1", running=False)
    clock = ManualClock(T0)
    executor, store = _executor_on(story, clock)
    other = store.acquire("job1", "someone-else", timedelta(seconds=30))
    running = observation("job1", 1, 1, "o1", ObjectState.RUNNING, execution(0))

    done = executor.run_pass("job1", other, Discovery(job="job1", objects=(running,), at=clock()))

    assert done.step == Observe(seen=(running,)) and not done.conflict
    last = store.read("job1").events[-1]
    assert isinstance(last, ev.Observed) and last.obs == running and last.token is None


def _held_unrecorded() -> tuple[Executor, MemoryRecords, Lease, Discovery]:
    """A launched job whose object the backend shows held by a hold the record lacks: its
    first pass observes it (a step that only commits), its next decides a release (a call)."""
    story = Story().launched(1, "o1", running=False)
    held = observation("job1", 1, 1, "o1", ObjectState.HELD, execution(0), hold_instance=1)
    clock = ManualClock(T0)
    executor, store = _executor_on(story, clock)
    lease = store.acquire("job1", "s", timedelta(seconds=30))
    found = Discovery(job="job1", objects=(held,), at=clock())
    return executor, store, lease, found


def test_a_pass_that_only_committed_hands_back_the_record_as_it_stands() -> None:
    # Observe commits and calls nothing: the record is what the pass read plus its events, so
    # the pass hands it back (the next round need not read it). A step that calls does not.
    executor, store, lease, found = _held_unrecorded()

    observed = executor.run_pass("job1", lease, found)
    assert isinstance(observed.step, Observe)
    assert observed.view == store.read("job1")

    called = executor.run_batch([("job1", lease, found)], known={"job1": observed.view})[0]
    assert isinstance(called.step, BackendRelease) and not called.conflict
    assert called.view is None
    assert isinstance(store.read("job1").events[-2], ev.CallIssued)


def test_a_decision_computed_on_a_known_record_that_moved_is_refused() -> None:
    # The record moved after the pass that handed it back (another supervisor recorded the
    # same observation): the next pass, computed on the known record, decides a release, and
    # its commit is refused at the revision it was computed from. Nothing lands, nothing is
    # called; the pass after it reads the record again.
    executor, store, lease, found = _held_unrecorded()
    observed = executor.run_pass("job1", lease, found)
    assert observed.view is not None
    moved = store.append("job1", [observed.view.events[-1]], expect_revision=observed.view.revision)

    refused = executor.run_batch([("job1", lease, found)], known={"job1": observed.view})[0]

    assert isinstance(refused.step, BackendRelease) and refused.conflict
    assert refused.view is None
    assert store.read("job1").revision == moved
    assert not any(isinstance(e, ev.CallIssued) for e in store.read("job1").events)
