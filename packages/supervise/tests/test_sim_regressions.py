"""Bugs the deterministic simulator (tools/sim) found in the supervisor, each pinned by its seed.

Replay a seed with ``nox -s sim -- --seed N``.
"""

from __future__ import annotations

from datetime import timedelta

from jobdispatch import ManualClock, State
from jobdispatch.job import fold
from jobdispatch.memory import MemoryBackend
from jobdispatch.records import events as ev
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.testing import SUCCESS, T0, Story
from jobdispatch_supervise.executor import Executor
from jobdispatch_supervise.sinks import EscalationMessage


class _Sink:
    """A sink named like another supervisor's, which can run code while it delivers."""

    name = "pager"

    def __init__(self) -> None:
        self.during = lambda: None
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
    story.add(ev.Escalated, id="budget:0", detail="spent")
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
    assert fold(view, clock()).escalations["budget:0"].delivered == {"pager"}
