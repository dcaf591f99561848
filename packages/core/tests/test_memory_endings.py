"""Every way the memory scheduler ends an execution gives the right cause, and native policy
reruns an object in place only for the causes and the budget its offer covers."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from jobdispatch import (
    Action,
    CauseKind,
    Invalid,
    JobSpec,
    ManualClock,
    ObjectRef,
    ObjectState,
    Provenance,
    RecoveryPolicy,
    Rule,
    StartRequest,
)
from jobdispatch.memory import MemoryBackend, MemoryEnv, Shape
from jobdispatch.memory import history as h


def running(backend: MemoryBackend, spec: JobSpec | None = None, k: int = 1) -> ObjectRef:
    spec = spec or JobSpec(command=["x"], nodes=3)
    native = backend.compile(spec, dict(enumerate(spec.recovery.rules)), {})
    ref = backend.start(StartRequest(job="abc", submission=1, attempt=k, spec=spec, native=native))
    backend.open(ref)
    if backend.inspect(ref).state is ObjectState.PENDING:
        backend.env.run(ref)
    return ref


ENDINGS: list[
    tuple[str, Callable[[MemoryEnv, ObjectRef], object], CauseKind, Provenance, int | None]
] = [
    ("preempt", lambda env, r: env.preempt(r), CauseKind.PREEMPTED, Provenance.SCHEDULER, None),
    ("lose_node", lambda env, r: env.lose_node(r), CauseKind.NODE_LOST, Provenance.SCHEDULER, None),
    ("time_out", lambda env, r: env.time_out(r), CauseKind.TIME_LIMIT, Provenance.SCHEDULER, None),
    ("oom", lambda env, r: env.oom(r), CauseKind.OUT_OF_MEMORY, Provenance.APPLICATION, 137),
    ("fail", lambda env, r: env.fail(r, 3), CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION, 3),
    (
        "signal",
        lambda env, r: env.signal(r, 11),
        CauseKind.NON_ZERO_EXIT,
        Provenance.APPLICATION,
        139,
    ),
    ("complete", lambda env, r: env.complete(r), CauseKind.NONE, Provenance.NONE, 0),
    (
        "launch_fail",
        lambda env, r: env.launch_fail(r),
        CauseKind.LAUNCH_FAILED,
        Provenance.SCHEDULER,
        None,
    ),
]


@pytest.mark.parametrize("shape", list(Shape), ids=str)
@pytest.mark.parametrize(
    ("name", "drive", "kind", "provenance", "code"), ENDINGS, ids=[e[0] for e in ENDINGS]
)
def test_each_ending_gives_its_cause(
    shape: Shape,
    name: str,
    drive: Callable[[MemoryEnv, ObjectRef], object],
    kind: CauseKind,
    provenance: Provenance,
    code: int | None,
) -> None:
    clock = ManualClock()
    backend = MemoryBackend(shape=shape, clock=clock)
    ref = running(backend)
    clock.advance(60)
    drive(backend.env, ref)
    obs = backend.inspect(ref)
    assert obs.state is ObjectState.ENDED
    (execution,) = obs.executions
    assert execution.cause is not None
    assert (execution.cause.kind, execution.cause.provenance) == (kind, provenance)
    assert execution.cause.exit_code == code
    assert execution.ended_at == clock()
    assert execution.started_at is not None
    assert execution.started_at < clock()


def test_oom_shows_as_a_kernel_kill() -> None:
    backend = MemoryBackend()
    ref = running(backend)
    backend.env.oom(ref)
    cause = backend.inspect(ref).executions[0].cause
    assert cause is not None
    assert (cause.signal, cause.exit_code) == (9, 137)


def test_a_lost_node_is_named_and_chosen_by_the_seed() -> None:
    picks = set()
    for _ in range(2):
        backend = MemoryBackend(seed=7)
        ref = running(backend)
        node = backend.env.lose_node(ref)
        cause = backend.inspect(ref).executions[0].cause
        assert cause is not None
        assert node in cause.detail
        assert backend.inspect(ref).lost_nodes == (node,)
        picks.add(node)
    assert len(picks) == 1


def test_an_ending_of_an_object_that_is_not_running_is_refused() -> None:
    backend = MemoryBackend()
    ref = backend.start(
        StartRequest(job="abc", submission=1, attempt=1, spec=JobSpec(command=["x"]))
    )
    with pytest.raises(Invalid, match="not running"):
        backend.env.preempt(ref)
    with pytest.raises(Invalid, match="non-zero"):
        backend.env.fail(ref, 0)


REQUEUE_2 = JobSpec(
    command=["x"],
    recovery=RecoveryPolicy(
        [Rule(on=[CauseKind.PREEMPTED, CauseKind.NODE_LOST], action=Action.REQUEUE, budget=2)]
    ),
)
RESTART_1 = JobSpec(
    command=["x"],
    recovery=RecoveryPolicy([Rule(on=[CauseKind.OUT_OF_MEMORY], action=Action.RESTART, budget=1)]),
)


def test_slurm_requeues_natively_within_its_budget() -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=ManualClock())
    ref = running(backend, REQUEUE_2)
    assert backend.inspect(ref).requeue_bit is True
    backend.env.preempt(ref)
    backend.env.lose_node(ref)
    obs = backend.inspect(ref)
    assert obs.state is ObjectState.RUNNING
    assert [e.index for e in obs.executions] == [0, 1, 2]
    assert [e.cause.kind for e in obs.executions[:2] if e.cause] == [
        CauseKind.PREEMPTED,
        CauseKind.NODE_LOST,
    ]
    assert obs.requeue_bit is False  # budget spent
    backend.env.preempt(ref)
    assert backend.inspect(ref).state is ObjectState.ENDED
    reruns = backend.env.history.select(h.NativeRerun, ref=ref)
    assert [(r.mode, r.rule, r.remaining) for r in reruns] == [("requeue", 0, 1), ("requeue", 0, 0)]


def test_slurm_does_not_requeue_for_a_cause_its_offer_does_not_cover() -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    ref = running(backend, REQUEUE_2)
    backend.env.time_out(ref)
    assert backend.inspect(ref).state is ObjectState.ENDED


def test_without_auto_run_a_native_requeue_waits_pending() -> None:
    backend = MemoryBackend(shape=Shape.SLURM)
    ref = running(backend, REQUEUE_2)
    backend.env.preempt(ref)
    assert backend.inspect(ref).state is ObjectState.PENDING
    assert backend.env.run(ref) == 1


def test_kubeflow_restarts_in_place_and_has_no_requeue_bit() -> None:
    backend = MemoryBackend(shape=Shape.KUBEFLOW, auto_run=True)
    ref = running(backend, RESTART_1)
    assert backend.inspect(ref).requeue_bit is None
    backend.env.oom(ref)
    obs = backend.inspect(ref)
    assert (obs.state, [e.index for e in obs.executions]) == (ObjectState.RUNNING, [0, 1])
    backend.env.oom(ref)
    assert backend.inspect(ref).state is ObjectState.ENDED
    assert [r.mode for r in backend.env.history.select(h.NativeRerun)] == ["restart"]


def test_native_rules_and_the_offer() -> None:
    slurm, kube = MemoryBackend(shape=Shape.SLURM), MemoryBackend(shape=Shape.KUBEFLOW)
    policy = RecoveryPolicy(
        [
            Rule(on=[CauseKind.PREEMPTED], action=Action.REQUEUE, budget=2),
            Rule(on=[CauseKind.TIME_LIMIT], action=Action.REQUEUE, budget=2),
            Rule(on=[CauseKind.OUT_OF_MEMORY, CauseKind.UNKNOWN], action=Action.RESTART, budget=1),
            Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1),
            Rule(on=[CauseKind.PREEMPTED], action=Action.HOLD, budget=1),
        ]
    )
    spec = JobSpec(command=["x"], recovery=policy)
    native = [str(s.native.answer) for s in slurm.rules(spec, policy)]
    perform = [str(s.perform.answer) for s in slurm.rules(spec, policy)]
    assert native == ["yes", "no", "no", "no", "no"]
    assert perform == ["yes", "yes", "no", "yes", "yes"]
    native = [str(s.native.answer) for s in kube.rules(spec, policy)]
    perform = [str(s.perform.answer) for s in kube.rules(spec, policy)]
    assert native == ["no", "no", "yes", "no", "no"]
    assert perform == ["no", "no", "no", "yes", "yes"]
    offer = slurm.compile(spec, dict(enumerate(policy.rules)), {0: 1})
    assert (offer.rules, dict(offer.remaining)) == ((0,), {0: 1})
    assert kube.compile(spec, dict(enumerate(policy.rules)), {}).rules == (2,)


def test_a_site_declaring_no_native_requeue_turns_it_off() -> None:
    from jobdispatch import Tristate

    backend = MemoryBackend(
        shape=Shape.SLURM, auto_run=True, capabilities={"native-requeue": Tristate.NO}
    )
    (support,) = backend.rules(REQUEUE_2, REQUEUE_2.recovery)
    assert support.native.answer is Tristate.NO
    ref = running(backend, REQUEUE_2)
    backend.env.preempt(ref)
    assert backend.inspect(ref).state is ObjectState.ENDED
