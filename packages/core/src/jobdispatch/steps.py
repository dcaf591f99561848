"""``next``: what should happen next for a job, given its folded record and what the backend shows.

Pure: the same job, discovery and ``now`` always give the same steps, so every actor computes
the same thing and the simulator can replay it. Steps come in priority order and an executor
performs the first, then reads and recomputes: evidence is recorded before anything is decided
on it, an outcome before clean-up, and the launch of a submission strictly in its order
(authorize, start, canonical, retire the others, open). docs/specs/0001-contract.md has the
table of every situation and the steps it gives.

A step is a frozen value of one of the classes below (the closed union ``Step``), and it carries
everything that executing it means, in three parts an executor runs in order:

1. ``before(ctx)``: the events committed before any call, conditionally on the revision ``next``
   was computed from and (for every step but ``Observe``) under the owner's lease;
2. ``call(ctx)``: the backend call to make once that commit landed (a value from
   :mod:`jobdispatch.calls`), or None;
3. ``answer(ctx, result)``: the evidence the call's result commits afterwards, at whatever
   revision the record has reached.

So the supervisor's executor, the property tests and the simulator all run the same code for a
step, and the tables of spec 0004 D2 and docs/reference/steps.md are checked against the
classes' declarations (``commits``, ``call_type``, ``answers``), which the property tests check
against what the methods return. Each class's docstring names the rows of spec 0001 D6 that
give it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import ClassVar, TypeAlias

import attrs

from jobdispatch import calls
from jobdispatch import progress as pr
from jobdispatch.calls import Call
from jobdispatch.errors import DispatchError, Invalid, OutcomeUnknown, Rejected, Unsupported
from jobdispatch.job import (
    HoldRec,
    Job,
    ObjectRec,
    SubmissionRec,
)
from jobdispatch.members import (
    ACTION_ESCALATE,
    ACTION_HOLD,
    ACTION_REQUEUE,
    ACTION_RESTART,
    ACTION_RESUBMIT,
    CALL_HOLD,
    CALL_RELEASE,
    CALL_REQUEUE,
    CALL_RESTORE,
    CAP_HOLD,
    CAUSE_LAUNCH_FAILED,
    CAUSE_NONE,
    CAUSE_UNKNOWN,
    CHARGE_NO_ADVANCE,
    CHECKPOINT_SHARED,
    ENFORCER_BACKEND,
    ENFORCER_NOBODY,
    HOLD_OPERATOR,
    HOLD_RECOVERY,
    OBJ_ENDED,
    OBJ_GATED,
    OBJ_PENDING,
    PROV_SCHEDULER,
    PROV_SUPERVISOR,
    REPLY_CREATED,
    REPLY_REFUSED,
    REPLY_UNKNOWN,
    STATE_FAILED,
    STATE_SUCCEEDED,
    TRI_UNKNOWN,
    TRI_YES,
    UNMATCHED_MANUAL,
)
from jobdispatch.records import events as ev
from jobdispatch.records.events import CallOp
from jobdispatch.spi import CessationEvidence, Discovery, ObjectObs, ObjectRef
from jobdispatch.suspects import excluded
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
from jobdispatch.triggers import (
    CLEANUP,
    SUBMIT,
    BudgetSpent,
    End,
    EscalationId,
    HoldExpired,
    Launch,
    NativeSpent,
    Release,
    RequeueFailed,
    Resubmit,
    Retry,
    RuleEscalates,
    Trigger,
    Unenforced,
    Unresolved,
)
from jobdispatch.types import (
    Actor,
    CallMeta,
    Cause,
    Hold,
    HoldMeta,
    State,
)

__all__ = [
    "OPEN_RETRY",
    "STEPS",
    "STOP_RETRY",
    "Answer",
    "Authorize",
    "BackendHold",
    "BackendRelease",
    "Canonical",
    "Cease",
    "Context",
    "DeclareStall",
    "Escalate",
    "LiftHold",
    "Miss",
    "Observe",
    "ObserveStall",
    "Open",
    "Outcome",
    "RecordProgress",
    "Requeue",
    "RestoreRequeue",
    "Retire",
    "RuleHold",
    "RuleRequeue",
    "Settle",
    "Start",
    "Step",
    "Stop",
    "VerifiedStopped",
    "Wait",
    "next_steps",
]


# ------------------------------------------------------------------ what executing a step reads


@attrs.frozen(kw_only=True)
class Context:
    """What an executor tells a step when it runs it: the time of the pass (``now``, which
    every decision carries), who acts, and the job as folded from the revision read."""

    at: datetime
    by: Actor
    job: Job


@attrs.frozen(kw_only=True)
class Answer:
    """A call's result, as the executor hands it to the step's ``answer``.

    ``value`` is what the backend method returned, ``error`` the exception it raised (one of
    the call's ``answers``), ``at`` when the call returned and ``revision`` the revision of the
    commit made before the call (a recorded call's id, which its answer names)."""

    at: datetime
    revision: int
    value: object = None
    error: Exception | None = None


def describe(exc: Exception) -> str:
    """An exception as an answer's detail: the project's own errors say what happened in their
    message; anything else is an adapter's own failure and is named by its type as well."""
    if isinstance(exc, DispatchError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


# ------------------------------------------------------------------ the steps


@attrs.frozen(kw_only=True)
class _Step:
    """What every step has: its name, what it declares it commits and calls, and the three
    parts an executor runs. The declarations (``commits``, ``call_type``, ``answers``) are what
    the docs' tables show; the property tests check the methods never go beyond them."""

    #: The step's name, as logs and the docs show it.
    kind: ClassVar[str]
    #: The event types ``before`` may commit (a decision, or for Observe, the evidence).
    commits: ClassVar[tuple[type[ev.Event], ...]] = ()
    #: The class of the call ``call`` returns, or None for a step with no call.
    call_type: ClassVar[type[Call] | None] = None
    #: The event types ``answer`` may commit.
    answers: ClassVar[tuple[type[ev.Event], ...]] = ()
    #: Whether ``before`` commits under the owner's lease. Only Observe's evidence does not:
    #: it is conditional on the revision read (the find was made after it) but it is a fact
    #: any reader may record.
    fenced: ClassVar[bool] = True

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        """The events to commit before the call (none by default)."""
        del ctx
        return []

    def call(self, ctx: Context) -> Call | None:
        """The backend call to make after ``before``'s commit (none by default)."""
        del ctx
        return None

    def answer(self, ctx: Context, result: Answer) -> list[ev.AnyEvent]:
        """The evidence to commit from the call's result (none by default)."""
        del ctx, result
        return []


@attrs.frozen(kw_only=True)
class Wait(_Step):
    """Nothing to do until ``wake`` (None: until the next poll or news).

    Rows L8, L10, L11, E10, E12, O4, O5, T2, T5, T6."""

    kind: ClassVar[str] = "wait"
    wake: datetime | None = None


@attrs.frozen(kw_only=True)
class Miss:
    """A known object a complete Find made at ``find_at`` did not show."""

    ref: ObjectRef
    find_at: datetime


@attrs.frozen(kw_only=True)
class Observe(_Step):
    """Record what the backend shows that the record does not: every differing observation,
    then every absence, in one commit.

    Rows L4, O1, O2, T7."""

    kind: ClassVar[str] = "observe"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.Observed, ev.Absent)
    fenced: ClassVar[bool] = False
    seen: tuple[ObjectObs, ...] = ()
    missing: tuple[Miss, ...] = ()

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        events: list[ev.AnyEvent] = [ev.Observed(at=ctx.at, by=ctx.by, obs=o) for o in self.seen]
        events.extend(
            ev.Absent(at=ctx.at, by=ctx.by, ref=m.ref, find_at=m.find_at) for m in self.missing
        )
        return events


@attrs.frozen(kw_only=True)
class RecordProgress(_Step):
    """Record what a reading of the job's progress showed that the record lacks (the progress,
    bounded by the job's ``record_every``; resumed entries; the source going blind or seeing
    again), as evidence, in one commit (:mod:`jobdispatch.progress`).

    Rows P1, P2."""

    kind: ClassVar[str] = "record-progress"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (
        ev.ProgressSeen,
        ev.ResumedFrom,
        ev.ProgressBlind,
        ev.ProgressSighted,
    )
    fenced: ClassVar[bool] = False
    evidence: tuple[pr.Evidence, ...] = ()

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        out: list[ev.AnyEvent] = []
        for item in self.evidence:
            if isinstance(item, pr.Mark):
                out.append(
                    ev.ProgressSeen(
                        at=ctx.at,
                        by=ctx.by,
                        step=item.step,
                        marked_at=item.at,
                        submission=item.submission,
                        execution=item.execution,
                        origin=item.origin,
                    )
                )
            elif isinstance(item, pr.Resumed):
                out.append(
                    ev.ResumedFrom(
                        at=ctx.at,
                        by=ctx.by,
                        submission=item.submission,
                        execution=item.execution,
                        step=item.step,
                        resumed_at=item.at,
                    )
                )
            elif isinstance(item, pr.Blind):
                out.append(ev.ProgressBlind(at=ctx.at, by=ctx.by, detail=item.detail))
            else:
                out.append(ev.ProgressSighted(at=ctx.at, by=ctx.by))
        return out


@attrs.frozen(kw_only=True)
class _StallVerdict(_Step):
    """What both stall steps carry: the run that made no progress and the ``stalled`` cause."""

    ref: ObjectRef
    execution: int
    cause: Cause

    def verdict(self, ctx: Context, *, enforced: bool) -> ev.StallDeclared:
        return ev.StallDeclared(
            at=ctx.at,
            by=ctx.by,
            ref=self.ref,
            execution=self.execution,
            cause=self.cause,
            enforced=enforced,
        )


@attrs.frozen(kw_only=True)
class DeclareStall(_StallVerdict):
    """A run made no progress for its stall rule's time: the verdict and the decision to stop
    the run are committed together, and only then is the run stopped, so the run's cause is
    ``stalled`` (never the ``cancelled`` a stop shows).

    Row P3."""

    kind: ClassVar[str] = "declare-stall"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.StallDeclared, ev.StopDecided)
    call_type: ClassVar[type[Call] | None] = calls.StopCall

    @property
    def reason(self) -> str:
        return f"stalled: {self.cause.detail}"

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [
            self.verdict(ctx, enforced=True),
            ev.StopDecided(at=ctx.at, by=ctx.by, ref=self.ref, reason=self.reason),
        ]

    def call(self, ctx: Context) -> Call:
        return calls.StopCall(ref=self.ref, reason=self.reason)


@attrs.frozen(kw_only=True)
class ObserveStall(_StallVerdict):
    """A run made no progress for its stall rule's time, and the rule only observes: the
    verdict is recorded, once per run, and nothing is stopped.

    Row P3."""

    kind: ClassVar[str] = "observe-stall"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.StallDeclared,)

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [self.verdict(ctx, enforced=False)]


@attrs.frozen(kw_only=True)
class ExpirePending(_Step):
    """The canonical object stayed pending past the job's pending deadline since it was opened:
    the verdict and the decision to stop it are committed together, and only then is it
    stopped, so its ending's cause is the deadline's (``no-capacity`` or ``never-fits``,
    provenance supervisor), never the ``cancelled`` a stop shows.

    Row P6."""

    kind: ClassVar[str] = "expire-pending"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.PendingExpired, ev.StopDecided)
    call_type: ClassVar[type[Call] | None] = calls.StopCall
    ref: ObjectRef
    cause: Cause

    @property
    def reason(self) -> str:
        return f"{self.cause.kind}: {self.cause.detail}"

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [
            ev.PendingExpired(at=ctx.at, by=ctx.by, ref=self.ref, cause=self.cause),
            ev.StopDecided(at=ctx.at, by=ctx.by, ref=self.ref, reason=self.reason),
        ]

    def call(self, ctx: Context) -> Call:
        return calls.StopCall(ref=self.ref, reason=self.reason)


@attrs.frozen(kw_only=True)
class Authorize(_Step):
    """Authorize submission ``submission``, used up by ``trigger``; a rule's authorization
    reserves its budget in the same event.

    Rows L1, L12, E3, H5, I1, P5."""

    kind: ClassVar[str] = "authorize"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.SubmissionAuthorized,)
    submission: int
    trigger: Trigger
    rule: int | None = None
    cause: Cause | None = None
    charged: bool | None = None
    #: Suspect nodes the submission keeps off, and until when (``jobdispatch.suspects``).
    exclude: tuple[str, ...] = ()
    exclude_until: datetime | None = None

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [
            ev.SubmissionAuthorized(
                at=ctx.at,
                by=ctx.by,
                n=self.submission,
                trigger=self.trigger,
                rule=self.rule,
                cause=self.cause,
                charged=self.charged,
                exclude=self.exclude,
                exclude_until=self.exclude_until,
            )
        ]


#: The exceptions of Start that are a refusal: the backend said no, so nothing was created.
_REFUSALS = (Rejected, Invalid, Unsupported)


@attrs.frozen(kw_only=True)
class Start(_Step):
    """Number the attempt, then call Start with the gate closed, then record whatever the reply
    was: created (with the object), refused, or unknown (``next`` then looks for the object by
    its discovery name).

    Rows L2, L3."""

    kind: ClassVar[str] = "start"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.AttemptStarted,)
    call_type: ClassVar[type[Call] | None] = calls.StartCall
    answers: ClassVar[tuple[type[ev.Event], ...]] = (ev.AttemptReplied,)
    submission: int
    attempt: int

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [
            ev.AttemptStarted(
                at=ctx.at, by=ctx.by, submission=self.submission, attempt=self.attempt
            )
        ]

    def call(self, ctx: Context) -> Call:
        return calls.StartCall(submission=self.submission, attempt=self.attempt)

    def answer(self, ctx: Context, result: Answer) -> list[ev.AnyEvent]:
        ref: ObjectRef | None = None
        detail = ""
        exc = result.error
        if isinstance(exc, OutcomeUnknown):
            reply, detail = REPLY_UNKNOWN, str(exc)
        elif isinstance(exc, _REFUSALS):
            reply, detail = REPLY_REFUSED, str(exc)
        elif exc is not None:  # an adapter's own failure: the object may exist or not
            reply, detail = REPLY_UNKNOWN, f"{type(exc).__name__}: {exc}"
        elif isinstance(result.value, ObjectRef):
            ref, reply = result.value, REPLY_CREATED
        else:  # an adapter that answered something else cannot say what it created
            reply, detail = REPLY_UNKNOWN, f"start answered {result.value!r}, not a reference"
        n, k = self.submission, self.attempt
        return [
            ev.AttemptReplied(
                at=result.at,
                by=ctx.by,
                submission=n,
                attempt=k,
                reply=reply,
                ref=ref,
                detail=detail,
            )
        ]


@attrs.frozen(kw_only=True)
class Canonical(_Step):
    """Choose ``ref`` (of attempt ``attempt``) as the one object of its submission that may run.

    Row L5."""

    kind: ClassVar[str] = "canonical"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.CanonicalChosen,)
    submission: int
    ref: ObjectRef
    attempt: int

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [
            ev.CanonicalChosen(
                at=ctx.at, by=ctx.by, submission=self.submission, ref=self.ref, attempt=self.attempt
            )
        ]


@attrs.frozen(kw_only=True)
class Retire(_Step):
    """Retire a duplicate object of a submission whose canonical is chosen, then stop it (it
    never ran: its gate was never lifted).

    Row L6."""

    kind: ClassVar[str] = "retire"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.Retired,)
    call_type: ClassVar[type[Call] | None] = calls.StopCall
    ref: ObjectRef
    submission: int
    attempt: int

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [
            ev.Retired(
                at=ctx.at, by=ctx.by, ref=self.ref, submission=self.submission, attempt=self.attempt
            )
        ]

    def call(self, ctx: Context) -> Call:
        return calls.StopCall(
            ref=self.ref, reason="a duplicate of the canonical object; it never ran"
        )


@attrs.frozen(kw_only=True)
class Open(_Step):
    """Decide to open the canonical object, with a deadline, then lift its gate by a call
    carrying that deadline.

    An adapter refuses the call past the deadline (the process paused between the two, say,
    while the job was cancelled or its lease taken, spec 0001 D8). A refusal commits nothing:
    ``next`` decides again, with a new deadline, if the object is still to be opened; the next
    Find shows whether it opened.

    Rows L7, L10."""

    kind: ClassVar[str] = "open"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.OpenDecided,)
    call_type: ClassVar[type[Call] | None] = calls.OpenCall
    submission: int
    ref: ObjectRef
    deadline: datetime

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [
            ev.OpenDecided(
                at=ctx.at,
                by=ctx.by,
                submission=self.submission,
                ref=self.ref,
                deadline=self.deadline,
            )
        ]

    def call(self, ctx: Context) -> Call:
        return calls.OpenCall(ref=self.ref, meta=CallMeta(deadline=self.deadline, by=ctx.by))


@attrs.frozen(kw_only=True)
class Stop(_Step):
    """Decide to stop an object, then stop it (again after ``STOP_RETRY`` while it lives).

    Rows L9, T1, T2, T7, P4."""

    kind: ClassVar[str] = "stop"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.StopDecided,)
    call_type: ClassVar[type[Call] | None] = calls.StopCall
    ref: ObjectRef
    reason: str

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [ev.StopDecided(at=ctx.at, by=ctx.by, ref=self.ref, reason=self.reason)]

    def call(self, ctx: Context) -> Call:
        return calls.StopCall(ref=self.ref, reason=self.reason)


@attrs.frozen(kw_only=True)
class VerifiedStopped(_Step):
    """Judge an object stopped after its absence lasted ``ABSENCE_GRACE``.

    Row O3."""

    kind: ClassVar[str] = "verified-stopped"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.VerifiedStopped,)
    ref: ObjectRef
    find_at: datetime

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [ev.VerifiedStopped(at=ctx.at, by=ctx.by, ref=self.ref, find_at=self.find_at)]


@attrs.frozen(kw_only=True)
class Outcome(_Step):
    """The job's outcome, and in the same commit the escalation it carries (once per id),
    which tells a person why no rule recovered it.

    Rows L12, E1, E2, E4, E7, E8, E9, E11."""

    kind: ClassVar[str] = "outcome"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.Escalated, ev.OutcomeDecided)
    state: State
    cause: Cause
    escalation: EscalationId | None = None
    detail: str = ""

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        events: list[ev.AnyEvent] = []
        if self.escalation is not None and self.escalation not in ctx.job.escalations:
            escalated = ev.Escalated(at=ctx.at, by=ctx.by, id=self.escalation, detail=self.detail)
            events.append(escalated)
        events.append(ev.OutcomeDecided(at=ctx.at, by=ctx.by, state=self.state, cause=self.cause))
        return events


@attrs.frozen(kw_only=True)
class Escalate(_Step):
    """Tell a person (the sinks deliver it at the next pass, one delivery recorded per sink).

    Rows L11, H4, T4, T5, P2."""

    kind: ClassVar[str] = "escalate"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.Escalated,)
    escalation: EscalationId
    detail: str

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [ev.Escalated(at=ctx.at, by=ctx.by, id=self.escalation, detail=self.detail)]


@attrs.frozen(kw_only=True)
class Settle(_Step):
    """The job is done with: everything stopped, nothing in flight.

    Rows T3, T5."""

    kind: ClassVar[str] = "settle"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.Settled,)

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [ev.Settled(at=ctx.at, by=ctx.by)]


@attrs.frozen(kw_only=True)
class RuleHold(_Step):
    """A rule's hold for a person: the recovery (charged to the rule's budget) and the hold, in
    one commit; the record alone holds it, no backend call.

    Row E6."""

    kind: ClassVar[str] = "rule-hold"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.RecoveryDecided, ev.HoldPlaced)
    submission: int
    trigger: Trigger
    rule: int
    cause: Cause
    hold: Hold
    instance: int
    charged: bool | None = None

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [
            ev.RecoveryDecided(
                at=ctx.at,
                by=ctx.by,
                rule=self.rule,
                trigger=self.trigger,
                cause=self.cause,
                submission=self.submission,
                charged=self.charged,
            ),
            ev.HoldPlaced(
                at=ctx.at,
                by=ctx.by,
                instance=self.instance,
                hold=self.hold,
                submission=self.submission,
                cause=self.cause,
            ),
        ]


@attrs.frozen(kw_only=True)
class LiftHold(_Step):
    """Lift a hold in the record (an operator hold whose time ran out, or a recovery hold the
    cessation signal ends with ``resume``); no backend call.

    Rows H3, H6."""

    kind: ClassVar[str] = "lift-hold"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.HoldLifted,)
    instance: int
    reason: str
    resume: bool = False

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [
            ev.HoldLifted(
                at=ctx.at, by=ctx.by, instance=self.instance, reason=self.reason, resume=self.resume
            )
        ]


@attrs.frozen(kw_only=True)
class _Recorded(_Step):
    """A call recorded both ways: ``call-issued`` (with its deadline; its revision is the call's
    id) committed before it, and ``call-answered`` naming that id after it, whatever happened."""

    op: ClassVar[CallOp]
    answers: ClassVar[tuple[type[ev.Event], ...]] = (ev.CallAnswered,)
    ref: ObjectRef
    deadline: datetime

    def _issued(self, ctx: Context, instance: int = 0) -> ev.CallIssued:
        return ev.CallIssued(
            at=ctx.at,
            by=ctx.by,
            op=self.op,
            ref=self.ref,
            deadline=self.deadline,
            instance=instance,
        )

    def answer(self, ctx: Context, result: Answer) -> list[ev.AnyEvent]:
        exc = result.error
        return [
            ev.CallAnswered(
                at=result.at,
                by=ctx.by,
                call=result.revision,
                ok=exc is None,
                detail="" if exc is None else describe(exc),
            )
        ]


@attrs.frozen(kw_only=True)
class BackendHold(_Recorded):
    """Place an operator's hold on the scheduler, by its instance, on a queued object.

    Row H1."""

    kind: ClassVar[str] = "backend-hold"
    op: ClassVar[CallOp] = CALL_HOLD
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.CallIssued,)
    call_type: ClassVar[type[Call] | None] = calls.HoldCall
    instance: int
    hold: Hold

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [self._issued(ctx, self.instance)]

    def call(self, ctx: Context) -> Call:
        hold = self.hold
        meta = HoldMeta(
            instance=self.instance,
            deadline=self.deadline,
            by=hold.by,
            reason=hold.reason,
            until=hold.until,
        )
        return calls.HoldCall(ref=self.ref, meta=meta)


@attrs.frozen(kw_only=True)
class BackendRelease(_Recorded):
    """Release a scheduler hold whose instance no longer stands, by that instance.

    Row H2."""

    kind: ClassVar[str] = "backend-release"
    op: ClassVar[CallOp] = CALL_RELEASE
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.CallIssued,)
    call_type: ClassVar[type[Call] | None] = calls.ReleaseCall
    instance: int

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [self._issued(ctx, self.instance)]

    def call(self, ctx: Context) -> Call:
        meta = HoldMeta(instance=self.instance, deadline=self.deadline, by=ctx.by)
        return calls.ReleaseCall(ref=self.ref, meta=meta)


@attrs.frozen(kw_only=True)
class _Requeues(_Recorded):
    """A requeue call on the canonical object of submission ``submission``, for ``trigger``."""

    op: ClassVar[CallOp] = CALL_REQUEUE
    call_type: ClassVar[type[Call] | None] = calls.RequeueCall
    submission: int
    trigger: Trigger

    def call(self, ctx: Context) -> Call:
        meta = CallMeta(deadline=self.deadline, by=ctx.by, reason=str(self.trigger))
        return calls.RequeueCall(ref=self.ref, meta=meta)


@attrs.frozen(kw_only=True)
class Requeue(_Requeues):
    """Requeue the canonical object for an intent decided already: a person's request, or the
    retry of a rule's requeue whose call showed no effect.

    Rows I2, E11."""

    kind: ClassVar[str] = "requeue"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.CallIssued,)

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [self._issued(ctx)]


@attrs.frozen(kw_only=True)
class RuleRequeue(_Requeues):
    """A rule's requeue (or restart the supervisor performs): the recovery, charged to the
    rule's budget, committed with the call's issue, then the call.

    Row E5."""

    kind: ClassVar[str] = "rule-requeue"
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.RecoveryDecided, ev.CallIssued)
    rule: int
    cause: Cause
    charged: bool | None = None

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        decided = ev.RecoveryDecided(
            at=ctx.at,
            by=ctx.by,
            rule=self.rule,
            trigger=self.trigger,
            cause=self.cause,
            ref=self.ref,
            submission=self.submission,
            charged=self.charged,
        )
        return [decided, self._issued(ctx)]


@attrs.frozen(kw_only=True)
class RestoreRequeue(_Recorded):
    """Clear a requeue bit a crash or an operator left set on the canonical object.

    Row I3."""

    kind: ClassVar[str] = "restore-requeue"
    op: ClassVar[CallOp] = CALL_RESTORE
    commits: ClassVar[tuple[type[ev.Event], ...]] = (ev.CallIssued,)
    call_type: ClassVar[type[Call] | None] = calls.RestoreCall

    def before(self, ctx: Context) -> list[ev.AnyEvent]:
        return [self._issued(ctx)]

    def call(self, ctx: Context) -> Call:
        return calls.RestoreCall(ref=self.ref, meta=CallMeta(deadline=self.deadline, by=ctx.by))


@attrs.frozen(kw_only=True)
class Cease(_Step):
    """Ask the site's cessation signal whether the processes of a held job's object are gone,
    and record the answer (unknown from an adapter without one). The signal answers within the
    pass, so its evidence carries the pass's time; the evidence has its own time besides.

    Row H6."""

    kind: ClassVar[str] = "cease"
    call_type: ClassVar[type[Call] | None] = calls.CeaseCall
    answers: ClassVar[tuple[type[ev.Event], ...]] = (ev.CessationAnswered,)
    ref: ObjectRef

    def call(self, ctx: Context) -> Call:
        return calls.CeaseCall(ref=self.ref)

    def answer(self, ctx: Context, result: Answer) -> list[ev.AnyEvent]:
        evidence = result.value
        if not isinstance(evidence, CessationEvidence):
            evidence = CessationEvidence(
                ceased=TRI_UNKNOWN,
                detail=f"the cessation signal answered {evidence!r}, not evidence",
                at=ctx.at,
            )
        return [ev.CessationAnswered(at=ctx.at, by=ctx.by, ref=self.ref, evidence=evidence)]


#: Every step ``next`` can return: a closed union, so an executor that handles a step by its
#: class is checked for every one of them.
Step: TypeAlias = (
    Wait
    | Observe
    | RecordProgress
    | DeclareStall
    | ObserveStall
    | ExpirePending
    | Authorize
    | Start
    | Canonical
    | Retire
    | Open
    | Stop
    | VerifiedStopped
    | Outcome
    | Escalate
    | Settle
    | RuleHold
    | LiftHold
    | BackendHold
    | BackendRelease
    | Requeue
    | RuleRequeue
    | RestoreRequeue
    | Cease
)

#: The classes of ``Step``, in the order the docs list them.
STEPS: Sequence[type[_Step]] = (
    Wait,
    Observe,
    RecordProgress,
    DeclareStall,
    ObserveStall,
    ExpirePending,
    Authorize,
    Start,
    Canonical,
    Retire,
    Open,
    Stop,
    VerifiedStopped,
    Outcome,
    Escalate,
    Settle,
    RuleHold,
    LiftHold,
    BackendHold,
    BackendRelease,
    Requeue,
    RuleRequeue,
    RestoreRequeue,
    Cease,
)


def _wait(*times: datetime | None) -> list[Step]:
    due = [t for t in times if t is not None]
    return [Wait(wake=min(due) if due else None)]


# ------------------------------------------------------------------ evidence first


def _observations(job: Job, discovery: Discovery, now: datetime) -> list[Step]:
    seen: list[ObjectObs] = []
    missing: list[Miss] = []
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
        seen.append(obs)
    if discovery.complete:
        present = {o.ref.id for o in discovery.objects}
        at = discovery.at or now
        for rec in job.objects.values():
            if rec.ref.id in present or rec.done:
                continue
            if rec.absent_last is not None and at - rec.absent_last < ABSENCE_REFRESH:
                continue  # a recent miss is on record already
            missing.append(Miss(ref=rec.ref, find_at=at))
    if not seen and not missing:
        return []
    return [Observe(seen=tuple(seen), missing=tuple(missing))]


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
            return [VerifiedStopped(ref=rec.ref, find_at=now)], None
        # Look again when the next miss is due to be recorded: a supervisor that polls less
        # often than ABSENCE_GAP (Slurm's 30 s) would otherwise let the absence start over.
        due = min(due, rec.absent_last + ABSENCE_REFRESH)
        wake = due if wake is None else min(wake, due)
    return [], wake


# ------------------------------------------------------------------ endings and rules


def _end_of(job: Job, sub: SubmissionRec) -> tuple[End, Cause] | None:
    """The unhandled end of the submission's canonical object: its trigger key and cause."""
    if sub.canonical is None:
        return None
    obj = job.object(sub.canonical)
    if obj is None or not obj.done:
        return None
    executions = obj.executions()
    if executions:
        last = max(executions, key=lambda x: x.index)
        key = End(obj.ref.id, last.index)
        if last.state is OBJ_ENDED:
            cause = job.run_cause(obj, last) or Cause(
                CAUSE_UNKNOWN, detail="the backend gave no cause"
            )
        else:
            cause = Cause(CAUSE_UNKNOWN, detail="vanished from the backend while it ran")
    elif obj.ref.id in job.pending_expired:
        # Stopped for waiting past the pending deadline: that decision preceded the stop.
        key = End(obj.ref.id, -1)
        cause = job.pending_expired[obj.ref.id]
    elif obj.ever_opened or obj.open_decided:
        key = End(obj.ref.id, -1)
        cause = Cause(CAUSE_UNKNOWN, detail="ended without a run the backend showed")
        if not obj.ever_opened:
            cause = Cause(CAUSE_LAUNCH_FAILED, PROV_SCHEDULER, "vanished before it ran")
    else:
        key = End(obj.ref.id, -1)
        cause = Cause(CAUSE_LAUNCH_FAILED, PROV_SCHEDULER, "vanished while gated")
    if key in job.handled_ends:
        return None
    return key, cause


def _launch_failure(job: Job, sub: SubmissionRec) -> tuple[Launch, Cause] | None:
    """A submission whose every attempt was refused or abandoned, with no object to show."""
    if sub.canonical is not None or not sub.attempts:
        return None
    if any(o for o in job.objects_of(sub.n) if not o.retired):
        return None
    if not all(a.reply is REPLY_REFUSED or a.abandoned for a in sub.attempts):
        return None
    key = Launch(sub.n)
    if key in job.triggers:
        return None
    return key, sub.launch_failure()


def _failed(cause: Cause, escalation: EscalationId | None = None, detail: str = "") -> Outcome:
    """The job's outcome: failed with the execution's own cause. ``escalation`` (committed with
    the outcome, once per id) tells a person why no rule recovered it, where one covered it."""
    return Outcome(state=STATE_FAILED, cause=cause, escalation=escalation, detail=detail)


def _authorize(
    job: Job,
    now: datetime,
    *,
    submission: int,
    trigger: Trigger,
    rule: int | None = None,
    cause: Cause | None = None,
    charged: bool | None = None,
) -> Authorize:
    """A submission after the first, carrying the suspect nodes it keeps off at ``now`` (a first
    submission has no runs behind it, so nothing is suspect)."""
    exclude, until = excluded(job, now)
    return Authorize(
        submission=submission,
        trigger=trigger,
        rule=rule,
        cause=cause,
        charged=charged,
        exclude=exclude,
        exclude_until=until,
    )


def _apply_rules(job: Job, sub: SubmissionRec, key: Trigger, cause: Cause, now: datetime) -> Step:
    """What an ended execution (or failed launch) leads to: an outcome, or a rule's action."""
    if cause.kind is CAUSE_NONE:
        return Outcome(state=STATE_SUCCEEDED, cause=cause)
    match = next((a for a in job.header.plan.rules if cause.kind in a.effective.on), None)
    if match is None:
        return _failed(cause)
    rule = match.effective
    n = match.index
    if match.enforcer is ENFORCER_NOBODY:
        return _failed(
            cause,
            Unenforced(n, key),
            f"rule {n} covers {cause.kind} but nobody enforces it",
        )
    if match.enforcer is ENFORCER_BACKEND:
        return _failed(cause, NativeSpent(n, key), f"the backend did not rerun it under rule {n}")
    if rule.action is ACTION_ESCALATE:
        return _failed(cause, RuleEscalates(n, key), f"rule {n} escalates {cause.kind}")
    # Under ``no-advance`` the firing says whether it is charged (spec 0001 D6, P5).
    charged = job.would_charge(n) if rule.charge is CHARGE_NO_ADVANCE else None
    if job.remaining(n) <= 0 and charged is not False:
        # Under ``no-advance`` a firing after which training advanced is not charged, so a
        # spent budget does not stop it (spec 0001, "Budgets that know whether training
        # advanced").
        return _failed(
            cause,
            BudgetSpent(n),
            f"rule {n} ({rule.action} on {cause.kind}) has spent its budget of {rule.budget}",
        )
    if rule.action is ACTION_RESUBMIT:
        return _authorize(
            job, now, submission=sub.n + 1, trigger=key, rule=n, cause=cause, charged=charged
        )
    if rule.action in (ACTION_REQUEUE, ACTION_RESTART):
        if sub.canonical is None:
            # A launch that failed left no object to run again in place.
            return _failed(
                cause,
                RuleEscalates(n, key),
                f"rule {n} would {rule.action} on {cause.kind}, but submission {sub.n} has no "
                f"object to {rule.action}",
            )
        return RuleRequeue(
            submission=sub.n,
            ref=sub.canonical,
            trigger=key,
            rule=match.index,
            cause=cause,
            deadline=now + CALL_DEADLINE,
            charged=charged,
        )
    if rule.action is ACTION_HOLD:
        until = now + rule.for_ if rule.for_ is not None else None
        hold = Hold(
            HOLD_RECOVERY,
            Actor.supervisor("policy"),
            f"rule {n}: {cause.kind}; a person decides",
            until,
        )
        return RuleHold(
            submission=sub.n,
            trigger=key,
            rule=match.index,
            cause=cause,
            hold=hold,
            instance=len(job.holds) + 1,
            charged=charged,
        )
    return _failed(cause, RuleEscalates(n, key), f"rule {n} escalates {cause.kind}")


# ------------------------------------------------------------------ holds


def _holds(job: Job, hold: HoldRec | None, now: datetime) -> tuple[list[Step], datetime | None]:
    if hold is None:
        return [], None
    if hold.hold.until is not None and now >= hold.hold.until:
        if hold.hold.kind is HOLD_OPERATOR:
            return [LiftHold(instance=hold.instance, reason="the hold's time ran out")], None
        esc = HoldExpired(hold.instance)
        if esc not in job.escalations:
            return [
                Escalate(
                    escalation=esc,
                    detail=f"hold {hold.instance} ({hold.hold.reason}) passed its deadline "
                    "with nobody releasing it; it stays held",
                )
            ], None
    wake = hold.hold.until if hold.hold.until is not None and now < hold.hold.until else None
    if (
        hold.hold.kind is HOLD_RECOVERY
        and job.header.plan.checkpoint is CHECKPOINT_SHARED
        and hold.submission
    ):
        sub = job.submission(hold.submission)
        obj = job.object(sub.canonical) if sub and sub.canonical else None
        if obj is not None:
            if obj.ceased is TRI_YES:
                return [
                    LiftHold(
                        instance=hold.instance,
                        resume=True,
                        reason="the site's cessation signal says its processes are gone",
                    )
                ], None
            due = obj.ceased_at + CESSATION_INTERVAL if obj.ceased_at else now
            if now >= due:
                return [Cease(ref=obj.ref)], None
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
        if job.in_flight(obj.ref, CALL_RELEASE, now) is None:
            return [BackendRelease(ref=obj.ref, instance=standing, deadline=now + CALL_DEADLINE)]
        return []
    can_hold = job.header.plan.capabilities.get(CAP_HOLD)
    if (
        hold is not None
        and hold.hold.kind is HOLD_OPERATOR
        and standing is None
        and obj.open_decided
        and obj.obs.state is OBJ_PENDING
        and can_hold is not None
        and can_hold.answer is TRI_YES
    ):
        tried = [c for c in job.calls_on(obj.ref, CALL_HOLD) if c.instance == hold.instance]
        if not tried or (not tried[-1].in_flight(now) and not tried[-1].ok):
            return [
                BackendHold(
                    ref=obj.ref,
                    instance=hold.instance,
                    deadline=now + CALL_DEADLINE,
                    hold=hold.hold,
                )
            ]
    return []


# ------------------------------------------------------------------ the launch


def _launch(
    job: Job, sub: SubmissionRec, hold: HoldRec | None, now: datetime
) -> tuple[list[Step], datetime | None]:
    """The next step of the latest submission's launch: until it has a canonical object,
    getting one (:func:`_to_canonical`); then opening it (:func:`_to_open`)."""
    if sub.canonical is None:
        return _to_canonical(job, sub, now)
    return _to_open(job, sub, sub.canonical, hold, now)


def _to_canonical(
    job: Job, sub: SubmissionRec, now: datetime
) -> tuple[list[Step], datetime | None]:
    """Choose the oldest live object of the submission's attempts as canonical; else start
    an attempt, while ``submit_retries`` allows; else, attempts unresolved past
    ``unresolved_age``, tell a person. A refused or abandoned last attempt with none
    unresolved is a launch failure, :func:`_launch_failure`'s."""
    opts = job.header.options
    known = sorted(
        (o for o in job.objects_of(sub.n) if not o.retired and not o.done),
        key=lambda o: o.attempt,
    )
    if known:
        first = known[0]
        return [Canonical(submission=sub.n, ref=first.ref, attempt=first.attempt)], None
    if not sub.attempts:
        return [Start(submission=sub.n, attempt=1)], None
    last = sub.attempts[-1]
    unresolved = [a for a in sub.attempts if not a.abandoned and a.reply in (None, REPLY_UNKNOWN)]
    if (last.reply is REPLY_REFUSED or last.abandoned) and not unresolved:
        return [], None  # a launch failure; _launch_failure handles it
    if len(sub.attempts) < 1 + opts.submit_retries:
        return [Start(submission=sub.n, attempt=len(sub.attempts) + 1)], None
    first_at = min(a.started_at for a in unresolved)
    due = first_at + opts.unresolved_age
    esc = Unresolved(sub.n)
    if now >= due and esc not in job.escalations:
        return [
            Escalate(
                escalation=esc,
                detail=f"submission {sub.n}: {len(unresolved)} attempts stayed "
                f"unresolved for {opts.unresolved_age}; find or abandon them",
            )
        ], None
    return [], due if now < due else None


def _to_open(
    job: Job, sub: SubmissionRec, canonical: ObjectRef, hold: HoldRec | None, now: datetime
) -> tuple[list[Step], datetime | None]:
    """Open the submission's canonical object, unless held, once every older submission's
    object is over (stopping it first when it is not), and again if the open did not land."""
    obj = job.object(canonical)
    if obj is None or obj.done:
        return [], None
    if not obj.open_decided:
        if hold is not None:
            return [], None  # held: the gate stays closed until released
        for older in job.submissions[: sub.n - 1]:
            for o in job.objects_of(older.n):
                if o.canonical and o.open_decided and (not o.done or _maybe_rerun(job, o, now)):
                    # Submission n opens only once n-1's object is ended or verified stopped,
                    # and an ended one is taken as over only if no requeue may have rerun it
                    # since it was seen (seed 10071625: a person's requeue called on it after
                    # a rule's hold, the hold released, and the rerun and n's object live at
                    # once).
                    return _stop_steps(job, o, "a newer submission replaces it", now)
        return [_open_step(sub.n, obj.ref, now)], None
    if obj.state is OBJ_GATED or obj.state is None:
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
    return Open(submission=n, ref=ref, deadline=now + CALL_DEADLINE)


def _stop_steps(
    job: Job, obj: ObjectRec, reason: str, now: datetime
) -> tuple[list[Step], datetime | None]:
    if not obj.stop_decided:
        return [Stop(ref=obj.ref, reason=reason)], None
    last = job.stop_at.get(obj.ref.id)
    if last is None or now >= last + STOP_RETRY:
        return [Stop(ref=obj.ref, reason=reason + " (again)")], None
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
            return [Retire(ref=obj.ref, submission=obj.submission, attempt=obj.attempt)], None
    return [], wake


def _restore_bit(job: Job, now: datetime) -> list[Step]:
    latest = job.latest
    if latest is None or latest.canonical is None:
        return []
    obj = job.object(latest.canonical)
    if obj is None or obj.obs is None or obj.obs.requeue_bit is not True or obj.done:
        return []
    native = any(
        a.enforcer is ENFORCER_BACKEND and a.effective.action is ACTION_REQUEUE
        for a in job.header.plan.rules
    )
    if native or job.requeues:
        return []
    if job.in_flight(obj.ref, CALL_REQUEUE, now) or job.in_flight(obj.ref, CALL_RESTORE, now):
        return []
    return [RestoreRequeue(ref=obj.ref, deadline=now + CALL_DEADLINE)]


def _requeue_trouble(job: Job, now: datetime) -> tuple[list[Step], datetime | None]:
    """A recovery by requeue whose call failed, or whose effect never showed."""
    latest = job.latest
    if latest is None or latest.canonical is None:
        return [], None
    obj = job.object(latest.canonical)
    if obj is None or not obj.done or obj.verified_stopped:
        return [], None
    calls = job.calls_on(obj.ref, CALL_REQUEUE)
    ended = [x for x in obj.executions() if x.state is OBJ_ENDED]
    if not calls or not ended or End(obj.ref.id, ended[-1].index) not in job.handled_ends:
        return [], None
    last = calls[-1]
    if last.in_flight(now):
        return [], last.deadline
    cause = job.recovery_cause or ended[-1].cause or Cause(CAUSE_UNKNOWN)
    settle_by = last.deadline + ABSENCE_GRACE
    if last.answered and last.ok and now < settle_by:
        return [], settle_by  # it landed; the rerun takes a moment to show
    if (last.answered and not last.ok) or len(calls) >= REQUEUE_TRIES:
        why = last.detail if last.answered else "no effect showed"
        return [
            Outcome(
                state=STATE_FAILED,
                cause=cause,
                escalation=RequeueFailed(last.revision),
                detail=f"the requeue of {obj.ref} failed after {len(calls)} calls: {why}",
            )
        ], None
    return [
        Requeue(
            ref=obj.ref,
            submission=latest.n,
            trigger=Retry(last.revision),
            deadline=now + CALL_DEADLINE,
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
    flying = job.in_flight(obj.ref, CALL_REQUEUE, now)
    if flying is not None:
        return [], flying.deadline
    trigger, _, _ = job.requeues[0]
    return [
        Requeue(
            ref=obj.ref,
            submission=latest.n,
            trigger=trigger,
            deadline=now + CALL_DEADLINE,
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
    if obj.verified_stopped or obj.state is not OBJ_ENDED:
        return False
    calls = job.calls_on(obj.ref, CALL_REQUEUE)
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
        if now >= due and CLEANUP not in job.escalations:
            names = ", ".join(o.ref.id for o in pending)
            return [
                Escalate(
                    escalation=CLEANUP,
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
    if job.header.options.unmatched is UNMATCHED_MANUAL and unresolved:
        # Only a person can abandon them: tell one, as the launch does, once they are old.
        due = min(a.started_at for a in unresolved) + job.header.options.unresolved_age
        esc = Unresolved(unresolved[0].n)
        if now >= due and esc not in job.escalations:
            return [
                Escalate(
                    escalation=esc,
                    detail=f"{len(unresolved)} attempts stayed unresolved for "
                    f"{job.header.options.unresolved_age} and block settlement under the "
                    "manual policy; find or abandon them",
                )
            ]
        return _wait(*wakes, due if now < due else None)
    return [Settle()]


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
        return [Authorize(submission=1, trigger=SUBMIT)]
    hold = job.active_hold
    wakes: list[datetime | None] = []
    ended = _end_of(job, latest) or _launch_failure(job, latest)
    if ended is not None:
        step = _apply_rules(job, latest, ended[0], ended[1], now)
        # One hold at a time: a rule's hold for a person waits until a standing hold is lifted.
        if not isinstance(step, RuleHold) or hold is None:
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
        trigger = Release(h.instance)
        if (
            not h.active
            and h.resume
            and h.hold.kind is HOLD_RECOVERY
            and trigger not in job.triggers
        ):
            return [_authorize(job, now, submission=latest.n + 1, trigger=trigger, cause=h.cause)]
    if job.resubmits:
        return [_authorize(job, now, submission=latest.n + 1, trigger=Resubmit(job.resubmits[0]))]

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

    steps, wake = _stalled(job, latest, now)
    if steps:
        return steps
    wakes.append(wake)

    steps, wake = _pending_too_long(job, latest, hold, now)
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


def _stalled(job: Job, sub: SubmissionRec, now: datetime) -> tuple[list[Step], datetime | None]:
    """A run declared stalled (enforced) that still runs is stopped again after STOP_RETRY."""
    if not job.stalls or sub.canonical is None:
        return [], None
    obj = job.object(sub.canonical)
    if obj is None or obj.done or not obj.executions():
        return [], None
    run = obj.executions()[-1]
    stall = job.stalls.get((obj.ref.id, run.index))
    if stall is None or not stall.enforced or run.state is OBJ_ENDED:
        return [], None
    return _stop_steps(job, obj, f"stalled: {stall.cause.detail}", now)


def _span(span: timedelta) -> str:
    """A duration as people say it: ``2h 5m``, ``40s``."""
    seconds = int(span.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
        f"{secs}s" if secs else "",
    ]
    return " ".join(p for p in parts if p) or "0s"


def _pending_too_long(
    job: Job, sub: SubmissionRec, hold: HoldRec | None, now: datetime
) -> tuple[list[Step], datetime | None]:
    """The job's pending deadline (``[pending]``) over the canonical object of the latest
    submission: opened, shown pending, never seen to start, and not held, since its open (or
    the latest lift of a hold on the submission, whichever is later) for ``pending.after``:
    stop it with the deadline's cause (row P6). One already expired that still lives is stopped
    again after STOP_RETRY. Otherwise, when the deadline is due, the wake-up."""
    rule = job.header.spec.pending
    if rule is None or sub.canonical is None:
        return [], None
    obj = job.object(sub.canonical)
    if obj is None or obj.done or not obj.open_decided:
        return [], None
    if obj.ref.id in job.pending_expired:
        cause = job.pending_expired[obj.ref.id]
        return _stop_steps(job, obj, f"{cause.kind}: {cause.detail}", now)
    if hold is not None or obj.state is not OBJ_PENDING:
        return [], None
    started = any(
        e.started_at is not None or e.state is not OBJ_PENDING for e in obj.executions()
    ) or any(key[0] == obj.ref.id for key in job.running_since)
    opened = job.open_at.get(obj.ref.id)
    if started or opened is None:
        return [], None
    lifted = [h.lifted_at for h in job.holds if h.lifted_at is not None and h.submission == sub.n]
    since = max([opened, *lifted])
    due = since + rule.after
    if now < due:
        return [], due
    said = obj.obs.detail if obj.obs is not None and obj.obs.detail else ""
    detail = (
        f"pending for {_span(now - since)} since it was opened, past pending after "
        f"{_span(rule.after)}" + (f"; the backend said: {said}" if said else "")
    )
    cause = Cause(rule.cause, PROV_SUPERVISOR, detail)
    return [ExpirePending(ref=obj.ref, cause=cause)], None


def _progress(job: Job, reading: pr.Reading, now: datetime) -> list[Step]:
    """What this poll's reading of the job's progress asks for (:func:`progress.judge`)."""
    verdict = pr.judge(job, reading, now)
    if verdict.evidence:
        return [RecordProgress(evidence=verdict.evidence)]
    stall = verdict.stall
    if stall is not None:
        if stall.enforced:
            return [DeclareStall(ref=stall.ref, execution=stall.execution, cause=stall.cause)]
        return [ObserveStall(ref=stall.ref, execution=stall.execution, cause=stall.cause)]
    if verdict.escalation is not None:
        return [Escalate(escalation=verdict.escalation, detail=verdict.detail)]
    return []


def next_steps(
    job: Job, discovery: Discovery, now: datetime, progress: pr.Reading | None = None
) -> list[Step]:
    """What should happen next, most urgent first. Pure: no I/O, no clock.

    Every step is computed from the revision ``job`` was folded from and the ``discovery`` made
    after reading it; an executor commits decisions conditionally on that revision.
    ``progress`` is what this poll read of the job's progress (None: not read this pass, and
    nothing is judged on it): its evidence is recorded right after the backend's, and a stall
    is declared before anything else is driven (:mod:`jobdispatch.progress`).
    """
    observe = _observations(job, discovery, now)
    if observe:
        return observe
    if job.settled:
        return _sweep(job, now)
    if job.terminal:
        return _cleanup(job, now)
    if progress is not None:
        steps = _progress(job, progress, now)
        if steps:
            return steps
    return _drive(job, now)
