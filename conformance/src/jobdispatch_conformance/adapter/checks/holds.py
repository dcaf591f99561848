"""Checks of backend holds: placed and released by instance, under a recorded deadline."""

from __future__ import annotations

from datetime import timedelta

from jobdispatch.errors import Unsupported
from jobdispatch.spi import Holder
from jobdispatch.types import Actor, Capability, HoldMeta, ObjectState

from jobdispatch_conformance.adapter.harness import (
    Harness,
    expect,
    expect_rejected_late,
    required,
)

__all__ = ["held_object_does_not_run", "hold_refuses_past_deadline", "holds_by_instance"]

ACTOR = Actor.supervisor("conformance")


def _meta(h: Harness, instance: int, within: timedelta = timedelta(hours=1)) -> HoldMeta:
    return HoldMeta(
        instance=instance, deadline=h.driver.now() + within, by=ACTOR, reason="conformance"
    )


def _holder(h: Harness) -> Holder | None:
    return h.backend if isinstance(h.backend, Holder) else None


def _required_holder(h: Harness) -> Holder:
    return required(_holder(h), "hold is answered yes but the adapter is not a Holder")


def _refuse(h: Harness) -> None:
    holder = _holder(h)
    if holder is None:
        raise Unsupported("not a Holder")
    holder.hold(h.start(), _meta(h, 1))


def holds_by_instance(h: Harness) -> None:
    """A hold shows its instance; releasing another instance leaves it; releasing it lifts it."""

    def works() -> None:
        holder = _required_holder(h)
        ref = h.start()
        holder.hold(ref, _meta(h, 7))
        obs = h.wait(ref, lambda o: o.hold_instance is not None, "held")
        expect(
            obs.state is ObjectState.HELD and obs.hold_instance == 7,
            f"after hold 7, {ref} shows {obs.state} with instance {obs.hold_instance}",
        )
        holder.release(ref, _meta(h, 8))
        obs = h.stays(ref, lambda o: o.hold_instance == 7, "held by instance 7 after release 8")
        holder.release(ref, _meta(h, 7))
        obs = h.wait(ref, lambda o: o.hold_instance is None, "released", nudge=False)
        expect(
            obs.state is ObjectState.GATED,
            f"releasing a gated object's hold leaves it gated; it is {obs.state}",
        )

    h.gate(Capability.HOLD, works, lambda: _refuse(h))


def hold_refuses_past_deadline(h: Harness) -> None:
    """Hold and release refuse with Rejected once their recorded deadline has passed."""

    def works() -> None:
        holder = _required_holder(h)
        ref = h.start()
        late = _meta(h, 1, within=-timedelta(hours=1))
        expect_rejected_late((holder.hold, holder.release), ref, late)
        expect(h.inspect(ref).hold_instance is None, "a hold refused for its deadline stands")

    h.gate(Capability.HOLD, works, lambda: _refuse(h))


def held_object_does_not_run(h: Harness) -> None:
    """An object held before it is opened does not run when opened; it runs once released."""

    def works() -> None:
        holder = _required_holder(h)
        ref = h.start()
        holder.hold(ref, _meta(h, 3))
        h.backend.open(ref)
        h.stays(
            ref,
            lambda o: o.state is ObjectState.HELD and not o.executions,
            "held and not running after open",
        )
        holder.release(ref, _meta(h, 3))
        h.wait(ref, lambda o: o.state is ObjectState.RUNNING, "running after release")

    h.gate(Capability.HOLD, works, lambda: _refuse(h))
