"""Bugs the deterministic simulator (tools/sim) found in the core, each pinned by its seed.

Every test puts a record in the situation the seed reached and checks what the fix changed.
Replay a seed with ``nox -s sim -- --seed N``.
"""

from __future__ import annotations

from datetime import timedelta

from jobdispatch import Action, Cause, CauseKind, Provenance, Rule, StepKind
from jobdispatch.records import events as ev
from jobdispatch.testing import Story

OOM = Cause(CauseKind.OUT_OF_MEMORY, Provenance.SCHEDULER)


def test_seed_10_rule_hold_waits_while_an_operator_hold_stands() -> None:
    """Seed 10, invariant 6: an execution ended under a hold rule while a person's hold stood;
    ``next`` placed the rule's hold anyway and ``fold`` refused the record it made ("a hold
    placed while another stands"). The rule's hold now waits until the standing one is lifted."""
    story = Story.with_rules(
        Rule(on=[CauseKind.OUT_OF_MEMORY], action=Action.HOLD, budget=2, for_=timedelta(hours=1))
    ).launched(1, "o1")
    story.add(ev.HoldRequested, reason="looking")
    ended = story.ended(1, "o1", OOM)
    assert all(s.kind is not StepKind.PLACE_HOLD for s in story.next(ended))

    story.add(ev.ReleaseRequested)
    steps = story.next(ended)
    assert steps[0].kind is StepKind.PLACE_HOLD
    story.add(ev.RecoveryDecided, rule=0, trigger=steps[0].trigger, cause=OOM, submission=1).add(
        ev.HoldPlaced, instance=2, hold=steps[0].hold, submission=1, cause=OOM
    )
    assert story.fold().active_hold is not None
