"""The pending deadline (``[pending]``, row P6 of spec 0001 D6; issue 35 item 5): a submission
whose object stays pending past ``pending.after`` since it was opened counts as an ending with
the deadline's cause, enforced by the supervisor for every adapter, so the rules on that cause
fail, hold or escalate it. Each test puts a record in one situation and checks what ``next``
does; the property at the end checks the rule over drawn histories."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch import (
    Action,
    Cause,
    CauseKind,
    ObjectRef,
    ObjectState,
    Provenance,
    RecoveryPolicy,
    Rule,
)
from jobdispatch.errors import Rejected, ValidationError
from jobdispatch.memory import MemoryBackend
from jobdispatch.plan import make_plan, pending_assignment
from jobdispatch.records import events as ev
from jobdispatch.spi import ObjectObs
from jobdispatch.steps import Authorize, Context, ExpirePending, Outcome, RuleHold, Stop, Wait
from jobdispatch.testing import SUPERVISOR, Story, execution, observation, plan_for
from jobdispatch.timing import STOP_RETRY
from jobdispatch.types import Enforcer, JobSpec, PendingRule
from jobdispatch.validate import problems

AFTER = timedelta(minutes=30)
CANCELLED = Cause(CauseKind.CANCELLED, Provenance.ACTOR, "stopped")


def story(*rules: Rule, cause: CauseKind = CauseKind.NO_CAPACITY) -> Story:
    spec = JobSpec(
        command=["train"],
        name="t",
        recovery=RecoveryPolicy(rules=rules),
        pending=PendingRule(after=AFTER, cause=cause),
    )
    return Story(spec=spec, plan=plan_for(spec))


def pending(detail: str = "0/6 nodes are available: 6 Insufficient nvidia.com/gpu") -> ObjectObs:
    return observation("job1", 1, 1, "o1", ObjectState.PENDING, detail=detail)


def ended_unrun() -> ObjectObs:
    return observation("job1", 1, 1, "o1", ObjectState.ENDED)


def waiting(s: Story) -> Story:
    """Submission 1 opened and seen pending, at the story's now."""
    return s.launched(running=False).observe(pending())


def commit(s: Story, step: object) -> Story:
    ctx = Context(at=s.now, by=SUPERVISOR, job=s.fold())
    s.commit(step.before(ctx))  # type: ignore[attr-defined]
    return s


def test_p6_within_the_deadline_the_supervisor_waits_and_wakes_when_it_is_due() -> None:
    s = waiting(story())
    (step,) = s.next(pending())
    assert isinstance(step, Wait) and step.wake == s.now + AFTER


def test_p6_past_the_deadline_the_object_is_stopped_with_the_deadlines_cause() -> None:
    s = waiting(story())
    s.later(AFTER.total_seconds() + 1)
    step = s.next(pending())[0]
    assert isinstance(step, ExpirePending) and step.ref == ObjectRef("o1")
    assert (step.cause.kind, step.cause.provenance) == (
        CauseKind.NO_CAPACITY,
        Provenance.SUPERVISOR,
    )
    assert "pending for 30m 1s since it was opened, past pending after 30m" in step.cause.detail
    assert "Insufficient nvidia.com/gpu" in step.cause.detail  # what the backend said
    ctx = Context(at=s.now, by=SUPERVISOR, job=s.fold())
    assert [type(e) for e in step.before(ctx)] == [ev.PendingExpired, ev.StopDecided]
    assert step.call(ctx) is not None


def test_p6_the_ending_takes_the_deadlines_cause_and_without_a_rule_fails_the_job() -> None:
    s = waiting(story(cause=CauseKind.NEVER_FITS))
    s.later(AFTER.total_seconds() + 1)
    commit(s, s.next(pending())[0])
    s.observe(ended_unrun())
    step = s.next(ended_unrun())[0]
    assert isinstance(step, Outcome) and step.cause.kind is CauseKind.NEVER_FITS


def test_p6_a_started_run_stopped_after_the_verdict_keeps_the_deadlines_cause() -> None:
    s = waiting(story())
    s.later(AFTER.total_seconds() + 1)
    commit(s, s.next(pending())[0])
    ended = s.ended(1, "o1", CANCELLED)
    step = s.next(ended)[0]
    assert isinstance(step, Outcome) and step.cause.kind is CauseKind.NO_CAPACITY


@pytest.mark.parametrize(
    ("action", "expected"),
    [(Action.RESUBMIT, Authorize), (Action.HOLD, RuleHold), (Action.ESCALATE, Outcome)],
)
def test_p6_rules_on_its_cause_fire_as_for_any_ending(action: Action, expected: type) -> None:
    rule = Rule(on=[CauseKind.NO_CAPACITY], action=action, budget=1)
    s = waiting(story(rule))
    s.later(AFTER.total_seconds() + 1)
    commit(s, s.next(pending())[0])
    s.observe(ended_unrun())
    step = s.next(ended_unrun())[0]
    assert isinstance(step, expected), step


def test_p6_a_stop_that_did_not_land_is_made_again_after_stop_retry() -> None:
    s = waiting(story())
    s.later(AFTER.total_seconds() + 1)
    commit(s, s.next(pending())[0])
    assert isinstance(s.next(pending())[0], Wait)
    s.later(STOP_RETRY.total_seconds() + 1)
    step = s.next(pending())[0]
    assert isinstance(step, Stop) and step.reason.endswith("(again)")


def test_p6_a_run_that_started_is_never_judged_pending() -> None:
    s = story().launched()  # seen running
    s.later(AFTER.total_seconds() * 3)
    again = observation("job1", 1, 1, "o1", ObjectState.PENDING, execution(0, ObjectState.ENDED))
    assert not any(isinstance(x, ExpirePending) for x in s.next(again))


def test_p6_without_a_pending_deadline_a_job_waits_for_ever() -> None:
    s = Story().launched(running=False).observe(pending())
    s.later(timedelta(days=30).total_seconds())
    assert s.next(pending()) == [Wait(wake=None)]


def test_the_deadline_is_refused_unsupervised_or_shorter_than_a_poll() -> None:
    spec = JobSpec(command=["train"], pending=PendingRule(after=AFTER))
    backend = MemoryBackend()
    with pytest.raises(Rejected, match="nobody would enforce the pending deadline"):
        make_plan(backend, None, spec)
    make_plan(backend, None, spec, supervised=True)
    short = JobSpec(command=["train"], pending=PendingRule(after=timedelta(milliseconds=1)))
    with pytest.raises(ValidationError, match=r"pending\.after: must be at least the poll"):
        make_plan(backend, None, short, supervised=True)


def test_the_plan_shows_who_stops_it_and_the_first_rule_on_its_cause() -> None:
    """Derived from the spec and the plan (never recorded): the supervisor enforces it, and
    the rule naming its cause acts on the ending, as ``next`` decides for any ending."""
    backend = MemoryBackend()
    esc = Rule(on=[CauseKind.PREEMPTED, CauseKind.NO_CAPACITY], action=Action.ESCALATE)
    hold = Rule(on=[CauseKind.NEVER_FITS], action=Action.HOLD, budget=1, for_=timedelta(days=1))
    rule = PendingRule(after=AFTER, cause=CauseKind.NEVER_FITS)
    spec = JobSpec(command=["train"], recovery=RecoveryPolicy(rules=[esc, hold]), pending=rule)
    plan = make_plan(backend, None, spec, supervised=True)
    shown = pending_assignment(spec, plan)
    assert shown is not None and shown.rule == rule
    assert shown.enforcer is Enforcer.SUPERVISOR
    assert shown.acting is plan.rules[1]
    capacity = JobSpec(
        command=["train"], recovery=RecoveryPolicy(rules=[hold]), pending=PendingRule(after=AFTER)
    )
    none = pending_assignment(capacity, make_plan(backend, None, capacity, supervised=True))
    assert none is not None and none.acting is None  # no rule on no-capacity: the job fails
    plain = JobSpec(command=["train"])
    assert pending_assignment(plain, make_plan(backend, None, plain)) is None


def test_validation_names_the_field() -> None:
    bad = JobSpec(
        command=["train"],
        pending=PendingRule(after=timedelta(0), cause=CauseKind.PREEMPTED),
    )
    found = {p.path: p.message for p in problems(bad)}
    assert found["pending.after"].startswith("must be positive")
    assert found["pending.cause"] == "must be no-capacity or never-fits, got preempted"


@given(
    opened_for=st.integers(min_value=0, max_value=4 * 3600),
    after=st.integers(min_value=60, max_value=3 * 3600),
)
def test_p6_the_verdict_comes_exactly_when_the_deadline_has_passed(
    opened_for: int, after: int
) -> None:
    """Over drawn waits and deadlines: pending strictly past ``after`` is expired; before it,
    the supervisor waits and wakes exactly at the deadline."""
    spec = JobSpec(command=["train"], name="t", pending=PendingRule(after=timedelta(seconds=after)))
    s = Story(spec=spec, plan=plan_for(spec)).launched(running=False).observe(pending())
    opened = s.now
    s.later(opened_for)
    step = s.next(pending())[0]
    if opened_for >= after:
        assert isinstance(step, ExpirePending)
    else:
        assert step == Wait(wake=opened + timedelta(seconds=after))


def test_the_spec_and_the_event_are_recorded_and_read_back() -> None:
    from datetime import UTC, datetime

    from jobdispatch import codec
    from jobdispatch.testing import SUPERVISOR as BY

    spec = JobSpec(command=["x"], pending=PendingRule(after=AFTER, cause=CauseKind.NEVER_FITS))
    data = codec.converter.unstructure(spec)
    assert data["pending"] == {"after": 1800.0, "cause": "never-fits"}
    assert codec.converter.structure(data, JobSpec) == spec
    assert "pending" not in codec.converter.unstructure(JobSpec(command=["x"]))
    cause = Cause(CauseKind.NO_CAPACITY, Provenance.SUPERVISOR, "pending for 30m")
    event = ev.PendingExpired(
        at=datetime(2026, 12, 1, tzinfo=UTC), by=BY, token=1, ref=ObjectRef("o1"), cause=cause
    )
    assert codec.decode_event(codec.encode_event(event), revision=1, job="j") == event
