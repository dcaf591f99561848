"""validate reports every problem of a spec at once, each naming its field path."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import jobdispatch
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch import Action, CauseKind, JobSpec, RecoveryPolicy, Resources, Rule, ValidationError
from jobdispatch.config import validate_config


def spec(**fields: Any) -> JobSpec:
    fields.setdefault("command", ["python", "train.py"])
    return JobSpec(**fields)


def rules(*rs: Rule) -> RecoveryPolicy:
    return RecoveryPolicy(rules=rs)


def one_rule(**rule: Any) -> JobSpec:
    """A spec whose recovery policy is the one rule of ``rule``'s fields."""
    return spec(recovery=rules(Rule(**rule)))


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
        one_rule(on=["preempted"], action=Action.HOLD, for_=timedelta.max),
        "recovery.rules[0].for",
        "at most 36500 days",
    ),
    (spec(image="a b"), "image", "without spaces"),
    (spec(working_dir=""), "working_dir", "non-empty"),
    (
        one_rule(on=[], action=Action.RESUBMIT, budget=1),
        "recovery.rules[0].on",
        "at least one cause",
    ),
    (
        one_rule(on=[CauseKind.CANCELLED], action=Action.RESUBMIT, budget=1),
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
        one_rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=-1),
        "recovery.rules[0].budget",
        "negative",
    ),
    (
        one_rule(on=[CauseKind.PREEMPTED], action=Action.HOLD, budget=1),
        "recovery.rules[0].for",
        "positive duration",
    ),
    (
        one_rule(
            on=[CauseKind.PREEMPTED],
            action=Action.HOLD,
            budget=1,
            for_=timedelta(seconds=-5),
        ),
        "recovery.rules[0].for",
        "positive duration",
    ),
    (
        one_rule(
            on=[CauseKind.PREEMPTED],
            action=Action.RESUBMIT,
            budget=1,
            for_=timedelta(hours=1),
        ),
        "recovery.rules[0].for",
        "only a hold",
    ),
    (
        one_rule(on=[CauseKind.OUT_OF_MEMORY], action=Action.ESCALATE, budget=2),
        "recovery.rules[0].budget",
        "no budget",
    ),
]


@pytest.mark.parametrize(("bad", "path", "words"), BAD, ids=[b[1] for b in BAD])
def test_each_bad_spec_names_its_field(bad: JobSpec, path: str, words: str) -> None:
    with pytest.raises(ValidationError) as err:
        jobdispatch.validate(bad)
    problem = next((p for p in err.value.problems if p.path == path), None)
    assert problem is not None, err.value.paths
    assert words in problem.message
    assert path in str(err.value)


def test_every_problem_is_reported_at_once() -> None:
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


def test_a_good_spec_passes() -> None:
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


# A trailing newline: Python's ``$`` matches before a final newline, so ``re.match`` with
# ``^...$`` let ``"gpu\n"`` through every check of a name, key or scheduler word.
#: Words every one of those checks takes (a name takes no '+').
_WORDS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True)
_ENDINGS = st.sampled_from(["\n", "\r\n", "\n\n"])


def _with(field: str, value: str) -> tuple[JobSpec, str]:
    """A spec whose ``field`` is ``value``, and the path a problem with it is told under."""
    if field == "name":
        return spec(name=value), "name"
    if field == "env":
        return spec(env={value: "x"}), f"env.{value}"
    if field == "constraints":
        return spec(resources=Resources(constraints=(value,))), "resources.constraints[0]"
    given: dict[str, Any] = {field: value}
    if field == "gpu_type":
        given["gpus_per_node"] = 1
    return spec(resources=Resources(**given)), f"resources.{field}"


@given(
    st.sampled_from(["name", "env", "gpu_type", "queue", "account", "qos", "constraints"]),
    _WORDS,
    _ENDINGS,
)
def test_a_trailing_newline_is_refused_wherever_a_word_is_checked(
    field: str, word: str, ending: str
) -> None:
    if field == "env":
        word = "V" + word.replace(".", "_").replace("-", "_")
    good, _ = _with(field, word)
    assert jobdispatch.problems(good) == []
    bad, path = _with(field, word + ending)
    assert [p.path for p in jobdispatch.problems(bad)] == [path]


def test_a_pattern_in_a_configuration_schema_is_anchored_at_the_very_end() -> None:
    schema = {
        "type": "object",
        "properties": {
            "partition": {"type": "string", "pattern": r"^[A-Za-z0-9_.+-]{1,128}$"},
            "path": {"type": "string", "pattern": r"^[^\x00\n]+$"},
            "dollar": {"type": "string", "pattern": r"^a[$]\$$"},
        },
    }
    validate_config({"partition": "gpu", "path": "/a b", "dollar": "a$$"}, schema, subject="t")
    for key, value in (("partition", "gpu\n"), ("path", "/a\n"), ("dollar", "a$$\n")):
        with pytest.raises(ValidationError) as caught:
            validate_config({key: value}, schema, subject="t")
        assert caught.value.paths == [key]
