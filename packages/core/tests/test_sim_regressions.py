"""Bugs the deterministic simulator (tools/sim) found in the core, each pinned by its seed.

Every test puts a record in the situation the seed reached and checks what the fix changed.
Replay a seed with ``nox -s sim -- --seed N``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from jobdispatch import (
    Action,
    Cause,
    CauseKind,
    Invalid,
    ObjectObs,
    ObjectRef,
    ObjectState,
    Provenance,
    Rule,
    State,
    UnmatchedPolicy,
    compose,
)
from jobdispatch.clock import ManualClock
from jobdispatch.memory import MemoryBackend
from jobdispatch.records import events as ev
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.steps import (
    Escalate,
    Miss,
    Observe,
    Outcome,
    RuleHold,
    Settle,
    Start,
    Stop,
    VerifiedStopped,
    Wait,
)
from jobdispatch.testing import PERSON, SUCCESS, T0, Story, observation
from jobdispatch.timing import ABSENCE_REFRESH
from jobdispatch.triggers import End, Launch, RuleEscalates, Unresolved

OOM = Cause(CauseKind.OUT_OF_MEMORY, Provenance.SCHEDULER)


def _o1_rerun(first: Cause, rerun: Cause) -> ObjectObs:
    """Submission 1's object o1 seen ended twice: its first execution, then the one a requeue
    call reran."""
    from jobdispatch.testing import execution

    return observation(
        "job1",
        1,
        1,
        "o1",
        ObjectState.ENDED,
        execution(0, ObjectState.ENDED, first),
        execution(1, ObjectState.ENDED, rerun),
    )


def test_seed_10_rule_hold_waits_while_an_operator_hold_stands() -> None:
    """Seed 10, invariant 6: an execution ended under a hold rule while a person's hold stood;
    ``next`` placed the rule's hold anyway and ``fold`` refused the record it made ("a hold
    placed while another stands"). The rule's hold now waits until the standing one is lifted."""
    story = Story.with_rules(
        Rule(on=[CauseKind.OUT_OF_MEMORY], action=Action.HOLD, budget=2, for_=timedelta(hours=1))
    ).launched(1, "o1")
    story.add(ev.HoldRequested, reason="looking")
    ended = story.ended(1, "o1", OOM)
    assert all(type(s) is not RuleHold for s in story.next(ended))

    story.add(ev.ReleaseRequested)
    steps = story.next(ended)
    assert type(steps[0]) is RuleHold
    story.add(ev.RecoveryDecided, rule=0, trigger=steps[0].trigger, cause=OOM, submission=1).add(
        ev.HoldPlaced, instance=2, hold=steps[0].hold, submission=1, cause=OOM
    )
    assert story.fold().active_hold is not None


def test_seed_20_a_refused_attempt_after_an_unresolved_one_does_not_stall_the_launch() -> None:
    """Seed 20, invariant 7: attempt 1.1 was committed and its process crashed before Start
    (no object, no reply); attempt 1.2 was refused. ``next`` read the refusal as a launch
    failure, which the unresolved 1.1 kept from being one: the job waited forever, neither
    launched nor escalated. Retries left now start another attempt; none left escalate."""
    story = Story().authorize().attempt(1, 1).attempt(1, 2)
    story.reply(1, 2, reply=ev.Reply.REFUSED, detail="no capacity")
    steps = story.next()
    assert isinstance(steps[0], Start) and steps[0].attempt == 3, steps[0]

    story = Story(options=ev.Options(supervised=True, submit_retries=1))
    story.authorize().attempt(1, 1).attempt(1, 2)
    story.reply(1, 2, reply=ev.Reply.REFUSED, detail="no capacity")
    assert type(story.next()[0]) is Wait
    story.later(timedelta(minutes=11).total_seconds())
    steps = story.next()
    assert isinstance(steps[0], Escalate) and steps[0].escalation == Unresolved(1), steps[0]


def test_seed_114_a_requeue_rule_on_a_failed_launch_fails_the_job() -> None:
    """Seed 114, a crash of the supervisor: a requeue rule covering launch-failed matched a
    launch that failed (its one attempt abandoned), and ``next`` asked to requeue an object that
    does not exist (``ref=None``); the executor's assertion stopped every pass. With nothing to
    run again in place, the job fails with the cause, and a person is told."""
    story = Story.with_rules(Rule(on=[CauseKind.LAUNCH_FAILED], action=Action.REQUEUE, budget=2))
    story.authorize().attempt(1, 1).add(ev.AbandonRequested, submission=1, attempt=1)
    step = story.next()[0]
    assert type(step) is Outcome
    assert step.cause is not None and step.cause.kind is CauseKind.LAUNCH_FAILED
    assert step.escalation == RuleEscalates(0, Launch(1))


def test_seed_123_abandon_refuses_a_settled_job() -> None:
    """Seed 123, invariant 6: under the residual policy a job settled with an attempt still
    unresolved; a person then abandoned it, and the operator committed the intent to a settled
    record, which ``fold`` refuses from then on. The operator refuses instead."""
    story = Story().authorize().attempt(1, 1).attempt(1, 2).reply(1, 2, "o2")
    story.canonical(1, "o2", 2).open(1, "o2").ended(1, "o2", SUCCESS)
    story.add(ev.OutcomeDecided, state=State.SUCCEEDED, cause=SUCCESS).add(ev.Settled)
    clock = ManualClock(T0)
    store = MemoryRecords(clock)
    store.create(story.header, story.events)
    operator = compose(MemoryBackend(clock=clock), store=store, clock=clock).operator
    with pytest.raises(Invalid, match="settled"):
        operator.abandon("job1", 1, 1, by=PERSON)
    assert len(store.read("job1").events) == len(story.events)


def test_seed_2_manual_policy_escalates_attempts_that_block_settlement() -> None:
    """Seed 2, invariant 7: under the manual policy attempt 1.1 was committed and its process
    crashed before Start; attempt 1.2 ran and succeeded. Settlement waits for a person to
    abandon 1.1, and nothing ever told one: the job neither settled nor escalated. Past the
    unresolved age it is escalated now (once)."""
    story = Story.with_rules(unmatched=UnmatchedPolicy.MANUAL)
    story.options = ev.Options(supervised=True, unmatched=UnmatchedPolicy.MANUAL)
    story.authorize().attempt(1, 1).attempt(1, 2).reply(1, 2, "o2")
    story.canonical(1, "o2", 2).open(1, "o2").ended(1, "o2", SUCCESS)
    story.add(ev.OutcomeDecided, state=State.SUCCEEDED, cause=SUCCESS)
    assert type(story.next()[0]) is Wait
    story.later(timedelta(minutes=10).total_seconds())
    step = story.next()[0]
    assert isinstance(step, Escalate) and step.escalation == Unresolved(1), step
    story.add(ev.Escalated, id=Unresolved(1), detail=step.detail)
    assert type(story.next()[0]) is Wait
    story.add(ev.AbandonRequested, submission=1, attempt=1)
    assert type(story.next()[0]) is Settle


def test_seed_1014_misses_far_apart_do_not_prove_an_absence() -> None:
    """Seed 1014, invariant 5: a lagging listing missed the object once (recorded absent);
    later a find showed it again, but that process crashed before recording it; minutes later
    another lagging find missed it, and ``next`` judged it verified stopped from the old
    absence. It was running: the job failed as "vanished before it ran" while its execution
    ran on. Misses recorded further apart than ABSENCE_GAP now start the absence over."""
    story = Story().launched(1, "o1")
    story.add(ev.Absent, ref=ObjectRef("o1"), find_at=story.now)
    story.later(333)
    step = story.next()[0]
    assert step == Observe(missing=(Miss(ref=ObjectRef("o1"), find_at=story.now),))
    story.add(ev.Absent, ref=ObjectRef("o1"), find_at=story.now)
    assert type(story.next()[0]) is Wait
    for _ in range(6):  # a continuing absence, recorded every ABSENCE_REFRESH
        story.later(ABSENCE_REFRESH.total_seconds())
        steps = story.next()
        if type(steps[0]) is Observe:
            story.add(ev.Absent, ref=ObjectRef("o1"), find_at=story.now)
            steps = story.next()
    assert type(steps[0]) is VerifiedStopped


def test_seed_3265_a_start_reply_recorded_after_settlement_folds() -> None:
    """Seed 3265, invariant 6: supervisor A committed attempt 1.1 and paused past its lease
    between Start and recording the reply; meanwhile the job was cancelled, cleaned up and
    settled. A's reply (evidence, which needs no lease) then landed after ``settled``, and
    ``fold`` refused the record from then on. A late reply is a fact like a late observation."""
    story = Story().authorize().attempt(1, 1).attempt(1, 2).reply(1, 2, "o2")
    story.add(ev.CancelRequested, reason="stop")
    story.observe(observation("job1", 1, 2, "o2", ObjectState.ENDED))
    story.add(ev.Settled)
    story.reply(1, 1, "o1")
    job = story.fold()
    assert job.settled and job.outcome is not None and job.outcome.state is State.CANCELLED
    assert job.submission(1).attempt(1).ref == ObjectRef("o1")  # type: ignore[union-attr]


def test_seed_6217_cancel_stops_what_the_record_knows_even_when_find_lags() -> None:
    """Seed 6217, invariant 4: a supervisor committed the open of submission 1's canonical
    object and paused before its open call; a person cancelled meanwhile, but a lagging Find
    did not show the gated object, so the cancel stopped nothing, and the open then lifted the
    gate of a cancelled job. The cancel now stops every object the record knows is not done."""
    from jobdispatch.spi import StartRequest

    clock = ManualClock(T0)
    backend = MemoryBackend(clock=clock)
    story = Story()
    ref = backend.start(StartRequest(job="job1", submission=1, attempt=1, spec=story.spec))
    story.authorize().attempt().reply(1, 1, ref.id).canonical(1, ref.id).open(1, ref.id)
    store = MemoryRecords(clock)
    store.create(story.header, story.events)
    backend.env.drop_next_observation("job1")

    receipt = compose(backend, store=store, clock=clock).operator.cancel("job1", by=PERSON)

    assert receipt.committed
    assert backend.env.state(ref) is ObjectState.ENDED
    backend.open(ref)  # the paused supervisor's call lands late: it lifts nothing
    assert backend.env.state(ref) is ObjectState.ENDED


def test_seed_3033085_a_cancelled_job_settles_only_once_a_requeues_rerun_is_seen() -> None:
    """Seed 3033085, invariant 5 (found by the sweep beyond CI's seeds): a requeue call on the
    ended canonical object was answered ok, so the object ran again; the job was cancelled
    before any Find showed the rerun, the record still showed the object ended, and clean-up
    settled the job with the rerun's end never observed. An ended object a requeue may have
    rerun since its last observation is no longer taken as done: it is stopped, and the job
    settles once an observation made after the call shows it."""
    from jobdispatch.timing import CALL_DEADLINE

    preempted = Cause(CauseKind.PREEMPTED, Provenance.SCHEDULER)
    story = Story.with_rules(Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=1))
    first_end = story.launched().ended(1, "o1", preempted)
    o1 = ObjectRef("o1")
    story.add(
        ev.RecoveryDecided, rule=0, trigger=End("o1", 0), cause=preempted, ref=o1, submission=1
    )
    story.add(ev.CallIssued, op=ev.CallOp.REQUEUE, ref=o1, deadline=story.now + CALL_DEADLINE)
    story.add(ev.CallAnswered, call=len(story.events), ok=True)
    story.add(ev.CancelRequested, reason="stop")

    # A lagging Find shows nothing: the rerun may be live, so it is stopped, not settled.
    step = story.next()[0]
    assert isinstance(step, Stop) and step.ref == o1, step
    # A Find after the call that still shows the first end is recorded, though nothing
    # changed, since it is the first sight of the object after the call.
    assert type(story.next(first_end)[0]) is Observe
    rerun = _o1_rerun(preempted, SUCCESS)
    story.observe(rerun)
    assert type(story.next(rerun)[0]) is Settle


def test_seed_10071625_a_released_hold_waits_for_a_requeues_rerun_to_stop() -> None:
    """Seed 10071625, invariant 1 (found by the sweep beyond CI's seeds, above 10,000,000): a
    rule's hold was placed on a non-zero exit; a person's requeue, asked for before the run, was
    then called on the ended object and answered ok, so the object ran again; the hold was
    released, and the new submission was authorized and opened while the rerun lived: two live
    objects at once. Submission n+1 now opens only once n's object is over, and an ended one
    counts as over only if no requeue may have rerun it since it was seen."""
    from jobdispatch.steps import Authorize, Open
    from jobdispatch.timing import CALL_DEADLINE

    failed = Cause(CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION)
    story = Story.with_rules(
        Rule(on=[CauseKind.NON_ZERO_EXIT], action=Action.HOLD, budget=1)
    ).launched(1, "o1")
    ended = story.ended(1, "o1", failed)
    steps = story.next(ended)
    assert type(steps[0]) is RuleHold
    story.add(ev.RecoveryDecided, rule=0, trigger=steps[0].trigger, cause=failed, submission=1)
    story.add(ev.HoldPlaced, instance=1, hold=steps[0].hold, submission=1, cause=failed)
    o1 = ObjectRef("o1")
    story.add(ev.RequeueRequested, reason="rerun it")
    story.add(ev.CallIssued, op=ev.CallOp.REQUEUE, ref=o1, deadline=story.now + CALL_DEADLINE)
    story.add(ev.CallAnswered, call=len(story.events), ok=True)
    story.add(ev.HoldLifted, instance=1, reason="released", resume=True)

    # The release gets its new submission, but its object opens only once the rerun is
    # stopped: one live object per job.
    steps = story.next()
    assert isinstance(steps[0], Authorize) and steps[0].submission == 2, steps[0]
    story.authorize(2, trigger=steps[0].trigger, cause=failed)
    story.attempt(2, 1).reply(2, 1, ref="o2").canonical(2, "o2", 1)
    gated = observation("job1", 2, 1, "o2", ObjectState.GATED)
    story.observe(gated)
    step = story.next(gated)[0]
    assert isinstance(step, Stop) and step.ref == o1, step
    story.add(ev.StopDecided, ref=o1, reason=step.reason)
    assert all(type(s) is not Open for s in story.next(gated))
    # Once the rerun is seen ended after the call, submission 2 opens.
    rerun = _o1_rerun(failed, failed)
    story.observe(rerun)
    step = story.next(gated)[0]
    assert isinstance(step, Open) and step.ref == ObjectRef("o2"), step
