"""Checks of an object's life: created gated, opened once, stopped alone."""

from __future__ import annotations

from datetime import timedelta

from jobdispatch.errors import Rejected
from jobdispatch.spi import ObjectObs
from jobdispatch.types import Actor, CallMeta, CauseKind, ObjectState, Provenance

from jobdispatch_conformance.adapter.harness import CheckFailed, Harness, expect

__all__ = [
    "open_after_stop_has_no_effect",
    "open_lifts_the_gate_and_is_idempotent",
    "open_refuses_past_deadline",
    "start_creates_a_gated_object",
    "stop_affects_one_object_only",
    "stop_gated_never_runs",
    "stop_is_idempotent",
    "stop_running_is_cancelled_by_an_actor",
]


def _not_run(o: ObjectObs) -> bool:
    return o.state is ObjectState.GATED and not o.executions


def start_creates_a_gated_object(h: Harness) -> None:
    """Start creates one object under the request's discovery name, gated, and it does not run
    however long the harness waits and nudges, until it is opened."""
    request = h.request()
    ref = h.start(request)
    obs = h.inspect(ref)
    expect(obs.name == request.name, f"object {ref} is named {obs.name!r}, not {request.name!r}")
    expect(obs.identity == (request.job, 1, 1), f"{obs.name!r} does not parse to the request")
    expect(obs.state is ObjectState.GATED, f"a started object must be gated; {ref} is {obs.state}")
    h.stays(ref, _not_run, "gated and never run before open")
    found = h.backend.find(request.job)
    expect(
        [o.ref for o in found.objects] == [ref],
        f"find({request.job}) must show exactly {ref}; it shows {[o.ref for o in found.objects]}",
    )


def open_lifts_the_gate_and_is_idempotent(h: Harness) -> None:
    """Open lifts the gate; opening again, while pending or running, is success with no effect."""
    ref = h.start()
    h.backend.open(ref)
    obs = h.inspect(ref)
    expect(
        obs.state in (ObjectState.PENDING, ObjectState.RUNNING),
        f"an opened object is pending or running; {ref} is {obs.state}",
    )
    h.backend.open(ref)
    obs = h.wait(ref, lambda o: o.state is ObjectState.RUNNING, "running")
    h.backend.open(ref)
    obs = h.inspect(ref)
    expect(obs.state is ObjectState.RUNNING, f"open of a running object changed it: {obs.state}")
    expect(
        len(obs.executions) == 1,
        f"open of a running object must not start another execution: {len(obs.executions)}",
    )


def open_after_stop_has_no_effect(h: Harness) -> None:
    """Opening an object that was stopped gated is success and it never runs."""
    ref = h.start()
    h.backend.stop(ref, "conformance: stop before open")
    h.wait(ref, lambda o: o.state is ObjectState.ENDED, "ended", nudge=False)
    h.backend.open(ref)
    h.stays(
        ref,
        lambda o: o.state is ObjectState.ENDED and not o.executions,
        "ended without an execution after a late open",
    )


def open_refuses_past_deadline(h: Harness) -> None:
    """Open refuses with Rejected once the deadline its decision recorded has passed, and the
    gate stays closed; within the deadline it opens.

    This is what bounds an open decided before a cancel and carried out after it by a process
    that paused in between (docs/specs/0001-contract.md, D8): it cannot land arbitrarily late.
    """
    ref = h.start()
    me = Actor.supervisor("conformance")
    try:
        h.backend.open(ref, CallMeta(deadline=h.driver.now() - timedelta(hours=1), by=me))
    except Rejected:
        pass
    else:
        raise CheckFailed("open past its deadline must raise Rejected")
    h.stays(ref, _not_run, "gated and never run after an open refused for its deadline")
    h.backend.open(ref, CallMeta(deadline=h.driver.now() + timedelta(hours=1), by=me))
    h.wait(
        ref, lambda o: o.state in (ObjectState.PENDING, ObjectState.RUNNING), "pending or running"
    )


def stop_running_is_cancelled_by_an_actor(h: Harness) -> None:
    """Stopping a running object ends its execution with cause cancelled, provenance actor."""
    ref = h.running()
    h.backend.stop(ref, "conformance: stop a running object")
    obs = h.wait(ref, lambda o: o.state is ObjectState.ENDED, "ended", nudge=False)
    last = obs.latest
    expect(last is not None and last.cause is not None, f"{ref} ended with no cause")
    assert last is not None
    assert last.cause is not None
    expect(
        (last.cause.kind, last.cause.provenance) == (CauseKind.CANCELLED, Provenance.ACTOR),
        f"a stopped execution ends cancelled by an actor; got {last.cause.kind}, "
        f"{last.cause.provenance}",
    )


def stop_affects_one_object_only(h: Harness) -> None:
    """Stop ends the object named and no other, not even one of the same job."""
    job = h.new_job()
    first = h.running(h.request(job, attempt=1))
    second = h.running(h.request(job, attempt=2))
    gated = h.start(h.request(job, attempt=3))
    h.backend.stop(first, "conformance: stop one object")
    h.wait(first, lambda o: o.state is ObjectState.ENDED, "ended", nudge=False)
    other = h.inspect(second)
    expect(
        other.state is ObjectState.RUNNING,
        f"stopping {first} changed its sibling {second}: it is {other.state}",
    )
    expect(
        all(e.cause is None for e in other.executions),
        f"stopping {first} ended an execution of {second}",
    )
    expect(
        h.inspect(gated).state is ObjectState.GATED,
        f"stopping {first} changed the gated sibling {gated}",
    )


def stop_is_idempotent(h: Harness) -> None:
    """Stopping twice, stopping an ended object, and stopping a ref the backend does not know
    (already gone) are all success."""
    ref = h.running()
    h.backend.stop(ref, "conformance: first stop")
    h.backend.stop(ref, "conformance: second stop")
    obs = h.wait(ref, lambda o: o.state is ObjectState.ENDED, "ended", nudge=False)
    h.backend.stop(ref, "conformance: stop after end")
    again = h.inspect(ref)
    expect(
        len(again.executions) == len(obs.executions),
        "stopping an ended object changed its executions",
    )
    try:
        h.backend.stop(h.driver.unknown_ref(), "conformance: already gone")
    except Exception as exc:
        raise CheckFailed(
            f"stop of an object already gone must succeed; it raised {exc!r}"
        ) from exc


def stop_gated_never_runs(h: Harness) -> None:
    """A gated object that is stopped ends without ever running."""
    ref = h.start()
    h.backend.stop(ref, "conformance: retire a gated object")
    h.wait(ref, lambda o: o.state is ObjectState.ENDED, "ended", nudge=False)
    h.stays(ref, lambda o: not o.executions, "without executions")
