"""Checks that what the adapter declares (capabilities, rules) is complete, stable and agrees
with what it does, plus the small optional protocols and reachability errors."""

from __future__ import annotations

from collections.abc import Callable

import attrs
from jobdispatch.errors import Unauthorized, Unreachable, Unsupported
from jobdispatch.spi import Backend, CessationSignal, IdentityWeakener
from jobdispatch.types import (
    RECOVERABLE,
    Action,
    Capability,
    CauseKind,
    JobSpec,
    ObjectState,
    RecoveryPolicy,
    Rule,
    Support,
    Tristate,
)

from jobdispatch_conformance.adapter.harness import CheckFailed, Harness, expect

__all__ = [
    "SPEC_CAPABILITIES",
    "capabilities_are_complete_and_stable",
    "ceased_once_ended",
    "identity_weakened_is_text",
    "rules_agree_with_capabilities",
    "rules_answer_each_rule_in_order",
    "spec_capabilities_are_honoured",
    "unauthorized_is_reported",
    "unreachable_is_reported",
]

#: Spec changes that use a capability. The paths are on the cluster; nothing here opens them.
SPEC_CAPABILITIES: dict[Capability, Callable[[JobSpec], JobSpec]] = {
    Capability.CONTAINER_IMAGE: lambda s: attrs.evolve(s, image="docker.io/library/busybox:1.36"),
    Capability.WORKING_DIRECTORY: lambda s: attrs.evolve(s, working_dir="/tmp"),  # noqa: S108
    Capability.OUTPUT_PATH: lambda s: attrs.evolve(s, output="/tmp/jd-conformance-%j.out"),  # noqa: S108
    Capability.PROCS_PER_NODE: lambda s: attrs.evolve(s, procs_per_node=2),
}

POLICY = RecoveryPolicy(
    [
        Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=2),
        Rule(on=[CauseKind.NODE_LOST, CauseKind.OUT_OF_MEMORY], action=Action.RESTART, budget=1),
        Rule(on=[CauseKind.TIME_LIMIT], action=Action.RESUBMIT, budget=3),
        Rule(on=[CauseKind.NON_ZERO_EXIT], action=Action.HOLD, budget=1),
        Rule(on=[CauseKind.UNKNOWN], action=Action.ESCALATE),
    ]
)


def capabilities_are_complete_and_stable(h: Harness) -> None:
    """Every capability is answered (unknown is an answer; absence is not), with a Support, and
    asking twice gives the same answers."""
    spec = h.driver.base_spec()
    first = dict(h.backend.capabilities(spec))
    missing = [str(c) for c in Capability if c not in first]
    expect(not missing, f"capabilities() leaves out {missing}; answer unknown instead")
    wrong = [str(c) for c, s in first.items() if not isinstance(s, Support)]
    expect(not wrong, f"capabilities() answers {wrong} with something other than a Support")
    expect(dict(h.backend.capabilities(spec)) == first, "capabilities() changed between calls")
    for cap, support in first.items():
        if support.answer is Tristate.UNKNOWN:
            h.note(f"capability.{cap}", "unknown")


def rules_answer_each_rule_in_order(h: Harness) -> None:
    """rules() gives one RuleSupport per rule, in the policy's order, the same every time."""
    spec = attrs.evolve(h.driver.base_spec(), recovery=POLICY)
    first = list(h.backend.rules(spec, POLICY))
    expect(
        len(first) == len(POLICY.rules),
        f"rules() answered {len(first)} rules for a policy of {len(POLICY.rules)}",
    )
    expect(list(h.backend.rules(spec, POLICY)) == first, "rules() changed between calls")
    single = [h.backend.rules(spec, RecoveryPolicy([r]))[0] for r in POLICY.rules]
    expect(single == first, "a rule's answer depends on the rules around it")


def rules_agree_with_capabilities(h: Harness) -> None:
    """A native answer yes needs the native capability not to be no, and a native capability
    answered yes must show in rules() for at least one cause; hold perform needs hold."""
    spec = h.driver.base_spec()
    for action, cap in (
        (Action.REQUEUE, Capability.NATIVE_REQUEUE),
        (Action.RESTART, Capability.NATIVE_RESTART),
    ):
        rules = [Rule(on=[k], action=action, budget=1) for k in RECOVERABLE]
        answers = [s.native.answer for s in h.backend.rules(spec, RecoveryPolicy(rules))]
        claimed = h.capability(cap)
        if claimed is Tristate.NO:
            expect(
                Tristate.YES not in answers,
                f"{cap} is answered no, yet rules() would {action} natively",
            )
        elif claimed is Tristate.YES:
            expect(
                Tristate.YES in answers,
                f"{cap} is answered yes, yet rules() never {action}s natively",
            )
    hold = Rule(on=[CauseKind.PREEMPTED], action=Action.HOLD, budget=1)
    (support,) = h.backend.rules(spec, RecoveryPolicy([hold]))
    if h.capability(Capability.HOLD) is Tristate.NO:
        expect(
            support.perform.answer is not Tristate.YES,
            "hold is answered no, yet rules() says it can perform a hold",
        )


def spec_capabilities_are_honoured(h: Harness) -> None:
    """A spec using a capability answered yes starts; answered no, Start refuses it with
    Unsupported rather than run something other than what was asked."""
    for cap, using in SPEC_CAPABILITIES.items():
        spec = using(h.driver.base_spec())
        answer = h.capability(cap)
        try:
            ref = h.start(h.request(spec=spec))
        except Unsupported as exc:
            if answer is Tristate.YES:
                raise CheckFailed(f"{cap} is answered yes, yet start refused: {exc}") from exc
            if answer is Tristate.UNKNOWN:
                h.note(f"capability.{cap}", "unknown: refused")
            continue
        if answer is Tristate.NO:
            raise CheckFailed(f"{cap} is answered no, yet start accepted a spec using it ({ref})")
        if answer is Tristate.UNKNOWN:
            h.note(f"capability.{cap}", "unknown: accepted")
        h.backend.stop(ref, "conformance: spec capability probe")


def ceased_once_ended(h: Harness) -> None:
    """A cessation signal never says "no" of an object that has ended."""
    signal = h.backend
    if not isinstance(signal, CessationSignal):
        h.skip("the adapter does not implement CessationSignal")
    ref = h.running()
    h.backend.stop(ref, "conformance: cessation")
    h.wait(ref, lambda o: o.state is ObjectState.ENDED, "ended", nudge=False)
    evidence = signal.ceased(ref)
    expect(
        evidence.ceased is not Tristate.NO, f"ceased({ref}) says no for an ended object: {evidence}"
    )


def identity_weakened_is_text(h: Harness) -> None:
    """identity_weakened answers a string: empty, or the reason."""
    weakener = h.backend
    if not isinstance(weakener, IdentityWeakener):
        h.skip("the adapter does not implement IdentityWeakener")
    answer = weakener.identity_weakened(h.driver.base_spec())
    expect(isinstance(answer, str), f"identity_weakened answered {answer!r}, not a string")


def _refused(h: Harness, make: str, error: type[Exception]) -> None:
    with h.driving():
        backend: Backend = getattr(h.driver, make)()
    try:
        for call in (
            lambda: backend.find(h.new_job()),
            lambda: backend.inspect(h.driver.unknown_ref()),
        ):
            try:
                call()
            except error:
                continue
            except Exception as exc:
                raise CheckFailed(f"{make}: expected {error.__name__}, got {exc!r}") from exc
            raise CheckFailed(f"{make}: the call succeeded; it must raise {error.__name__}")
    finally:
        backend.close()


def unreachable_is_reported(h: Harness) -> None:
    """A backend that cannot reach its cluster raises Unreachable, not an answer."""
    h.need("unreachable_backend")
    _refused(h, "unreachable_backend", Unreachable)


def unauthorized_is_reported(h: Harness) -> None:
    """A backend whose credentials are refused raises Unauthorized."""
    h.need("unauthorized_backend")
    _refused(h, "unauthorized_backend", Unauthorized)
