"""The plan: Submit's decision, made before anything is created.

Every recovery rule gets an enforcer, in this order (docs/specs/0001-contract.md, "The plan"):

1. the spec is validated, every problem at once;
2. under a shared checkpoint, every rule becomes a 24-hour hold for a person;
3. the backend answers, per rule, whether it would enforce it natively and whether it can
   perform its action when a supervisor asks;
4. the enforcer is the backend when it enforces natively, else the supervisor when the job is
   supervised and the backend can perform the action, else nobody;
5. an unknown answer is refused unless the caller accepted it naming an enforcer
   (``accept_unverified``); nobody is refused unless the caller accepted it
   (``accept_unenforced``), and then a matching cause fails the job with an escalation.

The plan also records the causes no rule covers, the checkpoint mode, the unmatched policy, the
capability answers it rests on and whether the job's execution identity is weakened. It does no
I/O of its own: everything it knows comes from the backend's answers.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import timedelta

import attrs

from jobdispatch.config import validate_config
from jobdispatch.errors import Invalid, Problem, Rejected, Unsupported, ValidationError
from jobdispatch.fit import fit
from jobdispatch.spi import (
    Backend,
    IdentityWeakener,
    InventoryReporter,
    PlacementChecker,
    ResourceChecker,
    ResourceTable,
    pacing_of,
)
from jobdispatch.timing import SHARED_HOLD_FOR
from jobdispatch.types import (
    RECOVERABLE,
    Action,
    Capability,
    CauseKind,
    CheckpointMode,
    Enforcer,
    JobID,
    JobSpec,
    PendingAssignment,
    Plan,
    RecoveryPolicy,
    Rule,
    RuleAssignment,
    RuleSupport,
    StallAssignment,
    StallMode,
    Support,
    Tristate,
    UnmatchedPolicy,
)
from jobdispatch.validate import validate

__all__ = [
    "SHARED_HOLD_FOR",
    "check_resources",
    "make_plan",
    "pending_assignment",
    "required_capabilities",
    "shorter_than_poll",
    "unsupported_need",
]


def required_capabilities(spec: JobSpec) -> list[tuple[Capability, str]]:
    """The capabilities ``spec`` cannot run without, each with the field that needs it."""
    needs: list[tuple[Capability, str]] = []
    if spec.image is not None:
        needs.append((Capability.CONTAINER_IMAGE, "image"))
    if spec.working_dir is not None:
        needs.append((Capability.WORKING_DIRECTORY, "working_dir"))
    if spec.procs_per_node > 1:
        needs.append((Capability.PROCS_PER_NODE, "procs_per_node"))
    if spec.output is not None:
        needs.append((Capability.OUTPUT_PATH, "output"))
    res = spec.resources
    for capability, field, asked in (
        (Capability.GPUS, "resources.gpus_per_node", res.gpus_per_node > 0),
        (Capability.CPUS_PER_PROC, "resources.cpus_per_proc", res.cpus_per_proc is not None),
        (
            Capability.MEMORY_LIMIT,
            "resources.memory_per_node",
            res.memory_per_node_mib is not None,
        ),
        (Capability.QUEUES, "resources.queue", res.queue is not None),
        (Capability.ACCOUNTS, "resources.account", res.account is not None),
        (Capability.ACCOUNTS, "resources.qos", res.qos is not None),
        (Capability.NODE_CONSTRAINTS, "resources.constraints", bool(res.constraints)),
        (Capability.EXCLUSIVE_NODES, "resources.exclusive", res.exclusive),
    ):
        if asked:
            needs.append((capability, field))
    return needs


def unsupported_need(
    spec: JobSpec, capabilities: Mapping[Capability, Support]
) -> tuple[Capability, str, Support] | None:
    """The first capability ``spec`` needs that ``capabilities`` answers no for, with the field
    of the spec that needs it and the answer; None when every need is met or unknown (unknown
    is tried, never refused). The one comparison of needs with answers: the plan refuses with
    it, and so does every adapter's ``start`` (:mod:`jobdispatch.kit.refusal`)."""
    for capability, field in required_capabilities(spec):
        answer = capabilities.get(capability)
        if answer is not None and answer.answer is Tristate.NO:
            return capability, field, answer
    return None


def check_resources(backend: Backend, spec: JobSpec) -> None:
    """Refuse ``spec`` when the cluster could never place it (its :class:`InventoryReporter`'s
    inventory, or its :class:`PlacementChecker`'s own figures), or when the adapter's own
    resource table breaks its allow-list; return when it fits or the cluster does not say
    enough.

    Raises ValidationError for a bad adapter table (every problem at once, as validate does) and
    Unsupported naming each field the cluster cannot satisfy and what it has instead.
    """
    if isinstance(backend, ResourceTable):
        name = backend.resource_table
        table = spec.resources.adapter.get(name, {})
        plain = {k: list(v) if isinstance(v, tuple) else v for k, v in table.items()}
        validate_config(plain, backend.resource_schema, subject=f"resources.{name}")
    if isinstance(backend, ResourceChecker):
        problems = backend.resource_problems(spec)
        if problems:
            raise ValidationError(problems, subject="job file")
    found: list[Problem] = []
    if isinstance(backend, InventoryReporter):
        found = fit(spec, backend.inventory())
    if not found and isinstance(backend, PlacementChecker):
        found = list(backend.never_fits(spec))
    if found:
        lines = "; ".join(str(p) for p in found)
        msg = f"this cluster cannot place the job: {lines}"
        raise Unsupported(msg)


def _effective(rule: Rule, mode: CheckpointMode) -> Rule:
    if mode is CheckpointMode.SHARED:
        return Rule(on=rule.on, action=Action.HOLD, budget=rule.budget, for_=SHARED_HOLD_FOR)
    return rule


def _assign(
    index: int,
    support: RuleSupport,
    supervised: bool,
    accept_unverified: Mapping[int, Enforcer],
    accept_unenforced: Collection[int],
) -> tuple[Enforcer, str]:
    """The rule's enforcer and what the caller accepted to get it ("" when nothing)."""
    accepted = accept_unverified.get(index)
    if support.native.answer is Tristate.YES:
        return Enforcer.BACKEND, ""
    if support.native.answer is Tristate.UNKNOWN and accepted is not None:
        return accepted, f"unverified native support accepted for the {accepted}"
    if supervised and support.perform.answer is Tristate.YES:
        return Enforcer.SUPERVISOR, ""
    if supervised and support.perform.answer is Tristate.UNKNOWN:
        if accepted is None:
            msg = (
                f"the backend cannot say whether it can perform rule {index} "
                f"({support.perform.detail or 'support unknown'}); "
                "accept_unverified it naming an enforcer"
            )
            raise Rejected(msg)
        return accepted, f"unverified support accepted for the {accepted}"
    if index in accept_unenforced:
        return Enforcer.NOBODY, "accepted unenforced: a matching cause fails the job"
    if supervised:
        msg = (
            f"nobody would enforce rule {index}: the backend cannot perform it "
            f"({support.perform.detail or 'not supported'}); change the rule or "
            "accept_unenforced it"
        )
    else:
        msg = f"nobody would enforce rule {index}; supervise the job or accept_unenforced it"
    raise Rejected(msg)


#: Why each duration a supervisor judges once per poll must last at least one poll.
_ONCE_PER_POLL = {
    "stall.after": "progress is read once per poll",
    "pending.after": "the backend is read once per poll",
}


def shorter_than_poll(spec: JobSpec, poll: timedelta, whose: str) -> list[Problem]:
    """The durations of ``spec`` a supervisor judges once per poll (``stall.after``,
    ``pending.after``) that are shorter than ``poll``, the interval of ``whose`` polls, each a
    Problem naming its field: such a rule could never be judged in time.

    ``make_plan`` checks them against the adapter's poll interval, the one it knows; where
    supervisors poll less often (a site's ``poll_interval``, a supervisor's ``--poll``), the
    caller that knows that interval checks again with it."""
    found = {
        "stall.after": spec.stall.after if spec.stall is not None else None,
        "pending.after": spec.pending.after if spec.pending is not None else None,
    }
    return [
        Problem(
            field, f"must be at least the poll interval of {whose} ({poll}), got {value}: {why}"
        )
        for field, why in _ONCE_PER_POLL.items()
        if (value := found[field]) is not None and value < poll
    ]


def _at_least_a_poll(backend: Backend, spec: JobSpec, field: str) -> None:
    """Refuse ``field`` of ``spec`` when it is shorter than the adapter's poll interval
    (ValidationError naming it)."""
    poll = timedelta(seconds=pacing_of(backend).interval)
    problems = [
        p for p in shorter_than_poll(spec, poll, f"adapter {backend.name!r}") if p.path == field
    ]
    if problems:
        raise ValidationError(problems, subject="job spec")


def _stall(
    backend: Backend,
    spec: JobSpec,
    supervised: bool,
    capabilities: Mapping[Capability, Support],
) -> StallAssignment | None:
    """Who enforces the spec's stall rule: the supervisor, which reads the job's progress.

    The progress source is the job's checkpoint root (``[progress]``: its marks and
    publications); a job that names none has, where the cluster answers yes for
    ``output-growth``, the growth of the running object's output instead. Never both: output
    is weaker evidence (a rank hung in a collective may go on logging), so a job that marks its
    progress is judged on its marks alone. A stall rule
    shorter than the poll could never be judged in time, and is refused naming
    ``stall.after``. A job without any progress source can never stall: the plan says so and
    nobody enforces the rule. An unsupervised job has nobody to read its progress: refused,
    as a rule nobody would enforce is."""
    rule = spec.stall
    if rule is None:
        return None
    _at_least_a_poll(backend, spec, "stall.after")
    growth = capabilities.get(Capability.OUTPUT_GROWTH)
    output_growth = spec.progress is None and growth is not None and growth.answer is Tristate.YES
    if spec.progress is None and not output_growth:
        return StallAssignment(
            rule=rule,
            enforcer=Enforcer.NOBODY,
            note=(
                "the job names no progress source ([progress] root) and this cluster cannot "
                f"see its output grow (output-growth: {growth or 'not answered'}): it can "
                "never stall"
            ),
        )
    if not supervised:
        msg = (
            "nobody would enforce the stall rule: only a supervisor reads progress; "
            "supervise the job"
        )
        raise Rejected(msg)
    note = (
        "observe only: a stall is recorded and shown, nothing is stopped"
        if rule.mode is StallMode.OBSERVE
        else ""
    )
    return StallAssignment(
        rule=rule,
        enforcer=Enforcer.SUPERVISOR,
        root=spec.progress.root if spec.progress is not None else "",
        note=note,
        output_growth=output_growth,
    )


def _pending(backend: Backend, spec: JobSpec, supervised: bool) -> None:
    """Refuse a pending deadline nobody would enforce: the supervisor stops a job pending past
    it, so an unsupervised job cannot have one, and one shorter than the poll could never be
    judged in time (refused naming ``pending.after``)."""
    rule = spec.pending
    if rule is None:
        return
    _at_least_a_poll(backend, spec, "pending.after")
    if not supervised:
        msg = (
            "nobody would enforce the pending deadline: only a supervisor stops a job pending "
            "past it; supervise the job"
        )
        raise Rejected(msg)


def pending_assignment(spec: JobSpec, plan: Plan) -> PendingAssignment | None:
    """What ``plan`` does with the pending deadline of ``spec`` (None: it has none): the
    supervisor stops a submission pending past it, and its ending, of the deadline's cause, is
    decided as any ending is, by the first of the plan's rules that names the cause (none: the
    job fails with it). Pure, and derived from the spec and the plan as recorded, so showing it
    changes no record; a plan is only ever made with a deadline when supervised."""
    rule = spec.pending
    if rule is None:
        return None
    acting = next((a for a in plan.rules if rule.cause in a.effective.on), None)
    enforcer = Enforcer.SUPERVISOR if plan.supervised else Enforcer.NOBODY
    return PendingAssignment(rule=rule, enforcer=enforcer, acting=acting)


def _rules(n: int) -> str:
    """``1 rule``, ``0 rules``, ``3 rules``."""
    return f"{n} rule" if n == 1 else f"{n} rules"


def make_plan(
    backend: Backend,
    job: JobID | None,
    spec: JobSpec,
    *,
    supervised: bool = False,
    accept_unverified: Mapping[int, Enforcer] | None = None,
    accept_unenforced: Collection[int] = (),
    unmatched: UnmatchedPolicy = UnmatchedPolicy.RESIDUAL,
) -> Plan:
    """The plan Submit would record for ``spec`` on ``backend``, without creating anything.

    Raises ValidationError for a bad spec, Unsupported when the cluster answers no to a
    capability the spec needs, and Rejected when a rule would go unenforced (or unverified)
    without the caller's acceptance.
    """
    validate(spec)
    accept_unverified = dict(accept_unverified or {})
    rules = spec.recovery.rules
    for i in [*accept_unverified, *accept_unenforced]:
        if not 0 <= i < len(rules):
            msg = f"accepted rule {i} does not exist (the policy has {_rules(len(rules))})"
            raise Invalid(msg)

    capabilities = dict(backend.capabilities(spec))
    need = unsupported_need(spec, capabilities)
    if need is not None:
        capability, field, answer = need
        msg = f"{field}: this cluster does not support {capability} ({answer})"
        raise Unsupported(msg)
    check_resources(backend, spec)

    mode = spec.checkpoint
    effective = RecoveryPolicy(rules=[_effective(r, mode) for r in rules])
    supports = list(backend.rules(spec, effective)) if rules else []
    if len(supports) != len(rules):
        msg = (
            f"adapter {backend.name!r} answered {len(supports)} rule support"
            f"{'' if len(supports) == 1 else 's'} for {_rules(len(rules))}"
        )
        raise Invalid(msg)

    assignments = []
    for i, (rule, eff, support) in enumerate(zip(rules, effective.rules, supports, strict=True)):
        enforcer, accepted = _assign(i, support, supervised, accept_unverified, accept_unenforced)
        assignments.append(
            RuleAssignment(
                index=i,
                rule=rule,
                effective=eff,
                enforcer=enforcer,
                support=support,
                accepted=accepted,
            )
        )
    stall = _stall(backend, spec, supervised, capabilities)
    _pending(backend, spec, supervised)
    covered = {kind for rule in rules for kind in rule.on}
    if spec.stall is None:
        covered.add(CauseKind.STALLED)  # a job without a stall rule never stalls
    if spec.pending is None or spec.pending.cause is not CauseKind.NEVER_FITS:
        covered.add(CauseKind.NEVER_FITS)  # only its pending deadline ends a job so
    uncovered = tuple(kind for kind in RECOVERABLE if kind not in covered)
    weakened = backend.identity_weakened(spec) if isinstance(backend, IdentityWeakener) else ""
    return Plan(
        job=job,
        rules=tuple(assignments),
        uncovered=uncovered,
        checkpoint=mode,
        unmatched=unmatched,
        capabilities=capabilities,
        identity_weakened=weakened,
        supervised=supervised,
        stall=stall,
    )


def with_firings(
    plan: Plan, firings: Mapping[int, int], charged: Mapping[int, int] | None = None
) -> Plan:
    """The plan as status shows it: each rule with how often it fired so far, and how many of
    those firings its budget paid for (``charged``; every firing when not given).

    Plans are frozen, so an assignment whose count is already right is shared rather than
    copied, and when every count is right the plan itself is the answer (status is read on
    every poll, and most jobs never fire a rule).
    """
    rules = plan.rules
    counts = [firings.get(a.index, 0) for a in rules]
    paid = [
        charged.get(a.index, 0) if charged is not None else n
        for a, n in zip(rules, counts, strict=True)
    ]
    if all(a.firings == n and a.charged == c for a, n, c in zip(rules, counts, paid, strict=True)):
        return plan
    shown = tuple(
        a if a.firings == n and a.charged == c else attrs.evolve(a, firings=n, charged=c)
        for a, n, c in zip(rules, counts, paid, strict=True)
    )
    return attrs.evolve(plan, rules=shown)
