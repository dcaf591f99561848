"""The supervisor end to end on the memory adapter: every cause with every action, lost
replies, spent budgets, cancels and holds in the middle of a recovery."""

from __future__ import annotations

from datetime import timedelta

import pytest
from jobdispatch import (
    Action,
    CauseKind,
    CleanupState,
    Enforcer,
    JobSpec,
    ObjectState,
    RecoveryPolicy,
    Rule,
    State,
    Status,
)
from jobdispatch.memory import Shape
from jobdispatch.triggers import BudgetSpent
from jobdispatch_supervise import EscalationMessage

from .conftest import ME, Scenario

DRIVERS = {
    CauseKind.PREEMPTED: lambda env, ref: env.preempt(ref),
    CauseKind.NODE_LOST: lambda env, ref: env.lose_node(ref),
    CauseKind.OUT_OF_MEMORY: lambda env, ref: env.oom(ref),
    CauseKind.TIME_LIMIT: lambda env, ref: env.time_out(ref),
    CauseKind.NON_ZERO_EXIT: lambda env, ref: env.fail(ref, 3),
}


def spec(*rules: Rule) -> JobSpec:
    return JobSpec(command=["train"], name="s", nodes=2, recovery=RecoveryPolicy(rules=rules))


def end_then_complete(sc: Scenario, kind: CauseKind) -> Scenario:
    sc.on(sc.running(1), lambda s: DRIVERS[kind](sc.backend.env, sc.canonical(s, 1)))
    return sc


@pytest.mark.parametrize("kind", list(DRIVERS), ids=str)
def test_resubmit_recovers_each_cause(scenario: Scenario, kind: CauseKind) -> None:
    scenario.submit(spec(Rule(on=[kind], action=Action.RESUBMIT, budget=1)))
    end_then_complete(scenario, kind)
    scenario.on(
        scenario.running(2), lambda s: scenario.backend.env.complete(scenario.canonical(s, 2))
    )
    status = scenario.run()
    assert status.cause is not None, status
    assert (status.state, status.cause.kind) == (State.SUCCEEDED, CauseKind.NONE)
    assert len(status.submissions) == 2
    assert status.submissions[0].executions[-1].cause is not None, status
    assert status.submissions[0].executions[-1].cause.kind is kind
    assert status.plan is not None, status
    assert status.plan.rules[0].firings == 1 and status.settled
    assert [(t.from_, t.to) for t in status.history] == [
        (State.PENDING, State.RECOVERING),
        (State.RECOVERING, State.SUCCEEDED),
    ]
    assert not scenario.live_overlaps()


@pytest.mark.parametrize(
    "kind", [CauseKind.PREEMPTED, CauseKind.NODE_LOST, CauseKind.OUT_OF_MEMORY], ids=str
)
def test_supervisor_requeue_reruns_the_same_object(slurm: Scenario, kind: CauseKind) -> None:
    slurm.submit(spec(Rule(on=[kind], action=Action.REQUEUE, budget=1)), accept_unverified=None)
    plan = slurm.status().plan
    assert plan is not None
    assert plan.rules[0].enforcer in (Enforcer.SUPERVISOR, Enforcer.BACKEND)
    end_then_complete(slurm, kind)

    def second_run(s: Status) -> bool:
        sub = s.submissions[0]
        return sub.state is ObjectState.RUNNING and len(sub.executions) == 2

    slurm.on(second_run, lambda s: slurm.backend.env.complete(slurm.canonical(s, 1)))
    status = slurm.run()
    assert status.state is State.SUCCEEDED and len(status.submissions) == 1
    indices = [x.index for x in status.submissions[0].executions]
    assert indices == [0, 1]
    assert status.submissions[0].executions[0].cause is not None, status
    assert status.submissions[0].executions[0].cause.kind is kind


def rerunning(s: Status) -> bool:
    """The first submission's object runs again: its second execution (a native rerun)."""
    return len(s.submissions[0].executions) == 2 and s.submissions[0].state is ObjectState.RUNNING


def test_native_restart_on_kubeflow_is_observed_not_acted_on(kubeflow: Scenario) -> None:
    plan = kubeflow.submit(
        spec(Rule(on=[CauseKind.NON_ZERO_EXIT], action=Action.RESTART, budget=2))
    )
    assert plan.rules[0].enforcer is Enforcer.BACKEND
    end_then_complete(kubeflow, CauseKind.NON_ZERO_EXIT)

    kubeflow.on(rerunning, lambda s: kubeflow.backend.env.complete(kubeflow.canonical(s, 1)))
    status = kubeflow.run()
    assert status.state is State.SUCCEEDED and len(status.submissions) == 1
    assert status.plan is not None, status
    assert status.plan.rules[0].firings == 1
    assert State.RECOVERING in [t.to for t in status.history]


def test_native_requeue_on_slurm_with_its_budget(slurm: Scenario) -> None:
    plan = slurm.submit(spec(Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=1)))
    assert plan.rules[0].enforcer is Enforcer.BACKEND
    end_then_complete(slurm, CauseKind.PREEMPTED)

    slurm.on(rerunning, lambda s: slurm.backend.env.preempt(slurm.canonical(s, 1)))
    status = slurm.run()
    # The backend's native budget of 1 is spent by the first preemption; the second ends it.
    assert status.cause is not None, status
    assert (status.state, status.cause.kind) == (State.FAILED, CauseKind.PREEMPTED)
    assert status.plan is not None, status
    assert status.plan.rules[0].firings == 1 and status.escalations


def held_for_out_of_memory(scenario: Scenario, hold_for: timedelta) -> None:
    """Submit a job whose rule holds it for a person, ``hold_for`` long, when it runs out of
    memory; its first run does (see :func:`end_then_complete`)."""
    oom = Rule(on=[CauseKind.OUT_OF_MEMORY], action=Action.HOLD, budget=1, for_=hold_for)
    scenario.submit(spec(oom))
    end_then_complete(scenario, CauseKind.OUT_OF_MEMORY)


def test_hold_for_a_person_then_release_resubmits(scenario: Scenario) -> None:
    held_for_out_of_memory(scenario, timedelta(hours=4))
    scenario.on(
        lambda s: s.state is State.HELD,
        lambda s: scenario.cluster.operator.release(scenario.job, by=ME, reason="fixed"),
    )
    scenario.on(
        scenario.running(2), lambda s: scenario.backend.env.complete(scenario.canonical(s, 2))
    )
    status = scenario.run()
    assert status.state is State.SUCCEEDED and len(status.submissions) == 2
    assert [t.to for t in status.history] == [
        State.RECOVERING,
        State.HELD,
        State.RECOVERING,
        State.SUCCEEDED,
    ]


def test_escalate_rule_fails_the_job_and_delivers_once(scenario: Scenario) -> None:
    delivered = []

    class Sink:
        name = "test"

        def deliver(self, message: EscalationMessage) -> None:
            delivered.append(message.id)

    scenario.sinks.append(Sink())
    scenario.submit(spec(Rule(on=[CauseKind.TIME_LIMIT], action=Action.ESCALATE)))
    end_then_complete(scenario, CauseKind.TIME_LIMIT)
    status = scenario.run()
    assert status.cause is not None, status
    assert (status.state, status.cause.kind) == (State.FAILED, CauseKind.TIME_LIMIT)
    assert delivered == [str(status.escalations[0].id)] and status.escalations[0].delivered == (
        "test",
    )
    # A new supervisor over the same record delivers nothing again.
    scenario.supervisor().executor.run_pass(
        scenario.job, scenario.store.acquire(scenario.job, "again", timedelta(seconds=30))
    )
    assert len(delivered) == 1


def test_preempted_three_times_under_a_budget_of_two_fails_with_an_escalation(
    scenario: Scenario,
) -> None:
    scenario.submit(spec(Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2)))
    for n in (1, 2, 3):
        scenario.on(scenario.running(n), scenario.preempting(n))
    status = scenario.run()
    assert status.cause is not None, status
    assert (status.state, status.cause.kind) == (State.FAILED, CauseKind.PREEMPTED)
    assert status.plan is not None, status
    assert len(status.submissions) == 3 and status.plan.rules[0].firings == 2
    assert [e.id for e in status.escalations] == [BudgetSpent(0)]
    assert not scenario.live_overlaps()


def test_a_lost_start_reply_leaves_a_gated_duplicate_that_is_retired_and_never_runs(
    scenario: Scenario,
) -> None:
    scenario.backend.env.lose_next_start_reply()
    scenario.backend.env.delay_next_object()
    scenario.submit(spec())
    scenario.on(
        scenario.running(1), lambda s: scenario.backend.env.complete(scenario.canonical(s, 1))
    )
    status = scenario.run()
    assert status.state is State.SUCCEEDED
    sub = status.submissions[0]
    assert sub.attempts == 2 and len(sub.retired) == 1
    ref, cause = sub.retired[0]
    assert cause.kind is CauseKind.DUPLICATE and ref != sub.canonical
    history = scenario.backend.env.history
    from jobdispatch.memory.history import ExecutionStarted

    assert not history.select(ExecutionStarted, ref=ref)


def test_cancel_during_recovery_commits_first_and_cleans_up(scenario: Scenario) -> None:
    scenario.submit(spec(Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=3)))
    end_then_complete(scenario, CauseKind.PREEMPTED)
    receipts = []
    scenario.on(
        lambda s: len(s.submissions) == 2,
        lambda s: receipts.append(
            scenario.cluster.operator.cancel(scenario.job, by=ME, reason="stop it")
        ),
    )
    status = scenario.run()
    assert receipts and receipts[0].committed
    assert status.cause is not None, status
    assert (status.state, status.cause.kind) == (State.CANCELLED, CauseKind.CANCELLED)
    assert status.cleanup is CleanupState.CLEAR and status.settled
    assert not scenario.live_overlaps()
    # Nothing was opened after the cancel was committed.
    from jobdispatch.memory.history import Opened

    cancel_at = next(t.at for t in status.history if t.to is State.CANCELLED)
    assert all(
        e.at <= cancel_at
        for e in scenario.backend.env.history.select(Opened, job=scenario.job)
        if e.lifted
    )


def test_operator_hold_and_release_around_a_recovery(scenario: Scenario) -> None:
    scenario.submit(spec(Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1)))

    def preempt_and_hold(s: Status) -> None:
        scenario.cluster.operator.hold(scenario.job, by=ME, reason="look first")
        scenario.backend.env.preempt(scenario.canonical(s, 1))

    scenario.on(scenario.running(1), preempt_and_hold)
    scenario.on(
        lambda s: (
            len(s.submissions) == 2
            and s.state is State.HELD
            and s.submissions[1].canonical is not None
        ),
        lambda s: scenario.cluster.operator.release(scenario.job, by=ME),
    )
    scenario.on(
        scenario.running(2), lambda s: scenario.backend.env.complete(scenario.canonical(s, 2))
    )
    status = scenario.run()
    assert status.state is State.SUCCEEDED and len(status.submissions) == 2
    assert State.HELD in [t.to for t in status.history]


def test_give_up_fails_with_the_last_cause(scenario: Scenario) -> None:
    held_for_out_of_memory(scenario, timedelta(hours=1))
    scenario.on(
        lambda s: s.state is State.HELD,
        lambda s: scenario.cluster.operator.give_up(scenario.job, by=ME, reason="bad data"),
    )
    status = scenario.run()
    assert status.cause is not None, status
    assert (status.state, status.cause.kind) == (State.FAILED, CauseKind.OUT_OF_MEMORY)
    assert "bad data" in status.cause.detail


def test_person_resubmit_stops_the_running_object_before_opening_the_next(
    scenario: Scenario,
) -> None:
    scenario.submit(spec())
    scenario.on(
        scenario.running(1),
        lambda s: scenario.cluster.operator.resubmit(scenario.job, by=ME, reason="new code"),
    )
    scenario.on(
        scenario.running(2), lambda s: scenario.backend.env.complete(scenario.canonical(s, 2))
    )
    status = scenario.run()
    assert status.state is State.SUCCEEDED and len(status.submissions) == 2
    assert status.submissions[0].executions[-1].cause is not None, status
    assert status.submissions[0].executions[-1].cause.kind is CauseKind.CANCELLED
    assert not scenario.live_overlaps()


def test_operator_requeue_reruns_in_place(slurm: Scenario) -> None:
    slurm.submit(spec())
    slurm.on(slurm.running(1), lambda s: slurm.cluster.operator.requeue(slurm.job, by=ME))

    slurm.on(rerunning, lambda s: slurm.backend.env.complete(slurm.canonical(s, 1)))
    status = slurm.run()
    assert status.state is State.SUCCEEDED
    assert status.submissions[0].executions[0].cause is not None, status
    assert status.submissions[0].executions[0].cause.kind is CauseKind.REQUEUED


def test_a_requeue_bit_left_set_is_restored(slurm: Scenario) -> None:
    slurm.submit(spec())
    slurm.on(slurm.running(1), lambda s: slurm.backend.env.set_requeue_bit(slurm.canonical(s, 1)))
    slurm.on(
        lambda s: (
            len(s.submissions) > 0
            and s.submissions[0].state is ObjectState.RUNNING
            and slurm.backend.inspect(slurm.canonical(s, 1)).requeue_bit is False
        ),
        lambda s: slurm.backend.env.complete(slurm.canonical(s, 1)),
    )
    status = slurm.run()
    assert status.state is State.SUCCEEDED


def test_every_scenario_shape_is_covered() -> None:
    assert {Shape.SLURM, Shape.KUBEFLOW} == set(Shape)
