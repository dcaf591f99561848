"""Native restart: which rules a derived runtime enforces, the runtime it derives, and how the
first run's cause survives a JobSet restart."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.spi import StartRequest
from jobdispatch.types import (
    Action,
    CauseKind,
    JobSpec,
    ObjectState,
    RecoveryPolicy,
    Rule,
    Tristate,
)
from jobdispatch_kubeflow import KubeflowBackend, Settings, probe
from jobdispatch_kubeflow.classify import Chain, observe
from jobdispatch_kubeflow.fake import FakeApi
from jobdispatch_kubeflow.manifest import trainer_job
from jobdispatch_kubeflow.restart import RESTARTABLE, indices, runtime_body
from objects import cond, jobset, node, nodes, pod, trainjob

PYTORCH = {"name": "node", "image": "pytorch"}
BASE: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {
        "name": "torch-distributed",
        "labels": {"trainer.kubeflow.org/framework": "torch"},
    },
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {}},
        "template": {
            "spec": trainer_job(
                {
                    "spec": {
                        "template": {"spec": {"containers": [{"name": "node", "image": "pytorch"}]}}
                    }
                }
            )
        },
    },
}
NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def backend() -> KubeflowBackend:
    probe.forget()
    api = FakeApi()
    api.put("clustertrainingruntimes", None, BASE)
    return KubeflowBackend(Settings(namespace="dispatch", probe_ttl=0), api=api, clock=lambda: NOW)


def rule(*on: CauseKind, budget: int = 2) -> Rule:
    return Rule(on=list(on), action=Action.RESTART, budget=budget)


def test_only_causes_a_policy_tells_apart_exactly_are_covered() -> None:
    assert indices([CauseKind.NON_ZERO_EXIT]) == (2,)
    assert indices([CauseKind.PREEMPTED, CauseKind.NODE_LOST]) == (0,)
    assert indices([CauseKind.OUT_OF_MEMORY, CauseKind.NON_ZERO_EXIT]) == (1, 2)
    assert indices([CauseKind.PREEMPTED]) is None, "one pod condition stands for both"
    assert indices([CauseKind.OUT_OF_MEMORY]) is None, "exit 137 is any SIGKILL"
    assert indices([CauseKind.NON_ZERO_EXIT, CauseKind.LAUNCH_FAILED]) is None
    assert indices([]) is None


@given(st.sets(st.sampled_from(list(CauseKind))))
def test_a_covered_rule_never_restarts_on_a_cause_it_does_not_name(on: set[CauseKind]) -> None:
    chosen = indices(on)
    if chosen is None:
        return
    restarts_on = set()
    if 0 in chosen:
        restarts_on |= {CauseKind.PREEMPTED, CauseKind.NODE_LOST}
    if 1 in chosen:
        restarts_on |= {CauseKind.OUT_OF_MEMORY, CauseKind.NON_ZERO_EXIT}
    if 2 in chosen:
        restarts_on |= {CauseKind.NON_ZERO_EXIT}
    assert restarts_on <= on <= RESTARTABLE


def test_the_derived_runtime_makes_failures_precise_and_bounds_restarts() -> None:
    body = runtime_body(BASE, namespace="dispatch", restart_on=[2], max_restarts=1)
    assert body["kind"] == "TrainingRuntime" and body["metadata"]["namespace"] == "dispatch"
    assert body["metadata"]["labels"]["trainer.kubeflow.org/framework"] == "torch"
    spec = body["spec"]["template"]["spec"]
    job = spec["replicatedJobs"][0]["template"]["spec"]
    assert job["backoffLimit"] == 0
    assert job["template"]["spec"]["restartPolicy"] == "Never"
    assert job["template"]["spec"]["containers"] == [PYTORCH]
    assert [r["action"] for r in job["podFailurePolicy"]["rules"]] == ["FailJob"] * 3
    policy = spec["failurePolicy"]
    assert policy["maxRestarts"] == 1
    assert policy["rules"][0]["onJobFailureMessagePatterns"] == ["FailJob rule at index 2"]
    assert policy["rules"][-1]["action"] == "FailJobSet"
    again = runtime_body(BASE, namespace="dispatch", restart_on=[2], max_restarts=1)
    other = runtime_body(BASE, namespace="dispatch", restart_on=[2], max_restarts=2)
    assert again["metadata"]["name"] == body["metadata"]["name"] != other["metadata"]["name"]
    assert "failurePolicy" not in BASE["spec"]["template"]["spec"], "the base is not changed"


def test_rules_compile_and_start_carry_the_offer_to_a_derived_runtime(
    backend: KubeflowBackend,
) -> None:
    spec = JobSpec(command=("train",))
    assert (
        backend.capabilities()[
            next(c for c in backend.capabilities() if str(c) == "native-restart")
        ].answer
        is Tristate.YES
    )
    policy = RecoveryPolicy([rule(CauseKind.NON_ZERO_EXIT), rule(CauseKind.PREEMPTED)])
    native = [s.native.answer for s in backend.rules(spec, policy)]
    assert native == [Tristate.YES, Tristate.NO]
    offer = backend.compile(spec, dict(enumerate(policy.rules)), {0: 1, 1: 2})
    assert offer.rules == (0,)
    assert dict(offer.settings) == {"restart-on": "2", "max-restarts": "1"}
    assert backend.compile(spec, {0: policy.rules[0]}, {0: 0}).rules == ()
    # The upstream runtime reruns pods in place, but the derived one does not: Start proceeds.
    ref = backend.start(StartRequest(job="j1", submission=1, attempt=1, spec=spec, native=offer))
    api = backend.api
    assert isinstance(api, FakeApi)
    (derived,) = [k for k in api.objects if k[0] == "trainingruntimes"]
    tj = api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
    assert tj["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
        "name": derived[2],
    }
    backend.start(StartRequest(job="j1", submission=1, attempt=2, spec=spec, native=offer))
    assert len([k for k in api.objects if k[0] == "trainingruntimes"]) == 1
    assert backend.inspect(ref).state is ObjectState.GATED


def test_without_rbac_for_runtimes_native_restart_is_no(backend: KubeflowBackend) -> None:
    api = backend.api
    assert isinstance(api, FakeApi)
    api.allowed = False
    probe.forget()
    (answer,) = backend.rules(
        JobSpec(command=("x",)), RecoveryPolicy([rule(CauseKind.NON_ZERO_EXIT)])
    )
    assert answer.native.answer is Tristate.NO


def test_the_run_before_a_restart_keeps_its_cause_from_the_rule_that_restarted_it() -> None:
    js = jobset(
        restarts=1,
        conditions=[
            cond(
                "RestartingJobSet",
                "FailurePolicy_dispatch-restart-2",
                "applying RestartJobSet failure policy action",
                status="False",
            )
        ],
    )
    obs = observe(Chain(trainjob=trainjob(), jobset=js, pods=[pod(attempt=1)], nodes=nodes(node())))
    first, second = obs.executions
    assert first.cause is not None and first.cause.kind is CauseKind.NON_ZERO_EXIT
    assert second.state is ObjectState.RUNNING


def test_a_restart_for_a_disruption_says_so_but_does_not_guess_which() -> None:
    js = jobset(
        restarts=1, conditions=[cond("RestartingJobSet", "FailurePolicy_dispatch-restart-0")]
    )
    obs = observe(Chain(trainjob=trainjob(), jobset=js, pods=[pod(attempt=1)], nodes=nodes(node())))
    cause = obs.executions[0].cause
    assert cause is not None and cause.kind is CauseKind.UNKNOWN
    assert "preempted or node lost" in cause.detail
