"""The pending deadline end to end on the memory adapter, both shapes (issue 35 item 5): the
supervisor ends a submission that stays pending past ``[pending] after`` with the deadline's
cause, whatever the adapter, and the rules on that cause decide as for any ending."""

from __future__ import annotations

from datetime import timedelta

import pytest
from jobdispatch import Action, CauseKind, JobSpec, RecoveryPolicy, Rule, State, Status
from jobdispatch.memory import Shape
from jobdispatch.types import PendingRule, Provenance

from .conftest import ME, Scenario

AFTER = timedelta(minutes=10)


@pytest.fixture(params=[Shape.SLURM, Shape.KUBEFLOW], ids=["slurm", "kubeflow"])
def full(request: pytest.FixtureRequest) -> Scenario:
    """A cluster where nothing opened ever starts: every object waits pending."""
    return Scenario(shape=request.param, auto_run=False)


def spec(cause: CauseKind = CauseKind.NO_CAPACITY, *rules: Rule) -> JobSpec:
    return JobSpec(
        command=["train"],
        name="p",
        recovery=RecoveryPolicy(rules=rules),
        pending=PendingRule(after=AFTER, cause=cause),
    )


def test_a_job_pending_past_its_deadline_fails_with_the_deadlines_cause(full: Scenario) -> None:
    full.submit(spec(CauseKind.NEVER_FITS))
    status = full.run()
    assert status.state is State.FAILED, status
    assert status.cause is not None and status.cause.kind is CauseKind.NEVER_FITS
    assert status.cause.provenance is Provenance.SUPERVISOR
    assert "past pending after 10m" in status.cause.detail
    assert status.settled  # the object was stopped and cleaned up
    # It waited its ten minutes before it failed.
    assert status.created_at is not None
    assert status.history[-1].at - status.created_at >= AFTER


def test_a_hold_rule_on_no_capacity_keeps_it_for_a_person(full: Scenario) -> None:
    rule = Rule(on=[CauseKind.NO_CAPACITY], action=Action.HOLD, budget=1, for_=timedelta(hours=1))
    full.submit(spec(CauseKind.NO_CAPACITY, rule))

    def seen(_: Status) -> None:
        full.cluster.operator.cancel(full.job, by=ME, reason="seen")

    full.on(lambda s: s.state is State.HELD, seen)
    status = full.run()
    assert State.HELD in [t.to for t in status.history], status.history
    assert status.state is State.CANCELLED
