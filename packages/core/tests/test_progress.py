"""Progress as evidence, stalls and no-advance budgets (jobdispatch.progress and the rows P1 to
P5 of spec 0001 D6): each test puts a record in one situation, hands ``next`` a reading of the
job's progress and checks what it does; the properties at the end check the module's
invariants over drawn histories."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobdispatch import (
    Action,
    Cause,
    CauseKind,
    Enforcer,
    ObjectRef,
    ObjectState,
    Plan,
    Provenance,
    RecoveryPolicy,
    Rule,
)
from jobdispatch import triggers as tr
from jobdispatch.errors import Rejected, ValidationError
from jobdispatch.job import Job
from jobdispatch.memory import MemoryBackend
from jobdispatch.phases import phase
from jobdispatch.plan import make_plan
from jobdispatch.progress import (
    BLIND,
    Blind,
    JobProgress,
    Mark,
    Origin,
    Resumed,
    Sighted,
    judge,
    window,
)
from jobdispatch.records import events as ev
from jobdispatch.spi import Discovery, Growth, ObjectObs
from jobdispatch.status import project
from jobdispatch.steps import (
    Authorize,
    Context,
    DeclareStall,
    Escalate,
    ObserveStall,
    Outcome,
    RecordProgress,
    Step,
    Stop,
    Wait,
)
from jobdispatch.testing import SUPERVISOR, T0, Story, execution, observation, plan_for
from jobdispatch.timing import STOP_RETRY
from jobdispatch.types import (
    Charge,
    JobSpec,
    ProgressSource,
    StallAssignment,
    StallMode,
    StallRule,
)
from jobdispatch.validate import problems

AFTER = timedelta(minutes=10)
GRACE = timedelta(minutes=30)
EVERY = timedelta(minutes=5)
ROOT = "s3://ckpt/team"
PREEMPTED = Cause(CauseKind.PREEMPTED, Provenance.SCHEDULER)
CANCELLED = Cause(CauseKind.CANCELLED, Provenance.ACTOR, "stopped")
OUT = Origin.OUTPUT
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def story(
    *rules: Rule,
    mode: StallMode = StallMode.ENFORCE,
    stall: bool = True,
    progress: bool = True,
    job: str = "job1",
) -> Story:
    spec = JobSpec(
        command=["train"],
        name="t",
        recovery=RecoveryPolicy(rules=rules),
        progress=ProgressSource(root=ROOT, record_every=EVERY) if progress else None,
        stall=StallRule(after=AFTER, startup_grace=GRACE, mode=mode) if stall else None,
    )
    return Story(spec=spec, plan=plan_for(spec), job_id=job)


def mark(step: int, at: datetime, n: int = 1, origin: Origin = Origin.MARK) -> Mark:
    return Mark(step=step, at=at, submission=n, execution="0", origin=origin)


def reading(step: int, at: datetime, n: int = 1, checkpoint: int | None = None) -> JobProgress:
    latest = mark(step, at, n)
    ckpt = None if checkpoint is None else mark(checkpoint, at, n, Origin.PUBLICATION)
    return JobProgress(latest=latest, checkpoint=ckpt)


def running(n: int = 1, ref: str = "o1", index: int = 0, job: str = "job1") -> ObjectObs:
    return observation(job, n, 1, ref, ObjectState.RUNNING, execution(index))


def commit(s: Story, step: object) -> Story:
    """Commit what a step commits before its call, as an executor would, at the story's now."""
    ctx = Context(at=s.now, by=SUPERVISOR, job=s.fold())
    s.commit(step.before(ctx))  # type: ignore[attr-defined]
    return s


# ------------------------------------------------------------------------------ P1: evidence


def test_p1_the_first_progress_is_recorded_as_evidence_once_the_jobs_window_ends() -> None:
    s = story().launched()
    # The job was created at T0: its first progress waits for the edge of that window.
    assert type(s.next(running(), progress=reading(100, T0))[0]) is Wait
    first_window(s)
    step = s.next(running(), progress=reading(100, T0))[0]
    assert step == RecordProgress(evidence=(mark(100, T0),))
    commit(s, step)
    job = s.fold()
    assert job.progress is not None and job.progress.step == 100
    # Recorded once: the same reading asks for nothing more.
    assert type(s.next(running(), progress=reading(100, T0))[0]) is Wait


def first_window(s: Story) -> Story:
    """Move the story to where the job's first recording window after its creation begins."""
    return s.later((next_window(s.job_id, T0) - s.now).total_seconds())


def next_window(job: str, at: datetime, every: timedelta = EVERY) -> datetime:
    """When the job's recording window after the one holding ``at`` begins."""
    start = EPOCH + phase(job, every) + (window(job, every, at) + 1) * every
    assert window(job, every, start) == window(job, every, at) + 1
    assert window(job, every, start - timedelta(microseconds=1)) == window(job, every, at)
    return start


def test_p1_progress_is_recorded_at_most_once_per_window_of_the_jobs_own() -> None:
    s = first_window(story().launched())
    commit(s, s.next(running(), progress=reading(1, s.now))[0])
    edge = next_window("job1", s.now)
    s.later((edge - s.now - timedelta(seconds=1)).total_seconds())
    assert type(s.next(running(), progress=reading(2, s.now))[0]) is Wait
    s.later(1)  # the job's next window has begun: the newest progress is recorded
    step = s.next(running(), progress=reading(30, s.now))[0]
    assert step == RecordProgress(evidence=(mark(30, s.now),))
    commit(s, step)
    s.later((EVERY - timedelta(seconds=1)).total_seconds())
    assert type(s.next(running(), progress=reading(31, s.now))[0]) is Wait


def test_each_job_has_a_phase_of_its_own_drawn_from_its_id_alone() -> None:
    # Pinned: the same id has the same phase in every process and on every machine (the
    # simulator's records replay byte for byte), unlike Python's salted hash().
    assert phase("job1", EVERY) == timedelta(minutes=4, seconds=23, microseconds=519901)
    assert phase("job1", timedelta(seconds=10)) == timedelta(seconds=3, microseconds=519901)
    # Ten thousand jobs launched together spread their windows' edges over the interval: no
    # tenth of a 10 s interval holds more than 1.2 times its share of them.
    every = timedelta(seconds=10)
    buckets = Counter(phase(f"job-{i}", every) // timedelta(seconds=1) for i in range(10_000))
    assert sorted(buckets) == list(range(10))
    assert max(buckets.values()) <= 1_200 and min(buckets.values()) >= 800


@settings(max_examples=200, deadline=None)
@given(
    st.text(min_size=1, max_size=40),
    st.integers(10, 86_400).map(lambda s: timedelta(seconds=s)),
    st.integers(0, 10**9).map(lambda s: T0 + timedelta(seconds=s / 1000)),
)
def test_a_phase_lies_within_the_interval_and_windows_follow_one_another(
    job: str, every: timedelta, at: datetime
) -> None:
    assert timedelta(0) <= phase(job, every) < every
    assert phase(job, every) == phase(job, every)
    w = window(job, every, at)
    assert window(job, every, at + every) == w + 1
    assert window(job, every, at - every) == w - 1


def test_p1_a_publication_is_recorded_as_the_checkpoint_and_resumed_entries_once() -> None:
    s = first_window(story().launched())
    entry = Resumed(submission=1, execution="0", step=40, at=T0)
    got = JobProgress(
        latest=mark(50, T0, origin=Origin.PUBLICATION),
        checkpoint=mark(50, T0, origin=Origin.PUBLICATION),
        resumed=(entry,),
    )
    step = s.next(running(), progress=got)[0]
    assert isinstance(step, RecordProgress)
    assert step.evidence == (entry, mark(50, T0, origin=Origin.PUBLICATION))
    commit(s, step)
    job = s.fold()
    assert job.checkpoint_step == 50
    assert job.resumed[(1, "0")].step == 40
    assert type(s.next(running(), progress=got)[0]) is Wait


def test_p1_a_run_that_ended_gets_its_progress_recorded_at_once() -> None:
    s = story().launched()
    commit(s, s.next(running(), progress=reading(1, T0))[0])
    s.later(30)
    ended = s.ended(1, "o1", PREEMPTED)
    step = s.next(ended, progress=reading(9, s.now, checkpoint=9))[0]
    assert isinstance(step, RecordProgress)
    assert [e.step for e in step.evidence if isinstance(e, Mark)] == [9]


def test_p1_without_a_progress_source_nothing_is_read_or_declared() -> None:
    s = story(progress=False).launched()
    s.later(GRACE.total_seconds() * 10)
    assert type(s.next(running(), progress=BLIND)[0]) is Wait
    assert type(s.next(running(), progress=JobProgress())[0]) is Wait


# ------------------------------------------------------------------------------ P2: blind


def test_p2_a_blind_source_is_recorded_once_and_never_declares_a_stall() -> None:
    s = story().launched()
    s.later(GRACE.total_seconds() * 2)
    step = s.next(running(), progress=Blind("the root is gone"))[0]
    assert step == RecordProgress(evidence=(Blind("the root is gone"),))
    commit(s, step)
    job = s.fold()
    assert job.blind is not None and job.blind.detail == "the root is gone"
    assert type(s.next(running(), progress=BLIND)[0]) is Wait


def test_p2_blind_past_its_bound_escalates_once() -> None:
    s = story().launched()
    commit(s, s.next(running(), progress=BLIND)[0])
    blind_rev = s.fold().blind.revision  # type: ignore[union-attr]
    s.later(timedelta(minutes=31).total_seconds())
    step = s.next(running(), progress=BLIND)[0]
    assert isinstance(step, Escalate) and step.escalation == tr.Blind(blind_rev)
    commit(s, step)
    assert type(s.next(running(), progress=BLIND)[0]) is Wait


def test_p2_seeing_again_is_recorded_before_any_judgement() -> None:
    s = story().launched()
    commit(s, s.next(running(), progress=BLIND)[0])
    s.later(GRACE.total_seconds() * 2)
    step = s.next(running(), progress=JobProgress())[0]
    assert step == RecordProgress(evidence=(Sighted(),))
    commit(s, step)
    assert s.fold().blind is None
    # Only then may the (long overdue) startup grace be judged.
    assert type(s.next(running(), progress=JobProgress())[0]) is DeclareStall


# ------------------------------------------------------------------------------ P3: stalls


def test_p3_no_stall_while_progress_is_within_stall_after() -> None:
    s = story().launched()
    s.later(GRACE.total_seconds() + 60)
    recent = reading(7, s.now - AFTER + timedelta(seconds=1))
    step = s.next(running(), progress=recent)[0]
    commit(s, step)  # its evidence
    assert type(s.next(running(), progress=recent)[0]) is Wait


def test_p3_a_run_without_progress_past_stall_after_is_stopped_as_stalled() -> None:
    s = story().launched()
    # Its progress is read (and recorded once the job's first window has ended).
    assert type(s.next(running(), progress=reading(7, T0 + timedelta(seconds=5)))[0]) is Wait
    first_window(s)
    commit(s, s.next(running(), progress=reading(7, T0 + timedelta(seconds=5)))[0])
    s.later((AFTER + timedelta(seconds=6)).total_seconds())
    step = s.next(running(), progress=reading(7, T0 + timedelta(seconds=5)))[0]
    assert isinstance(step, DeclareStall)
    assert (step.ref, step.execution) == (ObjectRef("o1"), 0)
    assert step.cause.kind is CauseKind.STALLED
    assert step.cause.provenance is Provenance.SUPERVISOR
    assert "step 7" in step.cause.detail and "no progress for" in step.cause.detail
    # The verdict and the stop are committed together, before the call stops the run.
    events = step.before(Context(at=s.now, by=SUPERVISOR, job=s.fold()))
    assert [type(e) for e in events] == [ev.StallDeclared, ev.StopDecided]
    assert step.call(Context(at=s.now, by=SUPERVISOR, job=s.fold())) is not None


def test_p3_before_its_first_progress_a_run_has_its_startup_grace() -> None:
    s = story().launched()
    s.later((GRACE - timedelta(seconds=1)).total_seconds())
    assert type(s.next(running(), progress=JobProgress())[0]) is Wait
    s.later(2)
    step = s.next(running(), progress=JobProgress())[0]
    assert isinstance(step, DeclareStall) and "startup grace" in step.cause.detail


def test_p3_progress_of_an_earlier_submission_is_not_this_runs_own() -> None:
    s = story(Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=3)).launched()
    s.ended(1, "o1", PREEMPTED)
    s.launched(2, "o2", rule=0, trigger=tr.End("o1", 0), cause=PREEMPTED)
    s.later((GRACE + timedelta(seconds=1)).total_seconds())
    old = reading(500, s.now, n=1)  # fresh, but submission 1's: a zombie, not this run
    step = s.next(running(2, "o2"), progress=old)[0]
    if isinstance(step, RecordProgress):
        commit(s, step)
        step = s.next(running(2, "o2"), progress=old)[0]
    assert isinstance(step, DeclareStall) and step.ref == ObjectRef("o2")


def test_p3_a_stalled_run_ends_with_cause_stalled_and_its_rule_fires() -> None:
    rule = Rule(on=[CauseKind.STALLED], action=Action.RESUBMIT, budget=1)
    s = story(rule).launched()
    s.later((GRACE + timedelta(seconds=1)).total_seconds())
    commit(s, s.next(running(), progress=JobProgress())[0])
    # The backend shows the stop as it shows any stop: cancelled.
    ended = s.ended(1, "o1", CANCELLED)
    step = s.next(ended, progress=JobProgress())[0]
    assert isinstance(step, Authorize) and step.rule == 0
    assert step.cause is not None and step.cause.kind is CauseKind.STALLED
    # Status shows the run's cause as the record has it.
    status = project(s.fold(), Discovery(job="job1", objects=(ended,), at=s.now), s.now)
    run = status.submissions[0].executions[0]
    assert run.cause is not None and run.cause.kind is CauseKind.STALLED
    assert status.progress is not None and status.progress.stalls[0].enforced


def test_p3_a_stalled_run_without_a_rule_fails_the_job_with_cause_stalled() -> None:
    s = story().launched()
    s.later((GRACE + timedelta(seconds=1)).total_seconds())
    commit(s, s.next(running(), progress=JobProgress())[0])
    ended = s.ended(1, "o1", CANCELLED)
    step = s.next(ended, progress=JobProgress())[0]
    assert isinstance(step, Outcome) and step.cause.kind is CauseKind.STALLED


def _stalled_then_ended(cause: Cause, ended: timedelta, seen_running: bool) -> Step:
    """A run with no progress past its startup grace, which ends with ``cause`` at ``ended``
    from the moment the stall is due; the step once its end is seen. ``seen_running``: the
    poll at the due moment still showed it running (Slurm does until sacct has the run's
    record), so the stall was declared and the stop decided first; else the end was seen
    first."""
    s = story().launched()
    s.later((GRACE + timedelta(seconds=1)).total_seconds())
    due = s.now
    if seen_running:
        declared = s.next(running(), progress=JobProgress())[0]
        assert isinstance(declared, DeclareStall)
        commit(s, declared)
        s.later(30)
    run = attrs.evolve(execution(0, ObjectState.ENDED, cause), ended_at=due + ended)
    shown = observation("job1", 1, 1, "o1", ObjectState.ENDED, run)
    s.observe(shown)
    return s.next(shown, progress=JobProgress())[0]


EXIT_3 = Cause(CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION, "exit 3", exit_code=3)
EXIT_15 = Cause(CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION, "exit 15", exit_code=15)


@pytest.mark.parametrize("seen_running", [True, False])
def test_p3_a_run_that_ended_by_itself_before_the_stall_keeps_its_own_cause(
    seen_running: bool,
) -> None:
    # The worker exits 3 five seconds before the stall is due. Whether the supervisor's poll
    # saw the end first, or still saw the run running and committed the stall and its stop
    # first, the run's ending is its own exit 3: the order of the evidence decides nothing.
    step = _stalled_then_ended(EXIT_3, -timedelta(seconds=5), seen_running)
    assert isinstance(step, Outcome)
    assert step.cause == EXIT_3


@pytest.mark.parametrize("cause", [EXIT_15, CANCELLED])
def test_p3_a_run_that_ended_after_the_stop_was_decided_is_stalled(cause: Cause) -> None:
    # Ended after the committed stop: the stop's own doing (cancelled, or a worker that exits
    # 15 on the SIGTERM), so the committed decision names the cause.
    step = _stalled_then_ended(cause, timedelta(seconds=2), seen_running=True)
    assert isinstance(step, Outcome) and step.cause.kind is CauseKind.STALLED


def test_p3_a_cancel_shown_before_the_decision_is_still_the_stops() -> None:
    # A cancel (or an ending the backend cannot name) says nothing of the run's own: with the
    # stop decided, the run is stalled even if the backend's clock puts the end first.
    for cause in (CANCELLED, Cause(CauseKind.UNKNOWN)):
        step = _stalled_then_ended(cause, -timedelta(seconds=1), seen_running=True)
        assert isinstance(step, Outcome) and step.cause.kind is CauseKind.STALLED


def test_p3_observe_mode_records_the_verdict_once_and_stops_nothing() -> None:
    s = story(mode=StallMode.OBSERVE).launched()
    s.later((GRACE + timedelta(seconds=1)).total_seconds())
    step = s.next(running(), progress=JobProgress())[0]
    assert isinstance(step, ObserveStall)
    ctx = Context(at=s.now, by=SUPERVISOR, job=s.fold())
    assert [type(e) for e in step.before(ctx)] == [ev.StallDeclared]
    assert step.call(ctx) is None
    commit(s, step)
    s.later(AFTER.total_seconds() * 3)
    assert type(s.next(running(), progress=JobProgress())[0]) is Wait
    status = project(s.fold(), Discovery(job="job1", objects=(running(),), at=s.now), s.now)
    assert status.progress is not None and not status.progress.stalls[0].enforced


def test_p4_a_stalled_run_still_running_is_stopped_again_after_stop_retry() -> None:
    s = story().launched()
    s.later((GRACE + timedelta(seconds=1)).total_seconds())
    commit(s, s.next(running(), progress=JobProgress())[0])
    assert type(s.next(running(), progress=JobProgress())[0]) is Wait
    s.later(STOP_RETRY.total_seconds())
    step = s.next(running(), progress=JobProgress())[0]
    assert isinstance(step, Stop) and step.reason.startswith("stalled")


# ------------------------------------------------------------------------------ budgets


def _fire_after(s: Story, n: int, ref: str, checkpoint: int | None) -> object:
    """End submission n's run by preemption with the newest checkpoint ``checkpoint``; record
    what the reading shows; answer the step that follows."""
    ended = s.ended(n, ref, PREEMPTED)
    got = reading(checkpoint or 0, s.now, n, checkpoint)
    step = s.next(ended, progress=got)[0]
    if isinstance(step, RecordProgress):
        commit(s, step)
        step = s.next(ended, progress=got)[0]
    return step


def test_no_advance_firings_after_progress_are_not_charged() -> None:
    rule = Rule(
        on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1, charge=Charge.NO_ADVANCE
    )
    s = story(rule, stall=False).launched()
    # Five preemptions, each after a newer checkpoint: never charged, never failed.
    for n in range(1, 6):
        s.later(600)
        step = _fire_after(s, n, f"o{n}", checkpoint=100 * n)
        assert isinstance(step, Authorize), step
        commit(s, step)
        s.attempt(n + 1, 1).reply(n + 1, 1, f"o{n + 1}").canonical(n + 1, f"o{n + 1}")
        s.open(n + 1, f"o{n + 1}").observe(running(n + 1, f"o{n + 1}"))
    job = s.fold()
    assert job.firings[0] == 5 and job.charged(0) == 0
    assert [f.charged for f in job.fired] == [False] * 5


def test_no_advance_two_crashes_at_the_same_step_spend_the_budget() -> None:
    rule = Rule(
        on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1, charge=Charge.NO_ADVANCE
    )
    s = story(rule, stall=False).launched()
    s.later(600)
    step = _fire_after(s, 1, "o1", checkpoint=300)  # advanced: free
    assert isinstance(step, Authorize) and step.charged is False  # said in the record
    commit(s, step)
    s.attempt(2, 1).reply(2, 1, "o2").canonical(2, "o2").open(2, "o2").observe(running(2, "o2"))
    s.later(600)
    step = _fire_after(s, 2, "o2", checkpoint=300)  # no advance: charged, budget now spent
    assert isinstance(step, Authorize) and step.charged is True
    commit(s, step)
    s.attempt(3, 1).reply(3, 1, "o3").canonical(3, "o3").open(3, "o3").observe(running(3, "o3"))
    s.later(600)
    step = _fire_after(s, 3, "o3", checkpoint=300)  # again: the budget is spent
    assert isinstance(step, Outcome) and step.cause.kind is CauseKind.PREEMPTED
    assert step.escalation == tr.BudgetSpent(0)
    status = project(s.fold(), Discovery(job="job1", objects=(), at=s.now), s.now)
    assert [f.charged for f in status.firings] == [False, True]
    assert status.plan is not None
    assert (status.plan.rules[0].firings, status.plan.rules[0].charged) == (2, 1)


def test_every_firing_is_charged_by_default_whatever_the_progress() -> None:
    rule = Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1)
    s = story(rule, stall=False).launched()
    s.later(600)
    first_firing = _fire_after(s, 1, "o1", checkpoint=100)
    assert isinstance(first_firing, Authorize) and first_firing.charged is None  # unsaid
    commit(s, first_firing)
    s.attempt(2, 1).reply(2, 1, "o2").canonical(2, "o2").open(2, "o2").observe(running(2, "o2"))
    s.later(600)
    step = _fire_after(s, 2, "o2", checkpoint=900)
    assert isinstance(step, Outcome) and step.escalation == tr.BudgetSpent(0)


# ------------------------------------------------------------------------------ properties

_steps = st.integers(0, 10_000)
_gaps = st.integers(1, 3_000).map(lambda s: timedelta(seconds=s))


@st.composite
def _histories(draw: st.DrawFn) -> list[tuple[timedelta, object]]:
    """A run's polls: each a time step and what was read (a mark at some age, or blind)."""
    out: list[tuple[timedelta, object]] = []
    for _ in range(draw(st.integers(1, 25))):
        gap = draw(_gaps)
        kind = draw(st.sampled_from(["mark", "blind", "none"]))
        if kind == "mark":
            out.append((gap, ("mark", draw(_steps), draw(st.integers(0, 1_200)))))
        else:
            out.append((gap, kind))
    return out


def _play(
    history: list[tuple[timedelta, object]], mode: StallMode, job: str = "job1"
) -> Iterator[tuple[Job, object, datetime, Step]]:
    """Drive one running job (id ``job``) through ``history``, committing what ``next``
    decides, and yield (job before the step, the reading, now, the step)."""
    s = story(mode=mode, job=job).launched()
    latest: Mark | None = None
    for gap, what in history:
        s.later(gap.total_seconds())
        if what == "blind":
            got: object = BLIND
        elif what == "none":
            got = JobProgress(latest=latest)
        else:
            assert isinstance(what, tuple), what
            _, step_no, age = what
            at = s.now - timedelta(seconds=age)
            if latest is None or at > latest.at:
                latest = mark(step_no, at)
            got = JobProgress(latest=latest)
        for _ in range(4):  # evidence, then a decision, as successive passes would
            folded = s.fold()
            step = s.next(running(job=job), progress=got)[0]  # type: ignore[arg-type]
            yield folded, got, s.now, step
            if isinstance(step, Wait):
                break
            commit(s, step)


@settings(max_examples=150, deadline=None)
@given(_histories(), st.sampled_from(StallMode))
def test_never_a_stall_while_blind_or_while_progress_is_recent(
    history: list[tuple[timedelta, object]], mode: StallMode
) -> None:
    for job, got, now, step in _play(history, mode):
        if not isinstance(step, DeclareStall | ObserveStall):
            continue
        assert not isinstance(got, Blind), "a stall declared from a blind reading"
        assert job.blind is None, "a stall declared while the record says blind"
        assert isinstance(got, JobProgress)
        started = job.running_since[("o1", 0)]
        own = [m for m in (got.latest,) if m is not None and m.at >= started]
        if own:
            assert now - max(m.at for m in own) >= AFTER
        else:
            assert now - started >= GRACE


_job_ids = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)


@settings(max_examples=150, deadline=None)
@given(_histories(), _job_ids)
def test_progress_enters_the_record_at_most_once_per_window_and_never_waits_past_one(
    history: list[tuple[timedelta, object]], job_id: str
) -> None:
    times: list[datetime] = []
    for job, got, now, step in _play(history, StallMode.OBSERVE, job_id):
        if isinstance(step, RecordProgress) and any(isinstance(e, Mark) for e in step.evidence):
            times.append(now)
        # Progress the record lacks waits at most until the job's next window begins (the
        # first, until the edge of the window the job was created in).
        rec = job.progress
        since = rec.recorded_at if rec is not None else job.header.created_at
        latest = got.latest if isinstance(got, JobProgress) and job.blind is None else None
        due = window(job_id, EVERY, now) > window(job_id, EVERY, since)
        news = latest is not None and (
            rec is None or (latest.step != rec.step and latest.at > rec.marked_at)
        )
        if due and news:
            assert isinstance(step, RecordProgress), (now, rec, got)
    windows = [window(job_id, EVERY, t) for t in [T0, *times]]
    assert all(a < b for a, b in itertools.pairwise(windows))  # one per window at most
    # So in any span of n intervals at most n + 1 entries, and on average one per interval.
    for a, b in itertools.pairwise(times):
        assert b - a > timedelta(0)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(1, 120).map(lambda s: timedelta(seconds=s)), min_size=2, max_size=40),
    st.integers(0, 39),
    _job_ids,
    _job_ids,
)
def test_a_stall_is_declared_in_the_first_poll_past_stall_after_whatever_the_jobs_phase(
    gaps: list[timedelta], hang: int, one: str, other: str
) -> None:
    """A job marks progress at every poll until poll ``hang``, then hangs; polls keep coming
    every ``gaps`` (then every 2 minutes). The stall is declared in the first poll at least
    ``stall.after`` past its last progress (so within one poll of it), and the job's id, which
    only moves when evidence is recorded, moves nothing of it."""

    def declared(job_id: str) -> tuple[datetime, datetime]:
        s = story(job=job_id).launched()
        last: Mark | None = None
        tail = [timedelta(minutes=2)] * (AFTER // timedelta(minutes=2) + 2)
        for i, gap in enumerate([*gaps, *([timedelta(minutes=2)] * hang), *tail]):
            s.later(gap.total_seconds())
            if i <= hang:
                last = mark(i, s.now)
            got = JobProgress(latest=last)
            for _ in range(4):
                step = s.next(running(job=job_id), progress=got)[0]
                if isinstance(step, DeclareStall):
                    assert last is not None
                    return s.now, last.at
                if isinstance(step, Wait):
                    break
                commit(s, step)
            assert last is None or s.now - last.at < AFTER, "the stall was due and not declared"
        raise AssertionError("no stall declared")

    at, last = declared(one)
    assert at - last >= AFTER
    assert declared(other) == (at, last)


@settings(max_examples=150, deadline=None)
@given(_histories())
def test_each_run_is_judged_at_most_once(history: list[tuple[timedelta, object]]) -> None:
    declared = [step for _, _, _, step in _play(history, StallMode.ENFORCE)]
    stalls = [s for s in declared if isinstance(s, DeclareStall | ObserveStall)]
    assert len(stalls) <= 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), _steps), min_size=1, max_size=8))
def test_a_no_advance_firing_is_charged_exactly_when_the_checkpoint_did_not_advance(
    firings: list[tuple[bool, int]],
) -> None:
    """Drawn firings of a no-advance rule, each after a checkpoint that advanced or not."""
    rule = Rule(
        on=[CauseKind.PREEMPTED],
        action=Action.RESUBMIT,
        budget=len(firings),
        charge=Charge.NO_ADVANCE,
    )
    s = story(rule, stall=False).launched()
    newest: int | None = None  # the newest checkpoint on record
    previous: int | None = None  # ... at the previous firing
    expected: list[bool] = []
    for n, (advance, by) in enumerate(firings, start=1):
        s.later(600)
        step_no = (newest or 0) + by + 1 if advance else None
        if step_no is not None:
            newest = step_no
        advanced = newest is not None and (n == 1 or previous is None or newest > previous)
        expected.append(not advanced)
        previous = newest
        step = _fire_after(s, n, f"o{n}", checkpoint=step_no)
        assert isinstance(step, Authorize), step
        commit(s, step)
        m = n + 1
        s.attempt(m, 1).reply(m, 1, f"o{m}").canonical(m, f"o{m}").open(m, f"o{m}")
        s.observe(running(m, f"o{m}"))
    assert [f.charged for f in s.fold().fired] == expected


def test_judge_is_pure_and_reads_nothing_but_its_arguments() -> None:
    s = story().launched()
    s.later(GRACE.total_seconds() + 1)
    job: Job = s.fold()
    got = JobProgress()
    assert judge(job, got, s.now) == judge(job, got, s.now)
    assert attrs.has(type(judge(job, got, s.now)))


# ------------------------------------------------------------------------------ the job spec


def _spec(**kw: Any) -> JobSpec:
    fields: dict[str, Any] = {
        "command": ["train"],
        "progress": ProgressSource(root=ROOT),
        "stall": StallRule(after=AFTER),
    }
    fields.update(kw)
    return JobSpec(**fields)


def _problems(spec: JobSpec) -> dict[str, str]:
    return {p.path: p.message for p in problems(spec)}


def test_validation_names_each_bad_progress_and_stall_field() -> None:
    found = _problems(
        _spec(
            stall=StallRule(after=timedelta(0), startup_grace=timedelta(seconds=-1)),
            progress=ProgressSource(root=" ", record_every=timedelta(seconds=1)),
        )
    )
    assert "must be positive" in found["stall.after"]
    assert "must not be negative" in found["stall.startup_grace"]
    assert "checkpoint root" in found["progress.root"]
    assert "at least 10 s" in found["progress.record_every"]


def test_no_advance_without_a_checkpoint_root_is_refused_naming_the_rule() -> None:
    rule = Rule(
        on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1, charge=Charge.NO_ADVANCE
    )
    found = _problems(JobSpec(command=["train"], recovery=RecoveryPolicy(rules=[rule])))
    assert "checkpoint root" in found["recovery.rules[0].charge"]
    assert not _problems(_spec(recovery=RecoveryPolicy(rules=[rule])))


def test_a_rule_on_stalled_without_a_stall_rule_is_refused() -> None:
    rule = Rule(on=[CauseKind.STALLED], action=Action.RESUBMIT, budget=1)
    found = _problems(_spec(stall=None, recovery=RecoveryPolicy(rules=[rule])))
    assert "can never stall" in found["recovery.rules[0].on"]


def _plan(spec: JobSpec, supervised: bool = True) -> Plan:
    return make_plan(MemoryBackend(), "job1", spec, supervised=supervised)


def test_the_plan_names_the_supervisor_as_the_stall_rules_enforcer() -> None:
    plan = _plan(_spec())
    assert plan.stall is not None and plan.stall.enforcer is Enforcer.SUPERVISOR
    assert plan.stall.root == ROOT and CauseKind.STALLED in plan.uncovered
    observed = _plan(_spec(stall=StallRule(after=AFTER, mode=StallMode.OBSERVE)))
    assert observed.stall is not None and "observe only" in observed.stall.note
    blindfold = _plan(_spec(progress=None))
    assert blindfold.stall is not None and blindfold.stall.enforcer is Enforcer.NOBODY
    assert "can never stall" in blindfold.stall.note
    plain = _plan(JobSpec(command=["train"]))
    assert plain.stall is None and CauseKind.STALLED not in plain.uncovered
    with pytest.raises(Rejected, match="supervise the job"):
        _plan(_spec(), supervised=False)
    with pytest.raises(ValidationError, match=r"stall\.after: must be at least the poll"):
        _plan(_spec(stall=StallRule(after=timedelta(milliseconds=100))))


def test_a_resumed_entry_listed_twice_is_recorded_once_and_a_duplicate_never_breaks_the_fold() -> (
    None
):
    s = story().launched()
    entry = Resumed(submission=1, execution="0", step=40, at=T0)
    step = s.next(running(), progress=JobProgress(resumed=(entry, entry)))[0]
    assert step == RecordProgress(evidence=(entry,))
    commit(s, step)
    commit(s, step)  # a second supervisor recorded it too: evidence, harmless
    assert s.fold().resumed[(1, "0")].step == 40


def test_every_execution_is_told_the_root_its_progress_is_read_from() -> None:
    from jobdispatch.launch import execution_env

    env = execution_env("j1", _spec(), submission=2)
    assert env == {
        "JOBDISPATCH_JOB": "j1",
        "JOBDISPATCH_SUBMISSION": "2",
        "JOBDISPATCH_CHECKPOINT_ROOT": ROOT,
    }
    assert "JOBDISPATCH_CHECKPOINT_ROOT" not in execution_env("j1", _spec(progress=None), 1)


def test_a_job_env_naming_another_checkpoint_root_is_refused() -> None:
    found = _problems(_spec(env={"JOBDISPATCH_CHECKPOINT_ROOT": "/elsewhere"}))
    assert "/elsewhere" in found["env.JOBDISPATCH_CHECKPOINT_ROOT"]
    assert "env.JOBDISPATCH_CHECKPOINT_ROOT" not in _problems(
        _spec(env={"JOBDISPATCH_CHECKPOINT_ROOT": ROOT})
    )


# ------------------------------------------------------------------ output growth as progress


def growth_story(*, progress: bool = False) -> Story:
    """A job whose plan counts output growth as progress (the cluster answered yes for
    ``output-growth``), with or without a checkpoint root of its own."""
    spec = JobSpec(
        command=["train"],
        name="t",
        progress=ProgressSource(root=ROOT, record_every=EVERY) if progress else None,
        stall=StallRule(after=AFTER, startup_grace=GRACE),
    )
    assert spec.stall is not None
    watched = StallAssignment(
        rule=spec.stall,
        enforcer=Enforcer.SUPERVISOR,
        root=ROOT if progress else "",
        output_growth=True,
    )
    return Story(spec=spec, plan=attrs.evolve(plan_for(spec), stall=watched))


def grown(size: int, at: datetime, ref: str = "o1") -> JobProgress:
    return JobProgress(output={ref: Growth(size=size, at=at)})


def test_the_plan_names_output_growth_as_a_progress_source_where_the_cluster_sees_it() -> None:
    backend = MemoryBackend(capabilities={"output-growth": "yes"})
    plan = make_plan(backend, "job1", _spec(progress=None), supervised=True)
    assert plan.stall is not None and plan.stall.enforcer is Enforcer.SUPERVISOR
    assert plan.stall.output_growth and plan.stall.sources == ("output growth",)
    # A job that marks its progress is judged on its marks alone: a hung rank may go on logging.
    marked = make_plan(backend, "job1", _spec(), supervised=True)
    assert marked.stall is not None and not marked.stall.output_growth
    assert marked.stall.sources == (f"checkpoint root {ROOT}",)
    unseen = MemoryBackend(capabilities={"output-growth": "unknown"})
    blind = make_plan(unseen, "job1", _spec(progress=None), supervised=True)
    assert blind.stall is not None and blind.stall.enforcer is Enforcer.NOBODY
    assert "output-growth: unknown" in blind.stall.note and not blind.stall.output_growth


def test_output_growth_is_recorded_as_progress_of_the_running_submission() -> None:
    s = first_window(growth_story().launched())
    step = s.next(running(), progress=grown(4096, T0 + timedelta(seconds=30)))[0]
    assert step == RecordProgress(
        evidence=(Mark(step=4096, at=T0 + timedelta(seconds=30), submission=1, origin=OUT),)
    )
    commit(s, step)
    job = s.fold()
    assert job.progress is not None and job.progress.origin is OUT and job.progress.step == 4096
    # The same size again says nothing; growth within the interval is not recorded yet.
    assert type(s.next(running(), progress=grown(4096, T0 + timedelta(seconds=30)))[0]) is Wait
    s.later(60)
    assert type(s.next(running(), progress=grown(5000, s.now))[0]) is Wait
    # Another object's growth (not the running one's) is not this run's.
    s.later(EVERY.total_seconds())
    assert type(s.next(running(), progress=grown(9999, s.now, ref="o2"))[0]) is Wait


def test_output_that_stops_growing_stalls_a_job_without_a_checkpoint_root() -> None:
    s = first_window(growth_story().launched())
    commit(s, s.next(running(), progress=grown(10, s.now))[0])
    quiet = s.now
    s.later((AFTER - timedelta(seconds=1)).total_seconds())
    assert type(s.next(running(), progress=grown(10, quiet))[0]) is Wait
    s.later(2)
    step = s.next(running(), progress=grown(10, quiet))[0]
    assert isinstance(step, DeclareStall) and step.cause.kind is CauseKind.STALLED
    assert "(output, submission 1)" in step.cause.detail


def test_a_job_not_watching_output_ignores_its_growth() -> None:
    s = story(progress=False).launched()
    s.later(GRACE.total_seconds() + 60)
    assert type(s.next(running(), progress=grown(10, s.now))[0]) is Wait
