"""The step executor: passes of read → find → fold → next → execute, for a batch of jobs.

It has no loop, no sleep and no clock of its own: the store, the backend and the clock are
injected, so the simulator drives exactly this code under crashes. It runs a batch of jobs in
phases (docs/specs/0004-supervisor.md, D2): every job's step is computed, every decision is
committed in one ``append_many``, the calls of the decisions that landed are made (from a
bounded pool of threads where the adapter declares ``ConcurrentCalls``, one at a time
otherwise), and every answer is committed in one ``append_many``. For each job the rules stay
those of one job alone:

* a decision is committed with ``expect_revision`` (the revision ``next`` was computed from)
  and the owner's lease, and its call is made only once that batch's commit has returned;
* a call's result is committed as evidence afterwards, at whatever revision the record has
  reached (evidence is a fact; recording it late is never wrong);
* on Conflict nothing is called for that job: its pass ends, and the next one re-reads and
  recomputes; one job's refusal never touches another job's part of the batch;
* a pass that finds its lease gone acts on nothing.

A batch of one job makes the very store and backend calls a pass of one job always made.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence

# sim: allowed (the pool is used only with an adapter declaring ConcurrentCalls; the
# simulator's backends declare none, so every simulated run makes its calls in order)
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import attrs
from jobdispatch import calls
from jobdispatch.calls import Call
from jobdispatch.clock import Clock
from jobdispatch.errors import Conflict, Invalid, Unsupported
from jobdispatch.job import Job, Replay
from jobdispatch.launch import start_request
from jobdispatch.members import TRI_UNKNOWN
from jobdispatch.plan import shorter_than_poll
from jobdispatch.progress import Reading
from jobdispatch.records import events as ev
from jobdispatch.records import rules
from jobdispatch.records.store import AppendRequest, Lease, Records
from jobdispatch.spi import (
    Backend,
    CessationEvidence,
    CessationSignal,
    Discovery,
    Holder,
    Requeuer,
    call_concurrency,
)
from jobdispatch.steps import Answer, Context, Step, Wait, next_steps
from jobdispatch.triggers import EscalationId
from jobdispatch.types import Actor

from jobdispatch_supervise.outbox import Outbox
from jobdispatch_supervise.progress import ProgressPoll, watches_output
from jobdispatch_supervise.sinks import EscalationMessage, Sink

__all__ = ["Executor", "Pass"]

log = logging.getLogger("jobdispatch.supervise")

#: How many jobs' folds an executor keeps to extend (see Executor._fold). At least as many as
#: one supervisor serves: a poll visits every owned job in turn, so with fewer kept than that,
#: the job folded longest ago is always the next one visited and every pass refolds its whole
#: record (at 1,000 jobs and 256 kept, half of a poll's time was refolding).
FOLDS_KEPT = 20_000

#: How many times evidence is offered again after the record moved under it.
EVIDENCE_TRIES = 10


@attrs.frozen(kw_only=True)
class Pass:
    """What one pass did: the step it executed (or the wait), and whether the job is settled.

    ``error`` is what ended the pass of this one job in a batch (an unreadable record, a
    backend that did not answer, a store that did not answer the batch its commit was in):
    :meth:`Executor.run_pass` raises it, :meth:`Executor.run_batch` hands it back so that the
    other jobs of the batch go on."""

    step: Step | None
    settled: bool = False
    lost: bool = False
    conflict: bool = False
    wake: datetime | None = None
    revision: int = 0
    error: Exception | None = None
    #: The record as this pass left it, where the pass knows it exactly without reading: its
    #: step committed a decision that landed and made no call, so the record is what was read
    #: plus those events (as stored). The job's next pass in the same poll may start from it
    #: (``run_batch``'s ``known``) instead of reading the record again. None otherwise.
    view: ev.View | None = None


@attrs.define(kw_only=True, eq=False)
class Work:
    """One job's step as it goes through a batch's phases: computed, decided (``revision``
    becomes the decision's), called (``result``), answered. ``conflict`` or ``error`` ends its
    part at whichever phase met it."""

    job: str
    lease: Lease
    folded: Job
    step: Step
    revision: int
    now: datetime
    ctx: Context
    read: ev.View
    call: Call | None = None
    result: Answer | None = None
    conflict: bool = False
    error: Exception | None = None
    after: ev.View | None = None

    @property
    def going(self) -> bool:
        """Whether the job's part goes on to the next phase."""
        return not self.conflict and self.error is None


class Executor:
    """Executes ``next``'s first step for each job of a batch per :meth:`run_batch`.

    Args:
        concurrency: the most backend calls in flight at once; capped by what the adapter
            declares (``ConcurrentCalls``, 1 when it declares nothing). Invalid below 1.
        poll: how often the supervisor running this executor polls, when it is known: a job
            whose ``stall.after`` or ``pending.after`` is shorter is logged as an error naming
            the field, once, when its record is first folded here (its plan checked them
            against the adapter's poll interval only; here each is judged up to a poll late).
    """

    def __init__(
        self,
        backend: Backend,
        store: Records,
        *,
        clock: Clock,
        holder: str,
        sinks: Sequence[Sink] = (),
        concurrency: int = 1,
        outbox: Outbox | None = None,
        poll: timedelta | None = None,
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            msg = f"an executor's call concurrency must be an integer >= 1, got {concurrency!r}"
            raise Invalid(msg)
        self.backend = backend
        self.store = store
        self.clock = clock
        self.holder = holder
        self.actor = Actor.supervisor(holder)
        self.sinks = list(sinks)
        #: Where each record read is offered for delivery off this thread (a supervisor's);
        #: None: escalations are delivered to ``sinks`` here, in the pass (the simulator's).
        self.outbox = outbox
        #: The most calls in flight at once: the caller's bound within the adapter's.
        self.concurrency = min(concurrency, call_concurrency(backend))
        self.poll = poll
        #: Job -> its record folded so far, extended by each pass (see _fold).
        self._replays: dict[str, Replay] = {}
        #: The longest durable commit (one ``append_many`` that answered) since
        #: :meth:`take_commit_seconds` last took it; None: none since.
        self._commit_seconds: float | None = None

    def take_commit_seconds(self) -> float | None:
        """The longest commit since the last call (wall seconds), and start counting anew:
        a supervisor publishes it once per poll (``Measured.commit_seconds``)."""
        taken, self._commit_seconds = self._commit_seconds, None
        return taken

    # ---------------------------------------------------------------- passes

    def run_pass(self, job: str, lease: Lease, discovery: Discovery | None = None) -> Pass:
        """Read, find (unless given), fold, compute, and execute the first step of one job;
        what ended the pass (other than a Conflict, which it answers) is raised."""
        result = self.run_batch([(job, lease, discovery)])[0]
        if result.error is not None:
            raise result.error
        return result

    def run_batch(
        self,
        jobs: Sequence[tuple[str, Lease, Discovery | None]],
        progress: ProgressPoll | None = None,
        known: Mapping[str, ev.View] | None = None,
    ) -> list[Pass]:
        """One pass of every job of ``jobs`` (each with its lease, and the discovery of a
        shared find or None to find it here), in phases: every job read (one ``read_many``),
        then each found, folded and its step computed; then every step executed by
        :meth:`_execute`. Answers one Pass per job,
        in order; a job's own failure is its Pass's ``error``, never the batch's.

        ``progress`` is the poll's reading of progress (None: progress is not read in this
        batch): the jobs that name a progress source get their reading from it, every root
        they share listed once per poll, before any step is computed.

        ``known`` holds records the caller knows exactly as they stand after its previous pass
        of the job (a :class:`Pass`'s ``view``): those jobs are not read again. A record that
        moved since (another writer) is met as it would be had that write come just after the
        read: a decision computed on it is refused (Conflict) and the next pass reads."""
        passes: list[Pass | None] = []
        works: list[Work] = []
        views = self._read(jobs, known or {})
        readings: dict[str, Reading] = {}
        found: dict[str, Discovery | None] = {j: d for j, _, d in jobs}
        if progress is not None:
            headers = {
                j: v.header
                for (j, _, _), v in zip(jobs, views, strict=True)
                if isinstance(v, ev.View)
            }
            self._find_watched(headers, found)
            readings = progress.readings(headers, found)
        for (job, lease, _), view in zip(jobs, views, strict=True):
            discovery = found[job]
            if isinstance(view, Exception):
                # Answered, not raised: one store error may be every job's, and raising it
                # once per job would grow its traceback by a frame each time.
                passes.append(Pass(step=None, error=view))
                continue
            try:
                early, work = self._compute(job, lease, discovery, view, readings.get(job))
            except Exception as exc:
                passes.append(Pass(step=None, error=exc))
                continue
            passes.append(early)
            if work is not None:
                works.append(work)
        if works:
            self._execute(works)
        done = iter(works)
        out: list[Pass] = []
        for early in passes:
            if early is not None:
                out.append(early)
                continue
            w = next(done)
            out.append(
                Pass(
                    step=w.step,
                    conflict=w.conflict,
                    revision=w.revision,
                    error=w.error,
                    view=w.after if w.going else None,
                )
            )
        return out

    def _read(
        self, jobs: Sequence[tuple[str, Lease, Discovery | None]], known: Mapping[str, ev.View]
    ) -> list[ev.View | Exception]:
        """Every job's record: the known ones as given, the others in one ``read_many``; a
        store that could not answer at all is every read job's problem."""
        wanted = [j for j, _, _ in jobs if j not in known]
        try:
            read: Sequence[ev.View | Exception] = self.store.read_many(wanted) if wanted else ()
        except Exception as exc:
            read = [exc] * len(wanted)
        answers = iter(read)
        return [known[j] if j in known else next(answers) for j, _, _ in jobs]

    def _find_watched(
        self, headers: Mapping[str, ev.Header], found: dict[str, Discovery | None]
    ) -> None:
        """Find, before progress is read, the jobs whose plan watches output growth and that
        have no discovery yet: the look at their running objects' output needs them. The
        discovery is the one the job's step is then computed on (one find per job per pass);
        a job that cannot be found now is found, and fails, in its own pass."""
        for job, header in headers.items():
            if found.get(job) is None and watches_output(header):
                try:
                    found[job] = self.backend.find(job)
                except Exception:  # noqa: S112 - the job's own pass finds it again and fails
                    continue

    def _compute(
        self,
        job: str,
        lease: Lease,
        discovery: Discovery | None,
        view: ev.View,
        reading: Reading | None = None,
    ) -> tuple[Pass | None, Work | None]:
        """Phase one for one job, its record read (one ``read_many`` for the batch): find
        (unless given), fold, deliver its escalations and compute its step. A Pass when it has
        to wait, else the Work to execute."""
        if discovery is None:
            discovery = self.backend.find(job)
        now = self.clock()
        folded = self._fold(view, now)
        if self.outbox is not None:
            try:
                self.outbox.offer(view)
            except Exception:  # a notice's trouble never stops the supervision of its job
                log.exception("job %s: its notices could not be queued", job)
        else:
            self._deliver(folded, view.revision)
        step = next_steps(folded, discovery, now, reading)[0]
        if isinstance(step, Wait):
            wait = Pass(step=step, settled=folded.settled, wake=step.wake, revision=view.revision)
            return wait, None
        ctx = Context(at=now, by=self.actor, job=folded)
        work = Work(
            job=job,
            lease=lease,
            folded=folded,
            step=step,
            revision=view.revision,
            now=now,
            ctx=ctx,
            read=view,
        )
        return None, work

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
            self._first_fold(view.header)
            if len(replays) >= FOLDS_KEPT:
                # Forget the job folded longest ago (the table keeps insertion order and a
                # job is moved to its end on every pass).
                del replays[next(iter(replays))]
        replays[job] = replay
        return replay.extend(view, now)

    def _first_fold(self, header: ev.Header) -> None:
        """Say, once per job, which of its durations judged once per poll are shorter than
        this supervisor's poll: the job was accepted against the adapter's interval, so it is
        served all the same, each such rule judged up to a poll late."""
        if self.poll is None:
            return
        for problem in shorter_than_poll(header.spec, self.poll, "this supervisor"):
            log.error(
                "job %s: %s %s; it is judged up to one poll late here (lower this "
                "supervisor's poll, or raise %s)",
                header.job,
                problem.path,
                problem.message,
                problem.path,
            )

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

    # ---------------------------------------------------------------- the phases

    def _execute(self, works: Sequence[Work]) -> None:
        """Run every work's step in three phases, each across the whole batch: commit what the
        steps decide (:meth:`_decide`), make their calls (:meth:`_call`), commit their answers
        (:meth:`_answer`).

        Each phase starts only once the one before it has returned for every job, which is
        what keeps the protocol's order for each job: a decision is committed before its call
        (the call is made only if that job's part of the commit landed), and its answer after
        the call. The phases are kept apart (and this is the one method that runs them) so
        that the simulator's mutants can wrap this one method."""
        self._decide(works)
        self._call(works)
        self._answer(works)

    def _commit(self, works: Sequence[Work], requests: Sequence[AppendRequest]) -> list[object]:
        """One ``append_many`` for the works' requests, answered per work; a store that does
        not answer (Unavailable, or anything else it raises) ends every one of those works'
        passes, since any of its parts may or may not have landed."""
        if not requests:
            return []
        try:
            # sim: allowed (the commit's latency is published for the metrics, never decided on)
            started = time.perf_counter()
            answers: list[object] = list(self.store.append_many(requests))
            # sim: allowed (as above: a measurement, not an input to any step)
            took = time.perf_counter() - started
            if self._commit_seconds is None or took > self._commit_seconds:
                self._commit_seconds = took
            return answers
        except Exception as exc:
            for w in works:
                w.error = exc
            return []

    def _decide(self, works: Sequence[Work]) -> None:
        """Phase two: every step's ``before`` committed in one batch, each at the revision its
        ``next`` was computed from and (unless the step is not fenced: Observe's evidence)
        under its job's lease. A job whose part is refused (Conflict) calls nothing."""
        deciding: list[Work] = []
        requests: list[AppendRequest] = []
        for w in works:
            step = w.step
            decided = step.before(w.ctx)
            w.call = step.call(w.ctx)
            if decided:
                owner = w.lease if step.fenced else None
                requests.append(
                    AppendRequest(
                        job=w.job, events=tuple(decided), expect_revision=w.revision, owner=owner
                    )
                )
                deciding.append(w)
        committed = self._commit(deciding, requests)
        for w, request, answer in zip(deciding, requests, committed, strict=False):
            if isinstance(answer, int):
                w.revision = answer
                if w.call is None:
                    w.after = _after(w.read, request, answer)
            elif isinstance(answer, Conflict):
                log.debug("job %s: %s; re-reading", w.job, answer)
                w.conflict = True
            else:
                w.error = answer  # type: ignore[assignment]  # NotFound: a Refusal

    def _call(self, works: Sequence[Work]) -> None:
        """Phase three: the call of every work whose decision landed, concurrently from a pool
        of at most ``concurrency`` threads when there are several, else in order here. A call
        failing outside its ``answers`` ends that job's pass only."""
        todo = [w for w in works if w.going and w.call is not None]
        if self.concurrency == 1 or len(todo) < 2:
            for w in todo:
                self._call_one(w)
            return
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(todo))) as pool:
            for _ in pool.map(self._call_one, todo):
                pass

    def _call_one(self, w: Work) -> None:
        assert w.call is not None
        try:
            w.result = self._make(w.job, w.folded, w.call, w.revision, w.now)
        except Exception as exc:
            w.error = exc

    def _answer(self, works: Sequence[Work]) -> None:
        """Phase four: every call's answer committed as evidence in one batch, from the
        revision of its decision on; a job whose record moved meanwhile is re-read and offered
        again in the next batch, up to EVIDENCE_TRIES times (then its pass ends in Conflict)."""
        pending: list[tuple[Work, tuple[ev.AnyEvent, ...], int]] = []
        for w in works:
            if w.going and w.result is not None:
                events = tuple(w.step.answer(w.ctx, w.result))
                if events:
                    pending.append((w, events, w.revision))
        for _ in range(EVIDENCE_TRIES):
            if not pending:
                return
            requests = [
                AppendRequest(job=w.job, events=events, expect_revision=revision)
                for w, events, revision in pending
            ]
            answers = self._commit([w for w, _, _ in pending], requests)
            again: list[tuple[Work, tuple[ev.AnyEvent, ...], int]] = []
            for (w, events, _), answer in zip(pending, answers, strict=False):
                if isinstance(answer, int):
                    continue
                if not isinstance(answer, Conflict):
                    w.error = answer  # type: ignore[assignment]  # NotFound: a Refusal
                    continue
                try:
                    revision = self.store.read(w.job).revision
                except Exception as exc:
                    w.error = exc
                    continue
                again.append((w, events, revision))
            pending = again
        for w, _, _ in pending:
            log.debug("job %s: could not record evidence; the record kept moving", w.job)
            w.conflict = True

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
                sub = folded.submission(n)
                request = start_request(
                    backend,
                    job,
                    header.spec,
                    header.plan,
                    submission=n,
                    attempt=k,
                    firings=folded.firings,
                    exclude=sub.exclude if sub is not None else (),
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
                    ceased=TRI_UNKNOWN, detail="the adapter has no cessation signal", at=now
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


def _after(read: ev.View, request: AppendRequest, revision: int) -> ev.View | None:
    """The record after ``request`` landed on ``read`` at ``revision``: what was read and
    the request's events as every store stores them (:func:`rules.stamp`); None if the
    revision says anything else landed too (it cannot: the append was conditional)."""
    token = request.owner.token if request.owner is not None else None
    events = read.events + tuple(rules.stamp(request.events, token))
    return ev.View(read.header, events) if len(events) == revision else None


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
