"""Jobs and recovery policies drawn from the run's generator.

Policies cover every action the shape can carry out or have carried out: native requeue and
restart (backend-enforced), supervisor requeue, resubmit, hold for a person, escalate, and rules
nobody enforces (accepted explicitly); budgets from 0 up; sometimes a shared checkpoint, which
turns every rule into a hold; sometimes the manual unmatched policy.
"""

from __future__ import annotations

import random
from datetime import timedelta

import attrs
from jobdispatch.memory import Shape
from jobdispatch.types import (
    PENDING_CAUSES,
    RECOVERABLE,
    Action,
    CauseKind,
    Charge,
    JobSpec,
    PendingRule,
    ProgressSource,
    RecoveryPolicy,
    Rule,
    SharedCheckpoint,
    StallMode,
    StallRule,
    UnmatchedPolicy,
)

from jobdispatch_sim.options import SimOptions

_STALLED = CauseKind.STALLED
_NEVER_FITS = CauseKind.NEVER_FITS

_ACTIONS = {
    Shape.SLURM: (Action.RESUBMIT, Action.RESUBMIT, Action.REQUEUE, Action.HOLD, Action.ESCALATE),
    Shape.KUBEFLOW: (
        Action.RESUBMIT,
        Action.RESUBMIT,
        Action.RESTART,
        Action.HOLD,
        Action.ESCALATE,
    ),
}

#: Causes the workload's rules name most; the rest appear too, less often.
_COMMON = (
    CauseKind.PREEMPTED,
    CauseKind.NODE_LOST,
    CauseKind.OUT_OF_MEMORY,
    CauseKind.NON_ZERO_EXIT,
    CauseKind.LAUNCH_FAILED,
    CauseKind.TIME_LIMIT,
)


@attrs.frozen(kw_only=True)
class JobPlan:
    """What the simulated person submits: a spec and Submit's options."""

    shape: Shape
    spec: JobSpec
    unmatched: UnmatchedPolicy
    submit_retries: int
    supervised: bool


def _rules(rng: random.Random, shape: Shape, opts: SimOptions) -> list[Rule]:
    # ``stalled`` is drawn only for jobs with a stall rule (see _progress), and ``never-fits``
    # only for jobs with a pending deadline (see with_pending), from their own generators, so
    # the seeds of runs without them play as they did before they existed.
    own = (_STALLED, _NEVER_FITS)
    free = list(_COMMON) + [k for k in RECOVERABLE if k not in _COMMON and k not in own]
    rules: list[Rule] = []
    for _ in range(rng.choice((0, 1, 1, 2, 2, 3))):
        if not free:
            break
        n = min(len(free), rng.choice((1, 1, 2, 3)))
        picked = sorted(rng.sample(free[: max(n, 6)], n), key=RECOVERABLE.index)
        for kind in picked:
            free.remove(kind)
        action = rng.choice(_ACTIONS[shape])
        if action is Action.ESCALATE:
            rules.append(Rule(on=picked, action=action))
        elif action is Action.HOLD:
            minutes = rng.choice((5, 20, 90))
            rules.append(
                Rule(
                    on=picked,
                    action=action,
                    budget=rng.randint(0, opts.max_budget),
                    for_=timedelta(minutes=minutes),
                )
            )
        else:
            rules.append(Rule(on=picked, action=action, budget=rng.randint(0, opts.max_budget)))
    return rules


def draw(rng: random.Random, opts: SimOptions, index: int) -> JobPlan:
    """One job's spec and Submit options."""
    shape = Shape.KUBEFLOW if rng.random() < opts.kubeflow_share else Shape.SLURM
    extensions = (SharedCheckpoint(),) if rng.random() < opts.p_shared_checkpoint else ()
    spec = JobSpec(
        command=("python", "train.py"),
        name=f"sim-{index}",
        nodes=rng.randint(1, 3),
        image="registry/train:1" if shape is Shape.KUBEFLOW else None,
        time_limit=timedelta(hours=rng.choice((1, 4))) if rng.random() < 0.3 else None,
        extensions=extensions,
        recovery=RecoveryPolicy(rules=_rules(rng, shape, opts)),
    )
    manual = rng.random() < opts.p_manual_unmatched
    return JobPlan(
        shape=shape,
        spec=spec,
        unmatched=UnmatchedPolicy.MANUAL if manual else UnmatchedPolicy.RESIDUAL,
        submit_retries=rng.choice((0, 1, 2, 2)),
        supervised=rng.random() < 0.95,
    )


#: The checkpoint roots jobs with progress share (two, so a poll lists several jobs per root).
ROOTS = ("/ckpt/a", "/ckpt/b")


def with_progress(rng: random.Random, opts: SimOptions, index: int, plan: JobPlan) -> JobPlan:
    """``plan``, for a share of the jobs, with a progress source, a stall rule (enforced or
    observed), maybe a rule on ``stalled``, and maybe every budgeted rule charging
    ``no-advance``. Drawn from ``rng``, the progress generator: the run's own draws are those
    of the plan without progress."""
    if opts.p_progress <= 0 or rng.random() >= opts.p_progress:
        return plan
    spec = plan.spec
    rules = list(spec.recovery.rules)
    stall: StallRule | None = None
    if plan.supervised:  # an unsupervised job has nobody to read its progress
        stall = StallRule(
            after=timedelta(minutes=rng.choice((2, 5, 10))),
            startup_grace=rng.choice((None, timedelta(minutes=3), timedelta(minutes=15))),
            mode=rng.choice((StallMode.ENFORCE, StallMode.ENFORCE, StallMode.OBSERVE)),
            blind_after=timedelta(minutes=rng.choice((10, 30))),
        )
        if rng.random() < 0.6:
            action = rng.choice(_ACTIONS[plan.shape])
            if action is Action.ESCALATE:
                rules.append(Rule(on=[_STALLED], action=action))
            elif action is Action.HOLD:
                rules.append(
                    Rule(
                        on=[_STALLED],
                        action=action,
                        budget=rng.randint(0, opts.max_budget),
                        for_=timedelta(minutes=20),
                    )
                )
            else:
                rules.append(
                    Rule(on=[_STALLED], action=action, budget=rng.randint(0, opts.max_budget))
                )
    if rng.random() < opts.p_no_advance:
        rules = [
            attrs.evolve(r, charge=Charge.NO_ADVANCE) if r.action is not Action.ESCALATE else r
            for r in rules
        ]
    progress = ProgressSource(root=ROOTS[index % len(ROOTS)])
    spec = attrs.evolve(spec, recovery=RecoveryPolicy(rules=rules), progress=progress, stall=stall)
    return attrs.evolve(plan, spec=spec)


def with_pending(rng: random.Random, opts: SimOptions, plan: JobPlan) -> JobPlan:
    """``plan``, for a share of the supervised jobs, with a pending deadline (a few minutes, so
    a world whose objects wait meets it), ending with ``no-capacity`` or ``never-fits``, and
    maybe a rule on that cause. Drawn from ``rng``, the pending generator: the run's own draws
    are those of the plan without it."""
    if opts.p_pending <= 0 or not plan.supervised or rng.random() >= opts.p_pending:
        return plan
    cause = rng.choice(PENDING_CAUSES)
    rules = list(plan.spec.recovery.rules)
    if not any(cause in r.on for r in rules) and rng.random() < 0.5:
        action = rng.choice((Action.RESUBMIT, Action.ESCALATE))
        budget = 0 if action is Action.ESCALATE else rng.randint(0, opts.max_budget)
        rules.append(Rule(on=[cause], action=action, budget=budget))
    pending = PendingRule(after=timedelta(minutes=rng.choice((2, 5, 15))), cause=cause)
    spec = attrs.evolve(plan.spec, recovery=RecoveryPolicy(rules=rules), pending=pending)
    return attrs.evolve(plan, spec=spec)
