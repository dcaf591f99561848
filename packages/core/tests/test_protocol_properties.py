"""Properties of the protocol: whatever happens, every record next and its executor write folds,
and records corrupted in ways the protocol cannot write are refused.

Each step runs by its own three parts, as the supervisor's executor runs them (commit what it
decides, make its call, commit its answer), while a toy backend answers its calls (sometimes
losing Start replies); hypothesis interleaves the steps with backend endings, operator intents
and the passing of time.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

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
    OutcomeUnknown,
    Provenance,
    Rule,
    State,
    calls,
    project,
)
from jobdispatch.progress import BLIND, JobProgress, Mark, Origin, Reading
from jobdispatch.records import events as ev
from jobdispatch.spi import Discovery, ExecutionObs, ObjectObs, discovery_name
from jobdispatch.steps import Answer, Context, Wait, next_steps
from jobdispatch.testing import SUPERVISOR, Story, plan_for
from jobdispatch.types import (
    Charge,
    JobSpec,
    ProgressSource,
    RecoveryPolicy,
    StallMode,
    StallRule,
)

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
    #: The job's progress as its helper left it, and whether its root can be read; None: the
    #: job names no progress source and ``next`` is given no reading.
    progress: JobProgress | None = None
    blind: bool = False
    #: Stalls committed while the root was blind (must stay empty).
    blind_stalls: list[ev.StallDeclared] = attrs.Factory(list)

    def reading(self) -> Reading | None:
        if self.progress is None:
            return None
        return BLIND if self.blind else self.progress

    def mark(self, step: int, publish: bool) -> None:
        """The running run's helper marks (or publishes) ``step`` now."""
        assert self.progress is not None
        live = [o for o in self.objects if o.state is ObjectState.RUNNING]
        if not live:
            return
        origin = Origin.PUBLICATION if publish else Origin.MARK
        mark = Mark(step=step, at=self.story.now, submission=live[-1].n, origin=origin)
        checkpoint = mark if publish else self.progress.checkpoint
        self.progress = JobProgress(latest=mark, checkpoint=checkpoint)

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

    # ---------------------------------------------------- the steps, as an executor runs them

    def execute(self) -> None:
        """Run ``next``'s first step by its own three parts (commit, call, answer), this world
        playing the backend; and check that each part stays within what its class declares
        (the declarations the docs' tables are checked against)."""
        s = self.story
        job = s.fold()
        step = next_steps(job, self.discovery(), s.now, self.reading())[0]
        event(f"step {step.kind}")
        if isinstance(step, Wait):
            s.later(5)
            return
        ctx = Context(at=s.now, by=SUPERVISOR, job=job)
        decided = step.before(ctx)
        assert {type(e) for e in decided} <= set(step.commits), (step, decided)
        if self.blind:
            self.blind_stalls.extend(e for e in decided if isinstance(e, ev.StallDeclared))
        revision = s.commit(decided)
        call = step.call(ctx)
        assert type(call) is step.call_type or (call is None and step.call_type is None), (
            step,
            call,
        )
        if call is None:
            return
        answer = step.answer(ctx, self.answer(call, revision))
        assert {type(e) for e in answer} <= set(step.answers), (step, answer)
        s.commit(answer)

    def answer(self, call: calls.Call, revision: int) -> Answer:
        """The toy backend: what ``call`` does to this world, and its answer."""
        at = self.story.now
        match call:
            case calls.StartCall(submission=n, attempt=k):
                obj = ToyObject(f"o{len(self.objects) + 1}", n, k)
                self.objects.append(obj)
                if self.lose_replies:
                    return Answer(at=at, revision=revision, error=OutcomeUnknown("reply lost"))
                return Answer(at=at, revision=revision, value=ObjectRef(obj.ref))
            case calls.OpenCall(ref=ref):
                obj = self.find(ref)
                if obj.state is ObjectState.GATED:
                    self.run(obj)
            case calls.StopCall(ref=ref):
                obj = self.find(ref)
                if obj.state is ObjectState.RUNNING:
                    self.end(obj, Cause(CauseKind.CANCELLED, Provenance.ACTOR))
                obj.state = ObjectState.ENDED
            case calls.RequeueCall(ref=ref):
                obj = self.find(ref)
                if obj.state is ObjectState.RUNNING:
                    self.end(obj, Cause(CauseKind.REQUEUED, Provenance.ACTOR))
                self.run(obj)
            case calls.HoldCall(ref=ref, meta=meta):
                obj = self.find(ref)
                obj.hold, obj.state = meta.instance, ObjectState.HELD
            case calls.ReleaseCall(ref=ref, meta=meta):
                obj = self.find(ref)
                if obj.hold == meta.instance:
                    obj.hold, obj.state = None, ObjectState.PENDING
            case calls.RestoreCall():
                pass  # the toy objects keep no requeue bit
            case calls.CeaseCall():
                pytest.fail("no shared checkpoint in these stories")
        return Answer(at=at, revision=revision)


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


def act(world: World, action: tuple[object, ...]) -> None:
    """One drawn action on the world: a supervisor step, the running object ending with a
    cause, a person's control, time passing, replies lost or not."""
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


def play(actions: list[tuple[object, ...]]) -> World:
    world = World(Story.with_rules(*RULES))
    for action in actions:
        act(world, action)
        world.story.fold()  # every record written so far folds
    return world


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ACTIONS, min_size=1, max_size=60))
def test_every_record_the_protocol_writes_folds(actions: list[tuple[Any, ...]]) -> None:
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
def test_supervising_to_the_end_always_reaches_an_outcome(actions: list[tuple[Any, ...]]) -> None:
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
def test_ended_is_what_the_backend_shows_and_always_has_a_step_to_take(
    actions: list[tuple[Any, ...]], ending: Cause, steps: int
) -> None:
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
        to_take = next_steps(job, discovery, world.story.now)
        assert to_take and not isinstance(to_take[0], Wait), to_take


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
def test_histories_the_protocol_cannot_write_are_refused(actions: list[tuple[Any, ...]]) -> None:
    world = play(actions)
    events = list(world.story.events)
    for what, corrupt in _corruptions(events):
        story = attrs.evolve(world.story, events=corrupt)
        with pytest.raises(Invalid):  # a record with this corruption must not fold
            story.fold()
        del what


# ------------------------------------------------------------------ progress (spec 0001 D9)

PROGRESS_RULES = [
    Rule(on=[CauseKind.STALLED], action=Action.RESUBMIT, budget=1, charge=Charge.NO_ADVANCE),
    Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=1, charge=Charge.NO_ADVANCE),
    Rule(on=[CauseKind.NODE_LOST], action=Action.RESUBMIT, budget=1),
]
#: Steps often, minutes at a time (a stall rule's times are minutes), marks and blind spells.
PROGRESS_ACTIONS = st.one_of(
    st.just(("step",)),
    st.just(("step",)),
    st.just(("step",)),
    st.tuples(st.just("time"), st.integers(30, 900)),
    st.tuples(st.just("mark"), st.integers(0, 1000), st.booleans()),
    st.tuples(st.just("blind"), st.booleans()),
    ACTIONS,
)


def play_progress(actions: list[tuple[object, ...]], mode: StallMode) -> World:
    spec = JobSpec(
        command=["train"],
        name="t",
        recovery=RecoveryPolicy(rules=PROGRESS_RULES),
        progress=ProgressSource(root="/ckpt", record_every=timedelta(minutes=5)),
        stall=StallRule(
            after=timedelta(minutes=10), startup_grace=timedelta(minutes=15), mode=mode
        ),
    )
    world = World(Story(spec=spec, plan=plan_for(spec)), progress=JobProgress())
    for action in actions:
        kind = action[0]
        if kind == "mark":
            world.mark(action[1], action[2])  # type: ignore[arg-type]
        elif kind == "blind":
            world.blind = bool(action[1])
        else:
            act(world, action)
        world.story.fold()
    # Then the supervisor keeps at it while a quarter of an hour passes, as the root stays as
    # the actions left it: a run still running gets its stall judged.
    for _ in range(2):
        for _ in range(8):
            world.execute()
        world.story.later(1000)
    for _ in range(8):
        world.execute()
    return world


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PROGRESS_ACTIONS, min_size=1, max_size=120), st.sampled_from(StallMode))
def test_progress_histories_fold_within_their_declarations_and_never_stall_blind(
    actions: list[tuple[Any, ...]], mode: StallMode
) -> None:
    world = play_progress(actions, mode)
    job = world.story.fold()
    assert not world.blind_stalls
    running = [o for o in world.objects if o.state is ObjectState.RUNNING]
    assert len(running) <= 1
    for index, used in job.rule_use.items():
        assert used <= job.header.plan.rules[index].effective.budget
    # A run stopped as stalled is recovered (or fails the job) as stalled.
    for e in world.story.events:
        if isinstance(e, ev.SubmissionAuthorized | ev.RecoveryDecided) and e.cause is not None:
            trigger = e.trigger
            stalled = getattr(trigger, "ref", None), getattr(trigger, "index", None)
            stall = job.stalls.get(stalled)  # type: ignore[arg-type]
            if stall is not None and stall.enforced:
                assert e.cause.kind is CauseKind.STALLED
    for stall in job.stalls.values():
        event("stall " + ("enforced" if stall.enforced else "observed"))
