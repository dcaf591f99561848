"""Holds by instance, requeue and its bit, deadlines, cessation, output and watch on the memory
adapter."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from jobdispatch import (
    Actor,
    CallMeta,
    CauseKind,
    HoldMeta,
    JobSpec,
    ManualClock,
    ObjectRef,
    ObjectState,
    Provenance,
    Rejected,
    StartRequest,
    Tristate,
    Unsupported,
)
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.memory import history as h

BOB = Actor.human("bob")


def start(backend: MemoryBackend, k: int = 1) -> ObjectRef:
    spec = JobSpec(command=["x"])
    return backend.start(StartRequest(job="abc", submission=1, attempt=k, spec=spec))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def hold_meta(clock: ManualClock, instance: int, within: float = 60) -> HoldMeta:
    return HoldMeta(instance=instance, deadline=clock() + timedelta(seconds=within), by=BOB)


def call_meta(clock: ManualClock, within: float = 60) -> CallMeta:
    return CallMeta(deadline=clock() + timedelta(seconds=within), by=BOB, reason="operator")


@pytest.mark.parametrize("shape", list(Shape), ids=str)
def test_release_lifts_only_the_named_instance(shape: Shape, clock: ManualClock) -> None:
    backend = MemoryBackend(shape=shape, clock=clock)
    ref = start(backend)
    backend.hold(ref, hold_meta(clock, 1))
    backend.open(ref)
    obs = backend.inspect(ref)
    assert (obs.state, obs.hold_instance) == (ObjectState.HELD, 1)
    backend.release(ref, hold_meta(clock, 2))
    assert backend.inspect(ref).hold_instance == 1
    backend.release(ref, hold_meta(clock, 1))
    obs = backend.inspect(ref)
    assert (obs.state, obs.hold_instance) == (ObjectState.PENDING, None)
    lifted = [(e.instance, e.lifted) for e in backend.env.history.select(h.Released)]
    assert lifted == [(2, False), (1, True)]


def test_a_held_object_does_not_run_and_release_lets_auto_run_start_it(clock: ManualClock) -> None:
    backend = MemoryBackend(auto_run=True, clock=clock)
    ref = start(backend)
    backend.open(ref)  # auto_run: running at once, so hold a second one before opening it
    other = start(backend, k=2)
    backend.hold(other, hold_meta(clock, 5))
    backend.open(other)
    assert backend.inspect(other).state is ObjectState.HELD
    backend.release(other, hold_meta(clock, 5))
    assert backend.inspect(other).state is ObjectState.RUNNING
    with pytest.raises(Rejected, match="running"):
        backend.hold(ref, hold_meta(clock, 6))


def test_hold_and_release_refuse_past_their_deadline(clock: ManualClock) -> None:
    backend = MemoryBackend(clock=clock)
    ref = start(backend)
    late = hold_meta(clock, 1, within=10)
    clock.advance(11)
    with pytest.raises(Rejected, match="deadline"):
        backend.hold(ref, late)
    backend.hold(ref, hold_meta(clock, 1, within=10))
    clock.advance(11)
    with pytest.raises(Rejected, match="deadline"):
        backend.release(ref, late)
    assert backend.inspect(ref).hold_instance == 1


def test_a_hold_declared_unsupported_is_refused(clock: ManualClock) -> None:
    backend = MemoryBackend.from_config({"capabilities": {"hold": "no"}}, clock=clock)
    with pytest.raises(Unsupported):
        backend.hold(start(backend), hold_meta(clock, 1))


def test_requeue_ends_the_running_execution_and_reruns(clock: ManualClock) -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=clock)
    ref = start(backend)
    backend.open(ref)
    clock.advance(5)
    backend.requeue(ref, call_meta(clock))
    obs = backend.inspect(ref)
    assert [e.index for e in obs.executions] == [0, 1]
    first = obs.executions[0].cause
    assert first is not None
    assert (first.kind, first.provenance, first.actor) == (
        CauseKind.REQUEUED,
        Provenance.ACTOR,
        BOB,
    )
    assert obs.state is ObjectState.RUNNING
    backend.env.complete(ref)
    backend.requeue(ref, call_meta(clock))  # an ended object comes back and runs again
    assert [e.index for e in backend.inspect(ref).executions] == [0, 1, 2]


def test_requeue_refuses_past_its_deadline_and_on_kubeflow(clock: ManualClock) -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=clock)
    ref = start(backend)
    backend.open(ref)
    meta = call_meta(clock, within=1)
    clock.advance(2)
    with pytest.raises(Rejected):
        backend.requeue(ref, meta)
    kube = MemoryBackend(shape=Shape.KUBEFLOW, clock=clock)
    with pytest.raises(Unsupported):
        kube.requeue(start(kube), call_meta(clock))


def test_a_requeue_bit_left_set_requeues_until_restored(clock: ManualClock) -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=clock)
    ref = start(backend)
    backend.open(ref)
    assert backend.inspect(ref).requeue_bit is False
    backend.env.set_requeue_bit(ref, True)
    assert backend.inspect(ref).requeue_bit is True
    backend.env.preempt(ref)
    assert backend.inspect(ref).state is ObjectState.RUNNING
    backend.restore_requeue_bit(ref, call_meta(clock))
    assert backend.inspect(ref).requeue_bit is False
    backend.env.preempt(ref)
    assert backend.inspect(ref).state is ObjectState.ENDED


def test_ceased_is_yes_once_ended_else_what_the_site_says(clock: ManualClock) -> None:
    backend = MemoryBackend(auto_run=True, clock=clock)
    ref = start(backend)
    backend.open(ref)
    assert backend.ceased(ref).ceased is Tristate.UNKNOWN
    backend.env.set_ceased(ref, Tristate.NO)
    assert backend.ceased(ref).ceased is Tristate.NO
    backend.stop(ref, "cancel")
    evidence = backend.ceased(ref)
    assert (evidence.ceased, evidence.at) == (Tristate.YES, clock())


def test_identity_is_weakened_only_where_ranks_restart() -> None:
    spec = JobSpec(command=["x"])
    assert MemoryBackend(shape=Shape.SLURM).identity_weakened(spec) == ""
    assert MemoryBackend(shape=Shape.KUBEFLOW).identity_weakened(spec) == ""
    kube = MemoryBackend.from_config({"shape": "kubeflow", "allow_rank_restart": True})
    assert "rank" in kube.identity_weakened(spec)


def test_output_read_and_follow() -> None:
    backend = MemoryBackend(auto_run=True)
    ref = start(backend)
    backend.open(ref)
    backend.env.write_output(ref, "step 1\n")
    backend.env.write_output(ref, b"oops\n", stream="stderr", rank=1)
    assert backend.output(ref).read() == b"step 1\n"
    assert backend.output(ref, stream="stderr", rank=1).read() == b"oops\n"
    stream = backend.output(ref, follow=True)
    assert stream.read1(100) == b"step 1\n"  # type: ignore[attr-defined]

    def finish() -> None:
        backend.env.write_output(ref, "step 2\n")
        backend.env.complete(ref)

    writer = threading.Thread(target=finish)
    writer.start()
    assert stream.read() == b"step 2\n"  # blocks until the object ended
    writer.join()


def test_watch_yields_the_present_then_every_change() -> None:
    backend = MemoryBackend()
    ref = start(backend)
    start_other = backend.start(
        StartRequest(job="zzz", submission=1, attempt=1, spec=JobSpec(command=["x"]))
    )
    watch = backend.watch("abc")
    assert next(watch).state is ObjectState.GATED
    backend.open(ref)
    backend.env.run(ref)
    backend.stop(start_other, "not watched")
    assert [o.state for o in watch] == [ObjectState.PENDING, ObjectState.RUNNING]


def test_a_held_object_that_was_never_opened_says_so(clock: ManualClock) -> None:
    backend = MemoryBackend(clock=clock)
    ref = start(backend)
    backend.hold(ref, hold_meta(clock, 1))
    assert backend.inspect(ref).state is ObjectState.HELD
    assert "gate" in backend.inspect(ref).detail
    backend.open(ref)
    assert backend.inspect(ref).detail == ""
