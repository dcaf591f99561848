"""The step executor: one pass of read → find → fold → next → execute, for one job.

It has no loop, no sleep, no thread and no clock of its own: the store, the backend and the
clock are injected, so the simulator drives exactly this code, single-threaded, under crashes.
The rules it follows (docs/specs/0004-supervisor.md):

* a decision is committed with ``expect_revision`` (the revision ``next`` was computed from)
  and the owner's lease, and only then is its backend call made;
* a call's result is committed as evidence afterwards, at whatever revision the record has
  reached (evidence is a fact; recording it late is never wrong);
* on Conflict nothing is called: the pass ends and the next one re-reads and recomputes;
* a pass that finds its lease gone acts on nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from datetime import datetime

import attrs
from jobdispatch.clock import Clock
from jobdispatch.errors import (
    Conflict,
    DispatchError,
    Invalid,
    NotFound,
    OutcomeUnknown,
    Rejected,
    Unsupported,
)
from jobdispatch.job import Job, Replay
from jobdispatch.launch import start_request
from jobdispatch.records import events as ev
from jobdispatch.records.store import Lease, Records
from jobdispatch.spi import (
    Backend,
    CessationEvidence,
    CessationSignal,
    Discovery,
    Holder,
    ObjectRef,
    Requeuer,
)
from jobdispatch.steps import Step, StepKind, next_steps
from jobdispatch.triggers import EscalationId
from jobdispatch.types import Actor, CallMeta, Enforcer, HoldMeta, Tristate

from jobdispatch_supervise.sinks import EscalationMessage, Sink

# Enum members bound once as module globals. In CPython 3.11 every ``Kind.MEMBER`` lookup goes
# through EnumType's __getattr__ hook (about a thousand instructions); a global costs a few.
_CALL_HOLD = ev.CallOp.HOLD
_CALL_RELEASE = ev.CallOp.RELEASE
_CALL_REQUEUE = ev.CallOp.REQUEUE
_CALL_RESTORE = ev.CallOp.RESTORE
_ENFORCER_BACKEND = Enforcer.BACKEND
_REPLY_CREATED = ev.Reply.CREATED
_REPLY_REFUSED = ev.Reply.REFUSED
_REPLY_UNKNOWN = ev.Reply.UNKNOWN
_STEP_OBSERVE = StepKind.OBSERVE
_STEP_REQUEUE = StepKind.REQUEUE
_STEP_WAIT = StepKind.WAIT
_TRI_UNKNOWN = Tristate.UNKNOWN

__all__ = ["Executor", "Pass"]

log = logging.getLogger("jobdispatch.supervise")

#: How many jobs' folds an executor keeps to extend (see Executor._fold).
FOLDS_KEPT = 256

#: Environment every process of an execution gets, so checkpoints and logs can be told apart.


@attrs.frozen(kw_only=True)
class Pass:
    """What one pass did: the step it executed (or the wait), and whether the job is settled."""

    step: Step | None
    settled: bool = False
    lost: bool = False
    conflict: bool = False
    wake: datetime | None = None
    revision: int = 0


class Executor:
    """Executes ``next``'s first step for one job per call of :meth:`run_pass`."""

    def __init__(
        self,
        backend: Backend,
        store: Records,
        *,
        clock: Clock,
        holder: str,
        sinks: Sequence[Sink] = (),
    ) -> None:
        self.backend = backend
        self.store = store
        self.clock = clock
        self.holder = holder
        self.actor = Actor.supervisor(holder)
        self.sinks = list(sinks)
        #: Job -> its record folded so far, extended by each pass (see _fold).
        self._replays: dict[str, Replay] = {}

    # ---------------------------------------------------------------- one pass

    def run_pass(self, job: str, lease: Lease, discovery: Discovery | None = None) -> Pass:
        """Read, find (unless given), fold, compute, and execute the first step."""
        view = self.store.read(job)
        if discovery is None:
            discovery = self.backend.find(job)
        now = self.clock()
        folded = self._fold(view, now)
        self._deliver(folded, view.revision)
        steps = next_steps(folded, discovery, now)
        step = steps[0]
        if step.kind is _STEP_WAIT:
            return Pass(step=step, settled=folded.settled, wake=step.wake, revision=view.revision)
        try:
            if step.kind is _STEP_OBSERVE:
                observe = [s for s in steps if s.kind is _STEP_OBSERVE]
                self._observe(job, observe, view.revision, now)
            else:
                self._execute(job, folded, step, view.revision, lease, now)
        except Conflict as exc:
            log.debug("job %s: %s; re-reading", job, exc)
            return Pass(step=step, conflict=True, revision=view.revision)
        return Pass(step=step, revision=view.revision)

    def _fold(self, view: ev.View, now: datetime) -> Job:
        """``fold(view, now)``, computed from this executor's previous fold of the job.

        Most passes read the record their own previous pass left, plus what that pass (or
        another writer) committed since; refolding the whole record each time would make a
        job's life quadratic in its length. Each job keeps a :class:`~jobdispatch.job.Replay`,
        which runs fold's own code over only the events added since, and over the whole record
        whenever the view is not the previous one plus new events, so the answer is always
        ``fold``'s. The Job it returns changes on the job's next pass: a pass uses it and lets
        it go. Invalid propagates as from ``fold``, and the next pass starts over.
        """
        replays = self._replays
        job = view.header.job
        replay = replays.pop(job, None)
        if replay is None:
            replay = Replay()
            if len(replays) >= FOLDS_KEPT:
                # Forget the job folded longest ago (the table keeps insertion order and a
                # job is moved to its end on every pass).
                del replays[next(iter(replays))]
        replays[job] = replay
        return replay.extend(view, now)

    # ---------------------------------------------------------------- commits

    def _decide(self, job: str, events: Sequence[ev.AnyEvent], revision: int, lease: Lease) -> int:
        return self.store.append(job, events, expect_revision=revision, owner=lease)

    def _evidence(
        self,
        job: str,
        events: Sequence[ev.AnyEvent],
        revision: int,
        recorded: Callable[[ev.View], bool] | None = None,
    ) -> int:
        """Commit evidence, moving forward past revisions others committed meanwhile.

        ``recorded`` tells whether a newer revision holds the fact already (another supervisor
        recorded it), in which case it is not recorded twice.
        """
        for _ in range(10):
            try:
                return self.store.append(job, events, expect_revision=revision)
            except Conflict:
                view = self.store.read(job)
                revision = view.revision
                if recorded is not None and recorded(view):
                    return revision
        msg = f"job {job}: could not record evidence; the record kept moving"
        raise Conflict(msg)

    def _observe(self, job: str, steps: Sequence[Step], revision: int, now: datetime) -> None:
        events: list[ev.AnyEvent] = []
        for s in steps:
            if s.obs is not None:
                events.append(ev.Observed(at=now, by=self.actor, obs=s.obs))
            elif s.ref is not None and s.find_at is not None:
                events.append(ev.Absent(at=now, by=self.actor, ref=s.ref, find_at=s.find_at))
        self.store.append(job, events, expect_revision=revision)

    # ---------------------------------------------------------------- steps

    def _execute(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        """Commit ``step``'s decision at ``revision`` under ``lease``, then make its call.

        Each kind has one method, named in ``_EXECUTE``; they are looked up on the instance, so
        a subclass (or the simulator's mutants) can replace one."""
        name = _EXECUTE.get(step.kind)
        if name is None:  # STOP_JOB is the stopper's, never next's
            msg = f"step {step.kind} cannot be executed by the supervisor"
            raise Invalid(msg)
        getattr(self, name)(job, folded, step, revision, lease, now)

    def _authorize(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        assert step.trigger is not None
        event = ev.SubmissionAuthorized(
            at=now,
            by=self.actor,
            n=step.submission,
            trigger=step.trigger,
            rule=step.rule,
            cause=step.cause,
        )
        self._decide(job, [event], revision, lease)

    def _start(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        """Number the attempt, call Start, and record whatever the reply was (unknown included:
        ``next`` then searches for the object by its discovery name)."""
        me = self.actor
        revision = self._decide(
            job,
            [ev.AttemptStarted(at=now, by=me, submission=step.submission, attempt=step.attempt)],
            revision,
            lease,
        )
        header = folded.header
        request = start_request(
            self.backend,
            job,
            header.spec,
            header.plan,
            submission=step.submission,
            attempt=step.attempt,
            firings=folded.firings,
        )
        ref: ObjectRef | None = None
        detail = ""
        try:
            ref = self.backend.start(request)
            reply = _REPLY_CREATED
        except OutcomeUnknown as exc:
            reply, detail = _REPLY_UNKNOWN, str(exc)
        except (Rejected, Invalid, Unsupported) as exc:
            reply, detail = _REPLY_REFUSED, str(exc)
        except Exception as exc:  # an adapter's own failure: the object may exist or not
            reply, detail = _REPLY_UNKNOWN, f"{type(exc).__name__}: {exc}"
        answer = ev.AttemptReplied(
            at=self.clock(),
            by=me,
            submission=step.submission,
            attempt=step.attempt,
            reply=reply,
            ref=ref,
            detail=detail,
        )
        self._evidence(job, [answer], revision)

    def _canonical(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        assert step.ref is not None
        event = ev.CanonicalChosen(
            at=now, by=self.actor, submission=step.submission, ref=step.ref, attempt=step.attempt
        )
        self._decide(job, [event], revision, lease)

    def _retire(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        assert step.ref is not None
        event = ev.Retired(
            at=now, by=self.actor, ref=step.ref, submission=step.submission, attempt=step.attempt
        )
        self._decide(job, [event], revision, lease)
        self._call_stop(step, "a duplicate of the canonical object; it never ran")

    def _open(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        """Commit the open with its deadline, then make the call under that deadline.

        An adapter refuses the call once the deadline has passed (this process paused between
        the two, say, while the job was cancelled or its lease taken). The refusal is only
        logged: nothing was lifted, and ``next`` decides again, with a new deadline, if the
        job still wants the object open."""
        assert step.ref is not None and step.deadline is not None
        me = self.actor
        event = ev.OpenDecided(
            at=now, by=me, submission=step.submission, ref=step.ref, deadline=step.deadline
        )
        self._decide(job, [event], revision, lease)
        try:
            self.backend.open(step.ref, CallMeta(deadline=step.deadline, by=me))
        except Rejected as exc:
            log.warning("job %s: open of %s refused: %s", job, step.ref, exc)

    def _stop(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        assert step.ref is not None
        event = ev.StopDecided(at=now, by=self.actor, ref=step.ref, reason=step.detail)
        self._decide(job, [event], revision, lease)
        self._call_stop(step, step.detail)

    def _call_stop(self, step: Step, reason: str) -> None:
        assert step.ref is not None
        with contextlib.suppress(NotFound):  # already gone is success
            self.backend.stop(step.ref, reason)

    def _verified_stopped(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        assert step.ref is not None and step.find_at is not None
        event = ev.VerifiedStopped(at=now, by=self.actor, ref=step.ref, find_at=step.find_at)
        self._decide(job, [event], revision, lease)

    def _outcome(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        """The outcome, and in the same commit the escalation it carries (once per id)."""
        assert step.state is not None and step.cause is not None
        me = self.actor
        events: list[ev.AnyEvent] = []
        if step.escalation is not None and step.escalation not in folded.escalations:
            events.append(ev.Escalated(at=now, by=me, id=step.escalation, detail=step.detail))
        events.append(ev.OutcomeDecided(at=now, by=me, state=step.state, cause=step.cause))
        self._decide(job, events, revision, lease)

    def _escalate(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        assert step.escalation is not None
        event = ev.Escalated(at=now, by=self.actor, id=step.escalation, detail=step.detail)
        self._decide(job, [event], revision, lease)

    def _settle(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        self._decide(job, [ev.Settled(at=now, by=self.actor)], revision, lease)

    def _cease(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        """Ask the site's cessation signal, and record its answer as evidence."""
        assert step.ref is not None
        if isinstance(self.backend, CessationSignal):
            evidence = self.backend.ceased(step.ref)
        else:
            evidence = CessationEvidence(
                ceased=_TRI_UNKNOWN, detail="the adapter has no cessation signal", at=now
            )
        answer = ev.CessationAnswered(at=now, by=self.actor, ref=step.ref, evidence=evidence)
        self._evidence(job, [answer], revision)

    # ---------------------------------------------------------------- recorded calls

    def _issue(
        self,
        job: str,
        step: Step,
        op: ev.CallOp,
        revision: int,
        lease: Lease,
        now: datetime,
        decided: Sequence[ev.AnyEvent] = (),
    ) -> int:
        """Commit ``decided`` and the call's CallIssued (with its deadline) as one decision; the
        revision of the CallIssued is the call's id, which its answer names."""
        assert step.ref is not None and step.deadline is not None
        issued = ev.CallIssued(
            at=now,
            by=self.actor,
            op=op,
            ref=step.ref,
            deadline=step.deadline,
            instance=step.instance,
        )
        return self._decide(job, [*decided, issued], revision, lease)

    def _call(self, job: str, issued: int, fn: Callable[..., object], *args: object) -> None:
        """Make a recorded call and commit its answer as evidence."""
        ok, detail = True, ""
        try:
            fn(*args)
        except DispatchError as exc:
            ok, detail = False, str(exc)
        except Exception as exc:
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        self._answer(job, issued, ok, detail)

    def _answer(self, job: str, issued: int, ok: bool, detail: str) -> None:
        answer = ev.CallAnswered(at=self.clock(), by=self.actor, call=issued, ok=ok, detail=detail)
        self._evidence(job, [answer], issued)

    def _place_hold(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        me = self.actor
        if step.ref is None:  # a rule's hold for a person: recorded, no backend call
            assert step.rule is not None and step.cause is not None and step.hold is not None
            assert step.trigger is not None
            self._decide(
                job,
                [
                    ev.RecoveryDecided(
                        at=now,
                        by=me,
                        rule=step.rule,
                        trigger=step.trigger,
                        cause=step.cause,
                        submission=step.submission,
                    ),
                    ev.HoldPlaced(
                        at=now,
                        by=me,
                        instance=step.instance,
                        hold=step.hold,
                        submission=step.submission,
                        cause=step.cause,
                    ),
                ],
                revision,
                lease,
            )
            return
        assert step.deadline is not None and isinstance(self.backend, Holder)
        issued = self._issue(job, step, _CALL_HOLD, revision, lease, now)
        hold = step.hold
        meta = HoldMeta(
            instance=step.instance,
            deadline=step.deadline,
            by=hold.by if hold else me,
            reason=hold.reason if hold else "",
            until=hold.until if hold else None,
        )
        self._call(job, issued, self.backend.hold, step.ref, meta)

    def _release_hold(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        if step.ref is None:  # a rule's hold for a person lifts in the record alone
            event = ev.HoldLifted(
                at=now,
                by=self.actor,
                instance=step.instance,
                reason=step.detail,
                resume=step.resume,
            )
            self._decide(job, [event], revision, lease)
            return
        assert step.deadline is not None
        if not isinstance(self.backend, Holder):
            return
        issued = self._issue(job, step, _CALL_RELEASE, revision, lease, now)
        meta = HoldMeta(instance=step.instance, deadline=step.deadline, by=self.actor)
        self._call(job, issued, self.backend.release, step.ref, meta)

    def _requeue(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        """A requeue (the rule's decision committed with its call, unless decided before) or
        the restoring of a requeue bit left set."""
        assert step.ref is not None and step.deadline is not None
        requeue = step.kind is _STEP_REQUEUE
        decided: list[ev.AnyEvent] = []
        if requeue and not step.decided:
            assert step.rule is not None and step.cause is not None and step.trigger is not None
            decided.append(
                ev.RecoveryDecided(
                    at=now,
                    by=self.actor,
                    rule=step.rule,
                    trigger=step.trigger,
                    cause=step.cause,
                    ref=step.ref,
                    submission=step.submission,
                )
            )
        op = _CALL_REQUEUE if requeue else _CALL_RESTORE
        issued = self._issue(job, step, op, revision, lease, now, decided)
        if not isinstance(self.backend, Requeuer):
            self._answer(job, issued, False, "the adapter cannot requeue")
            return
        reason = "" if step.trigger is None else str(step.trigger)
        meta = CallMeta(deadline=step.deadline, by=self.actor, reason=reason)
        fn = self.backend.requeue if requeue else self.backend.restore_requeue_bit
        self._call(job, issued, fn, step.ref, meta)

    # ---------------------------------------------------------------- escalations

    def _deliver(self, folded: Job, revision: int) -> None:
        """Deliver every committed escalation to every sink that has not had it, and record it."""
        for rec in folded.escalations.values():
            for sink in self.sinks:
                if sink.name in rec.delivered:
                    continue
                message = EscalationMessage(
                    job=folded.id,
                    name=folded.header.spec.name,
                    id=str(rec.id),
                    detail=rec.detail,
                    at=rec.at,
                )
                try:
                    sink.deliver(message)
                except Exception as exc:
                    log.warning("escalation %s to sink %s failed: %s", rec.id, sink.name, exc)
                    continue
                revision = self._evidence(
                    folded.id,
                    [
                        ev.EscalationDelivered(
                            at=self.clock(), by=self.actor, escalation=rec.id, sink=sink.name
                        )
                    ],
                    revision,
                    # Two supervisors may both deliver; the record keeps one delivery per sink.
                    recorded=_has_delivery(rec.id, sink.name),
                )


#: The method that executes each kind of step (``Executor._execute``).
_EXECUTE: dict[StepKind, str] = {
    StepKind.AUTHORIZE: "_authorize",
    StepKind.START: "_start",
    StepKind.CANONICAL: "_canonical",
    StepKind.RETIRE: "_retire",
    StepKind.OPEN: "_open",
    StepKind.STOP: "_stop",
    StepKind.VERIFIED_STOPPED: "_verified_stopped",
    StepKind.OUTCOME: "_outcome",
    StepKind.ESCALATE: "_escalate",
    StepKind.SETTLE: "_settle",
    StepKind.PLACE_HOLD: "_place_hold",
    StepKind.RELEASE_HOLD: "_release_hold",
    StepKind.REQUEUE: "_requeue",
    StepKind.RESTORE_REQUEUE: "_requeue",
    StepKind.CEASE: "_cease",
}


def _has_delivery(escalation: EscalationId, sink: str) -> Callable[[ev.View], bool]:
    """Whether a record holds the delivery of ``escalation`` to ``sink`` already."""

    def recorded(view: ev.View) -> bool:
        return any(
            isinstance(e, ev.EscalationDelivered) and e.escalation == escalation and e.sink == sink
            for e in view.events
        )

    return recorded
