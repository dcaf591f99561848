"""Properties of the protocol: whatever happens, every record next and its executor write folds,
and records corrupted in ways the protocol cannot write are refused.

A small fake executor turns each step into the events a supervisor would commit, while a toy
backend answers (sometimes losing Start replies); hypothesis interleaves the supervisor's steps
with backend endings, operator intents and the passing of time.
"""

from __future__ import annotations

from datetime import timedelta

import attrs
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jobdispatch import (
    Action,
    Cause,
    CauseKind,
    Invalid,
    ObjectRef,
    ObjectState,
    Provenance,
    Rule,
    State,
    StepKind,
    project,
)
from jobdispatch.records import events as ev
from jobdispatch.spi import Discovery, ExecutionObs, ObjectObs, discovery_name
from jobdispatch.steps import next_steps
from jobdispatch.testing import Story

ENDINGS = [
    Cause(CauseKind.NONE, exit_code=0),
    Cause(CauseKind.PREEMPTED, Provenance.SCHEDULER),
    Cause(CauseKind.NODE_LOST, Provenance.SCHEDULER),
    Cause(CauseKind.OUT_OF_MEMORY, Provenance.SCHEDULER),
    Cause(CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION, exit_code=3),
]
RULES = [
    Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2),
    Rule(on=[CauseKind.NODE_LOST], action=Action.REQUEUE, budget=1),
    Rule(on=[CauseKind.OUT_OF_MEMORY], action=Action.HOLD, budget=1, for_=timedelta(minutes=5)),
    Rule(on=[CauseKind.NON_ZERO_EXIT], action=Action.ESCALATE),
]


@attrs.define
class ToyObject:
    ref: str
    n: int
    k: int
    state: ObjectState = ObjectState.GATED
    executions: list[ExecutionObs] = attrs.Factory(list)
    hold: int | None = None

    def obs(self, job: str) -> ObjectObs:
        return ObjectObs(
            ref=ObjectRef(self.ref),
            name=discovery_name(job, self.n, self.k),
            state=self.state,
            executions=tuple(self.executions),
            hold_instance=self.hold,
        )


@attrs.define
class World:
    story: Story
    objects: list[ToyObject] = attrs.Factory(list)
    lose_replies: bool = False

    def discovery(self) -> Discovery:
        return Discovery(
            job="job1", objects=tuple(o.obs("job1") for o in self.objects), at=self.story.now
        )

    def find(self, ref: ObjectRef) -> ToyObject:
        return next(o for o in self.objects if o.ref == ref.id)

    def run(self, obj: ToyObject) -> None:
        obj.state = ObjectState.RUNNING
        obj.executions.append(ExecutionObs(index=len(obj.executions), state=ObjectState.RUNNING))

    def end(self, obj: ToyObject, cause: Cause) -> None:
        last = obj.executions[-1]
        obj.executions[-1] = attrs.evolve(last, state=ObjectState.ENDED, cause=cause)
        obj.state = ObjectState.ENDED

    # ------------------------------------------------------------ the fake executor

    def execute(self) -> None:
        s = self.story
        steps = next_steps(s.fold(), self.discovery(), s.now)
        step = steps[0]
        k = step.kind
        if k is StepKind.WAIT:
            s.later(5)
        elif k is StepKind.OBSERVE:
            for o in (x for x in steps if x.kind is StepKind.OBSERVE):
                if o.obs is not None:
                    s.observe(o.obs)
                else:
                    s.add(ev.Absent, ref=o.ref, find_at=o.find_at)
        elif k is StepKind.AUTHORIZE:
            s.add(
                ev.SubmissionAuthorized,
                n=step.submission,
                trigger=step.trigger,
                rule=step.rule,
                cause=step.cause,
            )
        elif k is StepKind.START:
            s.attempt(step.submission, step.attempt)
            obj = ToyObject(f"o{len(self.objects) + 1}", step.submission, step.attempt)
            self.objects.append(obj)
            if self.lose_replies:
                s.reply(step.submission, step.attempt, reply=ev.Reply.UNKNOWN)
            else:
                s.reply(step.submission, step.attempt, ref=obj.ref)
        elif k is StepKind.CANONICAL:
            s.canonical(step.submission, step.ref.id, step.attempt)
        elif k is StepKind.RETIRE:
            s.add(ev.Retired, ref=step.ref, submission=step.submission, attempt=step.attempt)
            self.find(step.ref).state = ObjectState.ENDED
        elif k is StepKind.OPEN:
            s.open(step.submission, step.ref.id)
            obj = self.find(step.ref)
            if obj.state is ObjectState.GATED:
                self.run(obj)
        elif k is StepKind.STOP:
            s.add(ev.StopDecided, ref=step.ref, reason=step.detail)
            obj = self.find(step.ref)
            if obj.state is ObjectState.RUNNING:
                self.end(obj, Cause(CauseKind.CANCELLED, Provenance.ACTOR))
            obj.state = ObjectState.ENDED
        elif k is StepKind.VERIFIED_STOPPED:
            s.add(ev.VerifiedStopped, ref=step.ref, find_at=step.find_at)
        elif k is StepKind.OUTCOME:
            if step.escalation and step.escalation not in s.fold().escalations:
                s.add(ev.Escalated, id=step.escalation, detail=step.detail)
            s.add(ev.OutcomeDecided, state=step.state, cause=step.cause)
        elif k is StepKind.ESCALATE:
            s.add(ev.Escalated, id=step.escalation, detail=step.detail)
        elif k is StepKind.SETTLE:
            s.add(ev.Settled)
        elif k is StepKind.PLACE_HOLD and step.ref is None:
            s.add(
                ev.RecoveryDecided,
                rule=step.rule,
                trigger=step.trigger,
                cause=step.cause,
                submission=step.submission,
            )
            s.add(
                ev.HoldPlaced,
                instance=step.instance,
                hold=step.hold,
                submission=step.submission,
                cause=step.cause,
            )
        elif k is StepKind.RELEASE_HOLD and step.ref is None:
            s.add(ev.HoldLifted, instance=step.instance, reason=step.detail, resume=step.resume)
        elif k in (
            StepKind.REQUEUE,
            StepKind.RESTORE_REQUEUE,
            StepKind.PLACE_HOLD,
            StepKind.RELEASE_HOLD,
        ):
            if k is StepKind.REQUEUE and not step.decided:
                s.add(
                    ev.RecoveryDecided,
                    rule=step.rule,
                    trigger=step.trigger,
                    cause=step.cause,
                    ref=step.ref,
                    submission=step.submission,
                )
            op = {
                StepKind.REQUEUE: ev.CallOp.REQUEUE,
                StepKind.RESTORE_REQUEUE: ev.CallOp.RESTORE,
                StepKind.PLACE_HOLD: ev.CallOp.HOLD,
                StepKind.RELEASE_HOLD: ev.CallOp.RELEASE,
            }[k]
            s.add(
                ev.CallIssued, op=op, ref=step.ref, deadline=step.deadline, instance=step.instance
            )
            issued = len(s.events)
            obj = self.find(step.ref)
            if k is StepKind.REQUEUE:
                if obj.state is ObjectState.RUNNING:
                    self.end(obj, Cause(CauseKind.REQUEUED, Provenance.ACTOR))
                self.run(obj)
            elif k is StepKind.PLACE_HOLD:
                obj.hold, obj.state = step.instance, ObjectState.HELD
            elif k is StepKind.RELEASE_HOLD and obj.hold == step.instance:
                obj.hold, obj.state = None, ObjectState.PENDING
            s.add(ev.CallAnswered, call=issued, ok=True)
        elif k is StepKind.CEASE:
            pytest.fail("no shared checkpoint in these stories")
        else:
            pytest.fail(f"unexpected step {k}")


ACTIONS = st.one_of(
    st.just(("step",)),
    st.tuples(st.just("end"), st.sampled_from(ENDINGS)),
    st.tuples(
        st.just("control"),
        st.sampled_from(["cancel", "hold", "release", "resubmit", "give-up", "requeue"]),
    ),
    st.tuples(st.just("time"), st.integers(1, 700)),
    st.tuples(st.just("lose-replies"), st.booleans()),
)


def _control(world: World, what: str) -> None:
    s = world.story
    job = s.fold()
    if job.terminal:
        return
    if what == "cancel":
        s.add(ev.CancelRequested, reason="test")
    elif what == "hold" and job.active_hold is None:
        s.add(ev.HoldRequested, reason="test")
    elif what == "release" and job.active_hold is not None:
        s.add(ev.ReleaseRequested)
    elif what == "resubmit":
        s.add(ev.ResubmitRequested)
    elif what == "give-up":
        s.add(ev.GiveUpRequested)
    elif what == "requeue":
        s.add(ev.RequeueRequested)


def play(actions: list[tuple[object, ...]]) -> World:
    world = World(Story.with_rules(*RULES))
    for action in actions:
        kind = action[0]
        if kind == "step":
            world.execute()
        elif kind == "end":
            live = [o for o in world.objects if o.state is ObjectState.RUNNING]
            if live:
                world.end(live[-1], action[1])  # type: ignore[arg-type]
        elif kind == "control":
            _control(world, action[1])  # type: ignore[arg-type]
        elif kind == "time":
            world.story.later(action[1])  # type: ignore[arg-type]
        elif kind == "lose-replies":
            world.lose_replies = bool(action[1])
        world.story.fold()  # every record written so far folds
    return world


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ACTIONS, min_size=1, max_size=60))
def test_every_record_the_protocol_writes_folds(actions):
    world = play(actions)
    job = world.story.fold()
    # Invariant: never two objects of the job past their gate and running at once.
    running = [o for o in world.objects if o.state is ObjectState.RUNNING]
    assert len(running) <= 1
    # Invariant: budgets hold.
    for index, used in job.rule_use.items():
        assert used <= job.header.plan.rules[index].effective.budget


@settings(max_examples=60, deadline=None)
@given(st.lists(ACTIONS, min_size=10, max_size=60))
def test_supervising_to_the_end_always_reaches_an_outcome(actions):
    world = play(actions)
    world.lose_replies = False
    for _ in range(400):
        job = world.story.fold()
        if job.settled:
            break
        if job.active_hold is not None and not job.terminal:
            # A person holds a job until they release it; liveness is owed once they have.
            world.story.add(ev.ReleaseRequested)
        running = [o for o in world.objects if o.state is ObjectState.RUNNING]
        if running and not job.terminal:
            world.end(running[-1], ENDINGS[0])
        world.execute()
    job = world.story.fold()
    assert job.settled or job.escalations, job.history
    if job.settled:
        assert job.outcome is not None and job.outcome.state.terminal


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ACTIONS, min_size=1, max_size=60), st.sampled_from(ENDINGS), st.integers(0, 3))
def test_ended_is_what_the_backend_shows_and_always_has_a_step_to_take(actions, ending, steps):
    """Issue 14.6: between a run's end and its commit, status shows ``ended`` with the run's
    cause instead of the committed ``pending``. Whatever the history, ``ended`` is never
    committed, carries the last run's cause, and is transient: ``next`` has a step to take.
    The running object, if any, is ended and a few steps taken, so that every moment of the
    window (shown only, observed, decided) is looked at."""
    world = play(actions)
    for _ in range(30):  # supervise until something runs, if it ever will
        running = [o for o in world.objects if o.state is ObjectState.RUNNING]
        if running or world.story.fold().terminal:
            break
        world.execute()
    if running:
        world.end(running[-1], ending)
    for _ in range(steps):
        world.execute()
    job = world.story.fold()
    discovery = world.discovery()
    status = project(job, discovery, world.story.now)
    assert status.committed is (status.state not in (State.RUNNING, State.ENDED))
    event(f"state {status.state}")
    if status.state is State.ENDED:
        assert not job.terminal and job.latest is not None and job.latest.canonical is not None
        shown = {o.ref: o for o in discovery.objects}
        rec = job.object(job.latest.canonical)
        obs = shown.get(job.latest.canonical) or (rec.obs if rec else None)
        assert obs is not None and obs.state is ObjectState.ENDED
        assert status.cause == max(obs.executions, key=lambda e: e.index).cause
        steps = next_steps(job, discovery, world.story.now)
        assert steps and steps[0].kind is not StepKind.WAIT, steps


# ------------------------------------------------------------------------------ corruptions


def _corruptions(events: list[ev.AnyEvent]) -> list[tuple[str, list[ev.AnyEvent]]]:
    out = []
    decisions = [i for i, e in enumerate(events) if e.decision]
    evidence = [i for i, e in enumerate(events) if not e.decision]
    for i in decisions[:3]:
        out.append(
            (
                "a decision without its token",
                [*events[:i], attrs.evolve(events[i], token=None), *events[i + 1 :]],
            )
        )
    for i in evidence[:2]:
        out.append(
            (
                "evidence with a token",
                [*events[:i], attrs.evolve(events[i], token=7), *events[i + 1 :]],
            )
        )
    for i, e in enumerate(events):
        if isinstance(
            e,
            ev.SubmissionAuthorized
            | ev.AttemptStarted
            | ev.CanonicalChosen
            | ev.OutcomeDecided
            | ev.Escalated
            | ev.Settled,
        ):
            out.append((f"{e.kind} written twice", [*events[: i + 1], e, *events[i + 1 :]]))
    outcome = next((e for e in events if isinstance(e, ev.OutcomeDecided)), None)
    if outcome is not None:
        flipped = attrs.evolve(
            outcome, state=State.SUCCEEDED if outcome.state is not State.SUCCEEDED else State.FAILED
        )
        out.append(("a second, different outcome", [*events, flipped]))
    return out


@settings(max_examples=80, deadline=None)
@given(st.lists(ACTIONS, min_size=5, max_size=40))
def test_histories_the_protocol_cannot_write_are_refused(actions):
    world = play(actions)
    events = list(world.story.events)
    for what, corrupt in _corruptions(events):
        story = attrs.evolve(world.story, events=corrupt)
        with pytest.raises(Invalid):  # a record with this corruption must not fold
            story.fold()
        del what
