"""Suspect nodes end to end on the memory adapter: a job whose two runs in a row are lost on
the same node resubmits with that node excluded, recorded with the authorization, passed to
the adapter (which then places the run elsewhere) and shown by status."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from jobdispatch import Action, CauseKind, RecoveryPolicy, Rule, State
from jobdispatch.spi import ObjectRef
from jobdispatch.status import Status
from jobdispatch.types import JobSpec

from .conftest import Scenario

HOLD = timedelta(hours=6)


def spec(hold: timedelta | None) -> JobSpec:
    rule = Rule(on=[CauseKind.NODE_LOST], action=Action.RESUBMIT, budget=3)
    return JobSpec(
        command=["train"],
        name="s",
        nodes=2,
        recovery=RecoveryPolicy(rules=(rule,), exclude_suspects_for=hold),
    )


def lose_node2(sc: Scenario, n: int) -> Callable[[Status], None]:
    """An action that takes node2 down under submission ``n``'s running object."""

    def act(s: Status) -> None:
        sc.backend.env.lose_node(sc.canonical(s, n), "node2")

    return act


def lose_node2_twice_then_complete(sc: Scenario) -> None:
    sc.on(sc.running(1), lose_node2(sc, 1))
    sc.on(sc.running(2), lose_node2(sc, 2))
    sc.on(sc.running(3), lambda s: sc.backend.env.complete(sc.canonical(s, 3)))


def nodes_of(sc: Scenario, ref: ObjectRef) -> tuple[str, ...]:
    runs = sc.backend.inspect(ref).executions
    return runs[-1].nodes


def test_two_runs_lost_on_one_node_keep_the_next_submission_off_it(slurm: Scenario) -> None:
    slurm.submit(spec(HOLD))
    lose_node2_twice_then_complete(slurm)
    status = slurm.run()
    assert status.state is State.SUCCEEDED, status
    first, second, third = status.submissions
    assert first.exclude == () and second.exclude == ()
    # Both lost runs were on node1 and node2 (the memory cluster places in order).
    assert third.exclude == ("node1", "node2")
    lost_at = second.executions[-1].ended_at
    assert lost_at is not None and third.exclude_until == lost_at + HOLD
    assert third.canonical is not None
    assert set(nodes_of(slurm, third.canonical)).isdisjoint({"node1", "node2"})


def test_without_the_setting_the_next_submission_goes_anywhere(slurm: Scenario) -> None:
    slurm.submit(spec(None))
    lose_node2_twice_then_complete(slurm)
    status = slurm.run()
    assert status.state is State.SUCCEEDED, status
    third = status.submissions[2]
    assert third.exclude == ()
    assert third.canonical is not None
    assert nodes_of(slurm, third.canonical) == ("node1", "node2")
