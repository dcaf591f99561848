"""What one job's record contributes to the metrics, derived from the record alone.

Pure, like ``fold`` and ``project``: no I/O, no clock. Every count here is a function of the
record, which only grows, so a sum of these over every record only grows too: the endpoint's
counters stay monotonic across supervisor restarts and takeovers, and across restarts of the
endpoint itself, because no process keeps a count of its own. Two supervisors that race over
a job cannot double-count it either: the record holds each decision once (its fencing token
saw to that), and that is what is counted.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime

import attrs
from jobdispatch.job import Job, fold
from jobdispatch.members import OBJ_ENDED
from jobdispatch.records import events as ev
from jobdispatch.spi import Discovery, ExecutionObs
from jobdispatch.status import project
from jobdispatch.triggers import End

__all__ = ["Budget", "JobFacts", "facts_of"]


@attrs.frozen
class Budget:
    """One rule of a job's plan, for the per-job budget gauges."""

    rule: int
    action: str
    budget: int
    used: int

    @property
    def remaining(self) -> int:
        return max(0, self.budget - self.used)


@attrs.frozen(kw_only=True)
class JobFacts:
    """One record's contribution: each field a multiset of label values (a tuple, one entry
    per occurrence) or the observations of a histogram, in seconds."""

    revision: int
    #: The job's state as its record shows it (``project`` with nothing observed now).
    state: str
    settled: bool
    #: (cause, provenance) of every execution end the record observed.
    endings: tuple[tuple[str, str], ...] = ()
    #: (state, cause, provenance) of the outcome, once decided.
    outcome: tuple[str, str, str] | None = None
    #: (rule, action, enforcer) once per firing of a recovery rule.
    recoveries: tuple[tuple[str, str, str], ...] = ()
    budgets: tuple[Budget, ...] = ()
    time_to_running: tuple[float, ...] = ()
    recovery: tuple[float, ...] = ()
    decision_latency: tuple[float, ...] = ()


def facts_of(view: ev.View, now: datetime) -> JobFacts:
    """The facts of the record ``view``. Raises what ``fold`` raises for a record the
    protocol cannot have written (Invalid): the caller counts such a record as unreadable."""
    job = fold(view, now)
    status = project(job, Discovery(job=job.id), now)
    runs = sorted(_executions(job), key=_started)
    endings = tuple(
        (str(x.cause.kind), str(x.cause.provenance)) if x.cause is not None else ("unknown", "none")
        for x in runs
        if x.state is OBJ_ENDED
    )
    outcome = None
    if job.outcome is not None:
        cause = job.outcome.cause
        outcome = (str(job.outcome.state), str(cause.kind), str(cause.provenance))
    recoveries: list[tuple[str, str, str]] = []
    budgets: list[Budget] = []
    for assignment in job.header.plan.rules:
        fired = job.firings.get(assignment.index, 0)
        action = str(assignment.effective.action)
        label = (str(assignment.index), action, str(assignment.enforcer))
        recoveries.extend([label] * fired)
        budgets.append(Budget(assignment.index, action, assignment.effective.budget, fired))
    return JobFacts(
        revision=view.revision,
        state=str(status.state),
        settled=job.settled,
        endings=endings,
        outcome=outcome,
        recoveries=tuple(recoveries),
        budgets=tuple(budgets),
        time_to_running=_time_to_running(job, runs),
        recovery=tuple(_recovery_times(runs)),
        decision_latency=tuple(_decision_latencies(view)),
    )


def _executions(job: Job) -> Iterator[ExecutionObs]:
    for obj in job.objects.values():
        yield from obj.executions()


def _started(x: ExecutionObs) -> tuple[bool, datetime | None, int]:
    # Runs that never started (their start is unknown) sort last, in index order.
    return (x.started_at is None, x.started_at, x.index)


def _time_to_running(job: Job, runs: list[ExecutionObs]) -> tuple[float, ...]:
    """From the job's creation to the start of its first run, once it ran."""
    first = next((x.started_at for x in runs if x.started_at is not None), None)
    if first is None:
        return ()
    return (max(0.0, (first - job.header.created_at).total_seconds()),)


def _recovery_times(runs: list[ExecutionObs]) -> Iterator[float]:
    """From each run's end to the start of the run after it: how long the job was down
    between two runs, whoever brought it back (a rule, the backend, a person)."""
    started = [x for x in runs if x.started_at is not None]
    for before, after in itertools.pairwise(started):
        if before.ended_at is not None and after.started_at is not None:
            yield max(0.0, (after.started_at - before.ended_at).total_seconds())


def _decision_latencies(view: ev.View) -> Iterator[float]:
    """From the commit of the observation that first showed a run's end to the commit of
    the decision it led to: a recovery, a submission charged to a rule, or the outcome.
    An end the backend reran by itself (a newer run of the same object observed) needed no
    decision and is not counted."""
    seen: dict[End, datetime] = {}
    done: set[End] = set()  # decided, or rerun by the backend: never timed again
    for event in view.events:
        if isinstance(event, ev.Observed):
            newest = max((x.index for x in event.obs.executions), default=-1)
            ref = event.obs.ref.id
            for key in [k for k in seen if k.ref == ref and k.index < newest]:
                del seen[key]
                done.add(key)
            for x in event.obs.executions:
                key = End(ref, x.index)
                fresh = key not in seen and key not in done
                if fresh and x.state is OBJ_ENDED and x.index == newest:
                    seen[key] = event.at
        elif isinstance(event, ev.RecoveryDecided | ev.SubmissionAuthorized):
            if isinstance(event.trigger, End) and event.trigger in seen:
                done.add(event.trigger)
                yield max(0.0, (event.at - seen.pop(event.trigger)).total_seconds())
        elif isinstance(event, ev.OutcomeDecided) and seen:
            yield max(0.0, (event.at - min(seen.values())).total_seconds())
            done.update(seen)
            seen.clear()
