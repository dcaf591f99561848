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

import functools
import logging
from collections.abc import Callable, Sequence
from datetime import datetime

import attrs
from jobdispatch import calls
from jobdispatch.calls import Call
from jobdispatch.clock import Clock
from jobdispatch.errors import Conflict, Unsupported
from jobdispatch.job import Job, Replay
from jobdispatch.launch import start_request
from jobdispatch.records import events as ev
from jobdispatch.records.store import Lease, Records
from jobdispatch.spi import Backend, CessationEvidence, CessationSignal, Discovery, Holder, Requeuer
from jobdispatch.steps import Answer, Context, Step, Wait, next_steps
from jobdispatch.triggers import EscalationId
from jobdispatch.types import Actor, Tristate

from jobdispatch_supervise.sinks import EscalationMessage, Sink

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
        step = next_steps(folded, discovery, now)[0]
        if isinstance(step, Wait):
            return Pass(step=step, settled=folded.settled, wake=step.wake, revision=view.revision)
        try:
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

    # ---------------------------------------------------------------- evidence

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

    # ---------------------------------------------------------------- one step

    def _execute(
        self, job: str, folded: Job, step: Step, revision: int, lease: Lease, now: datetime
    ) -> None:
        """Run any step in its three parts: commit what it decides, make its call, commit its
        answer.

        1. ``step.before``'s events are committed at ``revision`` (the one ``next`` computed
           from) and, unless the step is not fenced (Observe's evidence), under ``lease``. A
           Conflict ends the pass here: nothing is called on a decision that did not land.
        2. ``step.call``'s value is made on the backend (:meth:`_make`). The exceptions the
           call lists as its ``answers`` become its answer; any other ends the pass.
        3. ``step.answer``'s events are committed as evidence, from the revision of step 1's
           commit on (:meth:`_evidence`).

        The three are kept apart (and this is the one method that runs them) so that a caller
        can run them in batches, and the simulator's mutants can wrap this one method."""
        ctx = Context(at=now, by=self.actor, job=folded)
        decided = step.before(ctx)
        if decided:
            owner = lease if step.fenced else None
            revision = self.store.append(job, decided, expect_revision=revision, owner=owner)
        call = step.call(ctx)
        if call is None:
            return
        result = self._make(job, folded, call, revision, now)
        answer = step.answer(ctx, result)
        if answer:
            self._evidence(job, answer, revision)

    def _make(self, job: str, folded: Job, call: Call, revision: int, now: datetime) -> Answer:
        """Make ``call`` and hand back its result; the exceptions it lists as its answers are
        its result too (logged), and any other ends the pass."""
        method = self._method(job, folded, call, now)
        value: object = None
        error: Exception | None = None
        try:
            value = method()
        except call.answers as exc:
            log.warning("job %s: %s answered %s: %s", job, call.method, type(exc).__name__, exc)
            error = exc
        return Answer(at=self.clock(), revision=revision, value=value, error=error)

    def _method(self, job: str, folded: Job, call: Call, now: datetime) -> Callable[[], object]:
        """The backend method a call value is, bound to its arguments: the one place a step's
        call becomes an SPI call.

        A call on an optional ability the adapter lacks (a Holder's hold, a Requeuer's
        requeue) fails with Unsupported, which a recorded call commits as its answer; an
        adapter without a cessation signal answers unknown."""
        backend = self.backend
        match call:
            case calls.StartCall(submission=n, attempt=k):
                header = folded.header
                request = start_request(
                    backend,
                    job,
                    header.spec,
                    header.plan,
                    submission=n,
                    attempt=k,
                    firings=folded.firings,
                )
                return functools.partial(backend.start, request)
            case calls.OpenCall(ref=ref, meta=meta):
                return functools.partial(backend.open, ref, meta)
            case calls.StopCall(ref=ref, reason=reason):
                return functools.partial(backend.stop, ref, reason)
            case calls.HoldCall(ref=ref, meta=hold_meta) if isinstance(backend, Holder):
                return functools.partial(backend.hold, ref, hold_meta)
            case calls.ReleaseCall(ref=ref, meta=hold_meta) if isinstance(backend, Holder):
                return functools.partial(backend.release, ref, hold_meta)
            case calls.RequeueCall(ref=ref, meta=meta) if isinstance(backend, Requeuer):
                return functools.partial(backend.requeue, ref, meta)
            case calls.RestoreCall(ref=ref, meta=meta) if isinstance(backend, Requeuer):
                return functools.partial(backend.restore_requeue_bit, ref, meta)
            case calls.HoldCall() | calls.ReleaseCall():
                return _cannot("hold")
            case calls.RequeueCall() | calls.RestoreCall():
                return _cannot("requeue")
            case calls.CeaseCall(ref=ref):
                if isinstance(backend, CessationSignal):
                    return functools.partial(backend.ceased, ref)
                unknown = CessationEvidence(
                    ceased=_TRI_UNKNOWN, detail="the adapter has no cessation signal", at=now
                )
                return lambda: unknown

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


def _cannot(what: str) -> Callable[[], object]:
    """The call of an optional ability (Holder, Requeuer) the adapter lacks: it fails."""

    def refuse() -> object:
        msg = f"the adapter cannot {what}"
        raise Unsupported(msg)

    return refuse


def _has_delivery(escalation: EscalationId, sink: str) -> Callable[[ev.View], bool]:
    """Whether a record holds the delivery of ``escalation`` to ``sink`` already."""

    def recorded(view: ev.View) -> bool:
        return any(
            isinstance(e, ev.EscalationDelivered) and e.escalation == escalation and e.sink == sink
            for e in view.events
        )

    return recorded
