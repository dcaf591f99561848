"""An open carries the deadline recorded with its decision, and the memory adapter refuses it
past that deadline (spec 0001, D8; spec 0003, D2): what bounds an open decided before a cancel
and carried out after it by a process that paused in between."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from jobdispatch import CallMeta, JobSpec, ManualClock, ObjectRef, ObjectState, Rejected, codec
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.memory import history as h
from jobdispatch.records import events as ev
from jobdispatch.spi import StartRequest
from jobdispatch.testing import T0
from jobdispatch.timing import CALL_DEADLINE
from jobdispatch.types import Actor

ME = Actor.supervisor("t")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture(params=list(Shape), ids=str)
def backend(request: pytest.FixtureRequest, clock: ManualClock) -> MemoryBackend:
    return MemoryBackend(shape=request.param, clock=clock, auto_run=True)


def _start(backend: MemoryBackend) -> ObjectRef:
    spec = JobSpec(command=["train"])
    return backend.start(StartRequest(job="abc", submission=1, attempt=1, spec=spec))


def test_an_open_past_its_deadline_is_refused_and_lifts_nothing(
    backend: MemoryBackend, clock: ManualClock
) -> None:
    ref = _start(backend)
    meta = CallMeta(deadline=T0 + CALL_DEADLINE, by=ME)
    clock.advance(CALL_DEADLINE + timedelta(seconds=1))
    with pytest.raises(Rejected, match=f"open of {ref}: its deadline .* passed"):
        backend.open(ref, meta)
    assert backend.inspect(ref).state is ObjectState.GATED
    assert backend.env.history.select(h.Opened, ref=ref) == []


def test_an_open_within_its_deadline_lifts_the_gate_and_history_keeps_the_deadline(
    backend: MemoryBackend,
) -> None:
    ref = _start(backend)
    deadline = T0 + CALL_DEADLINE
    backend.open(ref, CallMeta(deadline=deadline, by=ME))
    assert backend.inspect(ref).state is ObjectState.RUNNING
    [opened] = backend.env.history.select(h.Opened, ref=ref)
    assert (opened.lifted, opened.deadline) == (True, deadline)


def test_an_open_decided_before_opens_carried_deadlines_still_decodes() -> None:
    """Records written before the field existed have no deadline: they read as None."""
    event = ev.OpenDecided(at=T0, by=ME, submission=1, ref=ObjectRef("o1"), deadline=T0)
    # The stored value is a checksum frame around the JSON (spec 0002 D3); values from before
    # frames existed are bare JSON, as this older record would be.
    raw = json.loads(codec.encode_event(event)[5:])
    assert raw["deadline"] == T0.isoformat()
    del raw["deadline"]
    old = codec.decode_event(json.dumps(raw).encode(), revision=4)
    assert isinstance(old, ev.OpenDecided) and old.deadline is None
