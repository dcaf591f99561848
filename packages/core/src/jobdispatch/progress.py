"""Progress as evidence: what a reading of a job's progress means for its record.

A job shows it is alive by the checkpoints its helper publishes and by the cheap marks it makes
(``jobdispatch-publish progress --step N``); ``resolve`` leaves a "resumed" entry naming the
step each execution resumed from. The supervisor reads all of that for every job it owns, in
batches (one listing per checkpoint root per poll, :class:`ProgressReader`), and hands each
job's reading to ``next``. This module decides, purely, from the folded record, that reading and
``now``:

* the growth of the running object's output, where the cluster can see it and the plan counts
  it as a progress source (``output-growth``): progress of the running submission, whose
  "step" is the output's size and whose time is the files' newest modification;
* what enters the record as evidence: the progress, only when it changed, and at most once in
  each of the job's own ``progress.record_every`` windows (:func:`window`: the intervals are
  phased by the job's id, so jobs launched together do not all record in the same poll; sooner
  when a run has ended, so the charge of a ``no-advance`` rule reads the newest checkpoint);
  each resumed entry once; the source going blind, and seeing again;
* whether the running execution is stalled: no progress of its own for the stall rule's
  ``after``, or none at all within its ``startup_grace`` since it started. Enforced, the
  verdict stops the run (``next`` commits it before the stop call); observed, it is only
  recorded, once per run;
* when a blind source has lasted past the stall rule's ``blind_after``: a person is told.

Fail closed: while the source cannot be read, or the record says it could not and has not
recorded seeing again, nothing is ever declared stalled; a job without a progress source can
never stall. It does no I/O and reads no clock.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeAlias, runtime_checkable

import attrs

from jobdispatch.job import Job, ProgressRec
from jobdispatch.members import OBJ_RUNNING, ORIGIN_OUTPUT, ORIGIN_PUBLICATION, STALL_ENFORCE
from jobdispatch.phases import phase
from jobdispatch.records.events import Origin
from jobdispatch.spi import Growth, ObjectRef
from jobdispatch.triggers import Blind as BlindEscalation
from jobdispatch.triggers import End
from jobdispatch.types import (
    Cause,
    CauseKind,
    JobID,
    ProgressSource,
    Provenance,
)

__all__ = [
    "BLIND",
    "Blind",
    "JobProgress",
    "Mark",
    "Origin",
    "ProgressReader",
    "ProgressUnreadable",
    "Reading",
    "Resumed",
    "Sighted",
    "Stall",
    "Verdict",
    "judge",
    "window",
]

#: How often output growth enters the record for a job that names no ``[progress]`` of its own.
_DEFAULT_SOURCE = ProgressSource(root="")


#: Where every job's ``record_every`` windows are counted from (shifted by its :func:`phase`).
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def window(job: JobID, every: timedelta, at: datetime) -> int:
    """The number of the job's ``every``-long recording window that holds ``at``: windows are
    counted from the epoch shifted by the job's :func:`phase`. Progress enters the record at
    most once per window, so at most once per interval on average and never twice in one
    window (two entries can be closer than ``every`` only across a window's edge)."""
    return _window(at, every, phase(job, every))


def _window(at: datetime, every: timedelta, shift: timedelta) -> int:
    if every <= timedelta(0):
        return 0
    return (at - _EPOCH - shift) // every


def _due(job: Job, rec: ProgressRec | None, every: timedelta, now: datetime) -> bool:
    """Whether progress may enter the record now: a window of the job's own has begun since
    the last entry (since the job was created, before its first), or a run ended that a rule
    may be about to act on.

    The first entry waits for a window's edge too: jobs submitted together would otherwise
    all record their first progress in the same poll, and stay aligned from then on."""
    since = rec.recorded_at if rec is not None else job.header.created_at
    shift = phase(job.id, every)
    return _window(now, every, shift) > _window(since, every, shift) or _ended_unhandled(job)


# ------------------------------------------------------------------ what a reading holds


@attrs.frozen(kw_only=True)
class Mark:
    """One piece of progress: step ``step`` reached at ``at`` (the job's clock) by execution
    ``execution`` of submission ``submission``, from a publication or a mark."""

    step: int
    at: datetime
    submission: int
    execution: str = ""
    origin: Origin = Origin.MARK


@attrs.frozen(kw_only=True)
class Resumed:
    """A "resumed" entry: execution ``execution`` of submission ``submission`` resumed from
    the checkpoint of step ``step``; ``resolve`` wrote it at ``at``."""

    submission: int
    execution: str
    step: int
    at: datetime


@attrs.frozen(kw_only=True)
class JobProgress:
    """One job's progress as one listing of its checkpoint root shows it.

    ``latest``: the newest progress of any origin (a mark or a publication); ``checkpoint``:
    the newest publication (what a run can resume from; None when nothing was published), the
    only progress a ``no-advance`` charge trusts; ``resumed``: every resumed entry;
    ``output``: the output growth of the job's running objects, by object id, where the plan
    counts it as a progress source (one batched look per poll)."""

    latest: Mark | None = None
    checkpoint: Mark | None = None
    resumed: tuple[Resumed, ...] = ()
    output: Mapping[str, Growth] = attrs.field(factory=dict, hash=False)


@attrs.frozen
class Blind:
    """The job's progress could not be read, and why (a store, a checkpoint root or its
    credentials unavailable; no progress source configured where the supervisor runs)."""

    detail: str = ""


#: A reading that could not be made, for a caller with nothing more to say.
BLIND = Blind("the progress source could not be read")

#: What the supervisor read of one job's progress this poll.
Reading: TypeAlias = JobProgress | Blind


class ProgressUnreadable(Exception):
    """A checkpoint root could not be listed; every job under it is read as :class:`Blind`."""


@runtime_checkable
class ProgressReader(Protocol):
    """Where a supervisor reads its jobs' progress: one listing of a checkpoint root answers
    for every job under it.

    ``read(root, jobs)`` lists ``root`` once and answers, for each job of ``jobs`` it found
    anything of, its :class:`JobProgress` (a job it found nothing of may be left out: it has
    made no progress yet). It raises :class:`ProgressUnreadable` when the root cannot be read
    (any other exception is taken the same way by the supervisor: blind, never stalled).
    The supervisor calls it at most once per root per poll.
    """

    def read(self, root: str, jobs: Collection[JobID]) -> Mapping[JobID, JobProgress]: ...


# ------------------------------------------------------------------ what the judgement says


@attrs.frozen
class Sighted:
    """The source can be read again after a blind spell."""


@attrs.frozen(kw_only=True)
class Stall:
    """Run ``execution`` of ``ref`` is stalled: stop it (``enforced``) or record the verdict."""

    ref: ObjectRef
    execution: int
    cause: Cause
    enforced: bool


#: Evidence a judgement asks to record.
Evidence: TypeAlias = Mark | Resumed | Blind | Sighted


@attrs.frozen(kw_only=True)
class Verdict:
    """What a reading means for the record now: evidence to commit, a stall to declare, or a
    blind spell to escalate (at most one of the three kinds, in that order of urgency)."""

    evidence: tuple[Evidence, ...] = ()
    stall: Stall | None = None
    escalation: BlindEscalation | None = None
    detail: str = ""


_NOTHING = Verdict()


def _news(mark: Mark, rec: ProgressRec | None) -> bool:
    """Whether ``mark`` says something the record's newest progress does not: a newer time
    with another step or another execution (a resumed run starts below the steps its
    predecessor reached, and still advances)."""
    if rec is None:
        return True
    if mark.at <= rec.marked_at:
        return False
    return (mark.step, mark.submission, mark.execution) != (
        rec.step,
        rec.submission,
        rec.execution,
    )


def _ended_unhandled(job: Job) -> bool:
    """Whether the latest canonical object has ended and a rule may be about to fire on it:
    progress is then recorded at once, so the charge reads the newest checkpoint."""
    latest = job.latest
    if latest is None or latest.canonical is None:
        return False
    obj = job.object(latest.canonical)
    if obj is None or not obj.done:
        return False
    runs = obj.executions()
    return not runs or End(obj.ref.id, runs[-1].index) not in job.handled_ends


def _evidence(job: Job, reading: JobProgress, now: datetime) -> list[Evidence]:
    source = job.header.spec.progress or _DEFAULT_SOURCE
    out: list[Evidence] = []
    if job.blind is not None:
        out.append(Sighted())
    if reading.resumed:
        known = set(job.resumed)
        for r in reading.resumed:  # each once, even when the listing holds it twice
            key = (r.submission, r.execution)
            if key not in known:
                known.add(key)
                out.append(r)
    rec = job.progress
    due = _due(job, rec, source.record_every, now)
    ckpt = reading.checkpoint
    if (
        ckpt is not None
        and ckpt.origin is ORIGIN_PUBLICATION
        and (job.checkpoint_step is None or ckpt.step > job.checkpoint_step)
        and due
    ):
        out.append(ckpt)
        if reading.latest is not None and (reading.latest.step, reading.latest.submission) == (
            ckpt.step,
            ckpt.submission,
        ):
            return out  # the mark of the step just published says nothing more
    latest = reading.latest
    # A publication as the newest progress is recorded once, as the checkpoint above.
    known_publication = (
        latest is not None
        and latest.origin is ORIGIN_PUBLICATION
        and (job.checkpoint_step is not None and latest.step <= job.checkpoint_step)
    )
    if (
        latest is not None
        and latest != ckpt
        and _news(latest, rec)
        and due
        and not known_publication
    ):
        out.append(latest)
    return out


def _running(job: Job) -> tuple[ObjectRef, int, int] | None:
    """The latest submission's canonical object, its run now running and the submission."""
    latest = job.latest
    if latest is None or latest.canonical is None:
        return None
    obj = job.object(latest.canonical)
    if obj is None or obj.done or obj.obs is None or obj.obs.state is not OBJ_RUNNING:
        return None
    runs = obj.obs.executions
    if not runs or runs[-1].state is not OBJ_RUNNING:
        return None
    return obj.ref, runs[-1].index, latest.n


def _newest(*marks: Mark | None) -> Mark | None:
    present = [m for m in marks if m is not None]
    return max(present, key=lambda m: m.at) if present else None


def _recorded(rec: ProgressRec | None) -> Mark | None:
    if rec is None:
        return None
    return Mark(
        step=rec.step,
        at=rec.marked_at,
        submission=rec.submission,
        execution=rec.execution,
        origin=rec.origin,
    )


def _describe(mark: Mark | None) -> str:
    if mark is None:
        return "no progress seen yet"
    return (
        f"last progress: step {mark.step} at {mark.at.isoformat()} "
        f"({mark.origin.value}, submission {mark.submission}"
        + (f" execution {mark.execution}" if mark.execution else "")
        + ")"
    )


def _stall(job: Job, reading: JobProgress, now: datetime) -> Stall | None:
    rule = job.header.spec.stall
    if rule is None:
        return None
    running = _running(job)
    if running is None:
        return None
    ref, index, n = running
    key = (ref.id, index)
    if key in job.stalls:
        return None  # judged once per run; an enforced stop is retried by ``next``
    started = job.running_since.get(key)
    if started is None:
        return None
    # The newest progress of the run's own, first from the reading (no Mark is made for the
    # record's: judge runs for every job every poll, and most answers are "not stalled").
    mine: Mark | None = None
    for m in (reading.latest, reading.checkpoint):
        own = m is not None and m.submission == n and m.at >= started
        if own and m is not None and (mine is None or m.at > mine.at):
            mine = m
    rec = job.progress
    if (
        rec is not None
        and rec.submission == n
        and rec.marked_at >= started
        and (mine is None or rec.marked_at > mine.at)
    ):
        mine = _recorded(rec)
    if mine is not None and now - mine.at < rule.after:
        return None
    newest = _newest(reading.latest, reading.checkpoint, _recorded(rec))
    if mine is None:
        if now - started < rule.grace:
            return None
        signal = (
            f"no progress within the startup grace of {_span(rule.grace)} since the run started at "
            f"{started.isoformat()}"
        )
    else:
        signal = f"no progress for {_span(now - mine.at)}, past stall after {_span(rule.after)}"
    cause = Cause(
        CauseKind.STALLED, Provenance.SUPERVISOR, f"{signal}; {_describe(mine or newest)}"
    )
    return Stall(ref=ref, execution=index, cause=cause, enforced=rule.mode is STALL_ENFORCE)


def _span(d: timedelta) -> str:
    """A duration as a person reads it in a cause's detail: ``20.4 s``, ``7 min 3 s``."""
    seconds = d.total_seconds()
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {secs} s"


def _watches_output(job: Job) -> bool:
    """Whether the job's plan counts its output's growth as progress."""
    stall = job.header.plan.stall
    return stall is not None and stall.output_growth


def _with_output(job: Job, reading: JobProgress) -> JobProgress:
    """``reading`` with the running object's output growth folded into its newest progress:
    a mark of origin ``output`` for the running submission, when it is newer than the rest."""
    if not reading.output:
        return reading
    running = _running(job)
    if running is None:
        return reading
    ref, _, n = running
    growth = reading.output.get(ref.id)
    if growth is None:
        return reading
    grown = Mark(step=growth.size, at=growth.at, submission=n, origin=ORIGIN_OUTPUT)
    if reading.latest is not None and reading.latest.at >= grown.at:
        return reading
    return attrs.evolve(reading, latest=grown)


def judge(job: Job, reading: Reading, now: datetime) -> Verdict:
    """What ``reading`` (this poll's reading of the job's progress) means for the job now.

    Evidence first (so a decision is taken on what the record holds), then a stall, then a
    blind spell's escalation. Nothing for a job without a progress source, or one with an
    outcome."""
    spec = job.header.spec
    if (spec.progress is None and not _watches_output(job)) or job.terminal:
        return _NOTHING
    if isinstance(reading, Blind):
        if job.blind is None:
            return Verdict(evidence=(reading,))
        bound = spec.stall.blind_after if spec.stall is not None else None
        escalation = BlindEscalation(job.blind.revision)
        if (
            bound is not None
            and now - job.blind.since >= bound
            and (escalation not in job.escalations)
        ):
            detail = (
                f"the progress of job {job.id} has been unreadable since "
                f"{job.blind.since.isoformat()} ({job.blind.detail or reading.detail}); no "
                "stall can be declared until it is read again"
            )
            return Verdict(escalation=escalation, detail=detail)
        return _NOTHING
    reading = _with_output(job, reading)
    evidence = _evidence(job, reading, now)
    if evidence:
        return Verdict(evidence=tuple(evidence))
    if job.blind is not None:
        return _NOTHING  # never while the record says blind (evidence above clears it first)
    stall = _stall(job, reading, now)
    if stall is not None:
        return Verdict(stall=stall)
    return _NOTHING
