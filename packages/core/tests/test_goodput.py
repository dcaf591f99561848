"""Goodput: the parts of a job's time add up exactly, the figures are a pure function of the
record, and each part lands where the record says it should."""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobdispatch.errors import ValidationError
from jobdispatch.goodput import (
    ExecutionEvidence,
    JobSummary,
    Part,
    Prices,
    QueueReason,
    Selection,
    Unit,
    evidence_of,
    goodput,
    prices_from,
    report,
    summarize,
    young_daly,
)
from jobdispatch.records import events as ev
from jobdispatch.spi import ExecutionObs, ObjectRef
from jobdispatch.testing import PREEMPTED, SUCCESS, T0, Story, observation
from jobdispatch.triggers import SUBMIT, End, Launch
from jobdispatch.types import (
    Action,
    Actor,
    Cause,
    CauseKind,
    Enforcer,
    Hold,
    HoldKind,
    JobSpec,
    ObjectState,
    Provenance,
    RecoveryPolicy,
    Resources,
    Rule,
    State,
)

_RUNNING = ObjectState.RUNNING
_ENDED = ObjectState.ENDED
_S = 1_000_000


def _run(
    index: int, start: datetime, end: datetime | None = None, cause: Cause | None = None
) -> ExecutionObs:
    return ExecutionObs(
        index=index,
        state=_RUNNING if end is None else _ENDED,
        cause=cause,
        started_at=start,
        ended_at=end,
    )


def _preempted_then_done(gpus: int = 0) -> Story:
    """Preempted after 97 s of running, resubmitted by rule 0, then succeeds after 49 s."""
    spec = JobSpec(
        command=["train"],
        name="t",
        nodes=2,
        resources=Resources(gpus_per_node=gpus),
        recovery=RecoveryPolicy(
            rules=[Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2)]
        ),
    )
    s = Story.with_rules(*spec.recovery.rules)
    s.spec = spec
    s.later(5).launched(1, "o1", running=False)
    s.later(10)
    t1 = s.now
    s.observe(observation("job1", 1, 1, "o1", _RUNNING, _run(0, t1)))
    s.later(100)
    end1 = s.now - timedelta(seconds=3)
    s.observe(observation("job1", 1, 1, "o1", _ENDED, _run(0, t1, end1, PREEMPTED)))
    s.later(2).authorize(2, End("o1", 0), rule=0, cause=PREEMPTED)
    s.later(1).attempt(2, 1).reply(2, 1, "o2").canonical(2, "o2").later(1).open(2, "o2")
    s.later(20)
    t2 = s.now
    s.observe(observation("job1", 2, 1, "o2", _RUNNING, _run(0, t2)))
    s.later(50)
    s.observe(
        observation("job1", 2, 1, "o2", _ENDED, _run(0, t2, s.now - timedelta(seconds=1), SUCCESS))
    )
    s.later(1).add(ev.OutcomeDecided, state=State.SUCCEEDED, cause=SUCCESS)
    s.later(4).add(ev.Settled)
    return s


def test_a_preempted_then_finished_job_splits_as_the_record_says() -> None:
    s = _preempted_then_done()
    g = goodput(s.view(), s.now)
    parts = {(x.part, x.reason): x.micros for x in g.shares if x.blame.cause is CauseKind.PREEMPTED}
    assert parts == {
        (Part.UNKNOWN, None): 97 * _S,  # the preempted run: nothing tells what was kept
        (Part.DETECTION, None): 3 * _S,
        (Part.DECISION, None): 2 * _S,
        (Part.RELAUNCH, None): 2 * _S,
        (Part.QUEUED, QueueReason.NO_CAPACITY): 20 * _S,
    }
    assert g.part_micros(Part.PRODUCTIVE) == 49 * _S
    assert g.part_micros(Part.CLEANUP) == 4 * _S
    assert g.total_micros == 194 * _S
    blamed = next(x for x in g.shares if x.blame.cause is CauseKind.PREEMPTED)
    assert blamed.blame.rule == 0
    assert str(blamed.blame.enforcer) == "supervisor"
    # Two nodes, no GPUs: two cores of resource time while a run held them.
    assert g.unit is Unit.CORE and g.width == 2
    assert g.resource_micros == 2 * (97 + 49) * _S


def test_progress_evidence_splits_the_lost_run_into_kept_and_recomputed() -> None:
    s = _preempted_then_done(gpus=4)
    view = s.view()
    runs = {(r.ref, r.index): r for r in goodput(view, s.now).runs}
    start1 = runs[("o1", 0)].started_at
    start2 = runs[("o2", 0)].started_at
    assert start1 is not None and start2 is not None
    evidence = {
        ("o1", 0): ExecutionEvidence(
            ref="o1", index=0, first_progress=start1 + timedelta(seconds=7)
        ),
        ("o2", 0): ExecutionEvidence(
            ref="o2",
            index=0,
            first_progress=start2 + timedelta(seconds=4),
            resumed_from=150,
            checkpoint_at=start1 + timedelta(seconds=60),
        ),
    }
    g = goodput(view, s.now, evidence)
    assert g.part_micros(Part.STARTUP) == (7 + 4) * _S
    # Kept from the first run: its progress up to the checkpoint the second resumed from.
    assert g.part_micros(Part.PRODUCTIVE) == (60 - 7 + 49 - 4) * _S
    assert g.part_micros(Part.RECOMPUTATION) == (97 - 60) * _S
    assert g.unit is Unit.GPU and g.width == 8
    recomputed = next(x for x in g.shares if x.part is Part.RECOMPUTATION)
    assert recomputed.blame.cause is CauseKind.PREEMPTED and recomputed.blame.rule == 0
    assert recomputed.resource_micros == 8 * 37 * _S


def _stopped_as_stalled() -> tuple[Story, datetime]:
    """A story whose first run started at ``t1`` and was stopped as stalled 300 s later; the
    story (now at the stop) and ``t1``."""
    s = Story()
    s.later(1).launched(1, "o1", running=False)
    t1 = s.now
    s.observe(observation("job1", 1, 1, "o1", _RUNNING, _run(0, t1)))
    s.later(300).add(ev.StopDecided, ref=ObjectRef("o1"), reason="stalled")
    return s, t1


def test_a_stall_stop_is_read_from_the_record_and_charged_as_stalled() -> None:
    s, t1 = _stopped_as_stalled()
    ev_of = evidence_of(s.view())
    assert ev_of[("o1", 0)].stall_stop_at == s.now
    evidence = {
        ("o1", 0): attrs.evolve(
            ev_of[("o1", 0)],
            first_progress=t1 + timedelta(seconds=10),
            last_progress=t1 + timedelta(seconds=100),
        )
    }
    s.later(5)
    stopped = Cause(CauseKind.CANCELLED, Provenance.ACTOR)
    s.observe(observation("job1", 1, 1, "o1", _ENDED, _run(0, t1, s.now, stopped)))
    g = goodput(s.view(), s.now, evidence)
    assert g.part_micros(Part.STALLED) == 205 * _S
    assert g.part_micros(Part.STARTUP) == 10 * _S


def test_holds_are_queued_for_a_person_or_for_a_rule() -> None:
    s = Story()
    s.later(2).authorize(1, SUBMIT)
    s.later(3).add(ev.HoldPlaced, instance=1, hold=Hold(HoldKind.OPERATOR, Actor.human("ops")))
    s.later(30).add(ev.HoldLifted, instance=1)
    s.later(5)
    g = goodput(s.view(), s.now)
    got = {(x.part, x.reason): x.micros for x in g.shares}
    assert got == {
        (Part.QUEUED, QueueReason.WAITING_FOR_SUPERVISOR): 2 * _S,
        (Part.QUEUED, QueueReason.GATED): 8 * _S,
        (Part.QUEUED, QueueReason.HELD_BY_PERSON): 30 * _S,
    }


def test_the_window_clips_the_spans_and_keeps_the_sum() -> None:
    s = _preempted_then_done()
    view = s.view()
    since = T0 + timedelta(seconds=50)
    until = T0 + timedelta(seconds=150)
    got = report([("hpc", view)], s.now, Selection(since=since, until=until))
    ((cluster, job),) = got.jobs
    assert cluster == "hpc"
    assert job.total_micros == 100 * _S
    assert got.total.total.micros == 100 * _S
    assert sum(f.micros for f in got.total.parts.values()) == 100 * _S
    assert report([("hpc", view)], s.now, Selection(clusters=("other",))).jobs == ()
    assert report([("hpc", view)], s.now, Selection(names=("x*",))).jobs == ()
    assert len(report([("hpc", view)], s.now, Selection(names=("t*",))).jobs) == 1


def test_cluster_figures_give_the_young_daly_interval() -> None:
    s = _preempted_then_done(gpus=1)
    got = report(
        [("hpc", s.view())],
        s.now,
        prices={"hpc": Prices(gpu_hour=3.6)},
        checkpoint_cost=timedelta(seconds=30),
    )
    (c,) = got.clusters
    assert c.interruptions == 1
    assert c.running_micros == (97 + 49) * _S
    assert c.mtbi == timedelta(seconds=146)
    assert c.interval == young_daly(timedelta(seconds=30), timedelta(seconds=146))
    assert c.interval is not None
    assert abs(c.interval.total_seconds() - (2 * 30 * 146) ** 0.5) < 1e-6
    # 2 nodes x 1 GPU x 146 s at 3.6 an hour.
    assert got.total.total.cost == pytest.approx(2 * 146 * 3.6 / 3600)
    assert "preempted" in got.by_cause
    assert any(k.startswith("0: preempted -> resubmit") for k in got.by_rule)


def test_prices_are_checked_and_name_every_bad_key() -> None:
    p = prices_from({"gpu_hour": 2, "queues": {"a100": {"gpu_hour": 4.5}}})
    assert p.per_hour(Unit.GPU, "a100") == 4.5
    assert p.per_hour(Unit.GPU, "other") == 2.0
    assert p.per_hour(Unit.CORE, None) is None
    with pytest.raises(ValidationError) as err:
        prices_from({"gpu_hour": -1, "cpu_hour": 1, "queues": {"q": {"core_hour": "x"}}})
    assert set(err.value.paths) == {
        "prices.gpu_hour",
        "prices.cpu_hour",
        "prices.queues.q.core_hour",
    }


# ------------------------------------------------------------------ generated records

_CAUSES = [PREEMPTED, SUCCESS, Cause(CauseKind.OUT_OF_MEMORY), Cause(CauseKind.NODE_LOST), None]


@st.composite
def records(draw: st.DrawFn) -> tuple[ev.View, datetime]:
    """Records with 1-4 submissions, each with up to three runs of its object, seen late or
    not at all, decisions on some ends, holds, an outcome and a settlement, or not. They need
    not fold: goodput must add up whatever the record says."""
    s = Story.with_rules(
        Rule(on=[CauseKind.PREEMPTED, CauseKind.OUT_OF_MEMORY], action=Action.RESUBMIT, budget=3)
    )
    s.spec = attrs.evolve(
        s.spec,
        nodes=draw(st.integers(1, 4)),
        resources=Resources(gpus_per_node=draw(st.integers(0, 8))),
    )
    gap = st.integers(0, 500)
    for n in range(1, draw(st.integers(1, 4)) + 1):
        ref = f"o{n}"
        s.later(draw(gap))
        trigger = SUBMIT if n == 1 else Launch(n - 1)
        s.authorize(
            n, trigger, rule=draw(st.sampled_from([None, 0])), cause=draw(st.sampled_from(_CAUSES))
        )
        s.attempt(n, 1).reply(n, 1, ref).canonical(n, ref)
        if draw(st.booleans()):
            s.later(draw(gap)).open(n, ref)
        runs: list[ExecutionObs] = []
        for index in range(draw(st.integers(0, 3))):
            s.later(draw(gap))
            start = None if draw(st.integers(0, 9)) == 0 else s.now
            s.observe(observation("job1", n, 1, ref, _RUNNING, *runs, _run(index, start or s.now)))
            if draw(st.integers(0, 3)) == 0:
                h = draw(st.sampled_from(list(HoldKind)))
                s.later(draw(gap)).add(
                    ev.HoldPlaced,
                    instance=len([e for e in s.events if isinstance(e, ev.HoldPlaced)]) + 1,
                    hold=Hold(h, Actor.human("p")),
                )
                if draw(st.booleans()):
                    s.later(draw(gap)).add(
                        ev.HoldLifted,
                        instance=len([e for e in s.events if isinstance(e, ev.HoldPlaced)]),
                    )
            s.later(draw(gap))
            end = s.now - timedelta(seconds=draw(st.integers(0, 20)))
            end = max(end, start or end)
            cause = draw(st.sampled_from(_CAUSES))
            x = ExecutionObs(
                index=index,
                state=_ENDED,
                cause=cause,
                started_at=start,
                ended_at=None if draw(st.integers(0, 9)) == 0 else end,
            )
            runs.append(x)
            s.later(draw(gap))
            if draw(st.integers(0, 5)):
                s.observe(observation("job1", n, 1, ref, _ENDED, *runs))
            if draw(st.booleans()):
                s.later(draw(gap)).add(
                    ev.RecoveryDecided, rule=0, trigger=End(ref, index), cause=cause or PREEMPTED
                )
    if draw(st.booleans()):
        s.later(draw(gap)).add(
            ev.OutcomeDecided,
            state=draw(st.sampled_from([State.SUCCEEDED, State.FAILED, State.CANCELLED])),
            cause=SUCCESS,
        )
        if draw(st.booleans()):
            s.later(draw(gap)).add(ev.Settled)
    now = s.now + timedelta(seconds=draw(st.integers(0, 1000)))
    return s.view(), now


@settings(max_examples=300, deadline=None)
@given(records())
def test_the_parts_add_up_exactly_to_the_total_for_every_record(
    got: tuple[ev.View, datetime],
) -> None:
    view, now = got
    g = goodput(view, now)
    total = int((g.until - g.created_at) / timedelta(microseconds=1))
    # The spans tile [0, total) without a gap or an overlap...
    assert [s.start for s in g.spans] == [0, *(s.end for s in g.spans)][: len(g.spans)]
    assert all(s.end > s.start for s in g.spans)
    assert (g.spans[-1].end if g.spans else 0) == total
    # ...so every way of adding them gives the total, exactly.
    assert sum(x.micros for x in g.shares) == total == g.total_micros
    assert sum(x.resource_micros for x in g.shares) == g.resource_micros
    assert sum(g.part_micros(p) for p in Part) == total
    # A run held the nodes for as long as it ran (within the job's life): no layer hides it.
    for r in g.runs:
        if r.started_at is not None and r.ended_at is not None:
            lo = max(r.started_at, g.created_at)
            hi = min(r.ended_at, g.until)
            assert r.running_micros == max(0, int((hi - lo) / timedelta(microseconds=1)))


@st.composite
def many_records(draw: st.DrawFn) -> tuple[list[ev.View], datetime]:
    """A few generated records, each its own job, with names and submitters that differ, so a
    selection can tell them apart."""
    views: list[ev.View] = []
    now = T0
    for i in range(draw(st.integers(1, 4))):
        view, at = draw(records())
        header = attrs.evolve(
            view.header,
            job=f"job{i}",
            spec=attrs.evolve(view.header.spec, name=draw(st.sampled_from(["train", "eval"]))),
            created_by=Actor.human(draw(st.sampled_from(["ops", "ana"]))),
        )
        views.append(ev.View(header, view.events))
        now = max(now, at)
    return views, now


_STATES = [State.SUCCEEDED, State.FAILED, State.CANCELLED]


@settings(max_examples=200, deadline=None)
@given(many_records(), st.data())
def test_a_report_from_summaries_is_the_report_from_the_views(
    got: tuple[list[ev.View], datetime], data: st.DataObject
) -> None:
    """The CLI hands the report cached summaries for some jobs and views for the others: the
    report must come out the same whichever it got, for any selection and window."""
    views, now = got
    a, b = sorted(data.draw(st.lists(st.integers(0, 4000), min_size=2, max_size=2)))
    selection = Selection(
        names=tuple(data.draw(st.lists(st.sampled_from(["train", "ev*", "x"]), max_size=2))),
        states=tuple(data.draw(st.lists(st.sampled_from(_STATES), max_size=2))),
        submitters=tuple(data.draw(st.lists(st.sampled_from(["ops", "human:ana"]), max_size=1))),
        since=data.draw(st.sampled_from([None, T0 + timedelta(seconds=a)])),
        until=data.draw(st.sampled_from([None, T0 + timedelta(seconds=b + 1)])),
    )
    prices = {"c": Prices(gpu_hour=2.5, core_hour=0.1)}
    summaries: list[ev.View | JobSummary] = [summarize(v, now) for v in views]
    mixed: list[ev.View | JobSummary] = [
        summarize(v, now) if data.draw(st.booleans()) else v for v in views
    ]
    from_views = report([("c", v) for v in views], now, selection, prices=prices)
    assert report([("c", s) for s in summaries], now, selection, prices=prices) == from_views
    assert report([("c", m) for m in mixed], now, selection, prices=prices) == from_views


def test_a_summary_keeps_the_labels_of_the_rules_its_spans_blame() -> None:
    """The totals by rule are keyed by the rule's label, which comes from the plan: a summary
    carries the labels of the rules it blames, and names any other by its index."""
    s = _preempted_then_done()
    summary = summarize(s.view(), s.now)
    blamed = {x.blame.rule for x in summary.figures.spans if x.blame.rule is not None}
    assert blamed and set(summary.rule_labels) == blamed
    assert all(summary.rule_label(r).startswith(f"{r}: ") for r in blamed)
    assert summary.rule_label(99) == "99"
    assert summary.submitter_id == "ops"


@settings(max_examples=100, deadline=None)
@given(records(), st.integers(0, 4000), st.integers(0, 4000))
def test_the_report_is_a_pure_function_and_windows_add_up(
    got: tuple[ev.View, datetime], a: int, b: int
) -> None:
    view, now = got
    assert goodput(view, now) == goodput(view, now)
    # A copy of the record (as another store would return it) gives the same figures.
    copy = ev.View(view.header, tuple(attrs.evolve(e) for e in view.events))
    assert goodput(copy, now) == goodput(view, now)
    since, until = sorted((T0 + timedelta(seconds=a), T0 + timedelta(seconds=b)))
    whole = report([("c", view)], now)
    left = report([("c", view)], now, Selection(until=since))
    mid = report([("c", view)], now, Selection(since=since, until=until))
    right = report([("c", view)], now, Selection(since=until))
    assert sum(r.total.total.micros for r in (left, mid, right)) == whole.total.total.micros
    for r in (whole, left, mid, right):
        assert sum(f.micros for f in r.total.parts.values()) == r.total.total.micros


def test_a_backends_own_rerun_is_charged_to_the_backend_rule() -> None:
    s = Story.with_rules(
        Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=2),
        enforcers={0: Enforcer.BACKEND},
    )
    s.later(1).launched(1, "o1", running=False)
    t1 = s.now
    s.observe(observation("job1", 1, 1, "o1", _RUNNING, _run(0, t1)))
    end = s.later(60).now
    s.later(5)
    t2 = s.later(25).now
    s.observe(observation("job1", 1, 1, "o1", _RUNNING, _run(0, t1, end, PREEMPTED), _run(1, t2)))
    s.later(40)
    g = goodput(s.view(), s.now)
    lost = {x.part: x for x in g.shares if x.blame.cause is CauseKind.PREEMPTED}
    assert lost[Part.UNKNOWN].micros == 60 * _S
    # Never seen ended before it ran again: the backend's relaunch, all of it.
    assert lost[Part.RELAUNCH].micros == 30 * _S
    assert {x.blame.rule for x in lost.values()} == {0}
    assert {x.blame.enforcer for x in lost.values()} == {Enforcer.BACKEND}


def test_a_rule_hold_is_queued_for_the_rule_and_charged_to_its_cause() -> None:
    s = Story.with_rules(Rule(on=[CauseKind.PREEMPTED], action=Action.HOLD, budget=1))
    s.later(1).launched(1, "o1", running=False)
    t1 = s.now
    s.observe(observation("job1", 1, 1, "o1", _RUNNING, _run(0, t1)))
    s.later(50).observe(observation("job1", 1, 1, "o1", _ENDED, _run(0, t1, s.now, PREEMPTED)))
    s.later(2).add(ev.RecoveryDecided, rule=0, trigger=End("o1", 0), cause=PREEMPTED)
    s.later(1).add(
        ev.HoldPlaced,
        instance=1,
        hold=Hold(HoldKind.RECOVERY, Actor.supervisor("s")),
        cause=PREEMPTED,
    )
    s.later(600).add(ev.HoldLifted, instance=1, resume=True)
    s.later(1)
    g = goodput(s.view(), s.now)
    held = [x for x in g.shares if x.reason is QueueReason.HELD_BY_RULE]
    assert [(x.micros, x.blame.cause, x.blame.rule) for x in held] == [
        (600 * _S, CauseKind.PREEMPTED, 0)
    ]
    assert g.part_micros(Part.DECISION) == 2 * _S
    assert g.part_micros(Part.RELAUNCH) == 2 * _S  # decided to held, lifted to now


def test_a_blind_window_makes_startup_and_stall_unknown_where_it_overlaps() -> None:
    s, t1 = _stopped_as_stalled()
    stall_at = s.now
    s.later(5)
    stopped = Cause(CauseKind.CANCELLED, Provenance.ACTOR)
    s.observe(observation("job1", 1, 1, "o1", _ENDED, _run(0, t1, s.now, stopped)))
    evidence = {
        ("o1", 0): ExecutionEvidence(
            ref="o1",
            index=0,
            first_progress=t1 + timedelta(seconds=10),
            last_progress=t1 + timedelta(seconds=100),
            stall_stop_at=stall_at,
            blind=((t1 + timedelta(seconds=5), t1 + timedelta(seconds=150)),),
        )
    }
    g = goodput(s.view(), s.now, evidence)
    assert g.part_micros(Part.STARTUP) == 5 * _S
    assert g.part_micros(Part.STALLED) == (305 - 150) * _S
    assert (
        g.part_micros(Part.UNKNOWN) == (5 + 90 + 50) * _S
    )  # blind start-up, no resume known, blind stall


@settings(max_examples=200, deadline=None)
@given(records(), st.data())
def test_the_parts_add_up_with_any_progress_evidence(
    got: tuple[ev.View, datetime], data: st.DataObject
) -> None:
    view, now = got
    plain = goodput(view, now)
    offset = st.one_of(st.none(), st.integers(-100, 4000).map(lambda s: T0 + timedelta(seconds=s)))
    evidence = {
        (r.ref, r.index): ExecutionEvidence(
            ref=r.ref,
            index=r.index,
            first_progress=data.draw(offset),
            last_progress=data.draw(offset),
            resumed_fresh=data.draw(st.booleans()),
            checkpoint_at=data.draw(offset),
            stall_stop_at=data.draw(offset),
            blind=tuple(
                (a, b) for a, b in [(data.draw(offset), data.draw(offset))] if a is not None
            ),
        )
        for r in plain.runs
    }
    g = goodput(view, now, evidence)
    assert sum(x.micros for x in g.shares) == g.total_micros == plain.total_micros
    assert g.resource_micros == plain.resource_micros  # evidence splits running time, no more
    assert [(r.ref, r.index, r.running_micros) for r in g.runs] == [
        (r.ref, r.index, r.running_micros) for r in plain.runs
    ]


def test_progress_events_in_the_record_are_the_evidence() -> None:
    """The same split as with evidence given by hand, read from the record's own progress
    events: the first run's marks, its checkpoint of step 150 published 60 s in (recorded as
    the run ended), and the second run's resumed-from entry naming that step."""
    s = _preempted_then_done(gpus=4)
    runs = {(r.ref, r.index): r for r in goodput(s.view(), s.now).runs}
    start1, start2 = runs[("o1", 0)].started_at, runs[("o2", 0)].started_at
    assert start1 is not None and start2 is not None

    s.progress_seen(10, 1, at=start1 + timedelta(seconds=7))
    s.progress_seen(150, 1, at=start1 + timedelta(seconds=60), origin=ev.Origin.PUBLICATION)
    s.add(ev.ResumedFrom, submission=2, execution="0", step=150, resumed_at=start2)
    s.progress_seen(160, 2, at=start2 + timedelta(seconds=4))
    evidence = evidence_of(s.view())
    assert evidence[("o2", 0)].resumed_from == 150
    assert evidence[("o2", 0)].checkpoint_at == start1 + timedelta(seconds=60)
    assert evidence[("o1", 0)].first_progress == start1 + timedelta(seconds=7)
    g = goodput(s.view(), s.now)
    assert g.part_micros(Part.STARTUP) == (7 + 4) * _S
    assert g.part_micros(Part.PRODUCTIVE) == (60 - 7 + 49 - 4) * _S
    assert g.part_micros(Part.RECOMPUTATION) == (97 - 60) * _S


def test_a_blind_spell_in_the_record_reaches_every_run() -> None:
    s = _preempted_then_done()
    s.add(ev.ProgressBlind, detail="root unreadable")
    opened = s.now
    s.later(5).add(ev.ProgressSighted)
    evidence = evidence_of(s.view())
    assert evidence == {}  # no run has progress evidence of its own to carry it
    s.add(ev.ProgressSeen, step=1, marked_at=opened, submission=1, execution="0")
    found = evidence_of(s.view())[("o1", 0)]
    assert found.blind == ((opened, opened + timedelta(seconds=5)),)
