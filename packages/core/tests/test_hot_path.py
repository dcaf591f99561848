"""The job level's hot path: ``Replay``, the incremental fold the executor uses, answers as
``fold`` on every revision; and the enum aliases of job, status and steps (kept for the figure
in spec 0001 D5) each hold the member their name says."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from jobdispatch import Action, CauseKind, ObjectState, Rule
from jobdispatch.job import Replay, fold
from jobdispatch.records import events as ev
from jobdispatch.testing import Story, execution, observation

NOW = datetime(2026, 1, 2, tzinfo=UTC)


def _story() -> Story:
    """A record with a launch, observations, a person's hold and release, and an end."""
    story = Story.with_rules(Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2))
    story.launched(1, "o1")
    story.later(30).observe(
        observation("job1", 1, 1, "o1", ObjectState.RUNNING, execution(0), lost_nodes=("n2",))
    )
    story.later(30).add(ev.HoldRequested, reason="maintenance")
    story.later(30).add(ev.ReleaseRequested)
    story.later(30).observe(observation("job1", 1, 1, "o1", ObjectState.RUNNING, execution(0)))
    return story


def test_a_replay_answers_as_fold_on_every_revision() -> None:
    view = _story().view()
    replay = Replay()
    for revision in range(len(view.events) + 1):
        prefix = ev.View(view.header, view.events[:revision])
        assert replay.extend(prefix, NOW) == fold(prefix, NOW)
    shorter = ev.View(view.header, view.events[:2])  # not an extension: folded anew
    assert replay.extend(shorter, NOW) == fold(shorter, NOW)


@pytest.mark.parametrize("module", ["jobdispatch.job", "jobdispatch.status", "jobdispatch.steps"])
def test_every_enum_alias_is_bound_to_the_member_its_name_says(module: str) -> None:
    """The hot paths bind enum members to module globals (``_STATE_HELD = State.HELD``): a
    global read is cheaper than an attribute of an enum class on Python 3.11. Such a binding
    is invisible to the type checker, so a wrong one (``_STATE_HELD = State.PENDING``) would
    pass it; every alias must end with the name of the member it holds."""
    import enum
    import importlib

    aliases = {
        name: value
        for name, value in vars(importlib.import_module(module)).items()
        if name.startswith("_") and name.isupper() and isinstance(value, enum.Enum)
    }
    assert aliases, f"{module} has no enum aliases; drop this test with them"
    wrong = {n: v for n, v in aliases.items() if not n.endswith(f"_{v.name}")}
    assert not wrong, wrong
