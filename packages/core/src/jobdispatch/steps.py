"""``next``: what should happen next for a job, given its folded record and what the backend shows.

Pure: the same job, discovery and ``now`` always give the same steps, so every actor computes
the same thing and the simulator can replay it. Steps come in priority order and an executor
performs the first, then reads and recomputes: evidence is recorded before anything is decided
on it, an outcome before clean-up, and the launch of a submission strictly in its order
(authorize, start, canonical, retire the others, open). docs/specs/0001-contract.md has the
table of every situation and the steps it gives.
"""

from __future__ import annotations

from datetime import datetime

import attrs

from jobdispatch.job import (
    HoldRec,
    Job,
    ObjectRec,
    SubmissionRec,
    end_key,
)
from jobdispatch.records.events import CallOp, Reply
from jobdispatch.spi import Discovery, ObjectObs, ObjectRef
from jobdispatch.timing import (
    ABSENCE_GAP,
    ABSENCE_GRACE,
    ABSENCE_REFRESH,
    CALL_DEADLINE,
    CESSATION_INTERVAL,
    OPEN_RETRY,
    REQUEUE_TRIES,
    STOP_RETRY,
)
from jobdispatch.types import (
    Action,
    Actor,
    Capability,
    Cause,
    CauseKind,
    CheckpointMode,
    Enforcer,
    Hold,
    HoldKind,
    ObjectState,
    Provenance,
    State,
    Tristate,
    UnmatchedPolicy,
    _Word,
)

__all__ = ["OPEN_RETRY", "STOP_RETRY", "Step", "StepKind", "next_steps"]


class StepKind(_Word):
    """The closed set of things ``next`` can ask for."""

    WAIT = "wait"
    OBSERVE = "observe"
    AUTHORIZE = "authorize"
    START = "start"
    CANONICAL = "canonical"
    OPEN = "open"
    RETIRE = "retire"
    PLACE_HOLD = "place-hold"
    RELEASE_HOLD = "release-hold"
    REQUEUE = "requeue"
    RESTORE_REQUEUE = "restore-requeue"
    STOP = "stop"
    STOP_JOB = "stop-job"
    VERIFIED_STOPPED = "verified-stopped"
    OUTCOME = "outcome"
    ESCALATE = "escalate"
    SETTLE = "settle"
    CEASE = "cease"


# Enum members bound once as module globals. In CPython 3.11 every ``Kind.MEMBER`` lookup goes
# through EnumType's __getattr__ hook (about a thousand instructions); a global costs a few.
_ACTION_ESCALATE = Action.ESCALATE
_ACTION_HOLD = Action.HOLD
_ACTION_REQUEUE = Action.REQUEUE
_ACTION_RESTART = Action.RESTART
_ACTION_RESUBMIT = Action.RESUBMIT
_CALL_HOLD = CallOp.HOLD
_CALL_RELEASE = CallOp.RELEASE
_CALL_REQUEUE = CallOp.REQUEUE
_CALL_RESTORE = CallOp.RESTORE
_CAP_HOLD = Capability.HOLD
_CAUSE_LAUNCH_FAILED = CauseKind.LAUNCH_FAILED
_CAUSE_NONE = CauseKind.NONE
_CAUSE_UNKNOWN = CauseKind.UNKNOWN
_CHECKPOINT_SHARED = CheckpointMode.SHARED
_ENFORCER_BACKEND = Enforcer.BACKEND
_ENFORCER_NOBODY = Enforcer.NOBODY
_HOLD_OPERATOR = HoldKind.OPERATOR
_HOLD_RECOVERY = HoldKind.RECOVERY
_OBJ_ENDED = ObjectState.ENDED
_OBJ_GATED = ObjectState.GATED
_OBJ_PENDING = ObjectState.PENDING
_PROV_SCHEDULER = Provenance.SCHEDULER
_REPLY_REFUSED = Reply.REFUSED
_REPLY_UNKNOWN = Reply.UNKNOWN
_STATE_FAILED = State.FAILED
_STATE_SUCCEEDED = State.SUCCEEDED
_STEP_AUTHORIZE = StepKind.AUTHORIZE
_STEP_CANONICAL = StepKind.CANONICAL
_STEP_CEASE = StepKind.CEASE
_STEP_ESCALATE = StepKind.ESCALATE
_STEP_OBSERVE = StepKind.OBSERVE
_STEP_OPEN = StepKind.OPEN
_STEP_OUTCOME = StepKind.OUTCOME
_STEP_PLACE_HOLD = StepKind.PLACE_HOLD
_STEP_RELEASE_HOLD = StepKind.RELEASE_HOLD
_STEP_REQUEUE = StepKind.REQUEUE
_STEP_RESTORE_REQUEUE = StepKind.RESTORE_REQUEUE
_STEP_RETIRE = StepKind.RETIRE
_STEP_SETTLE = StepKind.SETTLE
_STEP_START = StepKind.START
_STEP_STOP = StepKind.STOP
_STEP_VERIFIED_STOPPED = StepKind.VERIFIED_STOPPED
_STEP_WAIT = StepKind.WAIT
_TRI_YES = Tristate.YES
_UNMATCHED_MANUAL = UnmatchedPolicy.MANUAL


@attrs.frozen(kw_only=True)
class Step:
    """One thing to do. Only the fields its kind uses are set; docs/specs/0004-supervisor.md says
    what an executor commits and calls for each."""

    kind: StepKind
    submission: int = 0
    attempt: int = 0
    ref: ObjectRef | None = None
    trigger: str = ""
    rule: int | None = None
    obs: ObjectObs | None = None
    state: State | None = None
    cause: Cause | None = None
    escalation: str = ""
    detail: str = ""
    hold: Hold | None = None
    instance: int = 0
    op: CallOp | None = None
    deadline: datetime | None = None
    find_at: datetime | None = None
    wake: datetime | None = None
    #: For open, stop, place-hold and requeue: the decision is committed already (or needs none)
    #: and only the backend call remains.
    decided: bool = False
    resume: bool = False


#: The wait with no time to wake at (only news ends it). Steps are frozen values, so the one most
#: calls of next end with is built once (a Step costs about 20,000 instructions to make).
_WAIT_FOR_NEWS = Step(kind=_STEP_WAIT, wake=None)


def _wait(*times: datetime | None) -> list[Step]:
    due = [t for t in times if t is not None]
    if not due:
        return [_WAIT_FOR_NEWS]
    return [Step(kind=_STEP_WAIT, wake=min(due))]


# ------------------------------------------------------------------ evidence first


def _observations(job: Job, discovery: Discovery, now: datetime) -> list[Step]:
    steps: list[Step] = []
    for obs in discovery.objects:
        identity = obs.identity
        if identity is None or identity[0] != job.id:
            continue
        rec = job.object(obs.ref)
        if rec is None:
            sub = job.submission(identity[1])
            if sub is None or sub.attempt(identity[2]) is None:
                continue  # not an attempt this record made: not ours to record
        elif rec.obs == obs and rec.absent_since is None and not _maybe_rerun(job, rec, now):
            continue
        steps.append(Step(kind=_STEP_OBSERVE, ref=obs.ref, obs=obs))
    if discovery.complete:
        present = {o.ref.id for o in discovery.objects}
        at = discovery.at or now
        for rec in job.objects.values():
            if rec.ref.id in present or rec.done:
                continue
            if rec.absent_last is not None and at - rec.absent_last < ABSENCE_REFRESH:
                continue  # a recent miss is on record already
            steps.append(Step(kind=_STEP_OBSERVE, ref=rec.ref, find_at=at))
    return steps


def _absence(job: Job, now: datetime) -> tuple[list[Step], datetime | None]:
    """Objects absent long enough are judged stopped; else when to look again."""
    wake: datetime | None = None
    for rec in job.objects.values():
        if rec.done or rec.absent_since is None:
            continue
        if rec.absent_last is None or now - rec.absent_last > ABSENCE_GAP:
            continue  # no recent miss on record: only a fresh one continues the absence
        due = rec.absent_since + ABSENCE_GRACE
        if now >= due:
            return [Step(kind=_STEP_VERIFIED_STOPPED, ref=rec.ref, find_at=now)], None
        # Look again when the next miss is due to be recorded: a supervisor that polls less
        # often than ABSENCE_GAP (Slurm's 30 s) would otherwise let the absence start over.
        due = min(due, rec.absent_last + ABSENCE_REFRESH)
        wake = due if wake is None else min(wake, due)
    return [], wake


# ------------------------------------------------------------------ endings and rules


def _end_of(job: Job, sub: SubmissionRec) -> tuple[str, Cause] | None:
    """The unhandled end of the submission's canonical object: its trigger key and cause."""
    if sub.canonical is None:
        return None
    obj = job.object(sub.canonical)
    if obj is None or not obj.done:
        return None
    executions = obj.executions()
    if executions:
        last = max(executions, key=lambda x: x.index)
        key = end_key(obj.ref, last.index)
        if last.state is _OBJ_ENDED:
            cause = last.cause or Cause(_CAUSE_UNKNOWN, detail="the backend gave no cause")
        else:
            cause = Cause(_CAUSE_UNKNOWN, detail="vanished from the backend while it ran")
    elif obj.ever_opened or obj.open_decided:
        key = end_key(obj.ref, -1)
        cause = Cause(_CAUSE_UNKNOWN, detail="ended without a run the backend showed")
        if not obj.ever_opened:
            cause = Cause(_CAUSE_LAUNCH_FAILED, _PROV_SCHEDULER, "vanished before it ran")
    else:
        key = end_key(obj.ref, -1)
        cause = Cause(_CAUSE_LAUNCH_FAILED, _PROV_SCHEDULER, "vanished while gated")
    if key in job.handled_ends:
        return None
    return key, cause


def _launch_failure(job: Job, sub: SubmissionRec) -> tuple[str, Cause] | None:
    """A submission whose every attempt was refused or abandoned, with no object to show."""
    if sub.canonical is not None or not sub.attempts:
        return None
    if any(o for o in job.objects_of(sub.n) if not o.retired):
        return None
    if not all(a.reply is _REPLY_REFUSED or a.abandoned for a in sub.attempts):
        return None
    key = f"launch:{sub.n}"
    if key in job.triggers or key in job.handled_ends:
        return None
    return key, sub.launch_failure()


def _failed(cause: Cause, key: str, escalation: str = "", detail: str = "") -> Step:
    """The job's outcome: failed with the execution's own cause. ``escalation`` (committed with
    the outcome, once per id) tells a person why no rule recovered it, where one covered it."""
    return Step(
        kind=_STEP_OUTCOME,
        state=_STATE_FAILED,
        cause=cause,
        trigger=key,
        escalation=escalation,
        detail=detail,
    )


def _apply_rules(job: Job, sub: SubmissionRec, key: str, cause: Cause, now: datetime) -> Step:
    """What an ended execution (or failed launch) leads to: an outcome, or a rule's action."""
    if cause.kind is _CAUSE_NONE:
        return Step(kind=_STEP_OUTCOME, state=_STATE_SUCCEEDED, cause=cause, trigger=key)
    match = next((a for a in job.header.plan.rules if cause.kind in a.effective.on), None)
    if match is None:
        return _failed(cause, key)
    rule = match.effective
    n = match.index
    if match.enforcer is _ENFORCER_NOBODY:
        return _failed(
            cause,
            key,
            f"unenforced:{n}:{key}",
            f"rule {n} covers {cause.kind} but nobody enforces it",
        )
    if match.enforcer is _ENFORCER_BACKEND:
        return _failed(
            cause, key, f"native-spent:{n}:{key}", f"the backend did not rerun it under rule {n}"
        )
    if rule.action is _ACTION_ESCALATE:
        return _failed(cause, key, f"rule:{n}:{key}", f"rule {n} escalates {cause.kind}")
    if job.remaining(n) <= 0:
        return _failed(
            cause,
            key,
            f"budget:{n}",
            f"rule {n} ({rule.action} on {cause.kind}) has spent its budget of {rule.budget}",
        )
    if rule.action is _ACTION_RESUBMIT:
        return Step(kind=_STEP_AUTHORIZE, submission=sub.n + 1, trigger=key, rule=n, cause=cause)
    if rule.action in (_ACTION_REQUEUE, _ACTION_RESTART) and sub.canonical is None:
        # A launch that failed left no object to run again in place.
        return _failed(
            cause,
            key,
            f"rule:{n}:{key}",
            f"rule {n} would {rule.action} on {cause.kind}, but submission {sub.n} has no "
            f"object to {rule.action}",
        )
    if rule.action in (_ACTION_REQUEUE, _ACTION_RESTART):
        return Step(
            kind=_STEP_REQUEUE,
            submission=sub.n,
            ref=sub.canonical,
            trigger=key,
            rule=match.index,
            cause=cause,
            deadline=now + CALL_DEADLINE,
        )
    if rule.action is _ACTION_HOLD:
        until = now + rule.for_ if rule.for_ is not None else None
        hold = Hold(
            _HOLD_RECOVERY,
            Actor.supervisor("policy"),
            f"rule {n}: {cause.kind}; a person decides",
            until,
        )
        return Step(
            kind=_STEP_PLACE_HOLD,
            submission=sub.n,
            trigger=key,
            rule=match.index,
            cause=cause,
            hold=hold,
            instance=len(job.holds) + 1,
        )
    return _failed(cause, key, f"rule:{n}:{key}", f"rule {n} escalates {cause.kind}")


# ------------------------------------------------------------------ holds


def _holds(job: Job, hold: HoldRec | None, now: datetime) -> tuple[list[Step], datetime | None]:
    if hold is None:
        return [], None
    if hold.hold.until is not None and now >= hold.hold.until:
        if hold.hold.kind is _HOLD_OPERATOR:
            return [
                Step(
                    kind=_STEP_RELEASE_HOLD,
                    instance=hold.instance,
                    detail="the hold's time ran out",
                )
            ], None
        esc = f"hold-expired:{hold.instance}"
        if esc not in job.escalations:
            return [
                Step(
                    kind=_STEP_ESCALATE,
                    escalation=esc,
                    detail=f"hold {hold.instance} ({hold.hold.reason}) passed its deadline "
                    "with nobody releasing it; it stays held",
                )
            ], None
    wake = hold.hold.until if hold.hold.until is not None and now < hold.hold.until else None
    if (
        hold.hold.kind is _HOLD_RECOVERY
        and job.header.plan.checkpoint is _CHECKPOINT_SHARED
        and hold.submission
    ):
        sub = job.submission(hold.submission)
        obj = job.object(sub.canonical) if sub and sub.canonical else None
        if obj is not None:
            if obj.ceased is _TRI_YES:
                return [
                    Step(
                        kind=_STEP_RELEASE_HOLD,
                        instance=hold.instance,
                        resume=True,
                        detail="the site's cessation signal says its processes are gone",
                    )
                ], None
            due = obj.ceased_at + CESSATION_INTERVAL if obj.ceased_at else now
            if now >= due:
                return [Step(kind=_STEP_CEASE, ref=obj.ref)], None
            wake = due if wake is None else min(wake, due)
    return [], wake


def _backend_holds(job: Job, hold: HoldRec | None, now: datetime) -> list[Step]:
    """Operator holds on an opened, queued object become backend holds by instance; a backend
    hold whose instance no longer stands is released, by that instance."""
    latest = job.latest
    if latest is None or latest.canonical is None:
        return []
    obj = job.object(latest.canonical)
    if obj is None or obj.obs is None or obj.done:
        return []
    standing = obj.obs.hold_instance
    if standing is not None and (hold is None or hold.instance != standing):
        if job.in_flight(obj.ref, _CALL_RELEASE, now) is None:
            return [
                Step(
                    kind=_STEP_RELEASE_HOLD,
                    ref=obj.ref,
                    instance=standing,
                    deadline=now + CALL_DEADLINE,
                    decided=True,
                )
            ]
        return []
    can_hold = job.header.plan.capabilities.get(_CAP_HOLD)
    if (
        hold is not None
        and hold.hold.kind is _HOLD_OPERATOR
        and standing is None
        and obj.open_decided
        and obj.obs.state is _OBJ_PENDING
        and can_hold is not None
        and can_hold.answer is _TRI_YES
    ):
        tried = [c for c in job.calls_on(obj.ref, _CALL_HOLD) if c.instance == hold.instance]
        if not tried or (not tried[-1].in_flight(now) and not tried[-1].ok):
            return [
                Step(
                    kind=_STEP_PLACE_HOLD,
                    ref=obj.ref,
                    instance=hold.instance,
                    deadline=now + CALL_DEADLINE,
                    hold=hold.hold,
                    decided=True,
                )
            ]
    return []


# ------------------------------------------------------------------ the launch


def _launch(
    job: Job, sub: SubmissionRec, hold: HoldRec | None, now: datetime
) -> tuple[list[Step], datetime | None]:
    opts = job.header.options
    if sub.canonical is None:
        known = sorted(
            (o for o in job.objects_of(sub.n) if not o.retired and not o.done),
            key=lambda o: o.attempt,
        )
        if known:
            first = known[0]
            return [
                Step(kind=_STEP_CANONICAL, submission=sub.n, ref=first.ref, attempt=first.attempt)
            ], None
        if not sub.attempts:
            return [Step(kind=_STEP_START, submission=sub.n, attempt=1)], None
        last = sub.attempts[-1]
        unresolved = [
            a for a in sub.attempts if not a.abandoned and a.reply in (None, _REPLY_UNKNOWN)
        ]
        if (last.reply is _REPLY_REFUSED or last.abandoned) and not unresolved:
            return [], None  # a launch failure; _launch_failure handles it
        if len(sub.attempts) < 1 + opts.submit_retries:
            return [Step(kind=_STEP_START, submission=sub.n, attempt=len(sub.attempts) + 1)], None
        first_at = min(a.started_at for a in unresolved)
        due = first_at + opts.unresolved_age
        esc = f"unresolved:{sub.n}"
        if now >= due and esc not in job.escalations:
            return [
                Step(
                    kind=_STEP_ESCALATE,
                    escalation=esc,
                    detail=f"submission {sub.n}: {len(unresolved)} attempts stayed "
                    f"unresolved for {opts.unresolved_age}; find or abandon them",
                )
            ], None
        return [], due if now < due else None

    obj = job.object(sub.canonical)
    if obj is None or obj.done:
        return [], None
    if not obj.open_decided:
        if hold is not None:
            return [], None  # held: the gate stays closed until released
        for older in job.submissions[: sub.n - 1]:
            for o in job.objects_of(older.n):
                if o.canonical and o.open_decided and not o.done:
                    # Submission n opens only once n-1's object is ended or verified stopped.
                    return _stop_steps(job, o, "a newer submission replaces it", now)
        return [_open_step(sub.n, obj.ref, now)], None
    if obj.state is _OBJ_GATED or obj.state is None:
        # Decided but still gated: the open call was lost, is slow, or was refused past its
        # deadline. It is idempotent, so it is decided again (with a new deadline) and made
        # again once OPEN_RETRY has passed.
        opened_at = job.open_at.get(obj.ref.id)
        if opened_at is not None and now < opened_at + OPEN_RETRY:
            return [], opened_at + OPEN_RETRY
        return [_open_step(sub.n, obj.ref, now)], None
    return [], None


def _open_step(n: int, ref: ObjectRef, now: datetime) -> Step:
    """Open ``ref``, by a call that must land within CALL_DEADLINE of the decision.

    The deadline is recorded with the decision and the adapter refuses the call past it: a
    supervisor that paused between deciding and calling (and may have lost its lease, or seen
    the job cancelled meanwhile) cannot lift the gate arbitrarily late (spec 0001, D8)."""
    return Step(kind=_STEP_OPEN, submission=n, ref=ref, deadline=now + CALL_DEADLINE)


def _stop_steps(
    job: Job, obj: ObjectRec, reason: str, now: datetime
) -> tuple[list[Step], datetime | None]:
    if not obj.stop_decided:
        return [Step(kind=_STEP_STOP, ref=obj.ref, detail=reason)], None
    last = job.stop_at.get(obj.ref.id)
    if last is None or now >= last + STOP_RETRY:
        return [Step(kind=_STEP_STOP, ref=obj.ref, detail=reason + " (again)")], None
    return [], last + STOP_RETRY


def _retire(job: Job, now: datetime) -> tuple[list[Step], datetime | None]:
    wake: datetime | None = None
    for obj in job.objects.values():
        if obj.retired and not obj.done:
            steps, due = _stop_steps(job, obj, "a retired duplicate", now)
            if steps:
                return steps, None
            wake = due if wake is None or (due is not None and due < wake) else wake
        if obj.canonical or obj.retired or obj.open_decided:
            continue
        sub = job.submission(obj.submission)
        latest = job.latest
        if (sub is not None and sub.canonical is not None) or (
            latest is not None and obj.submission < latest.n
        ):
            return [
                Step(
                    kind=_STEP_RETIRE,
                    ref=obj.ref,
                    submission=obj.submission,
                    attempt=obj.attempt,
                )
            ], None
    return [], wake


def _restore_bit(job: Job, now: datetime) -> list[Step]:
    latest = job.latest
    if latest is None or latest.canonical is None:
        return []
    obj = job.object(latest.canonical)
    if obj is None or obj.obs is None or obj.obs.requeue_bit is not True or obj.done:
        return []
    native = any(
        a.enforcer is _ENFORCER_BACKEND and a.effective.action is _ACTION_REQUEUE
        for a in job.header.plan.rules
    )
    if native or job.requeues:
        return []
    if job.in_flight(obj.ref, _CALL_REQUEUE, now) or job.in_flight(obj.ref, _CALL_RESTORE, now):
        return []
    return [Step(kind=_STEP_RESTORE_REQUEUE, ref=obj.ref, deadline=now + CALL_DEADLINE)]


def _requeue_trouble(job: Job, now: datetime) -> tuple[list[Step], datetime | None]:
    """A recovery by requeue whose call failed, or whose effect never showed."""
    latest = job.latest
    if latest is None or latest.canonical is None:
        return [], None
    obj = job.object(latest.canonical)
    if obj is None or not obj.done or obj.verified_stopped:
        return [], None
    calls = job.calls_on(obj.ref, _CALL_REQUEUE)
    ended = [x for x in obj.executions() if x.state is _OBJ_ENDED]
    if not calls or not ended or end_key(obj.ref, ended[-1].index) not in job.handled_ends:
        return [], None
    last = calls[-1]
    if last.in_flight(now):
        return [], last.deadline
    cause = job.recovery_cause or ended[-1].cause or Cause(_CAUSE_UNKNOWN)
    settle_by = last.deadline + ABSENCE_GRACE
    if last.answered and last.ok and now < settle_by:
        return [], settle_by  # it landed; the rerun takes a moment to show
    if (last.answered and not last.ok) or len(calls) >= REQUEUE_TRIES:
        why = last.detail if last.answered else "no effect showed"
        return [
            Step(
                kind=_STEP_OUTCOME,
                state=_STATE_FAILED,
                cause=cause,
                escalation=f"requeue-failed:{last.revision}",
                detail=f"the requeue of {obj.ref} failed after {len(calls)} calls: {why}",
            )
        ], None
    return [
        Step(
            kind=_STEP_REQUEUE,
            ref=obj.ref,
            submission=latest.n,
            trigger=f"retry:{last.revision}",
            deadline=now + CALL_DEADLINE,
            decided=True,
        )
    ], None


def _requeues(job: Job, now: datetime) -> tuple[list[Step], datetime | None]:
    """A requeue intent (a person's, or a rule's already decided) gets its call."""
    if not job.requeues:
        return [], None
    latest = job.latest
    if latest is None or latest.canonical is None:
        return [], None
    obj = job.object(latest.canonical)
    if obj is None or not obj.open_decided:
        return [], None
    flying = job.in_flight(obj.ref, _CALL_REQUEUE, now)
    if flying is not None:
        return [], flying.deadline
    trigger, _, _ = job.requeues[0]
    return [
        Step(
            kind=_STEP_REQUEUE,
            ref=obj.ref,
            submission=latest.n,
            trigger=trigger,
            deadline=now + CALL_DEADLINE,
            decided=True,
        )
    ], None


# ------------------------------------------------------------------ the whole


def _maybe_rerun(job: Job, obj: ObjectRec, now: datetime) -> bool:
    """Whether ``obj`` may be running again unseen: it shows ended, but a requeue call on it
    may have landed after the observation the record holds (seed 3033085: a requeue answered
    ok, the job cancelled, and the rerun's end never observed before the job settled).

    An observation committed after the call's answer was found after the call landed (it is
    committed conditionally on the revision read before its find). An unanswered call may land
    until its deadline, so only an observation made after the deadline tells; while it is in
    flight, clean-up waits for it anyway."""
    if obj.verified_stopped or obj.state is not _OBJ_ENDED:
        return False
    calls = job.calls_on(obj.ref, _CALL_REQUEUE)
    if not calls:
        return False
    last = calls[-1]
    if last.answered:
        return last.ok and obj.seen_rev < last.answer_rev
    if now <= last.deadline:
        return False
    seen = obj.seen_at
    return obj.seen_rev < last.revision or seen is None or seen <= last.deadline


def _cleanup(job: Job, now: datetime) -> list[Step]:
    """After the outcome: stop everything live (and what a requeue may have rerun unseen),
    then settle."""
    pending = [o for o in job.objects.values() if not o.done or _maybe_rerun(job, o, now)]
    wakes: list[datetime | None] = []
    for obj in pending:
        steps, wake = _stop_steps(job, obj, "the job has its outcome", now)
        if steps:
            return steps
        wakes.append(wake)
    absence, wake = _absence(job, now)
    if absence:
        return absence
    wakes.append(wake)
    assert job.outcome is not None
    if pending:
        due = job.outcome.at + job.header.options.cleanup_deadline
        if now >= due and "cleanup" not in job.escalations:
            names = ", ".join(o.ref.id for o in pending)
            return [
                Step(
                    kind=_STEP_ESCALATE,
                    escalation="cleanup",
                    detail=f"clean-up is still pending after "
                    f"{job.header.options.cleanup_deadline}: {names} still live",
                )
            ]
        wakes.append(due if now < due else None)
        return _wait(*wakes)
    flying = [c.deadline for c in job.calls if c.in_flight(now)]
    if flying:
        return _wait(*flying)
    unresolved = job.unresolved_attempts()
    if job.header.options.unmatched is _UNMATCHED_MANUAL and unresolved:
        # Only a person can abandon them: tell one, as the launch does, once they are old.
        due = min(a.started_at for a in unresolved) + job.header.options.unresolved_age
        esc = f"unresolved:{unresolved[0].n}"
        if now >= due and esc not in job.escalations:
            return [
                Step(
                    kind=_STEP_ESCALATE,
                    escalation=esc,
                    detail=f"{len(unresolved)} attempts stayed unresolved for "
                    f"{job.header.options.unresolved_age} and block settlement under the "
                    "manual policy; find or abandon them",
                )
            ]
        return _wait(*wakes, due if now < due else None)
    return [Step(kind=_STEP_SETTLE)]


def _sweep(job: Job, now: datetime) -> list[Step]:
    """A settled job under the residual policy: an object of an attempt whose outcome stayed
    unknown may still show up; it is recorded (above), stopped and judged, never opened."""
    for obj in job.objects.values():
        if not obj.done:
            steps, wake = _stop_steps(job, obj, "a residual object of a settled job", now)
            return steps or _wait(wake)
    steps, wake = _absence(job, now)
    return steps or _wait(wake)


def _drive(job: Job, now: datetime) -> list[Step]:
    latest = job.latest
    if latest is None:
        return [Step(kind=_STEP_AUTHORIZE, submission=1, trigger="submit")]
    hold = job.active_hold
    wakes: list[datetime | None] = []
    ended = _end_of(job, latest) or _launch_failure(job, latest)
    if ended is not None:
        step = _apply_rules(job, latest, ended[0], ended[1], now)
        # One hold at a time: a rule's hold for a person waits until a standing hold is lifted.
        if step.kind is not _STEP_PLACE_HOLD or hold is None:
            return [step]
    steps, wake = _requeue_trouble(job, now)
    if steps:
        return steps
    wakes.append(wake)

    steps, wake = _holds(job, hold, now)
    if steps:
        return steps
    wakes.append(wake)

    for h in job.holds:
        trigger = f"release:{h.instance}"
        if (
            not h.active
            and h.resume
            and h.hold.kind is _HOLD_RECOVERY
            and trigger not in job.triggers
        ):
            return [
                Step(kind=_STEP_AUTHORIZE, submission=latest.n + 1, trigger=trigger, cause=h.cause)
            ]
    if job.resubmits:
        return [
            Step(
                kind=_STEP_AUTHORIZE,
                submission=latest.n + 1,
                trigger=f"resubmit:{job.resubmits[0]}",
            )
        ]

    steps, wake = _requeues(job, now)
    if steps:
        return steps
    wakes.append(wake)

    steps, wake = _retire(job, now)
    if steps:
        return steps
    wakes.append(wake)
    steps, wake = _launch(job, latest, hold, now)
    if steps:
        return steps
    wakes.append(wake)

    for step_list in (_backend_holds(job, hold, now), _restore_bit(job, now)):
        if step_list:
            return step_list
    steps, wake = _absence(job, now)
    if steps:
        return steps
    wakes.append(wake)
    return _wait(*wakes)


def next_steps(job: Job, discovery: Discovery, now: datetime) -> list[Step]:
    """What should happen next, most urgent first. Pure: no I/O, no clock.

    Every step is computed from the revision ``job`` was folded from and the ``discovery`` made
    after reading it; an executor commits decisions conditionally on that revision.
    """
    observe = _observations(job, discovery, now)
    if observe:
        return observe
    if job.settled:
        return _sweep(job, now)
    if job.terminal:
        return _cleanup(job, now)
    return _drive(job, now)
