"""``project`` between a run's end and the supervisor's commit of what follows.

Reliability issue 14.6: on Slurm that window lasts 1.5 to 7 s, and status showed ``pending``
with cause ``none`` in it, so a watcher saw running, pending, failed. ``project`` shows what the
backend shows instead: ``ended``, with the run's cause, not committed.
"""

from __future__ import annotations

from jobdispatch import (
    Action,
    Cause,
    CauseKind,
    Discovery,
    ObjectState,
    Provenance,
    Rule,
    State,
    project,
)
from jobdispatch.records import events as ev
from jobdispatch.spi import ObjectObs
from jobdispatch.status import Status
from jobdispatch.testing import PREEMPTED, SUCCESS, Story, execution, observation
from jobdispatch.triggers import End

FAILED_3 = Cause(CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION, exit_code=3)


def status(story: Story, *shown: ObjectObs) -> Status:
    when = story.now
    return project(story.fold(when), Discovery(job=story.job_id, objects=shown, at=when), when)


def ended(cause: Cause, ref: str = "o1", n: int = 1) -> ObjectObs:
    return observation("job1", n, 1, ref, ObjectState.ENDED, execution(0, ObjectState.ENDED, cause))


def test_a_run_shown_ended_before_anything_is_recorded_is_ended_not_pending() -> None:
    story = Story().launched(1, "o1")
    got = status(story, ended(FAILED_3))
    assert (got.state, got.cause, got.committed) == (State.ENDED, FAILED_3, False)


def test_a_recorded_end_awaiting_its_outcome_is_ended_with_its_cause() -> None:
    story = Story().launched(1, "o1")
    story.ended(1, "o1", FAILED_3)
    got = status(story)  # the backend shows nothing now: the record's observation stands
    assert (got.state, got.cause, got.committed) == (State.ENDED, FAILED_3, False)


def test_once_the_outcome_is_committed_the_state_is_the_records() -> None:
    story = Story().launched(1, "o1")
    obs = story.ended(1, "o1", FAILED_3)
    story.add(ev.OutcomeDecided, state=State.FAILED, cause=FAILED_3)
    got = status(story, obs)
    assert (got.state, got.cause, got.committed) == (State.FAILED, FAILED_3, True)


def test_a_success_shown_before_its_commit_is_ended_with_no_cause() -> None:
    story = Story().launched(1, "o1")
    got = status(story, ended(SUCCESS))
    assert (got.state, got.cause.kind, got.committed) == (State.ENDED, CauseKind.NONE, False)


def test_a_recovery_committed_for_the_end_is_recovering_not_ended() -> None:
    rule = Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2)
    story = Story.with_rules(rule).launched(1, "o1")
    obs = story.ended(1, "o1", PREEMPTED)
    story.authorize(2, End("o1", 0), rule=0, cause=PREEMPTED)
    got = status(story, obs)
    assert (got.state, got.cause.kind, got.committed) == (
        State.RECOVERING,
        CauseKind.PREEMPTED,
        True,
    )


def test_running_is_not_committed_either_and_pending_is() -> None:
    story = Story().launched(1, "o1", running=False)
    assert (status(story).state, status(story).committed) == (State.PENDING, True)
    shown = observation("job1", 1, 1, "o1", ObjectState.RUNNING, execution(0))
    got = status(story, shown)
    assert (got.state, got.committed) == (State.RUNNING, False)


def test_an_object_state_is_waiting_running_or_ended_and_only_one() -> None:
    """``waiting`` (what a hold may be placed on) is every state that neither runs nor ended."""
    from jobdispatch.types import ObjectState

    for state in ObjectState:
        kinds = [state.waiting, state is ObjectState.RUNNING, state is ObjectState.ENDED]
        assert kinds.count(True) == 1, state
