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
from jobdispatch import types as t
from jobdispatch.memory import Shape

from jobdispatch_sim.options import SimOptions

_STALLED = t.CauseKind.STALLED
_NEVER_FITS = t.CauseKind.NEVER_FITS

_ACTIONS = {
    Shape.SLURM: (
        t.Action.RESUBMIT,
        t.Action.RESUBMIT,
        t.Action.REQUEUE,
        t.Action.HOLD,
        t.Action.ESCALATE,
    ),
    Shape.KUBEFLOW: (
        t.Action.RESUBMIT,
        t.Action.RESUBMIT,
        t.Action.RESTART,
        t.Action.HOLD,
        t.Action.ESCALATE,
    ),
}

#: Causes the workload's rules name most; the rest appear too, less often.
_COMMON = (
    t.CauseKind.PREEMPTED,
    t.CauseKind.NODE_LOST,
    t.CauseKind.OUT_OF_MEMORY,
    t.CauseKind.NON_ZERO_EXIT,
    t.CauseKind.LAUNCH_FAILED,
    t.CauseKind.TIME_LIMIT,
)


@attrs.frozen(kw_only=True)
class JobPlan:
    """What the simulated person submits: a spec and Submit's options."""

    shape: Shape
    spec: t.JobSpec
    unmatched: t.UnmatchedPolicy
    submit_retries: int
    supervised: bool


def _rules(rng: random.Random, shape: Shape, opts: SimOptions) -> list[t.Rule]:
    # ``stalled`` is drawn only for jobs with a stall rule (see _progress), and ``never-fits``
    # only for jobs with a pending deadline (see with_pending), from their own generators, so
    # the seeds of runs without them play as they did before they existed.
    own = (_STALLED, _NEVER_FITS)
    free = list(_COMMON) + [k for k in t.RECOVERABLE if k not in _COMMON and k not in own]
    rules: list[t.Rule] = []
    for _ in range(rng.choice((0, 1, 1, 2, 2, 3))):
        if not free:
            break
        n = min(len(free), rng.choice((1, 1, 2, 3)))
        picked = sorted(rng.sample(free[: max(n, 6)], n), key=t.RECOVERABLE.index)
        for kind in picked:
            free.remove(kind)
        action = rng.choice(_ACTIONS[shape])
        if action is t.Action.ESCALATE:
            rules.append(t.Rule(on=picked, action=action))
        elif action is t.Action.HOLD:
            minutes = rng.choice((5, 20, 90))
            rules.append(
                t.Rule(
                    on=picked,
                    action=action,
                    budget=rng.randint(0, opts.max_budget),
                    for_=timedelta(minutes=minutes),
                )
            )
        else:
            rules.append(t.Rule(on=picked, action=action, budget=rng.randint(0, opts.max_budget)))
    return rules


def draw(rng: random.Random, opts: SimOptions, index: int) -> JobPlan:
    """One job's spec and Submit options."""
    shape = Shape.KUBEFLOW if rng.random() < opts.kubeflow_share else Shape.SLURM
    extensions = (t.SharedCheckpoint(),) if rng.random() < opts.p_shared_checkpoint else ()
    spec = t.JobSpec(
        command=("python", "train.py"),
        name=f"sim-{index}",
        nodes=rng.randint(1, 3),
        image="registry/train:1" if shape is Shape.KUBEFLOW else None,
        time_limit=timedelta(hours=rng.choice((1, 4))) if rng.random() < 0.3 else None,
        extensions=extensions,
        recovery=t.RecoveryPolicy(rules=_rules(rng, shape, opts)),
    )
    manual = rng.random() < opts.p_manual_unmatched
    return JobPlan(
        shape=shape,
        spec=spec,
        unmatched=t.UnmatchedPolicy.MANUAL if manual else t.UnmatchedPolicy.RESIDUAL,
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
    stall: t.StallRule | None = None
    if plan.supervised:  # an unsupervised job has nobody to read its progress
        stall = t.StallRule(
            after=timedelta(minutes=rng.choice((2, 5, 10))),
            startup_grace=rng.choice((None, timedelta(minutes=3), timedelta(minutes=15))),
            mode=rng.choice((t.StallMode.ENFORCE, t.StallMode.ENFORCE, t.StallMode.OBSERVE)),
            blind_after=timedelta(minutes=rng.choice((10, 30))),
        )
        if rng.random() < 0.6:
            action = rng.choice(_ACTIONS[plan.shape])
            if action is t.Action.ESCALATE:
                rules.append(t.Rule(on=[_STALLED], action=action))
            elif action is t.Action.HOLD:
                rules.append(
                    t.Rule(
                        on=[_STALLED],
                        action=action,
                        budget=rng.randint(0, opts.max_budget),
                        for_=timedelta(minutes=20),
                    )
                )
            else:
                rules.append(
                    t.Rule(on=[_STALLED], action=action, budget=rng.randint(0, opts.max_budget))
                )
    if rng.random() < opts.p_no_advance:
        rules = [
            attrs.evolve(r, charge=t.Charge.NO_ADVANCE) if r.action is not t.Action.ESCALATE else r
            for r in rules
        ]
    progress = t.ProgressSource(root=ROOTS[index % len(ROOTS)])
    spec = attrs.evolve(
        spec, recovery=t.RecoveryPolicy(rules=rules), progress=progress, stall=stall
    )
    return attrs.evolve(plan, spec=spec)


def with_pending(rng: random.Random, opts: SimOptions, plan: JobPlan) -> JobPlan:
    """``plan``, for a share of the supervised jobs, with a pending deadline (a few minutes, so
    a world whose objects wait meets it), ending with ``no-capacity`` or ``never-fits``, and
    maybe a rule on that cause. Drawn from ``rng``, the pending generator: the run's own draws
    are those of the plan without it."""
    if opts.p_pending <= 0 or not plan.supervised or rng.random() >= opts.p_pending:
        return plan
    cause = rng.choice(t.PENDING_CAUSES)
    rules = list(plan.spec.recovery.rules)
    if not any(cause in r.on for r in rules) and rng.random() < 0.5:
        action = rng.choice((t.Action.RESUBMIT, t.Action.ESCALATE))
        budget = 0 if action is t.Action.ESCALATE else rng.randint(0, opts.max_budget)
        rules.append(t.Rule(on=[cause], action=action, budget=budget))
    pending = t.PendingRule(after=timedelta(minutes=rng.choice((2, 5, 15))), cause=cause)
    spec = attrs.evolve(plan.spec, recovery=t.RecoveryPolicy(rules=rules), pending=pending)
    return attrs.evolve(plan, spec=spec)
