"""Each checker, fed a hand-written history, sees the violation it is for (and no other)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobdispatch.memory import history as h
from jobdispatch.records import events as ev
from jobdispatch.spi import ObjectRef
from jobdispatch.testing import Story
from jobdispatch.triggers import SUBMIT, End, Resubmit, Trigger
from jobdispatch.types import Action, Actor, Cause, CauseKind, ObjectState, Rule, State
from jobdispatch_sim.checkers import Checker, Violation
from jobdispatch_sim.checkers.budget import Budget
from jobdispatch_sim.checkers.canonical_open import CanonicalOpen
from jobdispatch_sim.checkers.causes import Causes
from jobdispatch_sim.checkers.folds import Folds
from jobdispatch_sim.checkers.outcome_final import OutcomeFinal
from jobdispatch_sim.checkers.single_live import SingleLive
from jobdispatch_sim.timeline import Call, Commit, Happened, Item, Submitted

T = datetime(2026, 1, 1, tzinfo=UTC)
ME = Actor.supervisor("t")
JOB = "job1"


class _Seq:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> int:
        self.n += 1
        return self.n


seq = _Seq()


def happened(entry: h.Entry) -> Happened:
    return Happened(seq=seq(), shape="slurm", entry=entry)


def commit(event: ev.AnyEvent, token: int | None = None, job: str = JOB) -> Commit:
    return Commit(seq=seq(), at=T, job=job, revision=seq.n, event=event, actor="sup", token=token)


def name(n: int = 1, k: int = 1) -> str:
    return f"jd-{JOB}-{n}-{k}"


def feed(checker: Checker, items: list[Item]) -> list[Violation]:
    out: list[Violation] = []
    for item in items:
        out.extend(checker.feed(item))
    return out


#: The deadline an open decision records in these histories.
DEADLINE = T + timedelta(seconds=30)


def opened(
    ref: str, n: int = 1, deadline: datetime | None = DEADLINE, at: datetime = T
) -> Happened:
    return happened(
        h.Opened(at=at, ref=ObjectRef(ref), name=name(n), lifted=True, deadline=deadline)
    )


def open_decided(ref: str, n: int = 1, deadline: datetime = DEADLINE) -> Commit:
    return commit(ev.OpenDecided(at=T, by=ME, submission=n, ref=ObjectRef(ref), deadline=deadline))


def ended(ref: str, n: int = 1) -> Happened:
    return happened(h.ObjectEnded(at=T, ref=ObjectRef(ref), name=name(n)))


def canonical(ref: str, n: int = 1) -> Commit:
    return commit(ev.CanonicalChosen(at=T, by=ME, submission=n, ref=ObjectRef(ref), attempt=1))


def test_single_live_sees_two_opened_objects_at_once_and_not_one_after_another() -> None:
    assert feed(SingleLive(), [opened("1", 1), ended("1", 1), opened("2", 2)]) == []
    found = feed(SingleLive(), [opened("1", 1), opened("2", 2)])
    assert [v.invariant for v in found] == [1]


def test_canonical_open_needs_the_canonical_commit_first() -> None:
    assert feed(CanonicalOpen(), [canonical("1"), open_decided("1"), opened("1")]) == []
    found = feed(CanonicalOpen(), [opened("1"), canonical("1"), open_decided("1")])
    assert [v.invariant for v in found] == [2]


def test_canonical_open_needs_a_recorded_decision_and_its_deadline() -> None:
    # The call carries no deadline, or one no decision recorded before the gate was lifted.
    cases: tuple[list[Item], ...] = (
        [canonical("1"), open_decided("1"), opened("1", deadline=None)],
        [canonical("1"), open_decided("1"), opened("1", deadline=DEADLINE + timedelta(1))],
        [canonical("1"), opened("1"), open_decided("1")],
    )
    for items in cases:
        assert [v.invariant for v in feed(CanonicalOpen(), items)] == [2], items
    # Lifted later than the deadline its decision recorded.
    late = opened("1", at=DEADLINE + timedelta(seconds=1))
    found = feed(CanonicalOpen(), [canonical("1"), open_decided("1"), late])
    assert [v.detail for v in found] == [
        "1 was opened 1.0s past the deadline its decision recorded"
    ]
    # A requeue back to run is held to its call's recorded deadline the same way.
    issued = commit(
        ev.CallIssued(at=T, by=ME, op=ev.CallOp.REQUEUE, ref=ObjectRef("1"), deadline=DEADLINE)
    )

    def requeued(at: datetime) -> Happened:
        return happened(
            h.Requeued(
                at=at, ref=ObjectRef("1"), name=name(), was=ObjectState.ENDED, deadline=DEADLINE
            )
        )

    assert feed(CanonicalOpen(), [canonical("1"), issued, requeued(T)]) == []
    over = feed(CanonicalOpen(), [canonical("1"), issued, requeued(DEADLINE + timedelta(1))])
    assert [v.invariant for v in over] == [2]


def test_budget_counts_by_cause_and_refuses_a_reused_trigger() -> None:
    story = Story.with_rules(Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1))
    header = story.header
    cause = Cause(CauseKind.PREEMPTED)

    def authorize(n: int, trigger: Trigger) -> Commit:
        return commit(ev.SubmissionAuthorized(at=T, by=ME, n=n, trigger=trigger, cause=cause))

    start = Submitted(seq=seq(), at=T, job=JOB, header=header)
    assert feed(Budget(), [start, authorize(2, End("1", 0))]) == []
    over = feed(Budget(), [start, authorize(2, End("1", 0)), authorize(3, End("2", 0))])
    assert [v.invariant for v in over] == [3]
    again = feed(Budget(), [start, authorize(2, Resubmit(4)), authorize(3, Resubmit(4))])
    assert [v.invariant for v in again] == [3]


def test_outcome_final_sees_a_second_outcome_an_open_after_cancel_and_a_stop_before_it() -> None:
    outcome = ev.OutcomeDecided(at=T, by=ME, state=State.FAILED, cause=Cause(CauseKind.UNKNOWN))
    cancel = ev.CancelRequested(at=T, by=Actor.human("p"))
    assert [v.invariant for v in feed(OutcomeFinal(), [commit(cancel), commit(outcome)])] == [4]
    # An open decided after the cancel (or never) is a violation; one decided before it is
    # what a supervisor that paused between deciding and calling does, and is allowed.
    late: list[Item] = [commit(cancel), open_decided("1"), opened("1")]
    assert [v.invariant for v in feed(OutcomeFinal(), late)] == [4]
    assert [v.invariant for v in feed(OutcomeFinal(), [commit(cancel), opened("1")])] == [4]
    assert feed(OutcomeFinal(), [open_decided("1"), commit(cancel), opened("1")]) == []
    # ... but never once a stop reached the object while it was gated.
    stopped = happened(h.Stopped(at=T, ref=ObjectRef("1"), name=name(), was=ObjectState.GATED))
    after_stop: list[Item] = [open_decided("1"), commit(cancel), stopped, opened("1")]
    assert [v.invariant for v in feed(OutcomeFinal(), after_stop)] == [4]
    stop = Call(seq=seq(), at=T, actor="op:cancel", op="stop", job=JOB, target="1", result="ok")
    assert [v.invariant for v in feed(OutcomeFinal(), [stop, commit(cancel)])] == [4]
    assert feed(OutcomeFinal(), [commit(cancel), stop]) == []


def test_causes_want_the_cause_of_the_execution_that_ended_the_job() -> None:
    preempted = Cause(CauseKind.PREEMPTED)
    authorize = commit(ev.SubmissionAuthorized(at=T, by=ME, n=1, trigger=SUBMIT))
    run = happened(h.ExecutionStarted(at=T, ref=ObjectRef("1"), name=name(), index=0))
    end = happened(
        h.ExecutionEnded(at=T, ref=ObjectRef("1"), name=name(), index=0, cause=preempted)
    )

    def outcome(cause: Cause) -> Commit:
        return commit(ev.OutcomeDecided(at=T, by=ME, state=State.FAILED, cause=cause))

    history: list[Item] = [authorize, canonical("1"), run, end]
    assert feed(Causes(), [*history, outcome(preempted)]) == []
    wrong = feed(Causes(), [*history, outcome(Cause(CauseKind.UNKNOWN))])
    assert [v.invariant for v in wrong] == [5]
    early = feed(Causes(), [authorize, canonical("1"), run, outcome(preempted)])
    assert [v.invariant for v in early] == [5]


def test_folds_sees_a_decision_under_an_older_token() -> None:
    settle = ev.Settled(at=T, by=ME)
    assert feed(Folds(), [commit(settle, token=1), commit(settle, token=2)]) == []
    stale = feed(Folds(), [commit(settle, token=2), commit(settle, token=1)])
    assert [v.invariant for v in stale] == [6]
