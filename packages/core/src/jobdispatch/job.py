"""The job level: a record folded into what ``project`` and ``next`` need.

``fold(view, now)`` replays the record's events in order. It performs no I/O and reads no clock;
every actor that folds the same revision sees the same job. A history the protocol cannot have
written (a second outcome, a budget overspent, a trigger used twice, an attempt out of order,
a decision without a token...) is refused with :class:`Invalid` naming the revision, never
folded silently: a record that says something impossible is evidence of a bug or of tampering,
and acting on it would be worse than stopping.

The records kept here are mutable while folding and must be treated as read-only afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import attrs

from jobdispatch.errors import Invalid
from jobdispatch.members import (
    ACTION_REQUEUE,
    ACTION_RESTART,
    CALL_REQUEUE,
    CAUSE_CANCELLED,
    CAUSE_HELD,
    CAUSE_LAUNCH_FAILED,
    CAUSE_NONE,
    CAUSE_RELEASED,
    CAUSE_UNKNOWN,
    CHARGE_NO_ADVANCE,
    ENFORCER_BACKEND,
    EVENTS_DECISION,
    HOLD_OPERATOR,
    LEVEL_JOB,
    OBJ_ENDED,
    OBJ_GATED,
    OBJ_PENDING,
    OBJ_RUNNING,
    ORIGIN_PUBLICATION,
    PROV_ACTOR,
    PROV_SCHEDULER,
    REPLY_CREATED,
    REPLY_REFUSED,
    REPLY_UNKNOWN,
    STATE_CANCELLED,
    STATE_FAILED,
    STATE_HELD,
    STATE_PENDING,
    STATE_RECOVERING,
)
from jobdispatch.records import events as ev
from jobdispatch.spi import ExecutionObs, ObjectObs, ObjectRef, discovery_name
from jobdispatch.timing import ABSENCE_GAP
from jobdispatch.triggers import End, EscalationId, Requeue, Resubmit, Trigger
from jobdispatch.types import (
    Actor,
    Cause,
    CauseKind,
    Hold,
    Level,
    ObjectState,
    RuleAssignment,
    State,
    Tristate,
)

__all__ = [
    "AttemptRec",
    "BlindRec",
    "CallRec",
    "EscalationRec",
    "FiringRec",
    "HoldRec",
    "Job",
    "ObjectRec",
    "Outcome",
    "ProgressRec",
    "Replay",
    "ResumedRec",
    "StallRec",
    "SubmissionRec",
    "Transition",
    "ended_before",
    "fold",
]


@attrs.frozen
class Outcome:
    """A committed terminal state and its cause."""

    state: State
    cause: Cause
    at: datetime


@attrs.frozen
class Transition:
    """One committed state transition of the job, for its history."""

    from_: State
    to: State
    submission: int
    cause: Cause
    at: datetime
    level: Level = Level.JOB


@attrs.define
class AttemptRec:
    """One Start call of a submission, numbered before the call."""

    n: int
    k: int
    started_at: datetime
    reply: ev.Reply | None = None
    ref: ObjectRef | None = None
    detail: str = ""
    abandoned: bool = False
    #: Who abandoned the attempt, and why: a launch that ends because people gave up on its
    #: attempts is theirs to explain, not the scheduler's.
    abandoned_by: Actor | None = None
    abandon_reason: str = ""


@attrs.define
class SubmissionRec:
    """Submission ``n``: why it was authorized, its attempts, its canonical object."""

    n: int
    trigger: Trigger
    rule: int | None
    cause: Cause | None
    authorized_at: datetime
    attempts: list[AttemptRec] = attrs.Factory(list)
    canonical: ObjectRef | None = None
    canonical_attempt: int = 0
    #: Suspect nodes its attempts keep off, and until when (``jobdispatch.suspects``).
    exclude: tuple[str, ...] = ()
    exclude_until: datetime | None = None

    def attempt(self, k: int) -> AttemptRec | None:
        return self.attempts[k - 1] if 0 < k <= len(self.attempts) else None

    def launch_failure(self) -> Cause:
        """Why this submission never got an object, from what its attempts' records say.

        A refusal is the scheduler's word, so any refused attempt makes the cause the
        scheduler's. Attempts that were only abandoned tell a different story: their Start
        never answered (or answered "unknown", say a supervisor killed inside Start) and a
        person closed them, so the cause is that person's, with what each attempt left.
        """
        refused = [a for a in self.attempts if a.reply is REPLY_REFUSED]
        if not any(a.abandoned for a in self.attempts):
            details = "; ".join(a.detail for a in refused if a.detail)
            return Cause(CAUSE_LAUNCH_FAILED, PROV_SCHEDULER, details or "start refused")
        parts = []
        for a in self.attempts:
            if a.reply is REPLY_REFUSED:
                what = "refused" + (f": {a.detail}" if a.detail else "")
            elif a.reply is REPLY_UNKNOWN:
                what = "Start's outcome unknown" + (f" ({a.detail})" if a.detail else "")
            else:
                what = "Start never answered"
            if a.abandoned and a.reply is not REPLY_REFUSED:
                what += f", abandoned by {a.abandoned_by}"
                if a.abandon_reason:
                    what += f" ({a.abandon_reason})"
            parts.append(f"attempt {a.n}.{a.k}: {what}")
        detail = "no attempt created an object; " + "; ".join(parts)
        if refused:
            return Cause(CAUSE_LAUNCH_FAILED, PROV_SCHEDULER, detail)
        last = next(a for a in reversed(self.attempts) if a.abandoned)
        return Cause(CAUSE_LAUNCH_FAILED, PROV_ACTOR, detail, actor=last.abandoned_by)


@attrs.define
class ObjectRec:
    """One backend object the record knows, and what was decided and seen about it."""

    ref: ObjectRef
    submission: int
    attempt: int
    name: str
    canonical: bool = False
    retired: bool = False
    open_decided: bool = False
    stop_decided: bool = False
    verified_stopped: bool = False
    obs: ObjectObs | None = None
    absent_since: datetime | None = None
    #: The latest recorded miss of the current absence (see ABSENCE_GAP).
    absent_last: datetime | None = None
    ever_opened: bool = False
    ceased: Tristate = Tristate.UNKNOWN
    ceased_at: datetime | None = None
    #: The revision and time of its latest observation (-1, None: never observed): whether
    #: what the record shows was seen after a call that may have changed the object.
    seen_rev: int = -1
    seen_at: datetime | None = None

    @property
    def state(self) -> ObjectState | None:
        """The last state observed, or None when never observed."""
        return self.obs.state if self.obs is not None else None

    @property
    def done(self) -> bool:
        """Ended (as observed) or verified stopped: it will never run again."""
        return self.verified_stopped or self.state is OBJ_ENDED

    def executions(self) -> tuple[ExecutionObs, ...]:
        return self.obs.executions if self.obs is not None else ()


@attrs.define
class HoldRec:
    """One hold instance: an operator's, or a recovery rule's hold for a person."""

    instance: int
    hold: Hold
    placed_at: datetime
    submission: int = 0
    cause: Cause | None = None
    rule: int | None = None
    active: bool = True
    lifted_at: datetime | None = None
    lifted_reason: str = ""
    resume: bool = False


@attrs.define
class CallRec:
    """A hold-family, requeue or restore call recorded at ``revision`` with its deadline."""

    revision: int
    op: ev.CallOp
    ref: ObjectRef
    instance: int
    deadline: datetime
    issued_at: datetime
    answered: bool = False
    ok: bool = False
    detail: str = ""
    #: The revision of its answer, once answered.
    answer_rev: int = -1

    def in_flight(self, now: datetime) -> bool:
        """Unanswered and not past its deadline: its effect may still land."""
        return not self.answered and now <= self.deadline


@attrs.define
class EscalationRec:
    """An escalation committed once (its id derives from its cause), and where it was delivered."""

    id: EscalationId
    detail: str
    at: datetime
    delivered: set[str] = attrs.Factory(set)


@attrs.frozen
class ProgressRec:
    """The newest progress the record holds: what a ``progress-seen`` event said, and when it
    was committed (``recorded_at``, the supervisor's time; ``marked_at`` is the job's)."""

    step: int
    marked_at: datetime
    submission: int
    execution: str
    origin: ev.Origin
    recorded_at: datetime


@attrs.frozen
class ResumedRec:
    """Execution ``execution`` of submission ``submission`` resumed from step ``step``."""

    submission: int
    execution: str
    step: int
    at: datetime


@attrs.frozen
class BlindRec:
    """The progress source has been unreadable since ``since`` (the ``progress-blind`` event
    at ``revision``)."""

    since: datetime
    revision: int
    detail: str


@attrs.frozen
class StallRec:
    """A stall verdict on one run: enforced (the run is being stopped) or only observed."""

    cause: Cause
    enforced: bool
    at: datetime
    revision: int


def ended_before(cause: Cause | None, ended_at: datetime | None, decided: datetime) -> bool:
    """Whether a run the backend shows ended with ``cause`` at ``ended_at`` ended by itself
    before a stop was decided at ``decided``: an ending of the run's own (anything but
    ``cancelled``, which is how a stop shows, and ``unknown``, which says nothing) at a time
    before the decision.

    A supervisor may decide to stop a run that has already ended when its poll still showed
    it running (Slurm shows a run running until accounting has its record): the run's own
    ending (its exit 3, a preemption) is then the cause, as it is when the poll sees the end
    first, so which evidence came first does not change the ending. An ending after the
    decision (a worker that exits 15 on the stop's SIGTERM) is the stop's. The two times are
    the backend's clock and the supervisor's, which must agree to well within a poll, as
    stall rules already need. The simulator's checkers judge by this same rule."""
    return (
        cause is not None
        and cause.kind is not CAUSE_CANCELLED
        and cause.kind is not CAUSE_UNKNOWN
        and ended_at is not None
        and ended_at < decided
    )


@attrs.frozen
class FiringRec:
    """One firing of a supervisor-enforced rule: whether its budget paid for it, and the
    newest checkpoint step the record showed then (None: none yet), which the rule's next
    firing under ``no-advance`` compares with."""

    rule: int
    charged: bool
    checkpoint: int | None
    at: datetime


@attrs.define
class Job:
    """A folded record: everything ``project`` and ``next`` know of the job."""

    header: ev.Header
    revision: int
    outcome: Outcome | None = None
    cancelled_by_request: bool = False
    settled: bool = False
    settled_at: datetime | None = None
    submissions: list[SubmissionRec] = attrs.Factory(list)
    objects: dict[str, ObjectRec] = attrs.Factory(dict)
    holds: list[HoldRec] = attrs.Factory(list)
    calls: list[CallRec] = attrs.Factory(list)
    rule_use: dict[int, int] = attrs.Factory(dict)
    firings: dict[int, int] = attrs.Factory(dict)
    triggers: set[Trigger] = attrs.Factory(set)
    #: Execution ends already accounted for (a rule fired, an outcome, or a native rerun seen).
    handled_ends: set[End] = attrs.Factory(set)
    #: Execution ends the backend was seen to rerun by itself (each counted as a firing once).
    reruns_seen: set[End] = attrs.Factory(set)
    #: Revisions of person's resubmit requests not yet turned into a submission.
    resubmits: list[int] = attrs.Factory(list)
    #: Requeue intents (a person's, or a rule's) waiting for their call, by trigger key.
    requeues: list[tuple[Trigger, int | None, Cause | None]] = attrs.Factory(list)
    escalations: dict[EscalationId, EscalationRec] = attrs.Factory(dict)
    #: Lifecycle notices delivered, as (notice id, sink) pairs (``jobdispatch.notices``).
    notices_delivered: set[tuple[str, str]] = attrs.Factory(set)
    #: When an open or a stop of each object was last decided, for retrying the idempotent call.
    open_at: dict[str, datetime] = attrs.Factory(dict)
    stop_at: dict[str, datetime] = attrs.Factory(dict)
    history: list[Transition] = attrs.Factory(list)
    committed: State = State.PENDING
    recovery_cause: Cause | None = None
    last_at: datetime | None = None
    #: The newest progress recorded, and the newest checkpoint step (from publications and
    #: resumed entries) a ``no-advance`` charge compares with.
    progress: ProgressRec | None = None
    checkpoint_step: int | None = None
    #: What each execution resumed from, by (submission, execution).
    resumed: dict[tuple[int, str], ResumedRec] = attrs.Factory(dict)
    #: Since when the progress source is unreadable, while it is.
    blind: BlindRec | None = None
    #: Stall verdicts by (object id, run index).
    stalls: dict[tuple[str, int], StallRec] = attrs.Factory(dict)
    #: Objects stopped for staying pending past the job's pending deadline, by object id: the
    #: cause their ending takes (``[pending]``).
    pending_expired: dict[str, Cause] = attrs.Factory(dict)
    #: When the record first saw each run running, by (object id, run index): a stall rule's
    #: startup grace counts from there.
    running_since: dict[tuple[str, int], datetime] = attrs.Factory(dict)
    #: Every firing of a supervisor-enforced rule, in order, charged or not.
    fired: list[FiringRec] = attrs.Factory(list)

    # -------------------------------------------------------------- derived facts

    @property
    def id(self) -> str:
        return self.header.job

    @property
    def terminal(self) -> bool:
        return self.outcome is not None

    @property
    def latest(self) -> SubmissionRec | None:
        return self.submissions[-1] if self.submissions else None

    def submission(self, n: int) -> SubmissionRec | None:
        return self.submissions[n - 1] if 0 < n <= len(self.submissions) else None

    def object(self, ref: ObjectRef) -> ObjectRec | None:
        return self.objects.get(ref.id)

    def objects_of(self, n: int) -> Iterator[ObjectRec]:
        return (o for o in self.objects.values() if o.submission == n)

    @property
    def active_hold(self) -> HoldRec | None:
        """The hold in force, if one stands (at most one does)."""
        hold = self.holds[-1] if self.holds else None
        return hold if hold is not None and hold.active else None

    def calls_on(self, ref: ObjectRef, op: ev.CallOp) -> list[CallRec]:
        return [c for c in self.calls if c.ref == ref and c.op is op]

    def in_flight(self, ref: ObjectRef, op: ev.CallOp, now: datetime) -> CallRec | None:
        for call in reversed(self.calls_on(ref, op)):
            if call.in_flight(now):
                return call
        return None

    def assignment(self, rule: int) -> RuleAssignment:
        return self.header.plan.rules[rule]

    def remaining(self, rule: int) -> int:
        return self.assignment(rule).effective.budget - self.rule_use.get(rule, 0)

    def would_charge(self, rule: int) -> bool:
        """Whether a firing of ``rule`` now would be charged to its budget: always, unless the
        rule charges ``no-advance`` and the newest checkpoint on record is newer than at the
        rule's previous firing (or, at its first, than none). Unknown progress is charged: only
        evidence in the record spares a budget."""
        if self.assignment(rule).effective.charge is not CHARGE_NO_ADVANCE:
            return True
        newest = self.checkpoint_step
        if newest is None:
            return True
        previous = next((f for f in reversed(self.fired) if f.rule == rule), None)
        return (
            previous is not None
            and previous.checkpoint is not None
            and (newest <= previous.checkpoint)
        )

    def charged(self, rule: int) -> int:
        """How many of the rule's firings its budget paid for."""
        return self.rule_use.get(rule, 0)

    def run_cause(self, obj: ObjectRec, run: ExecutionObs) -> Cause | None:
        """The cause of run ``run`` of ``obj``: ``stalled`` when the supervisor decided to stop
        it as stalled (that decision was committed before its stop, so whatever the backend
        says of the kill, ``cancelled`` say, the run ended because it hung), unless the run
        had ended by itself before that decision (:func:`ended_before`); the pending
        deadline's cause when the object was stopped for waiting past it (a run that started
        between that decision and the stop included); else the backend's."""
        if self.stalls:
            stall = self.stalls.get((obj.ref.id, run.index))
            if (
                stall is not None
                and stall.enforced
                and not ended_before(run.cause, run.ended_at, stall.at)
            ):
                return stall.cause
        if self.pending_expired:
            expired = self.pending_expired.get(obj.ref.id)
            if expired is not None:
                return expired
        return run.cause

    def last_cause(self) -> Cause | None:
        """The cause of the latest ended execution of the latest canonical object, if any."""
        latest = self.latest
        if latest is None or latest.canonical is None:
            return None
        obj = self.object(latest.canonical)
        if obj is None:
            return None
        ended = [e for e in obj.executions() if e.state is OBJ_ENDED]
        return self.run_cause(obj, ended[-1]) if ended else None

    def residuals(self) -> list[AttemptRec]:
        """Under the residual policy, the unresolved attempts a settled job leaves behind: the
        host keeps sweeping for their objects."""
        return self.unresolved_attempts() if self.settled else []

    def unresolved_attempts(self) -> list[AttemptRec]:
        """Attempts whose reply is missing or unknown, not matched to an object, not abandoned."""
        out = []
        matched = {(o.submission, o.attempt) for o in self.objects.values()}
        for sub in self.submissions:
            for a in sub.attempts:
                if a.abandoned or (a.n, a.k) in matched:
                    continue
                if a.reply in (None, REPLY_UNKNOWN):
                    out.append(a)
        return out


# ------------------------------------------------------------------------ folding


def _bad(revision: int, job: Job, message: str) -> Invalid:
    return Invalid(f"record {job.id} revision {revision}: {message}")


def _matching_rule(job: Job, kind: CauseKind) -> RuleAssignment | None:
    for assignment in job.header.plan.rules:
        if kind in assignment.effective.on:
            return assignment
    return None


class _Folder:
    """Applies events one by one; each ``_on_*`` method checks what the protocol allows."""

    #: The events a settled record may still take: evidence, and clean-up of residual objects.
    AFTER_SETTLED = (
        ev.EscalationDelivered,
        ev.NoticeDelivered,
        ev.Observed,
        ev.Absent,
        ev.AttemptReplied,  # a Start whose caller paused may answer after clean-up settled
        ev.CallAnswered,
        ev.StopDecided,
        ev.VerifiedStopped,
        ev.CessationAnswered,
        ev.ProgressSeen,
        ev.ResumedFrom,
        ev.ProgressBlind,
        ev.ProgressSighted,
    )

    def __init__(self, view: ev.View, now: datetime) -> None:
        self.view = view
        # No handler reads ``now`` today: a folded Job is a function of the record alone, which
        # is what lets a reader that owns one reuse it for the same record (the executor does).
        # A handler that starts to depend on it must make those readers key on it too.
        self.now = now
        self.job = Job(header=view.header, revision=view.revision)
        self.calls: dict[int, CallRec] = {}
        #: The cause of each release reason met so far: releases by one person with one reason
        #: commit equal causes, and a frozen cause can be shared.
        self.released: dict[str, Cause] = {}

    def fold(self) -> Job:
        return self.apply(self.view.events, 0)

    def apply(self, events: tuple[ev.AnyEvent, ...], start: int) -> Job:
        """Replay ``events[start:]`` (revisions ``start + 1`` on) onto the job folded so far, which
        must be ``events[:start]``; the job is then at revision ``len(events)``."""
        job = self.job
        dispatch = _DISPATCH
        for i, event in enumerate(events[start:] if start else events, start=start + 1):
            try:
                handler, decides = dispatch[type(event)]
            except KeyError:  # not an event type: checked as before, then refused by KeyError
                handler, decides = _unknown_event, type(event).cls is EVENTS_DECISION
            if decides is (event.token is None):
                what = (
                    "carries no owner token"
                    if event.token is None
                    else ("is not a decision but carries a token")
                )
                raise _bad(i, job, f"{event.kind} {what}")
            if job.settled and not isinstance(event, self.AFTER_SETTLED):
                raise _bad(i, job, f"{event.kind} after the job settled")
            handler(self, i, event)
        job.revision = len(events)
        job.last_at = events[-1].at if events else job.header.created_at
        return job

    # -------------------------------------------------------------- helpers

    def _move(self, to: State, submission: int, cause: Cause, at: datetime) -> None:
        job = self.job
        if job.committed is to:
            return
        job.history.append(Transition(job.committed, to, submission, cause, at, LEVEL_JOB))
        job.committed = to

    def _base_state(self) -> State:
        return STATE_RECOVERING if self.job.recovery_cause is not None else STATE_PENDING

    def _recovering(self, submission: int, cause: Cause, at: datetime) -> None:
        self.job.recovery_cause = cause
        if self.job.active_hold is None:
            self._move(STATE_RECOVERING, submission, cause, at)

    def _use_trigger(self, i: int, trigger: Trigger) -> None:
        if trigger in self.job.triggers:
            raise _bad(i, self.job, f"trigger {str(trigger)!r} authorized twice")
        self.job.triggers.add(trigger)

    def _charge(self, i: int, rule: int | None, at: datetime, said: bool | None) -> None:
        """Count a firing of ``rule``; charge its budget unless the firing said it is not
        charged (a ``no-advance`` rule after training advanced). What the decision said is
        history: it is not judged again here."""
        job = self.job
        if rule is None:
            return
        if not 0 <= rule < len(job.header.plan.rules):
            raise _bad(i, job, f"rule {rule} is not in the plan")
        charged = job.would_charge(rule) if said is None else said
        job.fired.append(FiringRec(rule, charged, job.checkpoint_step, at))
        job.firings[rule] = job.firings.get(rule, 0) + 1
        if not charged:
            return
        job.rule_use[rule] = job.rule_use.get(rule, 0) + 1
        if job.rule_use[rule] > job.assignment(rule).effective.budget:
            raise _bad(
                i,
                job,
                f"rule {rule} fired beyond its budget of {job.assignment(rule).effective.budget}",
            )

    def _not_terminal(self, i: int, what: str) -> None:
        if self.job.terminal:
            raise _bad(i, self.job, f"{what} after the outcome was committed")

    def _object(self, i: int, ref: ObjectRef) -> ObjectRec:
        obj = self.job.object(ref)
        if obj is None:
            raise _bad(i, self.job, f"object {ref} is not known to the record")
        return obj

    def _outcome(self, state: State, cause: Cause, at: datetime) -> None:
        job = self.job
        job.outcome = Outcome(state, cause, at)
        latest = job.latest.n if job.latest else 0
        self._move(state, latest, cause, at)

    # -------------------------------------------------------------- controls

    def _on_hold_requested(self, i: int, e: ev.HoldRequested) -> None:
        job = self.job
        if job.outcome is not None:
            return  # a late hold of a finished job changes nothing
        holds = job.holds
        if holds and holds[-1].active:
            return  # one hold at a time; the standing one stays
        submissions = job.submissions
        n = submissions[-1].n if submissions else 0
        by = e.by
        reason = e.reason
        at = e.at
        holds.append(HoldRec(len(holds) + 1, Hold(HOLD_OPERATOR, by, reason, e.until), at, n))
        if job.committed is not STATE_HELD:
            self._move(STATE_HELD, n, Cause(CAUSE_HELD, PROV_ACTOR, reason, actor=by), at)

    def _lift(self, hold: HoldRec, at: datetime, reason: str, resume: bool) -> None:
        hold.active = False
        hold.lifted_at = at
        hold.lifted_reason = reason
        hold.resume = resume
        job = self.job
        if job.outcome is None:
            to = self._base_state()
            if job.committed is not to:
                cause = self.released.get(reason)
                if cause is None:
                    cause = Cause(CAUSE_RELEASED, PROV_ACTOR, reason)
                    self.released[reason] = cause
                submissions = job.submissions
                self._move(to, submissions[-1].n if submissions else 0, cause, at)

    def _on_release_requested(self, i: int, e: ev.ReleaseRequested) -> None:
        job = self.job
        hold = job.active_hold
        if hold is None or job.terminal:
            return
        self._lift(hold, e.at, e.reason or f"released by {e.by}", resume=True)

    def _on_cancel_requested(self, i: int, e: ev.CancelRequested) -> None:
        job = self.job
        if job.terminal:
            return  # the receipt says which outcome stood already
        detail = e.reason or (f"superseded by {e.superseded_by}" if e.superseded_by else "")
        job.cancelled_by_request = True
        for hold in job.holds:
            if hold.active:
                hold.active = False
                hold.lifted_at = e.at
                hold.lifted_reason = "cancelled"
        self._outcome(STATE_CANCELLED, Cause(CAUSE_CANCELLED, PROV_ACTOR, detail, actor=e.by), e.at)

    def _on_resubmit_requested(self, i: int, e: ev.ResubmitRequested) -> None:
        self._not_terminal(i, "a resubmit request")
        self.job.resubmits.append(i)

    def _on_requeue_requested(self, i: int, e: ev.RequeueRequested) -> None:
        self._not_terminal(i, "a requeue request")
        self.job.requeues.append((Requeue(i), None, None))

    def _on_give_up_requested(self, i: int, e: ev.GiveUpRequested) -> None:
        job = self.job
        if job.terminal:
            return
        last = job.recovery_cause or job.last_cause()
        detail = f"given up by {e.by}" + (f": {e.reason}" if e.reason else "")
        if last is not None and last.kind is not CAUSE_NONE:
            cause = attrs.evolve(last, detail=f"{last.detail}; {detail}" if last.detail else detail)
        else:
            cause = Cause(CAUSE_CANCELLED, PROV_ACTOR, detail, actor=e.by)
        for hold in job.holds:
            hold.active = False
        self._outcome(STATE_FAILED, cause, e.at)

    def _on_abandon_requested(self, i: int, e: ev.AbandonRequested) -> None:
        sub = self.job.submission(e.submission)
        attempt = sub.attempt(e.attempt) if sub else None
        if attempt is None:
            raise _bad(
                i,
                self.job,
                f"abandon names attempt {e.submission}.{e.attempt}, which was never started",
            )
        attempt.abandoned = True
        attempt.abandoned_by = e.by
        attempt.abandon_reason = e.reason

    # -------------------------------------------------------------- evidence

    def _on_observed(self, i: int, e: ev.Observed) -> None:
        job = self.job
        obs = e.obs
        obj = job.objects.get(obs.ref.id)
        if obj is None:
            identity = obs.identity
            if identity is None or identity[0] != job.id:
                raise _bad(i, job, f"observed object {obs.ref} ({obs.name}) is not this job's")
            _, n, k = identity
            sub = job.submission(n)
            if sub is None or sub.attempt(k) is None:
                raise _bad(
                    i,
                    job,
                    f"observed object {obs.name} of attempt {n}.{k}, which was never started",
                )
            obj = ObjectRec(obs.ref, n, k, obs.name)
            job.objects[obs.ref.id] = obj
        obj.obs = obs
        obj.seen_rev = i
        obj.seen_at = e.at
        obj.absent_since = None
        obj.absent_last = None
        if obs.state is not OBJ_GATED:
            obj.ever_opened = True
        runs = obs.executions
        if obs.state is OBJ_RUNNING and runs:
            run = runs[-1]
            key = (obs.ref.id, run.index)
            if run.state is OBJ_RUNNING and key not in job.running_since:
                job.running_since[key] = e.at
        # Only an ended run of the canonical object can be a native rerun; most observations
        # show one live run and need nothing more.
        if obj.canonical and runs and (len(runs) > 1 or runs[0].state is OBJ_ENDED):
            self._native_reruns(obj, e.at)

    def _native_reruns(self, obj: ObjectRec, at: datetime) -> None:
        """Executions that ended while the object lives on were rerun by the backend itself:
        a firing of the backend-enforced rule that covers the cause, observed, not acted on."""
        job = self.job
        if not obj.canonical or obj.obs is None:
            return
        executions = obj.obs.executions
        ended = [x for x in executions if x.state is OBJ_ENDED]
        if not ended:
            return
        latest_index = max(x.index for x in executions)
        for x in ended:
            key = End(obj.ref.id, x.index)
            if key in job.handled_ends or key in job.reruns_seen:
                continue
            # A rerun shows as a newer execution, or as the object queued again after its run
            # ended. An object shown running whose only run has ended is a backend between two
            # answers (Slurm's COMPLETING, a lagging accounting row), not a rerun.
            rerun = x.index < latest_index or obj.obs.state is OBJ_PENDING
            if not rerun:
                continue
            # Counted once; the end stays undecided, so if the object ends without the rerun
            # ever showing, the end is still acted on (next: the rules, or the outcome).
            job.reruns_seen.add(key)
            cause = x.cause or Cause(CAUSE_UNKNOWN)
            assignment = _matching_rule(job, cause.kind)
            if (
                assignment is not None
                and assignment.enforcer is ENFORCER_BACKEND
                and not job.terminal
            ):
                job.firings[assignment.index] = job.firings.get(assignment.index, 0) + 1
                self._recovering(obj.submission, cause, at)

    def _on_absent(self, i: int, e: ev.Absent) -> None:
        obj = self._object(i, e.ref)
        # Misses recorded further apart than ABSENCE_GAP may hide a sighting that was never
        # recorded (its process crashed first): the absence starts over from this miss.
        if (
            obj.absent_since is None
            or obj.absent_last is None
            or e.find_at - obj.absent_last > ABSENCE_GAP
        ):
            obj.absent_since = e.find_at
        obj.absent_last = e.find_at if obj.absent_last is None else max(obj.absent_last, e.find_at)

    def _on_attempt_replied(self, i: int, e: ev.AttemptReplied) -> None:
        job = self.job
        sub = job.submission(e.submission)
        attempt = sub.attempt(e.attempt) if sub else None
        if attempt is None:
            raise _bad(i, job, f"reply to attempt {e.submission}.{e.attempt}, never started")
        if attempt.reply is not None and attempt.reply is not REPLY_UNKNOWN:
            raise _bad(i, job, f"attempt {e.submission}.{e.attempt} answered twice")
        attempt.reply = e.reply
        attempt.detail = e.detail
        if e.reply is REPLY_CREATED:
            if e.ref is None:
                raise _bad(i, job, "a created reply names no object")
            attempt.ref = e.ref
            if job.object(e.ref) is None:
                job.objects[e.ref.id] = ObjectRec(
                    e.ref, e.submission, e.attempt, discovery_name(job.id, e.submission, e.attempt)
                )

    def _on_call_answered(self, i: int, e: ev.CallAnswered) -> None:
        call = self.calls.get(e.call)
        if call is None:
            raise _bad(i, self.job, f"answer to revision {e.call}, which issued no call")
        if call.answered:
            raise _bad(i, self.job, f"call at revision {e.call} answered twice")
        call.answered = True
        call.ok = e.ok
        call.detail = e.detail
        call.answer_rev = i

    def _on_cessation_answered(self, i: int, e: ev.CessationAnswered) -> None:
        obj = self._object(i, e.ref)
        obj.ceased = e.evidence.ceased
        obj.ceased_at = e.at

    def _on_progress_seen(self, i: int, e: ev.ProgressSeen) -> None:
        job = self.job
        job.progress = ProgressRec(e.step, e.marked_at, e.submission, e.execution, e.origin, e.at)
        if e.origin is ORIGIN_PUBLICATION:
            self._checkpoint(e.step)

    def _checkpoint(self, step: int) -> None:
        job = self.job
        if job.checkpoint_step is None or step > job.checkpoint_step:
            job.checkpoint_step = step

    def _on_resumed_from(self, i: int, e: ev.ResumedFrom) -> None:
        # Evidence from outside: a second entry of one execution (two supervisors recorded it,
        # or its resolve ran twice) changes nothing, and never makes the record unreadable.
        key = (e.submission, e.execution)
        if key not in self.job.resumed:
            self.job.resumed[key] = ResumedRec(e.submission, e.execution, e.step, e.resumed_at)
        self._checkpoint(e.step)

    def _on_progress_blind(self, i: int, e: ev.ProgressBlind) -> None:
        if self.job.blind is None:
            self.job.blind = BlindRec(e.at, i, e.detail)

    def _on_progress_sighted(self, i: int, e: ev.ProgressSighted) -> None:
        self.job.blind = None

    def _on_escalation_delivered(self, i: int, e: ev.EscalationDelivered) -> None:
        rec = self.job.escalations.get(e.escalation)
        if rec is None:
            msg = f"delivery of escalation {str(e.escalation)!r}, never committed"
            raise _bad(i, self.job, msg)
        if e.sink in rec.delivered:
            msg = f"escalation {str(e.escalation)!r} delivered to {e.sink} twice"
            raise _bad(i, self.job, msg)
        rec.delivered.add(e.sink)

    def _on_notice_delivered(self, i: int, e: ev.NoticeDelivered) -> None:
        # A second record of one delivery is harmless (a notice's delivery is at least once);
        # writers check for one before committing, so it happens only if they race.
        self.job.notices_delivered.add((e.notice, e.sink))

    # -------------------------------------------------------------- decisions

    def _on_submission_authorized(self, i: int, e: ev.SubmissionAuthorized) -> None:
        job = self.job
        self._not_terminal(i, "a submission")
        expected = len(job.submissions) + 1
        if e.n != expected:
            raise _bad(i, job, f"submission {e.n} authorized, expected {expected}")
        self._use_trigger(i, e.trigger)
        self._charge(i, e.rule, e.at, e.charged)
        if isinstance(e.trigger, Resubmit):
            if e.trigger.revision not in job.resubmits:
                msg = f"resubmit trigger {str(e.trigger)!r} names no pending request"
                raise _bad(i, job, msg)
            job.resubmits.remove(e.trigger.revision)
        if isinstance(e.trigger, End):
            job.handled_ends.add(e.trigger)
        job.submissions.append(
            SubmissionRec(
                e.n,
                e.trigger,
                e.rule,
                e.cause,
                e.at,
                exclude=e.exclude,
                exclude_until=e.exclude_until,
            )
        )
        if e.n > 1:
            self._recovering(
                e.n,
                e.cause or Cause(CAUSE_NONE, PROV_ACTOR, "resubmitted by a person"),
                e.at,
            )

    def _on_attempt_started(self, i: int, e: ev.AttemptStarted) -> None:
        job = self.job
        self._not_terminal(i, "an attempt")
        sub = job.submission(e.submission)
        if sub is None or sub is not job.latest:
            raise _bad(i, job, f"attempt for submission {e.submission}, not the latest")
        if sub.canonical is not None:
            raise _bad(i, job, f"attempt for submission {e.submission}, which has its canonical")
        if e.attempt != len(sub.attempts) + 1:
            raise _bad(
                i, job, f"attempt {e.attempt} out of order (expected {len(sub.attempts) + 1})"
            )
        sub.attempts.append(AttemptRec(e.submission, e.attempt, e.at))

    def _on_canonical_chosen(self, i: int, e: ev.CanonicalChosen) -> None:
        job = self.job
        sub = job.submission(e.submission)
        if sub is None:
            raise _bad(i, job, f"canonical for submission {e.submission}, never authorized")
        if sub.canonical is not None:
            raise _bad(i, job, f"submission {e.submission} has a canonical object already")
        obj = self._object(i, e.ref)
        if obj.submission != e.submission or obj.retired:
            raise _bad(i, job, f"object {e.ref} cannot be submission {e.submission}'s canonical")
        sub.canonical = e.ref
        sub.canonical_attempt = obj.attempt
        obj.canonical = True

    def _on_open_decided(self, i: int, e: ev.OpenDecided) -> None:
        job = self.job
        self._not_terminal(i, "an open")
        sub = job.submission(e.submission)
        if sub is None or sub.canonical != e.ref:
            raise _bad(i, job, f"open of {e.ref}, not submission {e.submission}'s canonical")
        for older in job.submissions[: e.submission - 1]:
            for obj in job.objects_of(older.n):
                if obj.canonical and obj.open_decided and not obj.done:
                    raise _bad(
                        i,
                        job,
                        f"open of submission {e.submission} while submission "
                        f"{older.n}'s object {obj.ref} is not verified stopped",
                    )
        self._object(i, e.ref).open_decided = True
        job.open_at[e.ref.id] = e.at

    def _on_retired(self, i: int, e: ev.Retired) -> None:
        obj = self._object(i, e.ref)
        if obj.canonical or obj.open_decided:
            raise _bad(i, self.job, f"retire of {e.ref}, which is canonical or opened")
        obj.retired = True
        obj.stop_decided = True
        self.job.stop_at[e.ref.id] = e.at

    def _on_stop_decided(self, i: int, e: ev.StopDecided) -> None:
        self._object(i, e.ref).stop_decided = True
        self.job.stop_at[e.ref.id] = e.at

    def _on_stall_declared(self, i: int, e: ev.StallDeclared) -> None:
        job = self.job
        self._not_terminal(i, "a stall verdict")
        self._object(i, e.ref)
        key = (e.ref.id, e.execution)
        if key in job.stalls:
            raise _bad(i, job, f"run {e.execution} of {e.ref} declared stalled twice")
        job.stalls[key] = StallRec(e.cause, e.enforced, e.at, i)

    def _on_pending_expired(self, i: int, e: ev.PendingExpired) -> None:
        job = self.job
        self._not_terminal(i, "a pending deadline")
        self._object(i, e.ref)
        if e.ref.id in job.pending_expired:
            raise _bad(i, job, f"{e.ref} expired pending twice")
        job.pending_expired[e.ref.id] = e.cause

    def _on_verified_stopped(self, i: int, e: ev.VerifiedStopped) -> None:
        obj = self._object(i, e.ref)
        if obj.absent_since is None:
            raise _bad(i, self.job, f"{e.ref} verified stopped without having been absent")
        obj.verified_stopped = True

    def _on_recovery_decided(self, i: int, e: ev.RecoveryDecided) -> None:
        job = self.job
        self._not_terminal(i, "a recovery")
        self._use_trigger(i, e.trigger)
        self._charge(i, e.rule, e.at, e.charged)
        if isinstance(e.trigger, End):
            job.handled_ends.add(e.trigger)
        action = job.assignment(e.rule).effective.action
        if action in (ACTION_REQUEUE, ACTION_RESTART):
            if e.ref is None:
                raise _bad(i, job, "a requeue recovery names no object")
            job.requeues.append((e.trigger, e.rule, e.cause))
        self._recovering(e.submission or (job.latest.n if job.latest else 0), e.cause, e.at)

    def _on_hold_placed(self, i: int, e: ev.HoldPlaced) -> None:
        job = self.job
        self._not_terminal(i, "a hold")
        if e.instance != len(job.holds) + 1:
            raise _bad(i, job, f"hold instance {e.instance} out of order")
        if job.active_hold is not None:
            raise _bad(i, job, "a hold placed while another stands")
        job.holds.append(HoldRec(e.instance, e.hold, e.at, e.submission, e.cause))
        self._move(STATE_HELD, e.submission, e.cause or Cause(CAUSE_HELD), e.at)

    def _on_hold_lifted(self, i: int, e: ev.HoldLifted) -> None:
        job = self.job
        hold = job.active_hold
        if hold is None or hold.instance != e.instance:
            raise _bad(i, job, f"lift of hold instance {e.instance}, which does not stand")
        self._lift(hold, e.at, e.reason, e.resume)

    def _on_call_issued(self, i: int, e: ev.CallIssued) -> None:
        job = self.job
        self._object(i, e.ref)
        if e.op is CALL_REQUEUE:
            self._not_terminal(i, "a requeue call")
            if not job.requeues:
                # Reissuing a call whose deadline passed is allowed: the intent was served
                # by an earlier call whose effect never showed.
                if not job.calls_on(e.ref, CALL_REQUEUE):
                    raise _bad(i, job, "a requeue call with no requeue intent")
            else:
                job.requeues.pop(0)
        call = CallRec(i, e.op, e.ref, e.instance, e.deadline, e.at)
        job.calls.append(call)
        self.calls[i] = call

    def _on_outcome_decided(self, i: int, e: ev.OutcomeDecided) -> None:
        job = self.job
        if job.terminal:
            raise _bad(i, job, f"a second outcome ({e.state}) after {job.outcome.state}")  # type: ignore[union-attr]
        if not e.state.terminal:
            raise _bad(i, job, f"outcome {e.state} is not terminal")
        latest = job.latest
        if latest is not None and latest.canonical is not None:
            obj = job.object(latest.canonical)
            if obj is not None:
                for x in obj.executions():
                    if x.state is OBJ_ENDED:
                        job.handled_ends.add(End(obj.ref.id, x.index))
        self._outcome(e.state, e.cause, e.at)

    def _on_escalated(self, i: int, e: ev.Escalated) -> None:
        job = self.job
        if e.id in job.escalations:
            raise _bad(i, job, f"escalation {str(e.id)!r} committed twice")
        job.escalations[e.id] = EscalationRec(e.id, e.detail, e.at)

    def _on_settled(self, i: int, e: ev.Settled) -> None:
        job = self.job
        if not job.terminal:
            raise _bad(i, job, "settled before an outcome")
        job.settled = True
        job.settled_at = e.at


_HANDLERS: dict[type[ev.Event], Callable[[_Folder, int, Any], None]] = {
    cls: getattr(_Folder, "_on_" + kind.replace("-", "_")) for kind, cls in ev.EVENT_TYPES.items()
}


def _unknown_event(folder: _Folder, i: int, event: Any) -> None:
    _HANDLERS[type(event)]  # raises KeyError, as dispatching an unknown type always did


#: Each event type's handler and whether it is a decision, in one lookup per event.
_DISPATCH: dict[type[ev.Event], tuple[Callable[[_Folder, int, Any], None], bool]] = {
    cls: (handler, cls.cls is ev.EventClass.DECISION) for cls, handler in _HANDLERS.items()
}


def fold(view: ev.View, now: datetime) -> Job:
    """Replay ``view`` into the job level. Pure: ``now`` is an argument, nothing is read.

    Raises Invalid, naming the revision, for a history the protocol cannot have written.
    """
    return _Folder(view, now).fold()


class Replay:
    """One record folded as it grows: each :meth:`extend` replays only the events added since
    the last, where :func:`fold` replays the whole record every time.

    For a reader that follows a record through every revision it reaches (the simulator's fold
    checker folds each record after every step). Same answers as ``fold``, from the same code:
    ``extend(view, now)`` raises the Invalid ``fold(view, now)`` would, and otherwise returns
    the job ``fold`` would. A view that is not the previous one plus new events (another
    header, fewer events, an event replaced) is folded from its start. The Job returned is this
    replay's own and changes on the next ``extend``: read it, never keep it.
    """

    def __init__(self) -> None:
        self._folder: _Folder | None = None
        self._events: tuple[ev.AnyEvent, ...] = ()

    def extend(self, view: ev.View, now: datetime) -> Job:
        folder = self._folder
        seen = self._events
        events = view.events
        start = len(seen)
        if (
            folder is None
            or (folder.job.header is not view.header and folder.job.header != view.header)
            or len(events) < start
            or events[:start] != seen
        ):
            folder = _Folder(view, now)
            start = 0
        self._folder = None  # a replay that raises starts over next time, as fold would
        job = folder.apply(events, start)
        self._folder = folder
        self._events = events
        return job
