"""The job level's hot path: ``Replay``, the incremental fold the executor uses, answers as
``fold`` on every revision; and the enum aliases the hot paths read (``jobdispatch.members``,
kept for the figure in spec 0001 D5) each hold the member their name says."""

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


def test_every_enum_alias_is_bound_to_the_member_its_name_says() -> None:
    """The hot paths read enum members as module globals (``STATE_HELD``, not ``State.HELD``):
    a global read is cheaper than an attribute of an enum class on Python 3.11. Each is bound
    once, in ``jobdispatch.members``; such a binding is invisible to the type checker, so a
    wrong one (``STATE_HELD = State.PENDING``) would pass it: every alias must end with the
    name of the member it holds."""
    import enum

    from jobdispatch import members

    aliases = {name: getattr(members, name) for name in members.__all__}
    assert all(isinstance(value, enum.Enum) for value in aliases.values()), aliases
    wrong = {n: v for n, v in aliases.items() if not n.endswith(f"_{v.name}")}
    assert not wrong, wrong


@pytest.mark.parametrize("module", ["jobdispatch.job", "jobdispatch.status", "jobdispatch.steps"])
def test_the_hot_paths_read_the_aliases_as_their_own_globals(module: str) -> None:
    """Imported by name, an alias is a global of the importing module: as cheap to read as one
    bound there (a module attribute, ``members.STATE_HELD``, would not be)."""
    import importlib

    from jobdispatch import members

    found = vars(importlib.import_module(module))
    imported = [name for name in members.__all__ if name in found]
    assert imported, f"{module} reads no alias; drop it from this test"
    assert all(found[name] is getattr(members, name) for name in imported)
