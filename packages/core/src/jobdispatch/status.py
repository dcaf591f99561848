"""``project``: the job as status reports it, from its folded record and what the backend shows.

Pure, like ``fold`` and ``next``. The committed state (pending, held, recovering, or the
outcome) comes from the record; the backend adds only what it shows now: a canonical object
running makes the job ``running``, and one whose run has ended while the record has not yet
said what follows makes it ``ended``, with that run's cause (``Status.committed`` is false for
both). History holds committed transitions only, so it reads the same whoever asks and whenever.
"""

from __future__ import annotations

from datetime import datetime

import attrs

from jobdispatch.job import EscalationRec, Job, Transition
from jobdispatch.members import (
    CAUSE_HELD,
    CAUSE_UNKNOWN,
    CLEANUP_BLOCKED,
    CLEANUP_CLEAR,
    CLEANUP_PENDING,
    LEVEL_JOB,
    LEVEL_OBJECT_ONLY,
    OBJ_ENDED,
    OBJ_GATED,
    OBJ_HELD,
    OBJ_PENDING,
    OBJ_RUNNING,
    PROV_ACTOR,
    STATE_ENDED,
    STATE_HELD,
    STATE_PENDING,
    STATE_RECOVERING,
    STATE_RUNNING,
    STATE_UNKNOWN,
)
from jobdispatch.plan import pending_assignment, with_firings
from jobdispatch.spi import Discovery, ExecutionObs, ObjectObs, ObjectRef
from jobdispatch.suspects import excluded
from jobdispatch.triggers import CLEANUP, End, EscalationId
from jobdispatch.types import (
    NO_CAUSE,
    Cause,
    CauseKind,
    Charge,
    CleanupState,
    Hold,
    JobID,
    Level,
    ObjectState,
    PendingAssignment,
    Plan,
    Provenance,
    State,
)

__all__ = [
    "Escalation",
    "Firing",
    "ProgressStatus",
    "StallVerdict",
    "Status",
    "Submission",
    "project",
    "project_objects",
]


@attrs.frozen(kw_only=True)
class Submission:
    """Submission ``n`` as status shows it."""

    n: int
    canonical: ObjectRef | None
    executions: tuple[ExecutionObs, ...] = ()
    state: ObjectState | None = None
    rule: int | None = None
    cause: Cause | None = None
    attempts: int = 0
    #: Objects of this submission that were not canonical, each with its cause (``duplicate``:
    #: they never ran).
    retired: tuple[tuple[ObjectRef, Cause], ...] = ()
    #: Suspect nodes this submission keeps off, and until when (``jobdispatch.suspects``).
    exclude: tuple[str, ...] = ()
    exclude_until: datetime | None = None


#: The cause every retired object carries.
DUPLICATE = Cause(
    CauseKind.DUPLICATE,
    Provenance.ACTOR,
    "not the canonical object of its submission; it never ran",
)


@attrs.frozen(kw_only=True)
class Escalation:
    """An escalation of the job and the sinks it reached."""

    id: EscalationId
    detail: str
    at: datetime
    delivered: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class StallVerdict:
    """A run judged stalled: stopped for it (``enforced``) or only observed."""

    ref: ObjectRef
    execution: int
    cause: Cause
    enforced: bool
    at: datetime


@attrs.frozen(kw_only=True)
class Firing:
    """One firing of a supervisor-enforced rule, and whether its budget paid for it."""

    rule: int
    charged: bool
    checkpoint: int | None
    at: datetime


@attrs.frozen(kw_only=True)
class ProgressStatus:
    """What the record holds of a job's progress (for a job with a progress source)."""

    root: str
    step: int | None = None
    marked_at: datetime | None = None
    origin: str = ""
    checkpoint: int | None = None
    blind_since: datetime | None = None
    blind_detail: str = ""
    stalls: tuple[StallVerdict, ...] = ()
    resumed: tuple[tuple[int, str, int], ...] = ()


@attrs.frozen(kw_only=True)
class Status:
    """A job as the core computes it from its record and what the backend shows."""

    job: JobID
    name: str = ""
    level: Level = Level.JOB
    state: State
    cause: Cause = NO_CAUSE
    settled: bool = False
    cleanup: CleanupState = CleanupState.CLEAR
    hold: Hold | None = None
    submissions: tuple[Submission, ...] = ()
    history: tuple[Transition, ...] = ()
    plan: Plan | None = None
    #: What the plan does with the job's pending deadline (None: it has none), derived from the
    #: recorded spec and plan as ``plan`` shows it (:func:`jobdispatch.plan.pending_assignment`).
    pending: PendingAssignment | None = None
    supersedes: JobID = ""
    escalations: tuple[Escalation, ...] = ()
    revision: int = 0
    created_at: datetime | None = None
    #: The job's progress, stalls and blind spells (None: the job names no progress source).
    progress: ProgressStatus | None = None
    #: Every firing of a supervisor-enforced rule, charged or not (``no-advance``).
    firings: tuple[Firing, ...] = ()
    #: The suspect nodes the job's next submission would keep off if it were authorized now,
    #: and until when (``jobdispatch.suspects.excluded``: what the plan of that submission
    #: carries); empty for a job that has ended or sets no ``exclude_suspects_for``.
    next_exclude: tuple[str, ...] = ()
    next_exclude_until: datetime | None = None

    @property
    def terminal(self) -> bool:
        return self.state.terminal and self.level is LEVEL_JOB

    @property
    def committed(self) -> bool:
        """Whether ``state`` and ``cause`` are the record's. They are not while the job is
        ``running`` or ``ended``: both are what the backend shows now, and an ``ended`` job's
        cause is its run's, before the supervisor has committed the outcome or recovery that
        follows (which may differ: a rule may resubmit it)."""
        return self.state is not STATE_RUNNING and self.state is not STATE_ENDED


def _escalation(rec: EscalationRec) -> Escalation:
    return Escalation(
        id=rec.id, detail=rec.detail, at=rec.at, delivered=tuple(sorted(rec.delivered))
    )


def project(job: Job, discovery: Discovery, now: datetime) -> Status:
    """The job's status: its record, plus what ``discovery`` shows now (and, at ``now``,
    the suspect nodes a next submission would keep off). Pure."""
    shown: dict[str, ObjectObs] = {o.ref.id: o for o in discovery.objects}

    def current(ref: ObjectRef | None) -> ObjectObs | None:
        if ref is None:
            return None
        rec = job.object(ref)
        return shown.get(ref.id) or (rec.obs if rec else None)

    # Retired objects by submission, in the record's order (one walk, not one per submission).
    retired: dict[int, list[tuple[ObjectRef, Cause]]] = {}
    for o in job.objects.values():
        if o.retired:
            retired.setdefault(o.submission, []).append((o.ref, DUPLICATE))

    submissions = []
    for sub in job.submissions:
        obs = current(sub.canonical)
        submissions.append(
            Submission(
                n=sub.n,
                canonical=sub.canonical,
                executions=_runs(job, obs) if obs else (),
                state=obs.state if obs else None,
                rule=sub.rule,
                cause=sub.cause,
                attempts=len(sub.attempts),
                retired=tuple(retired.get(sub.n, ())),
                exclude=sub.exclude,
                exclude_until=sub.exclude_until,
            )
        )

    hold = job.active_hold
    latest = job.latest
    running = False
    ended: Cause | None = None
    if latest is not None and latest.canonical is not None:
        obs = current(latest.canonical)
        running = obs is not None and obs.state is OBJ_RUNNING
        if obs is not None and obs.state is OBJ_ENDED:
            ended = _unhandled_end(job, obs)

    cause = NO_CAUSE
    if job.outcome is not None:
        state = job.outcome.state
        cause = job.outcome.cause
    elif running:
        state = STATE_RUNNING
    elif ended is not None:
        # The run is over but the record does not say so yet (the supervisor observes, then
        # commits the outcome or a recovery, seconds later): show what the backend shows
        # rather than the committed pending, so a watcher never sees running, pending, failed.
        state = STATE_ENDED
        cause = ended
    elif hold is not None:
        state = STATE_HELD
        cause = hold.cause or Cause(CAUSE_HELD, PROV_ACTOR, hold.hold.reason, actor=hold.hold.by)
    else:
        state = (
            job.committed if job.committed in (STATE_PENDING, STATE_RECOVERING) else STATE_PENDING
        )
        if state is STATE_RECOVERING and job.recovery_cause is not None:
            cause = job.recovery_cause

    cleanup = CLEANUP_CLEAR
    if job.outcome is not None:
        live = [
            o
            for o in job.objects.values()
            if not o.done and not (shown.get(o.ref.id) and shown[o.ref.id].state is OBJ_ENDED)
        ]
        if live:
            cleanup = CLEANUP_BLOCKED if CLEANUP in job.escalations else CLEANUP_PENDING

    next_exclude, next_until = ((), None) if job.terminal else excluded(job, now)
    return Status(
        job=job.id,
        name=job.header.spec.name,
        level=LEVEL_JOB,
        state=state,
        cause=cause,
        settled=job.settled,
        cleanup=cleanup,
        hold=hold.hold if hold else None,
        submissions=tuple(submissions),
        history=tuple(job.history),
        plan=with_firings(job.header.plan, job.firings, _charged(job)),
        pending=pending_assignment(job.header.spec, job.header.plan),
        supersedes=job.header.supersedes,
        escalations=tuple(_escalation(e) for e in job.escalations.values()),
        revision=job.revision,
        created_at=job.header.created_at,
        progress=_progress(job),
        firings=tuple(
            Firing(rule=f.rule, charged=f.charged, checkpoint=f.checkpoint, at=f.at)
            for f in job.fired
        ),
        next_exclude=next_exclude,
        next_exclude_until=next_until,
    )


def _runs(job: Job, obs: ObjectObs) -> tuple[ExecutionObs, ...]:
    """The object's runs, each with its cause as the record has it: a run stopped as stalled
    shows ``stalled``, not the ``cancelled`` the backend shows of the stop."""
    rec = job.object(obs.ref)
    if not job.stalls or rec is None:
        return obs.executions
    return tuple(
        x if x.state is not OBJ_ENDED else attrs.evolve(x, cause=job.run_cause(rec, x))
        for x in obs.executions
    )


def _charged(job: Job) -> dict[int, int]:
    """How many firings of each rule its budget paid for: every firing, unless the rule
    charges ``no-advance`` (then only those the record shows charged)."""
    out: dict[int, int] = {}
    for a in job.header.plan.rules:
        if a.effective.charge is Charge.NO_ADVANCE:
            out[a.index] = job.charged(a.index)
        else:
            out[a.index] = job.firings.get(a.index, 0)
    return out


def _progress(job: Job) -> ProgressStatus | None:
    source = job.header.spec.progress
    if source is None:
        return None
    rec = job.progress
    blind = job.blind
    return ProgressStatus(
        root=source.root,
        step=rec.step if rec else None,
        marked_at=rec.marked_at if rec else None,
        origin=rec.origin.value if rec else "",
        checkpoint=job.checkpoint_step,
        blind_since=blind.since if blind else None,
        blind_detail=blind.detail if blind else "",
        stalls=tuple(
            StallVerdict(
                ref=job.objects[ref].ref,
                execution=index,
                cause=v.cause,
                enforced=v.enforced,
                at=v.at,
            )
            for (ref, index), v in job.stalls.items()
        ),
        resumed=tuple((r.submission, r.execution, r.step) for r in job.resumed.values()),
    )


def _unhandled_end(job: Job, obs: ObjectObs) -> Cause | None:
    """The cause of the ended object's last run, unless the record has acted on that end."""
    if not obs.executions:
        return None  # it never ran: nothing shown to report; next judges it from the record
    last = max(obs.executions, key=lambda x: x.index)
    if End(obs.ref.id, last.index) in job.handled_ends:
        return None
    rec = job.object(obs.ref)
    cause = job.run_cause(rec, last) if rec is not None else last.cause
    return cause or Cause(CAUSE_UNKNOWN, detail="the backend gave no cause")


def project_objects(job: JobID, discovery: Discovery) -> Status:
    """Status without a record: what the backend shows, object by object.

    Without a record there is no job level, so a job is never reported terminal: an object's end
    is not the job's (its recovery may be under way elsewhere).
    """
    objects = sorted(
        (o for o in discovery.objects if (o.identity or ("",))[0] == job),
        key=lambda o: (o.identity or ("", 0, 0))[1:],
    )
    by_n: dict[int, list[ObjectObs]] = {}
    for o in objects:
        ident = o.identity
        assert ident is not None
        by_n.setdefault(ident[1], []).append(o)
    submissions = tuple(
        Submission(
            n=n,
            canonical=obs[0].ref if len(obs) == 1 else None,
            executions=obs[0].executions if len(obs) == 1 else (),
            state=obs[0].state if len(obs) == 1 else None,
            attempts=len(obs),
        )
        for n, obs in sorted(by_n.items())
    )
    state = STATE_UNKNOWN
    cause = NO_CAUSE
    if any(o.state is OBJ_RUNNING for o in objects):
        state = STATE_RUNNING
    elif any(o.state in (OBJ_PENDING, OBJ_GATED) for o in objects):
        state = STATE_PENDING
    elif any(o.state is OBJ_HELD for o in objects):
        state = STATE_HELD
    elif objects and objects[-1].latest is not None and objects[-1].latest.cause is not None:
        cause = objects[-1].latest.cause
    return Status(
        job=job, level=LEVEL_OBJECT_ONLY, state=state, cause=cause, submissions=submissions
    )
