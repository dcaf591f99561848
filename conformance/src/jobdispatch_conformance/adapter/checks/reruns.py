"""Checks of an object that runs more than once: native requeue or restart, requested requeue,
and the requeue bit. Each execution must keep its own index and its own cause."""

from __future__ import annotations

from datetime import timedelta

from jobdispatch.errors import Unsupported
from jobdispatch.spi import NativeOffer, NativePolicyCompiler, ObjectObs, ObjectRef, Requeuer
from jobdispatch.types import (
    Action,
    Actor,
    CallMeta,
    CauseKind,
    ObjectState,
    Provenance,
    RecoveryPolicy,
    Rule,
    Tristate,
)

from jobdispatch_conformance.adapter.checks.endings import ENDINGS
from jobdispatch_conformance.adapter.harness import (
    CheckFailed,
    Harness,
    expect,
    expect_rejected_late,
)

__all__ = [
    "native_rerun_tells_executions_apart",
    "requeue_bit_is_restored",
    "requeue_refuses_past_deadline",
    "requeue_reruns_as_a_new_execution",
]

ACTOR = Actor.supervisor("conformance")
REQUEUE_PROBE = Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=1)


def _told_apart(obs: ObjectObs, ref: ObjectRef) -> None:
    indices = [e.index for e in obs.executions]
    expect(
        len(set(indices)) == len(indices),
        f"executions of {ref} must have distinct indices; got {indices}",
    )
    expect(indices == sorted(indices), f"executions of {ref} are out of order: {indices}")
    ended = [e for e in obs.executions if e.ended_at is not None]
    expect(all(e.cause is not None for e in ended), f"an ended execution of {ref} has no cause")


def _native_rule(h: Harness) -> tuple[Rule, str] | None:
    """A one-cause rule the backend would enforce natively, for a cause the driver can cause."""
    for action in (Action.REQUEUE, Action.RESTART):
        for operation, ending in ENDINGS.items():
            if not ending.kind.recoverable or not h.driver.can(operation):
                continue
            rule = Rule(on=[ending.kind], action=action, budget=1)
            spec = h.driver.base_spec()
            (support,) = h.backend.rules(spec, RecoveryPolicy([rule]))
            if support.native.answer is Tristate.YES:
                return rule, operation
    return None


def native_rerun_tells_executions_apart(h: Harness) -> None:
    """A rule the backend enforces natively reruns the object as a new execution (index + 1),
    the ended execution keeps its cause, and once the budget is spent the object ends."""
    found = _native_rule(h)
    if found is None:
        h.skip("no native requeue or restart rule for a cause the driver can cause")
    rule, operation = found
    spec = h.driver.base_spec()
    import attrs

    spec = attrs.evolve(spec, recovery=RecoveryPolicy([rule]))
    if isinstance(h.backend, NativePolicyCompiler):
        offer = h.backend.compile(spec, {0: rule}, {0: 1})
    else:
        offer = NativeOffer(rules=(0,), remaining={0: 1})
    expect(offer.rules == (0,), f"compile of a native rule must offer it; offered {offer.rules}")
    ref = h.running(h.request(spec=spec, native=offer))
    with h.driving():
        ENDINGS[operation].drive(h.driver, ref)
    # The rerun may be visible before the ended execution's cause is (Slurm's accounting
    # lands a moment after squeue shows the requeued job running, 0007): wait for both.
    obs = h.wait(
        ref,
        lambda o: (
            (
                any(e.index > 0 and e.state is ObjectState.RUNNING for e in o.executions)
                and o.executions[0].cause is not None
            )
            or o.state is ObjectState.ENDED
        ),
        f"rerun after {operation}, with the first execution's cause known",
    )
    _told_apart(obs, ref)
    expect(
        obs.state is not ObjectState.ENDED,
        f"{ref} ended after {operation} although rule {rule.action} on {rule.on} was offered",
    )
    first = obs.executions[0]
    expect(
        first.cause is not None and first.cause.kind is ENDINGS[operation].kind,
        f"the first execution must keep its cause {ENDINGS[operation].kind}: {first.cause}",
    )
    with h.driving():
        ENDINGS[operation].drive(h.driver, ref)
    obs = h.wait(
        ref, lambda o: o.state is ObjectState.ENDED, "ended once the budget is spent", nudge=False
    )
    _told_apart(obs, ref)
    expect(
        len(obs.executions) == 2,
        f"a budget of 1 allows one rerun; {ref} ran {len(obs.executions)} times",
    )


def _perform_requeue(h: Harness) -> Tristate:
    (support,) = h.backend.rules(h.driver.base_spec(), RecoveryPolicy([REQUEUE_PROBE]))
    return support.perform.answer


def _meta(h: Harness, within: timedelta = timedelta(hours=1)) -> CallMeta:
    return CallMeta(deadline=h.driver.now() + within, by=ACTOR, reason="conformance")


def _requeuer(h: Harness) -> Requeuer | None:
    answer = _perform_requeue(h)
    requeuer = h.backend if isinstance(h.backend, Requeuer) else None
    if answer is Tristate.NO:
        if requeuer is not None:
            try:
                requeuer.requeue(h.start(), _meta(h))
            except Unsupported:
                return None
            raise CheckFailed(
                "rules() answers requeue perform no, yet requeue did not raise Unsupported"
            )
        return None
    if answer is Tristate.YES:
        expect(
            requeuer is not None,
            "rules() answers requeue perform yes but the adapter is not a Requeuer",
        )
    if requeuer is None:
        h.skip("the adapter is not a Requeuer")
    return requeuer


def requeue_reruns_as_a_new_execution(h: Harness) -> None:
    """Requeue ends the running execution with cause requeued (provenance actor) and the object
    runs again as a new execution with the next index."""
    requeuer = _requeuer(h)
    if requeuer is None:
        return
    ref = h.running()
    requeuer.requeue(ref, _meta(h))
    obs = h.wait(
        ref,
        lambda o: len(o.executions) >= 2 and o.state is ObjectState.RUNNING,
        "running again after requeue",
    )
    _told_apart(obs, ref)
    cause = obs.executions[0].cause
    expect(
        cause is not None
        and (cause.kind, cause.provenance) == (CauseKind.REQUEUED, Provenance.ACTOR),
        f"a requeued execution ends requeued by an actor; got {cause}",
    )
    expect(
        obs.executions[-1].index == obs.executions[0].index + 1,
        f"the rerun must be the next execution: {[e.index for e in obs.executions]}",
    )


def requeue_refuses_past_deadline(h: Harness) -> None:
    """Requeue and restore refuse with Rejected once their recorded deadline has passed."""
    requeuer = _requeuer(h)
    if requeuer is None:
        return
    ref = h.running()
    late = _meta(h, within=-timedelta(hours=1))
    expect_rejected_late((requeuer.requeue, requeuer.restore_requeue_bit), ref, late)
    obs = h.inspect(ref)
    expect(
        len(obs.executions) == 1 and obs.state is ObjectState.RUNNING,
        f"a requeue refused for its deadline changed {ref}: {obs.state}",
    )


def requeue_bit_is_restored(h: Harness) -> None:
    """A requeue bit left set shows as True, and restore clears it."""
    requeuer = _requeuer(h)
    if requeuer is None:
        return
    h.need("set_requeue_bit")
    ref = h.running()
    with h.driving():
        h.driver.set_requeue_bit(ref)
    h.wait(ref, lambda o: o.requeue_bit is True, "showing its requeue bit set")
    requeuer.restore_requeue_bit(ref, _meta(h))
    h.wait(ref, lambda o: o.requeue_bit is False, "showing its requeue bit cleared")
