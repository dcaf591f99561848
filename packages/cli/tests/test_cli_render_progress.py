"""What status shows of progress: the newest step and checkpoint, a blind spell, stall verdicts
(observe-only ones included) and whether each firing of a no-advance rule was charged."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs
from jobdispatch import Action, Cause, CauseKind, Enforcer, ObjectRef, ObjectState, Provenance
from jobdispatch.records import events as ev
from jobdispatch.spi import Discovery
from jobdispatch.status import Status, project
from jobdispatch.testing import Story, execution, observation, plan_for
from jobdispatch.triggers import End
from jobdispatch.types import (
    Charge,
    JobSpec,
    ProgressSource,
    RecoveryPolicy,
    Rule,
    StallAssignment,
    StallMode,
    StallRule,
)
from jobdispatch_cli.render import plan_view, status_view
from jobdispatch_cli.timeline import build, render_text
from rich.console import Console

STALLED = Cause(CauseKind.STALLED, Provenance.SUPERVISOR, "no progress for 0:21:00")


def _text(renderable: object) -> str:
    console = Console(record=True, width=240, color_system=None)
    console.print(renderable)
    return console.export_text()


def _story(mode: StallMode) -> Story:
    rule = Rule(on=[CauseKind.STALLED], action=Action.RESUBMIT, budget=1, charge=Charge.NO_ADVANCE)
    spec = JobSpec(
        command=["train"],
        name="t",
        recovery=RecoveryPolicy(rules=[rule]),
        progress=ProgressSource(root="s3://ckpt/a"),
        stall=StallRule(after=timedelta(minutes=20), mode=mode),
    )
    assert spec.stall is not None
    stall = StallAssignment(rule=spec.stall, enforcer=Enforcer.SUPERVISOR, root="s3://ckpt/a")
    s = Story(spec=spec, plan=attrs.evolve(plan_for(spec), stall=stall)).launched()
    s.progress_seen(400, 1, origin=ev.Origin.PUBLICATION)
    s.later(1300)
    enforced = mode is StallMode.ENFORCE
    s.add(ev.StallDeclared, ref=ObjectRef("o1"), execution=0, cause=STALLED, enforced=enforced)
    return s


def _stopped_and_resubmitted(s: Story, **authorized: Any) -> Status:
    """The stalled run of ``s`` stopped, and submission 2 authorized for it by rule 0 (with the
    authorization's further fields): the job's status as the store and the backend show it."""
    s.add(ev.StopDecided, ref=ObjectRef("o1"), reason="stalled")
    ended = s.ended(1, "o1", Cause(CauseKind.CANCELLED, Provenance.ACTOR))
    s.add(ev.SubmissionAuthorized, n=2, trigger=End("o1", 0), rule=0, cause=STALLED, **authorized)
    return project(s.fold(), Discovery(job="job1", objects=(ended,), at=s.now), s.now)


def test_status_shows_an_enforced_stall_and_an_uncharged_firing() -> None:
    s = _story(StallMode.ENFORCE)
    status = _stopped_and_resubmitted(s, charged=False)
    text = _text(status_view(status))
    assert "stalled, stopped: run 0 of o1" in text
    assert "progress: step 400" in text and "newest checkpoint step 400" in text
    assert "not charged (training advanced)" in text
    assert "1 (0 charged, 1 free)" in text
    labels = [label for _, label in build(status, now=s.now).marks]
    assert "stalled: run 0" in labels
    assert "stalled" in _text(render_text(build(status, now=s.now)))


def test_status_and_timeline_show_an_observe_only_verdict() -> None:
    s = _story(StallMode.OBSERVE)
    obs = observation("job1", 1, 1, "o1", ObjectState.RUNNING, execution(0))
    status = project(s.fold(), Discovery(job="job1", objects=(obs,), at=s.now), s.now)
    text = _text(status_view(status))
    assert "would have stalled (observe only)" in text
    assert "stall: observe after 20m" in text
    assert "would stall (observe): run 0" in [label for _, label in build(status, now=s.now).marks]


def test_status_shows_the_suspect_nodes_a_submission_keeps_off() -> None:
    s = _story(StallMode.ENFORCE)
    until = s.now + timedelta(hours=6)
    status = _stopped_and_resubmitted(s, exclude=("n2", "n7"), exclude_until=until)
    assert status.submissions[1].exclude == ("n2", "n7")
    text = _text(status_view(status))
    assert "submission 2 keeps off suspect nodes n2, n7 until" in text
    assert "submission 1 keeps off" not in text


def test_status_shows_the_suspect_nodes_the_next_submission_would_keep_off() -> None:
    s = _story(StallMode.ENFORCE)
    obs = observation("job1", 1, 1, "o1", ObjectState.RUNNING, execution(0))
    status = project(s.fold(), Discovery(job="job1", objects=(obs,), at=s.now), s.now)
    status = attrs.evolve(status, next_exclude=("n4",), next_exclude_until=s.now)
    text = _text(status_view(status))
    assert "a next submission would keep off suspect nodes n4 until" in text


def test_the_plan_names_output_growth_among_the_progress_sources() -> None:
    rule = StallRule(after=timedelta(minutes=20))
    spec = JobSpec(command=["train"], stall=rule)
    watched = StallAssignment(rule=rule, enforcer=Enforcer.SUPERVISOR, output_growth=True)
    text = _text(plan_view(attrs.evolve(plan_for(spec), stall=watched), cluster="local"))
    assert "progress read from output growth" in text
