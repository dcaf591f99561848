"""The readmission gate is probed, never taken from the catalogue (issue 35, item 4): LocalQueue →
ClusterQueue → its AdmissionChecks → the Lease of the controller answering dispatch's check. A
queue without the check answers no, and the plan refuses a rule nobody could enforce there."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from jobdispatch.errors import Rejected
from jobdispatch.plan import make_plan
from jobdispatch.types import (
    Action,
    Capability,
    CauseKind,
    Enforcer,
    JobSpec,
    RecoveryPolicy,
    Rule,
    Tristate,
)
from jobdispatch_kubeflow import KubeflowBackend, admission, probe
from jobdispatch_kubeflow.fake import FakeApi
from objects import ANSWERED, check, cluster_queue, lease, local_queue
from objects import kueue_backend as fake_kueue_backend

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def objects(**kw: Any) -> probe.GateObjects:
    return probe.GateObjects(queue="q", namespace="dispatch", **kw)


def through_gate(message: str | None, **kw: Any) -> probe.GateObjects:
    """The queue's ClusterQueue lists AdmissionCheck ``gate`` of dispatch's controller, with
    ``message`` (None: not Active)."""
    gate = {"gate": check(message=message)}
    return objects(
        local_queue=local_queue(), cluster_queue=cluster_queue("gate"), checks=gate, **kw
    )


@pytest.mark.parametrize(
    ("found", "answer", "said"),
    [
        (objects(), Tristate.NO, "LocalQueue dispatch/q does not exist"),
        (objects(local_queue=local_queue()), Tristate.NO, "ClusterQueue 'cq', which does not"),
        (
            objects(local_queue=local_queue(), cluster_queue=cluster_queue()),
            Tristate.NO,
            "lists no AdmissionCheck of jobdispatch.dev/admission (its checks: none)",
        ),
        (
            objects(
                local_queue=local_queue(),
                cluster_queue=cluster_queue("other", strategy=False),
                checks={"other": check("example.com/provisioning")},
            ),
            Tristate.NO,
            "(its checks: other): Kueue readmits an evicted TrainJob by itself",
        ),
        (
            through_gate(None),
            Tristate.NO,
            "AdmissionCheck gate is not Active",
        ),
        (
            through_gate("answered by someone"),
            Tristate.UNKNOWN,
            "names no controller Lease",
        ),
        (
            through_gate(ANSWERED),
            Tristate.NO,
            "the Lease dispatch/l of its controller does not exist",
        ),
        (
            through_gate(ANSWERED, leases={"dispatch/l": lease(NOW - timedelta(minutes=5))}),
            Tristate.NO,
            "its controller's Lease dispatch/l lapsed (last renewed",
        ),
        (
            through_gate(ANSWERED, leases={"dispatch/l": lease(NOW - timedelta(seconds=20))}),
            Tristate.YES,
            "lists AdmissionCheck gate, answered by jobdispatch-kueue-admission",
        ),
        (objects(refused="clusterqueues"), Tristate.UNKNOWN, "RBAC refuses reading clusterqueues"),
    ],
)
def test_the_gate_is_answered_from_what_the_queue_lists_and_who_answers(
    found: probe.GateObjects, answer: Tristate, said: str
) -> None:
    support = probe.readmission_gate(found, NOW)
    assert support.answer is answer
    assert said in support.detail


def test_the_active_message_names_the_lease_and_reads_back() -> None:
    assert admission.lease_of(admission.active_message("ns", "name")) == ("ns", "name")
    assert admission.lease_of("answered by ctl-1") is None


def kueue_backend(*, gated: bool) -> KubeflowBackend:
    """Kueue mode over a fake cluster whose LocalQueue ``q`` has dispatch's check answered by a
    live controller (``gated``), or none."""
    backend: KubeflowBackend = fake_kueue_backend(gated=gated, renewed=NOW)[0]
    return backend


RESUBMIT_ON_PREEMPTED = RecoveryPolicy(
    rules=(Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=2),)
)


def test_a_queue_without_the_check_answers_no_and_the_plan_refuses_its_rule() -> None:
    backend = kueue_backend(gated=False)
    gate = backend.capabilities()[Capability.READMISSION_GATE]
    assert gate.answer is Tristate.NO and "ClusterQueue cq" in gate.detail
    spec = JobSpec(command=("true",), recovery=RESUBMIT_ON_PREEMPTED)
    with pytest.raises(Rejected, match=r"nobody would enforce rule 0.*Kueue readmits on preempted"):
        make_plan(backend, None, spec, supervised=True)
    accepted = make_plan(backend, None, spec, supervised=True, accept_unenforced=(0,))
    assert accepted.rules[0].enforcer is Enforcer.NOBODY
    # A job without rules is planned, with the warning that Kueue may run it again.
    bare = make_plan(backend, None, JobSpec(command=("true",)), supervised=True)
    assert "Kueue may readmit an evicted TrainJob by itself" in bare.identity_weakened
    assert "readmission-gate no" in bare.identity_weakened


def test_a_queue_with_the_check_and_a_live_controller_answers_yes() -> None:
    backend = kueue_backend(gated=True)
    gate = backend.capabilities()[Capability.READMISSION_GATE]
    assert gate.answer is Tristate.YES, gate
    spec = JobSpec(command=("true",), recovery=RESUBMIT_ON_PREEMPTED)
    plan = make_plan(backend, None, spec, supervised=True)
    assert plan.rules[0].enforcer is Enforcer.SUPERVISOR
    assert "Kueue" not in plan.identity_weakened


def test_the_controller_names_its_lease_where_the_probe_reads_it() -> None:
    """A controller round marks the check Active naming its Lease; the probe follows it."""
    api = FakeApi()
    api.put("admissionchecks", None, {**check(), "metadata": {"name": "gate", "generation": 1}})
    candidate = admission.Lease(api, "dispatch", "l", "me", wall=lambda: NOW)
    assert candidate.round()
    admission.Controller(api, candidate, clock=lambda: NOW).reconcile()
    written = api.get("admissionchecks", None, "gate")
    assert written is not None
    (active,) = written["status"]["conditions"]
    assert admission.lease_of(active["message"]) == ("dispatch", "l")
    found = objects(
        local_queue=local_queue(),
        cluster_queue=cluster_queue("gate"),
        checks={"gate": written},
        leases={"dispatch/l": api.get("leases", "dispatch", "l")},
    )
    assert probe.readmission_gate(found, NOW).answer is Tristate.YES
