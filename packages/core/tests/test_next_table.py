"""The transition table of ``next``, row by row (docs/specs/0001-contract.md, "The table").

Each test puts a record in one situation, shows ``next`` what the backend shows, and checks
the first step: the one an executor performs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest
from jobdispatch import (
    Action,
    Capability,
    Cause,
    CauseKind,
    CheckpointMode,
    Enforcer,
    ObjectRef,
    ObjectState,
    Provenance,
    Rule,
    State,
    Support,
    Tristate,
    UnmatchedPolicy,
)
from jobdispatch import triggers as tr
from jobdispatch.records import events as ev
from jobdispatch.spi import CessationEvidence, ObjectObs
from jobdispatch.steps import (
    Authorize,
    BackendHold,
    BackendRelease,
    Canonical,
    Cease,
    Escalate,
    LiftHold,
    Observe,
    Open,
    Outcome,
    Requeue,
    RestoreRequeue,
    Retire,
    RuleHold,
    RuleRequeue,
    Settle,
    Start,
    Step,
    Stop,
    VerifiedStopped,
    Wait,
)
from jobdispatch.testing import PERSON, PREEMPTED, SUCCESS, Story, execution, observation
from jobdispatch.timing import ABSENCE_GRACE, ABSENCE_REFRESH, CALL_DEADLINE, OPEN_RETRY, STOP_RETRY
from jobdispatch.types import Hold, HoldKind

RESUBMIT = Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2)
OOM = Cause(CauseKind.OUT_OF_MEMORY, Provenance.SCHEDULER)


def running(n: int = 1, ref: str = "o1", k: int = 1, index: int = 0) -> ObjectObs:
    return observation("job1", n, k, ref, ObjectState.RUNNING, execution(index))


def gated(n: int = 1, ref: str = "o1", k: int = 1) -> ObjectObs:
    return observation("job1", n, k, ref, ObjectState.GATED)


def first(steps: Sequence[Step]) -> Step:
    return steps[0]


# ------------------------------------------------------------------------------ launch


def test_l1_nothing_yet_authorizes_submission_one() -> None:
    step = first(Story().next())
    assert isinstance(step, Authorize) and (step.submission, step.trigger) == (1, tr.SUBMIT), step


def test_l2_authorized_starts_attempt_one() -> None:
    step = first(Story().authorize().next())
    assert isinstance(step, Start) and (step.submission, step.attempt) == (1, 1), step


def test_l3_unanswered_attempt_with_nothing_found_tries_again() -> None:
    step = first(Story().authorize().attempt().next())
    assert isinstance(step, Start) and step.attempt == 2, step


def test_l4_lost_reply_object_found_by_name_is_recorded_first() -> None:
    story = Story().authorize().attempt().reply(reply=ev.Reply.UNKNOWN)
    step = first(story.next(gated()))
    assert step == Observe(seen=(gated(),))
    story.observe(gated())
    step = first(story.next(gated()))
    assert isinstance(step, Canonical) and (step.ref, step.attempt) == (ObjectRef("o1"), 1), step


def test_l5_created_reply_makes_its_object_canonical() -> None:
    story = Story().authorize().attempt().reply(ref="o1").observe(gated())
    assert type(first(story.next(gated()))) is Canonical


def test_l6_first_matched_attempt_is_canonical_and_the_other_is_retired() -> None:
    story = Story().authorize().attempt().reply(reply=ev.Reply.UNKNOWN).attempt(1, 2)
    story.reply(1, 2, ref="o2").observe(gated(ref="o2", k=2)).observe(gated(ref="o1", k=1))
    shown = (gated(ref="o1"), gated(ref="o2", k=2))
    step = first(story.next(*shown))
    assert isinstance(step, Canonical) and step.ref == ObjectRef("o1"), step
    story.canonical(1, "o1", 1)
    step = first(story.next(*shown))
    assert isinstance(step, Retire) and step.ref == ObjectRef("o2"), step


def test_l7_canonical_gated_object_is_opened() -> None:
    story = Story().authorize().attempt().reply(ref="o1").observe(gated()).canonical(1, "o1")
    step = first(story.next(gated()))
    assert isinstance(step, Open) and (step.ref, step.submission) == (ObjectRef("o1"), 1), step
    # The call carries a deadline, recorded with the decision, past which adapters refuse it.
    assert step.deadline == story.now + CALL_DEADLINE


def test_l8_held_job_keeps_its_gate_closed() -> None:
    story = Story().authorize().attempt().reply(ref="o1").observe(gated()).canonical(1, "o1")
    story.add(ev.HoldRequested, reason="wait")
    assert type(first(story.next(gated()))) is Wait


def test_l9_newer_submission_stops_the_older_object_before_it_opens() -> None:
    story = Story().launched(1, "o1").add(ev.ResubmitRequested, reason="new data")
    story.authorize(2, tr.Resubmit(7))
    # The trigger above names revision 7, where the request stands.
    assert story.events[6].kind == "resubmit-requested"
    story.attempt(2, 1).reply(2, 1, ref="o2").observe(gated(2, "o2")).canonical(2, "o2")
    step = first(story.next(running(), gated(2, "o2")))
    assert isinstance(step, Stop) and step.ref == ObjectRef("o1"), step


def test_l10_open_decided_but_still_gated_is_opened_again_after_a_while() -> None:
    story = Story().authorize().attempt().reply(ref="o1").observe(gated()).canonical(1, "o1")
    story.open(1, "o1")
    assert type(first(story.next(gated()))) is Wait
    story.later(OPEN_RETRY.total_seconds())
    again = first(story.next(gated()))
    # Decided again, with a deadline of its own: the first one may be what refused the call.
    assert isinstance(again, Open) and again.deadline == story.now + CALL_DEADLINE, again


def test_l11_unresolved_attempts_escalate_after_the_unresolved_age() -> None:
    story = Story().authorize()
    for k in (1, 2, 3):
        story.attempt(1, k).reply(1, k, reply=ev.Reply.UNKNOWN)
    step = first(story.next())
    assert type(step) is Wait and step.wake is not None
    story.later(timedelta(minutes=10).total_seconds())
    step = first(story.next())
    assert isinstance(step, Escalate) and step.escalation == tr.Unresolved(1), step


def test_l12_refused_start_is_a_launch_failure_that_rules_see() -> None:
    story = Story.with_rules(Rule(on=[CauseKind.LAUNCH_FAILED], action=Action.RESUBMIT, budget=1))
    story.authorize().attempt().reply(reply=ev.Reply.REFUSED, detail="bad partition")
    step = first(story.next())
    assert isinstance(step, Authorize) and (step.submission, step.trigger) == (2, tr.Launch(1)), (
        step
    )
    assert step.cause is not None and step.cause.kind is CauseKind.LAUNCH_FAILED
    assert "bad partition" in step.cause.detail


def test_l12_abandoned_abandoned_attempts_end_the_submission_as_launch_failed() -> None:
    story = Story(options=ev.Options(supervised=True, unmatched=UnmatchedPolicy.MANUAL))
    story.authorize()
    for k in (1, 2, 3):
        story.attempt(1, k).reply(1, k, reply=ev.Reply.UNKNOWN)
        story.add(ev.AbandonRequested, submission=1, attempt=k)
    step = first(story.next())
    assert isinstance(step, Outcome) and step.state == State.FAILED, step
    assert step.cause.kind is CauseKind.LAUNCH_FAILED


def test_l12_attempts_only_abandoned_are_the_persons_doing_not_a_refusal() -> None:
    # Reliability D9: a supervisor killed inside Start three times leaves three attempts with no
    # reply; once a person abandons them, nothing refused the start: the person ended it.
    story = Story(options=ev.Options(supervised=True, unmatched=UnmatchedPolicy.MANUAL))
    story.authorize()
    for k in (1, 2, 3):
        story.attempt(1, k)
    story.reply(1, 3, reply=ev.Reply.UNKNOWN, detail="sbatch timed out")
    for k in (1, 2, 3):
        story.add(ev.AbandonRequested, submission=1, attempt=k, reason="no such object")
    step = first(story.next())
    assert isinstance(step, Outcome) and step.state == State.FAILED, step
    cause = step.cause
    assert (cause.kind, cause.provenance, cause.actor) == (
        CauseKind.LAUNCH_FAILED,
        Provenance.ACTOR,
        PERSON,
    )
    assert "refused" not in cause.detail
    assert "attempt 1.1: Start never answered, abandoned by human:ops (no such object)" in (
        cause.detail
    )
    assert "attempt 1.3: Start's outcome unknown (sbatch timed out)" in cause.detail


def test_l12_a_refusal_among_abandoned_attempts_stays_the_schedulers() -> None:
    story = Story(options=ev.Options(supervised=True, unmatched=UnmatchedPolicy.MANUAL))
    story.authorize().attempt(1, 1).attempt(1, 2).reply(
        1, 2, reply=ev.Reply.REFUSED, detail="invalid account"
    )
    story.add(ev.AbandonRequested, submission=1, attempt=1)
    step = first(story.next())
    assert isinstance(step, Authorize | Outcome) and step.cause is not None, step
    cause = step.cause
    assert (cause.kind, cause.provenance) == (CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER)
    assert "attempt 1.2: refused: invalid account" in cause.detail
    assert "attempt 1.1: Start never answered, abandoned by human:ops" in cause.detail


# ------------------------------------------------------------------------------ evidence


def test_o1_a_changed_observation_is_recorded_before_anything_is_decided() -> None:
    story = Story().launched(1, "o1")
    done = observation(
        "job1", 1, 1, "o1", ObjectState.ENDED, execution(0, ObjectState.ENDED, SUCCESS)
    )
    step = first(story.next(done))
    assert step == Observe(seen=(done,))


def test_o2_missing_from_a_complete_find_is_recorded_absent() -> None:
    step = first(Story().launched(1, "o1").next())
    assert type(step) is Observe and [m.ref for m in step.missing] == [ObjectRef("o1")]


def test_o3_absent_past_the_grace_is_verified_stopped_and_then_ends_the_run() -> None:
    story = Story.with_rules(Rule(on=[CauseKind.UNKNOWN], action=Action.RESUBMIT, budget=1))
    story.launched(1, "o1").add(ev.Absent, ref=ObjectRef("o1"), find_at=story.now)
    assert type(first(story.next())) is Wait
    for _ in range(int(ABSENCE_GRACE / ABSENCE_REFRESH)):  # the absence goes on, recorded
        story.later(ABSENCE_REFRESH.total_seconds())
        story.add(ev.Absent, ref=ObjectRef("o1"), find_at=story.now)
    step = first(story.next())
    assert isinstance(step, VerifiedStopped) and step.ref == ObjectRef("o1"), step
    story.add(ev.VerifiedStopped, ref=ObjectRef("o1"), find_at=story.now)
    step = first(story.next())
    assert isinstance(step, Authorize) and step.cause is not None, step
    assert step.cause.kind is CauseKind.UNKNOWN


def test_o3b_a_continuing_absence_wakes_the_supervisor_when_its_next_miss_is_due() -> None:
    # A supervisor polling every 30 s (Slurm's pacing) slept until the grace ran out, so its
    # misses came more than ABSENCE_GAP apart and the absence started over at every one.
    story = Story().launched(1, "o1")
    story.add(ev.Absent, ref=ObjectRef("o1"), find_at=story.now)
    step = first(story.next())
    assert type(step) is Wait
    assert step.wake == story.now + ABSENCE_REFRESH


def test_o4_an_incomplete_find_proves_no_absence() -> None:
    step = first(Story().launched(1, "o1").next(complete=False))
    assert type(step) is Wait


def test_o5_objects_of_attempts_never_made_are_not_recorded() -> None:
    foreign = observation("job1", 4, 1, "x9", ObjectState.RUNNING, execution(0))
    other_job = observation("job2", 1, 1, "y1", ObjectState.RUNNING, execution(0))
    story = Story().launched(1, "o1")
    assert type(first(story.next(running(), foreign, other_job))) is Wait


# ------------------------------------------------------------------------------ endings


def test_e1_success_is_the_outcome() -> None:
    story = Story().launched()
    obs = story.ended(1, "o1", SUCCESS)
    step = first(story.next(obs))
    assert isinstance(step, Outcome) and (step.state, step.cause) == (State.SUCCEEDED, SUCCESS), (
        step
    )


def test_e2_an_uncovered_cause_fails_the_job_with_that_cause() -> None:
    story = Story.with_rules(RESUBMIT).launched()
    obs = story.ended(1, "o1", OOM)
    step = first(story.next(obs))
    assert isinstance(step, Outcome) and (step.state, step.cause) == (State.FAILED, OOM), step


def test_e3_a_covered_cause_with_budget_resubmits_charged_to_its_rule() -> None:
    story = Story.with_rules(RESUBMIT).launched()
    obs = story.ended(1, "o1", PREEMPTED)
    step = first(story.next(obs))
    assert isinstance(step, Authorize), step
    assert (step.submission, step.rule, step.trigger) == (2, 0, tr.End("o1", 0))


def test_e4_a_spent_budget_fails_the_job_and_escalates() -> None:
    story = Story.with_rules(Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1))
    story.launched(1, "o1")
    story.ended(1, "o1", PREEMPTED)
    story.launched(2, "o2", trigger=tr.End("o1", 0), rule=0, cause=PREEMPTED)
    obs = story.ended(2, "o2", PREEMPTED)
    step = first(story.next(obs))
    assert isinstance(step, Outcome) and step.cause is not None, step
    assert (step.state, step.cause.kind) == (State.FAILED, CauseKind.PREEMPTED)
    assert step.escalation == tr.BudgetSpent(0)


def test_e5_requeue_rule_decides_and_calls_with_a_deadline() -> None:
    story = Story.with_rules(Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=1))
    obs = story.launched().ended(1, "o1", PREEMPTED)
    step = first(story.next(obs))
    assert isinstance(step, RuleRequeue) and step.rule == 0, step
    assert step.deadline == story.now + CALL_DEADLINE


def test_e6_hold_rule_places_a_recovery_hold_for_a_person() -> None:
    story = Story.with_rules(
        Rule(on=[CauseKind.PREEMPTED], action=Action.HOLD, budget=1, for_=timedelta(hours=2))
    )
    obs = story.launched().ended(1, "o1", PREEMPTED)
    step = first(story.next(obs))
    assert type(step) is RuleHold
    assert step.hold.kind is HoldKind.RECOVERY and step.hold.until == story.now + timedelta(hours=2)


def _preempted_fails_the_job(story: Story) -> tr.EscalationId | None:
    """The story's first object launched and preempted: the job fails; the escalation it raises."""
    obs = story.launched().ended(1, "o1", PREEMPTED)
    step = first(story.next(obs))
    assert isinstance(step, Outcome) and step.state == State.FAILED, step
    return step.escalation


def test_e7_escalate_rule_fails_the_job_and_tells_a_person() -> None:
    story = Story.with_rules(Rule(on=[CauseKind.PREEMPTED], action=Action.ESCALATE))
    escalation = _preempted_fails_the_job(story)
    assert isinstance(escalation, tr.RuleEscalates) and escalation.rule == 0


def test_e8_an_unenforced_rule_fails_the_job_with_an_escalation() -> None:
    story = Story.with_rules(RESUBMIT, enforcers={0: Enforcer.NOBODY})
    escalation = _preempted_fails_the_job(story)
    assert isinstance(escalation, tr.Unenforced) and escalation.rule == 0


def test_e9_a_natively_enforced_rule_whose_object_ended_fails_the_job() -> None:
    rule = Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=1)
    story = Story.with_rules(rule, enforcers={0: Enforcer.BACKEND})
    escalation = _preempted_fails_the_job(story)
    assert isinstance(escalation, tr.NativeSpent) and escalation.rule == 0


def test_e10_a_native_rerun_is_observed_not_acted_on() -> None:
    rule = Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=2)
    story = Story.with_rules(rule, enforcers={0: Enforcer.BACKEND}).launched()
    rerun = observation(
        "job1",
        1,
        1,
        "o1",
        ObjectState.RUNNING,
        execution(0, ObjectState.ENDED, PREEMPTED),
        execution(1),
    )
    story.observe(rerun)
    job = story.fold()
    assert job.firings == {0: 1} and job.committed is State.RECOVERING
    assert type(first(story.next(rerun))) is Wait


def test_e11_e12_requeue_call_that_failed_fails_the_job() -> None:
    story = Story.with_rules(Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=1))
    obs = story.launched().ended(1, "o1", PREEMPTED)
    story.add(
        ev.RecoveryDecided,
        rule=0,
        trigger=tr.End("o1", 0),
        cause=PREEMPTED,
        ref=ObjectRef("o1"),
        submission=1,
    )
    story.add(
        ev.CallIssued, op=ev.CallOp.REQUEUE, ref=ObjectRef("o1"), deadline=story.now + CALL_DEADLINE
    )
    assert type(first(story.next(obs))) is Wait  # in flight
    story.add(ev.CallAnswered, call=len(story.events), ok=False, detail="refused")
    step = first(story.next(obs))
    assert isinstance(step, Outcome) and step.state == State.FAILED, step
    assert isinstance(step.escalation, tr.RequeueFailed)


# ------------------------------------------------------------------------------ holds


def pending(n: int = 1, ref: str = "o1", instance: int | None = None) -> ObjectObs:
    state = ObjectState.HELD if instance else ObjectState.PENDING
    return observation("job1", n, 1, ref, state, hold_instance=instance)


def test_h1_operator_hold_on_a_queued_object_becomes_a_backend_hold_by_instance() -> None:
    story = Story.with_rules(capabilities={Capability.HOLD: Support.yes()})
    story.launched(running=False).observe(pending()).add(ev.HoldRequested, reason="maintenance")
    step = first(story.next(pending()))
    assert isinstance(step, BackendHold) and step.instance == 1, step


def test_h2_a_backend_hold_with_no_standing_hold_is_released_by_its_instance() -> None:
    story = Story.with_rules(capabilities={Capability.HOLD: Support.yes()})
    story.launched(running=False).observe(pending(instance=1))
    step = first(story.next(pending(instance=1)))
    assert isinstance(step, BackendRelease) and (step.instance, step.ref) == (1, ObjectRef("o1")), (
        step
    )


def test_h3_an_operator_hold_past_its_until_is_lifted() -> None:
    story = Story().launched().add(ev.HoldRequested, until=Story().now + timedelta(minutes=5))
    assert type(first(story.next(running()))) is Wait
    story.later(300)
    step = first(story.next(running()))
    assert isinstance(step, LiftHold) and step.instance == 1, step


def test_h4_a_recovery_hold_past_its_deadline_escalates_and_stays_held() -> None:
    story = Story.with_rules(
        Rule(on=[CauseKind.PREEMPTED], action=Action.HOLD, budget=1, for_=timedelta(hours=1))
    )
    obs = story.launched().ended(1, "o1", PREEMPTED)
    story.add(ev.RecoveryDecided, rule=0, trigger=tr.End("o1", 0), cause=PREEMPTED, submission=1)
    hold = Hold(
        HoldKind.RECOVERY, Story().header.created_by, "rule 0", story.now + timedelta(hours=1)
    )
    story.add(ev.HoldPlaced, instance=1, hold=hold, submission=1, cause=PREEMPTED)
    assert story.fold().committed is State.HELD
    story.later(3600)
    step = first(story.next(obs))
    assert isinstance(step, Escalate) and step.escalation == tr.HoldExpired(1), step


def test_h5_a_released_recovery_hold_resubmits() -> None:
    story = Story.with_rules(
        Rule(on=[CauseKind.PREEMPTED], action=Action.HOLD, budget=1, for_=timedelta(hours=1))
    )
    obs = story.launched().ended(1, "o1", PREEMPTED)
    story.add(ev.RecoveryDecided, rule=0, trigger=tr.End("o1", 0), cause=PREEMPTED, submission=1)
    hold = Hold(HoldKind.RECOVERY, Story().header.created_by, "rule 0", None)
    story.add(ev.HoldPlaced, instance=1, hold=hold, submission=1, cause=PREEMPTED)
    story.add(ev.ReleaseRequested, reason="checked the checkpoint")
    step = first(story.next(obs))
    assert isinstance(step, Authorize) and (step.submission, step.trigger) == (2, tr.Release(1)), (
        step
    )


def test_h6_shared_checkpoint_hold_asks_cessation_then_resumes_when_ceased() -> None:
    story = Story.with_rules(
        Rule(on=[CauseKind.PREEMPTED], action=Action.HOLD, budget=1, for_=timedelta(hours=24)),
        checkpoint=CheckpointMode.SHARED,
    )
    obs = story.launched().ended(1, "o1", PREEMPTED)
    story.add(ev.RecoveryDecided, rule=0, trigger=tr.End("o1", 0), cause=PREEMPTED, submission=1)
    hold = Hold(HoldKind.RECOVERY, Story().header.created_by, "shared", None)
    story.add(ev.HoldPlaced, instance=1, hold=hold, submission=1, cause=PREEMPTED)
    step = first(story.next(obs))
    assert isinstance(step, Cease) and step.ref == ObjectRef("o1"), step
    story.add(
        ev.CessationAnswered, ref=ObjectRef("o1"), evidence=CessationEvidence(ceased=Tristate.YES)
    )
    step = first(story.next(obs))
    assert isinstance(step, LiftHold) and step.resume is True, step


# ------------------------------------------------------------------------------ intents


def test_i1_a_persons_resubmit_authorizes_the_next_submission() -> None:
    story = Story().launched().add(ev.ResubmitRequested)
    step = first(story.next(running()))
    assert isinstance(step, Authorize) and (step.submission, step.rule) == (2, None), step
    assert step.trigger == tr.Resubmit(len(story.events))


def test_i2_a_persons_requeue_calls_requeue() -> None:
    story = Story().launched().add(ev.RequeueRequested)
    step = first(story.next(running()))
    assert isinstance(step, Requeue) and step.ref == ObjectRef("o1"), step


def test_i3_a_requeue_bit_left_set_is_restored() -> None:
    story = Story().launched()
    obs = observation("job1", 1, 1, "o1", ObjectState.RUNNING, execution(0), requeue_bit=True)
    story.observe(obs)
    step = first(story.next(obs))
    assert isinstance(step, RestoreRequeue) and step.ref == ObjectRef("o1"), step


# ------------------------------------------------------------------------------ terminal


def test_t1_cancel_stops_everything_live() -> None:
    story = Story().launched().add(ev.CancelRequested, reason="wrong data")
    outcome = story.fold().outcome
    assert outcome is not None and outcome.state is State.CANCELLED
    step = first(story.next(running()))
    assert isinstance(step, Stop) and step.ref == ObjectRef("o1"), step


def test_t2_a_stop_is_repeated_only_after_its_retry_interval() -> None:
    story = Story().launched().add(ev.CancelRequested).add(ev.StopDecided, ref=ObjectRef("o1"))
    assert type(first(story.next(running()))) is Wait
    story.later(STOP_RETRY.total_seconds())
    assert type(first(story.next(running()))) is Stop


def test_t3_everything_done_settles() -> None:
    story = Story().launched()
    obs = story.ended(1, "o1", SUCCESS)
    story.add(ev.OutcomeDecided, state=State.SUCCEEDED, cause=SUCCESS)
    assert type(first(story.next(obs))) is Settle


def test_t4_cleanup_past_its_deadline_escalates() -> None:
    story = Story().launched().add(ev.CancelRequested).add(ev.StopDecided, ref=ObjectRef("o1"))
    story.later(timedelta(minutes=30).total_seconds())
    steps = story.next(running())
    assert any(type(s) is Escalate and s.escalation == tr.CLEANUP for s in steps) or (
        type(first(steps)) is Stop
    )
    story.add(ev.StopDecided, ref=ObjectRef("o1"))
    step = first(story.next(running()))
    assert isinstance(step, Escalate) and step.escalation == tr.CLEANUP, step


@pytest.mark.parametrize(
    ("policy", "settles"), [(UnmatchedPolicy.RESIDUAL, True), (UnmatchedPolicy.MANUAL, False)]
)
def test_t5_unresolved_attempts_block_settling_only_under_manual(
    policy: UnmatchedPolicy, settles: bool
) -> None:
    story = Story(options=ev.Options(supervised=True, unmatched=policy)).authorize()
    story.attempt(1, 1).reply(1, 1, reply=ev.Reply.UNKNOWN)
    story.attempt(1, 2).reply(1, 2, ref="o2")
    obs = observation(
        "job1", 1, 2, "o2", ObjectState.ENDED, execution(0, ObjectState.ENDED, SUCCESS)
    )
    story.observe(obs).canonical(1, "o2", 2).add(
        ev.OutcomeDecided, state=State.SUCCEEDED, cause=SUCCESS
    )
    assert (type(first(story.next(obs))) is Settle) is settles


def test_t6_a_settled_job_needs_nothing() -> None:
    story = Story().launched()
    obs = story.ended(1, "o1", SUCCESS)
    story.add(ev.OutcomeDecided, state=State.SUCCEEDED, cause=SUCCESS).add(ev.Settled)
    step = first(story.next(obs))
    assert type(step) is Wait and step.wake is None


def test_e10_an_object_shown_running_whose_only_run_ended_is_not_a_rerun() -> None:
    """A backend between two answers (Slurm's COMPLETING while accounting already closed the
    run) shows the object running with its only execution ended. That is no rerun: when the
    object then ends, its end is acted on (here: the resubmit rule fires)."""
    story = Story.with_rules(RESUBMIT).launched()
    between = observation(
        "job1", 1, 1, "o1", ObjectState.RUNNING, execution(0, ObjectState.ENDED, PREEMPTED)
    )
    story.observe(between)
    assert story.fold().reruns_seen == set()
    assert type(first(story.next(between))) is Wait
    obs = story.ended(1, "o1", PREEMPTED)
    step = first(story.next(obs))
    assert isinstance(step, Authorize) and (step.submission, step.trigger) == (
        2,
        tr.End("o1", 0),
    ), step


def test_e10_a_rerun_that_never_shows_still_ends_the_job() -> None:
    rule = Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=2)
    story = Story.with_rules(rule, enforcers={0: Enforcer.BACKEND}).launched()
    queued = observation(
        "job1", 1, 1, "o1", ObjectState.PENDING, execution(0, ObjectState.ENDED, PREEMPTED)
    )
    story.observe(queued)
    assert story.fold().firings == {0: 1}
    obs = story.ended(1, "o1", PREEMPTED)  # cancelled while queued: no second run
    step = first(story.next(obs))
    assert isinstance(step, Outcome) and step.state == State.FAILED, step
