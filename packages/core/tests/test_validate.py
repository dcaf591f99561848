"""validate reports every problem of a spec at once, each naming its field path."""

from __future__ import annotations

from datetime import timedelta

import jobdispatch
import pytest
from jobdispatch import Action, CauseKind, JobSpec, RecoveryPolicy, Rule, ValidationError


def spec(**fields):
    fields.setdefault("command", ["python", "train.py"])
    return JobSpec(**fields)


def rules(*rs):
    return RecoveryPolicy(rules=rs)


BAD = [
    (spec(command=[]), "command", "must not be empty"),
    (spec(command=["  "]), "command[0]", "blank"),
    (spec(command=["a", "b\x00c"]), "command[1]", "NUL"),
    (spec(nodes=0), "nodes", "at least 1"),
    (spec(nodes=True), "nodes", "whole number"),
    (spec(procs_per_node=-2), "procs_per_node", "at least 1"),
    (spec(nodes=10**9), "nodes", "at most"),
    (spec(name="bad name!"), "name", "letters, digits"),
    (spec(env={"1BAD": "x"}), "env.1BAD", "not a valid environment variable name"),
    (spec(env={"RANK": "3"}), "env.RANK", "set by dispatch"),
    (spec(env={"OK": "a\x00b"}), "env.OK", "NUL"),
    (spec(time_limit=timedelta(0)), "time_limit", "positive"),
    (spec(time_limit=timedelta(days=999_999_999)), "time_limit", "at most 36500 days"),
    (
        spec(recovery=rules(Rule(on=["preempted"], action=Action.HOLD, for_=timedelta.max))),
        "recovery.rules[0].for",
        "at most 36500 days",
    ),
    (spec(image="a b"), "image", "without spaces"),
    (spec(working_dir=""), "working_dir", "non-empty"),
    (
        spec(recovery=rules(Rule(on=[], action=Action.RESUBMIT, budget=1))),
        "recovery.rules[0].on",
        "at least one cause",
    ),
    (
        spec(recovery=rules(Rule(on=[CauseKind.CANCELLED], action=Action.RESUBMIT, budget=1))),
        "recovery.rules[0].on[0]",
        "not a recoverable cause",
    ),
    (
        spec(
            recovery=rules(
                Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1),
                Rule(
                    on=[CauseKind.NODE_LOST, CauseKind.PREEMPTED], action=Action.REQUEUE, budget=1
                ),
            )
        ),
        "recovery.rules[1].on[1]",
        "already covered by recovery.rules[0]",
    ),
    (
        spec(recovery=rules(Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=-1))),
        "recovery.rules[0].budget",
        "negative",
    ),
    (
        spec(recovery=rules(Rule(on=[CauseKind.PREEMPTED], action=Action.HOLD, budget=1))),
        "recovery.rules[0].for",
        "positive duration",
    ),
    (
        spec(
            recovery=rules(
                Rule(
                    on=[CauseKind.PREEMPTED],
                    action=Action.HOLD,
                    budget=1,
                    for_=timedelta(seconds=-5),
                )
            )
        ),
        "recovery.rules[0].for",
        "positive duration",
    ),
    (
        spec(
            recovery=rules(
                Rule(
                    on=[CauseKind.PREEMPTED],
                    action=Action.RESUBMIT,
                    budget=1,
                    for_=timedelta(hours=1),
                )
            )
        ),
        "recovery.rules[0].for",
        "only a hold",
    ),
    (
        spec(recovery=rules(Rule(on=[CauseKind.OUT_OF_MEMORY], action=Action.ESCALATE, budget=2))),
        "recovery.rules[0].budget",
        "no budget",
    ),
]


@pytest.mark.parametrize(("bad", "path", "words"), BAD, ids=[b[1] for b in BAD])
def test_each_bad_spec_names_its_field(bad, path, words):
    with pytest.raises(ValidationError) as err:
        jobdispatch.validate(bad)
    problem = next((p for p in err.value.problems if p.path == path), None)
    assert problem is not None, err.value.paths
    assert words in problem.message
    assert path in str(err.value)


def test_every_problem_is_reported_at_once():
    bad = JobSpec(
        command=[],
        nodes=0,
        env={"9": "x"},
        recovery=rules(Rule(on=[CauseKind.HELD], action=Action.RESUBMIT, budget=-1)),
    )
    with pytest.raises(ValidationError) as err:
        jobdispatch.validate(bad)
    assert err.value.paths == [
        "command",
        "nodes",
        "env.9",
        "recovery.rules[0].on[0]",
        "recovery.rules[0].budget",
    ]
    assert isinstance(err.value, jobdispatch.Invalid)
    assert isinstance(err.value, jobdispatch.DispatchError)


def test_a_good_spec_passes():
    jobdispatch.validate(
        spec(
            name="finetune",
            nodes=4,
            procs_per_node=8,
            env={"NCCL_DEBUG": "INFO"},
            time_limit=timedelta(hours=2),
            recovery=rules(
                Rule(
                    on=[CauseKind.PREEMPTED, CauseKind.NODE_LOST], action=Action.RESUBMIT, budget=3
                )
            ),
        )
    )
