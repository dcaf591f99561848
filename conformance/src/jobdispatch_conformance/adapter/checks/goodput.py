"""Goodput from what the adapter showed: a scripted lifecycle (start, open, run, preempt) is
recorded as a supervisor would record it, and the goodput parts of that record must agree with
what the harness did. The figures are a function of the record; this holds the adapter to the
times the record gets from it (a run cannot start before its object was opened, nor end after
the harness saw it ended), so that the same lifecycle gives the same figures on any adapter.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from jobdispatch.goodput import Part, goodput
from jobdispatch.records import events as ev
from jobdispatch.spi import ObjectObs
from jobdispatch.testing import plan_for
from jobdispatch.triggers import SUBMIT
from jobdispatch.types import (
    NO_CAUSE,
    Action,
    Actor,
    CauseKind,
    ObjectState,
    RecoveryPolicy,
    Rule,
    State,
)

from jobdispatch_conformance.adapter.harness import Harness, expect

__all__ = ["goodput_of_a_preempted_run"]

_BY = Actor.supervisor("conformance")
_US = timedelta(microseconds=1)


def _record(
    h: Harness, job: str, times: dict[str, datetime], obs: list[tuple[datetime, ObjectObs]]
) -> ev.View:
    ref = obs[0][1].ref
    spec = h.driver.base_spec()
    spec = type(spec)(
        command=spec.command,
        nodes=spec.nodes,
        resources=spec.resources,
        recovery=RecoveryPolicy(
            rules=[Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1)]
        ),
    )
    header = ev.Header(
        job=job, spec=spec, plan=plan_for(spec), created_by=_BY, created_at=times["created"]
    )
    events: list[ev.AnyEvent] = [
        ev.SubmissionAuthorized(at=times["created"], by=_BY, token=1, n=1, trigger=SUBMIT),
        ev.AttemptStarted(at=times["created"], by=_BY, token=1, submission=1, attempt=1),
        ev.AttemptReplied(
            at=times["created"], by=_BY, submission=1, attempt=1, reply=ev.Reply.CREATED, ref=ref
        ),
        ev.CanonicalChosen(at=times["created"], by=_BY, token=1, submission=1, ref=ref, attempt=1),
        ev.OpenDecided(at=times["opened"], by=_BY, token=1, submission=1, ref=ref),
    ]
    events += [ev.Observed(at=at, by=_BY, obs=o) for at, o in obs]
    events += [
        ev.OutcomeDecided(
            at=times["decided"],
            by=_BY,
            token=1,
            state=State.FAILED,
            cause=obs[-1][1].executions[0].cause or NO_CAUSE,
        ),
        ev.Settled(at=times["decided"], by=_BY, token=1),
    ]
    return ev.View(header, tuple(events))


def goodput_of_a_preempted_run(h: Harness) -> None:
    """Start, open, wait for the run, preempt it, wait for its end, then fail the job: the
        record of that has its run's running time exactly as the adapter reported it, charged to
        ``preempted``; the detection is the adapter's end to the harness seeing it; the parts add
        up to the job's life; and the adapter's run ends after it started and no later than the
    harness saw it ended."""
    h.need("preempt")
    slack = timedelta(seconds=max(1.0, h.timeouts.poll))
    job = h.new_job()
    times = {"created": h.driver.now()}
    with h.driving():
        started = h.driver.ending_spec("preempt")
    ref = h.start(h.request(job, spec=started))
    times["opened"] = h.driver.now()
    h.backend.open(ref)
    running = h.wait(ref, lambda o: o.state is ObjectState.RUNNING, "running")
    seen: list[tuple[datetime, ObjectObs]] = [(h.driver.now(), running)]
    with h.driving():
        h.driver.preempt(ref)
    ended = h.ended_execution(ref, 0)
    seen.append((h.driver.now(), ended))
    times["decided"] = h.driver.now()
    run = next((e for e in ended.executions if e.index == 0), None)
    expect(run is not None and run.started_at is not None, f"{ref}: execution 0 has no start")
    expect(run is not None and run.ended_at is not None, f"{ref}: execution 0 has no end time")
    assert run is not None and run.started_at is not None and run.ended_at is not None
    # A backend may report times from its own clock, behind the harness's (a fake cluster's
    # are fixed): only what no honest backend can do is refused, a run ending before it
    # started or after the harness saw it ended.
    expect(
        run.started_at <= run.ended_at <= seen[-1][0] + slack,
        f"{ref}: execution 0 ran from {run.started_at} to {run.ended_at}, but was seen ended "
        f"at {seen[-1][0]}",
    )
    g = goodput(_record(h, job, times, seen), times["decided"])
    expect(
        sum(s.micros for s in g.shares) == g.total_micros,
        f"goodput parts do not add up: {g.shares}",
    )
    (figures,) = g.runs
    lo, hi = max(run.started_at, g.created_at), min(run.ended_at, g.until)
    expect(
        figures.running_micros == max(0, (hi - lo) // _US),
        f"{ref}: goodput counts {figures.running_micros} µs of running, the adapter reported "
        f"{run.started_at} to {run.ended_at}",
    )
    expect(
        figures.blame.cause is CauseKind.PREEMPTED,
        f"{ref}: the run's time is charged to {figures.blame.cause}, not preempted (the "
        f"adapter said {run.cause})",
    )
    detected = g.part_micros(Part.DETECTION)
    expected = max(timedelta(0), min(seen[-1][0], g.until) - max(run.ended_at, g.created_at))
    expect(
        detected == expected // _US,
        f"{ref}: detection is {detected} µs; the run ended at {run.ended_at} and was seen "
        f"ended at {seen[-1][0]}",
    )
