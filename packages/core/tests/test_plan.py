"""make_plan assigns every rule an enforcer before anything starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jobdispatch
import pytest
from jobdispatch import (
    Action,
    Capability,
    CauseKind,
    Enforcer,
    JobSpec,
    Plan,
    RecoveryPolicy,
    Rejected,
    Rule,
    SharedCheckpoint,
    Support,
    Unsupported,
)
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.testing import expected_output

ROOT = Path(__file__).resolve().parents[3]


def test_plan_examples_prints_exactly_what_its_docstring_says() -> None:
    script = ROOT / "examples" / "plan_examples.py"
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out == expected_output(script)


def test_the_repository_plan_examples_are_the_design_ones() -> None:
    design = ROOT.parent / "shared" / "design" / "plan_examples.py"
    if not design.exists():
        pytest.skip("no shared/design beside this checkout")
    assert (ROOT / "examples" / "plan_examples.py").read_text() == design.read_text()


def spec(*rules: Rule, **fields: Any) -> JobSpec:
    return JobSpec(command=["train"], recovery=RecoveryPolicy(rules=rules), **fields)


REQUEUE_PREEMPTED = Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=2)


def supervised_on_slurm(spec: JobSpec) -> Plan:
    """The plan of job ``j`` on a Slurm-shaped memory backend, for a supervised submission."""
    return jobdispatch.make_plan(MemoryBackend(shape=Shape.SLURM), "j", spec, supervised=True)


def test_native_rules_go_to_the_backend_others_to_the_supervisor() -> None:
    oom = Rule(on=[CauseKind.OUT_OF_MEMORY], action=Action.RESUBMIT, budget=1)
    plan = supervised_on_slurm(spec(REQUEUE_PREEMPTED, oom))
    assert [a.enforcer for a in plan.rules] == [Enforcer.BACKEND, Enforcer.SUPERVISOR]
    assert list(plan.uncovered) == [
        CauseKind.NODE_LOST,
        CauseKind.TIME_LIMIT,
        CauseKind.NON_ZERO_EXIT,
        CauseKind.LAUNCH_FAILED,
        CauseKind.NO_CAPACITY,
        CauseKind.REQUEUED,
        CauseKind.UNKNOWN,
    ]
    assert plan.capabilities[Capability.HOLD].answer.value == "yes"


def test_unenforced_rules_are_refused_unless_accepted() -> None:
    backend = MemoryBackend(shape=Shape.KUBEFLOW)
    rule = Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=1)
    with pytest.raises(Rejected, match="nobody would enforce rule 0"):
        jobdispatch.make_plan(backend, "j", spec(rule), supervised=True)
    plan = jobdispatch.make_plan(backend, "j", spec(rule), supervised=True, accept_unenforced=[0])
    assert plan.rules[0].enforcer is Enforcer.NOBODY and plan.rules[0].accepted


def test_unknown_support_needs_an_enforcer_named() -> None:
    backend = MemoryBackend(shape=Shape.SLURM)

    class Unsure:
        name = "unsure"

        def __getattr__(self, attr: str) -> Any:
            return getattr(backend, attr)

        def rules(self, spec: JobSpec, policy: RecoveryPolicy) -> list[jobdispatch.RuleSupport]:
            unknown = jobdispatch.RuleSupport(native=Support.no(), perform=Support.unknown())
            return [unknown for _ in policy.rules]

    rule = Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1)
    with pytest.raises(Rejected, match="accept_unverified"):
        jobdispatch.make_plan(Unsure(), "j", spec(rule), supervised=True)
    plan = jobdispatch.make_plan(
        Unsure(), "j", spec(rule), supervised=True, accept_unverified={0: Enforcer.SUPERVISOR}
    )
    assert plan.rules[0].enforcer is Enforcer.SUPERVISOR


def test_a_capability_the_cluster_lacks_is_unsupported_naming_the_field() -> None:
    backend = MemoryBackend(shape=Shape.SLURM)
    with pytest.raises(Unsupported, match="image"):
        jobdispatch.make_plan(backend, "j", spec(image="pytorch:2"))


def test_shared_checkpoints_turn_every_rule_into_a_day_long_hold() -> None:
    rules = (REQUEUE_PREEMPTED, Rule(on=[CauseKind.NODE_LOST], action=Action.RESUBMIT, budget=1))
    plan = supervised_on_slurm(spec(*rules, extensions=[SharedCheckpoint()]))
    assert {a.effective.action for a in plan.rules} == {Action.HOLD}
    assert all(a.effective.for_ == jobdispatch.SHARED_HOLD_FOR for a in plan.rules)
    assert [a.rule.action for a in plan.rules] == [Action.REQUEUE, Action.RESUBMIT]


def test_accepting_a_rule_that_does_not_exist_is_invalid() -> None:
    with pytest.raises(jobdispatch.Invalid, match="rule 3"):
        jobdispatch.make_plan(MemoryBackend(shape=Shape.SLURM), "j", spec(), accept_unenforced=[3])
