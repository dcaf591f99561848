"""Invariant 7: once faults stop, every job reaches an outcome and settles, or is escalated.

The liveness phase runs with every fault off and a diligent person at hand (who releases their
own holds and abandons attempts when an escalation asks). A job that neither settled nor
escalated within the phase's simulated time is a violation, reported with why it is stuck:
the step ``next`` keeps asking for, the state it is in, and its record's tail.
"""

from __future__ import annotations

from jobdispatch.errors import Invalid
from jobdispatch.job import fold
from jobdispatch.spi import Discovery
from jobdispatch.steps import next_steps

from jobdispatch_sim.checkers import Context, Violation


def diagnose(ctx: Context, job: str, discovery: Discovery) -> str:
    """Why ``job`` is not settled: its folded state and what ``next`` asks for now."""
    try:
        folded = fold(ctx.read(job), ctx.now)
    except Invalid as exc:
        return f"its record does not fold: {exc}"
    steps = next_steps(folded, discovery, ctx.now)
    first = steps[0]
    where = f"state {folded.committed}" + (
        f", outcome {folded.outcome.state}" if folded.outcome else ", no outcome"
    )
    hold = folded.active_hold
    if hold is not None:
        where += f", held ({hold.hold.kind}, until {hold.hold.until})"
    live = [o.ref.id for o in folded.objects.values() if not o.done]
    return (
        f"{where}; next asks for {first!r}; "
        f"objects not done: {', '.join(live) or 'none'}; "
        f"unresolved attempts: {len(folded.unresolved_attempts())}"
    )


def check(ctx: Context, job: str, discovery: Discovery, seq: int) -> Violation | None:
    """A violation when ``job`` neither settled nor escalated."""
    try:
        folded = fold(ctx.read(job), ctx.now)
    except Invalid as exc:
        return Violation(
            invariant=7, name="liveness", job=job, detail=f"does not fold: {exc}", seq=seq
        )
    if folded.settled or folded.escalations:
        return None
    return Violation(
        invariant=7,
        name="liveness",
        job=job,
        detail="neither settled nor escalated once faults stopped: "
        + diagnose(ctx, job, discovery),
        seq=seq,
    )
